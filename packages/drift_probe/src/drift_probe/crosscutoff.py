"""The cross-cutoff test: the same prompts to two snapshots of one model family.

Snapshot A (cutoff ``t_A``) was trained before a fact changed, snapshot B (``t_B > t_A``) after.
For every fact that changed in ``(t_A, t_B]``, the fact has drifted for A and not (from that change)
for B. ``P(A > B)`` is the share of those facts on which A's drift probe scores higher than B's,
ties counting one half. Each snapshot's probe is trained on its own labels with every fact that
changes between the cutoffs held out of training.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from paper_common.facts import World

__all__ = ["p_a_greater_b", "transitioned"]


def p_a_greater_b(
    scores_a: Sequence[float] | np.ndarray, scores_b: Sequence[float] | np.ndarray
) -> float:
    """Mean over paired items of ``1[a > b] + 0.5 * 1[a == b]``."""
    a, b = np.asarray(scores_a, float), np.asarray(scores_b, float)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(
            f"scores must be two non-empty 1-D arrays of one length; got {a.shape}, {b.shape}"
        )
    return float(np.mean((a > b) + 0.5 * (a == b)))


def transitioned(
    world: World, t_a: int, t_b: int, relations: Sequence[str] | None = None
) -> set[tuple[str, str]]:
    """``(subject, relation)`` keys whose value at ``t_b`` differs from the value at ``t_a``."""
    if t_b <= t_a:
        raise ValueError(f"t_b ({t_b}) must be after t_a ({t_a})")
    keys = {
        (f.subject, f.relation) for f in world.changed_after(t_a, relations) if f.valid_from <= t_b
    }
    return {k for k in keys if world.value_at(*k, t_a) != world.value_at(*k, t_b)}
