"""Ordered two-skill composition on a realization, batched over pairs and contexts.

For every ordered pair ``(A, B)`` the end point of "A then B" is ``phi^B_h(phi^A_h(0))`` in the joint
coordinates, computed for all contexts at once. The first segment ``phi^A_h(0)`` does not depend on
the partner (a field moves only its own block, and the other blocks are 0), so it is computed once
per skill; the second segments of all ordered pairs run as one stacked batch. From the end points:

- the readout commutator ``C1(h) = (r_AB - r_BA) / h^2`` (``(B, d)`` per pair), the same numbers as
  :func:`~skill_commutator.commutator.ordered_commutator` with the realization's flows and readout;
- the ordered-composition gap at the deployment strength ``h0``: ``|O_task(AB) - O_task(BA)|`` with
  ``O_task = O_A + O_B`` (the composite task wants both skills' targets) and ``|r_AB - r_BA|``;
- ActAdd's commutator: constant steering (one context-independent coordinate vector per skill, the
  field at the origin averaged over contexts) applied in both orders as separate additions; it is
  zero up to rounding, the floor below which no commutator is resolved.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from skill_commutator.commutator import lie_bracket, rk4_flow
from skill_commutator.realize import Realization

__all__ = [
    "PairResults",
    "actadd_commutator",
    "actadd_vectors",
    "compose_pairs",
    "deployment_strength",
    "exact_brackets",
    "temporal_gaps",
]


@dataclass
class PairResults:
    """End points and commutators of every unordered pair ``(a, b)`` (``a < b``), per step size.

    ``c1[h][k]``: ``(B, d)`` readout commutator of pair ``k`` at ``h`` (A = ``pairs[k][0]``);
    ``o_gap[k]`` / ``r_gap[k]``: ``(B,)`` gaps at ``h0``; ``coord_c1[h][k]``: ``(B, n_coords)``.
    """

    pairs: list[tuple[int, int]]
    h0: float
    hs: list[float]
    c1: dict[float, list[torch.Tensor]] = field(default_factory=dict)
    coord_c1: dict[float, list[torch.Tensor]] = field(default_factory=dict)
    o_gap: list[torch.Tensor] = field(default_factory=list)
    r_gap: list[torch.Tensor] = field(default_factory=list)
    r_single: dict[float, torch.Tensor] = field(default_factory=dict)
    z_single: dict[float, torch.Tensor] = field(default_factory=dict)
    r0: torch.Tensor | None = None

    def norms(self, h: float) -> torch.Tensor:
        """``|C1(h)|`` per pair and context: ``(n_pairs, B)``."""
        return torch.stack([c.norm(dim=-1) for c in self.c1[h]])

    def richardson(self, h: float) -> list[torch.Tensor]:
        """``2 C1(h/2) - C1(h)`` per pair (both steps must have been measured)."""
        if h not in self.c1 or h / 2 not in self.c1:
            raise ValueError(f"need C1 at h={h} and h/2={h / 2}; measured {sorted(self.c1)}")
        return [2 * a - b for a, b in zip(self.c1[h / 2], self.c1[h], strict=True)]


def deployment_strength(
    real: Realization,
    rate_quantile: float = 0.5,
    origin: dict[str, torch.Tensor] | None = None,
) -> float:
    """``h0``: the time at which a skill's flow raises its objective by about 1 nat, ``1 / median``
    of ``dO_s/dt`` at the origin over skills and contexts (so strengths are comparable across
    realizations whose coordinates have different units). ``origin``: ``real.at_origin()`` if
    already computed."""
    rate = (real.at_origin() if origin is None else origin)["rate"]
    q = float(torch.quantile(rate.flatten(), rate_quantile))
    if not (q > 0 and np.isfinite(q)):
        raise ValueError(
            f"the {rate_quantile:g}-quantile of the skills' rates dO_s/dt at the origin is {q:g}: "
            "h0 = 1 / rate needs a positive finite rate (do the skills move their objectives?)"
        )
    return 1.0 / q


def _steps(h: float, h0: float, steps_at_h0: int) -> int:
    return max(1, round(steps_at_h0 * h / h0))


def compose_pairs(
    real: Realization,
    h0: float,
    hs: Sequence[float],
    pairs: Sequence[tuple[int, int]] | None = None,
    steps_at_h0: int = 2,
    progress: Callable[[str], None] | None = None,
    allow_self: bool = False,
    gaps: bool = True,
) -> PairResults:
    """Both orders of every pair at ``h0`` and at each ``h`` of ``hs``.

    RK4 takes ``max(1, round(steps_at_h0 * h / h0))`` steps per segment. ``pairs``: unordered skill
    index pairs (default all ``a < b``). ``allow_self``: pairs ``(a, a)`` allowed too (a skill
    with itself: its true commutator is 0, a null for the estimator). ``gaps=False``: skip the
    rollouts at ``h0`` (no ``o_gap`` / ``r_gap``) unless ``h0`` is among ``hs``.
    """
    if not h0 > 0 or any(not h > 0 for h in hs):
        raise ValueError(f"h0 and every h must be > 0; got h0={h0}, hs={list(hs)}")
    n, b = len(real.skills), real.batch
    pairs = list(pairs) if pairs is not None else list(itertools.combinations(range(n), 2))
    if not pairs or any(
        (a == c and not allow_self) or not (0 <= a < n and 0 <= c < n) for a, c in pairs
    ):
        raise ValueError(f"pairs must be distinct skill indices in 0..{n - 1}; got {pairs}")
    ordered = [(a, c) for a, c in pairs] + [(c, a) for a, c in pairs]
    out = PairResults(pairs=pairs, h0=float(h0), hs=[float(h) for h in hs])
    with torch.no_grad():
        out.r0 = real.readout(real.zeros())
    skills_first = torch.arange(n, device=real.device).repeat_interleave(b)
    second = torch.tensor([c for _, c in ordered], device=real.device).repeat_interleave(b)
    # h0 once, also when it is among hs
    for h in dict.fromkeys([float(h0), *out.hs] if gaps else out.hs):
        if progress:
            progress(f"{real.kind} h={h:.3g}")
        steps = _steps(h, h0, steps_at_h0)
        first = rk4_flow(lambda z: real.field(z, skills_first), steps)(real.zeros(n), h)
        start = torch.cat([first[a * b : (a + 1) * b] for a, _ in ordered])
        end = rk4_flow(lambda z: real.field(z, second), steps)(start, h)
        with torch.no_grad():
            r_end = real.readout(end)
            out.r_single[h] = real.readout(first)
        out.z_single[h] = first.detach()
        k = len(pairs)
        r_ab, r_ba = r_end[: k * b].view(k, b, -1), r_end[k * b :].view(k, b, -1)
        z_ab, z_ba = end[: k * b].view(k, b, -1), end[k * b :].view(k, b, -1)
        if h == float(h0):
            first_skill = torch.tensor([a for a, _ in pairs], device=real.device).repeat_interleave(
                b
            )
            second_skill = torch.tensor(
                [c for _, c in pairs], device=real.device
            ).repeat_interleave(b)
            with torch.no_grad():
                flat_ab, flat_ba = r_ab.reshape(k * b, -1), r_ba.reshape(k * b, -1)
                o_ab = real.objective(flat_ab, first_skill) + real.objective(flat_ab, second_skill)
                o_ba = real.objective(flat_ba, first_skill) + real.objective(flat_ba, second_skill)
            out.o_gap = list((o_ab - o_ba).abs().view(k, b))
            out.r_gap = list((r_ab - r_ba).norm(dim=-1))
        if h in out.hs:
            out.c1[h] = list((r_ab - r_ba) / h**2)
            out.coord_c1[h] = list((z_ab - z_ba) / h**2)
    return out


def actadd_vectors(
    real: Realization, origin: dict[str, torch.Tensor] | None = None
) -> torch.Tensor:
    """ActAdd's constant steering, one coordinate vector per skill: the skill's field at the origin
    averaged over contexts, ``(n_skills, n_coords)`` (each nonzero only in its own block).
    ``origin``: ``real.at_origin()`` if already computed."""
    v = (real.at_origin() if origin is None else origin)["v"].mean(1)  # (n_skills, m)
    return torch.block_diag(*v.unbind(0))


def actadd_commutator(
    real: Realization, vectors: torch.Tensor, a: int, b: int, h: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """ActAdd's readout commutator ``(r((0 + h u_A) + h u_B) - r((0 + h u_B) + h u_A)) / h^2`` from a
    base point ``z_base`` (the contexts' origin shifted by ``h`` along every skill, so the two sums
    round differently), and the composed change ``r_AB - r_base``: ``((B, d), (B, d))``."""
    base = real.zeros() + h * vectors.sum(0)  # a generic point: additions no longer exact
    ua, ub = h * vectors[a], h * vectors[b]
    with torch.no_grad():
        r_ab = real.readout((base + ua) + ub)
        r_ba = real.readout((base + ub) + ua)
        r_base = real.readout(base)
    return (r_ab - r_ba) / h**2, r_ab - r_base


def exact_brackets(
    real: Realization, pairs: Sequence[tuple[int, int]], z: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact bracket ``[X_A, X_B]`` of every pair at ``z`` (default the origin) by nested
    forward-mode AD through the fields, and its readout ``Dr . [X_A, X_B]`` (what ``C1`` estimates):
    ``(n_pairs, B, n_coords)`` and ``(n_pairs, B, d)``, all pairs in one stacked batch."""
    k, b = len(pairs), real.batch
    z = real.zeros(k) if z is None else z.repeat(k, 1)
    first = torch.tensor([a for a, _ in pairs], device=real.device).repeat_interleave(b)
    second = torch.tensor([c for _, c in pairs], device=real.device).repeat_interleave(b)
    br = lie_bracket(lambda q: real.field(q, first), lambda q: real.field(q, second), z)
    _, push = torch.func.jvp(real.readout, (z,), (br,))
    return br.view(k, b, -1).detach(), push.view(k, b, -1).detach()


def temporal_gaps(
    real: Realization, res: PairResults, tokens_per_segment: int = 1
) -> list[dict[str, float]]:
    """Order in time: skill A steers the first rollout segment and B the second, against the swap
    (each skill at its coordinates after flowing for ``h0`` from the origin). Per pair: the share of
    contexts whose generated tokens differ, the mean ``|r_AB - r_BA|`` at the last position and the
    mean ``|O_task(AB) - O_task(BA)|``. Needs a realization with ``rollout`` (activation)."""
    if not hasattr(real, "rollout"):
        raise ValueError(f"temporal order needs a realization with rollout(); {real.kind} has none")
    b = real.batch
    z = res.z_single[res.h0]
    rows = []
    for a, c in res.pairs:
        za, zc = z[a * b : (a + 1) * b], z[c * b : (c + 1) * b]
        ab = real.rollout([za, zc], tokens_per_segment)
        ba = real.rollout([zc, za], tokens_per_segment)
        o = [real.objective(x["r"], a) + real.objective(x["r"], c) for x in (ab, ba)]
        rows.append(
            {
                "tokens_differ": float((ab["tokens"] != ba["tokens"]).any(dim=1).double().mean()),
                "r_gap": float((ab["r"] - ba["r"]).norm(dim=-1).mean()),
                "o_gap": float((o[0] - o[1]).abs().mean()),
            }
        )
    return rows
