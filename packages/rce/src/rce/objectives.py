"""Edit objectives: the sanitized target's likelihood plus one defence term.

Every editor (ROME's v*, MEMIT's z, fine-tuning's weights) minimises

    NLL(target | edit prompts)  +  defence term  (+ ROME's KL and weight decay)

where the defence term is one of (``Defence.name``):

- ``"none"``: nothing (a plain edit to the sanitized target).
- ``"fact_erasure"``: Patil et al.'s deletion objective, mean p(true) on the edit prompts; it
  *replaces* the NLL term (no target).
- ``"input_rephrasing"``: mean p(true) on the edit prompts and the editor's paraphrases.
- ``"head_projection"``: Patil et al.'s HP defence, hinges on logit-lens *probabilities*
  ``max(0, p_s - p_(k)) + max(0, p_(k from bottom) - p_s)`` over ``layers``, ``p_(k)`` the k-th
  largest probability *among the other tokens*: zero only once the true token has left every
  layer's top-k and bottom-k.
- ``"max_entropy"``: minus the entropy of the logit-lens distribution over ``layers``.

**Mode.** Patil et al. run their three defences (HP, max-entropy, input rephrasing) on top of fact
erasure: the defence term is the whole edit loss (with ROME's KL and weight decay), there is no
sanitized target (``mode="erasure"``, the default for them, as published). ``mode="target"`` adds the
term to the target NLL instead: our adaptation, for comparing defences at equal edit efficacy.
``"none"``, ``"rce"`` and ``"revs"`` edit to a target (``"target"`` only); ``"fact_erasure"`` is
``"erasure"`` only.
- ``"rce"`` (our proposal): ``lam * [max(0, z_s - z_(R) + m) + max(0, z_(R') - z_s + m)]`` on the
  final logits, ``z_(R)`` the R-th largest logit excluding the true token and the target: the
  first hinge pushes the true token below rank R, the second keeps it out of the bottom tail that a
  bottom-k attack reads. ``whitebox=True`` puts the same hinges on the logit lens of ``layers``.
- ``"revs"``: REVS's neuron rank demotion, applied to the weights after the edit
  (:func:`rce.editing.revs_demote`), not a loss term.

Defence terms are averaged over the edit prompts and the editor's paraphrases (rows at the
position that predicts the answer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

__all__ = [
    "DEFENCES",
    "DEFENCE_MODES",
    "PATIL_DEFENCES",
    "Defence",
    "head_projection_margin",
    "lens_entropy",
    "rank_hinge",
]

DEFENCES = (
    "none",
    "fact_erasure",
    "input_rephrasing",
    "head_projection",
    "max_entropy",
    "rce",
    "revs",
)

#: Patil et al.'s defences, published on top of fact erasure (``mode="erasure"`` by default)
PATIL_DEFENCES = ("head_projection", "max_entropy", "input_rephrasing")
DEFENCE_MODES = ("erasure", "target")


@dataclass(frozen=True)
class Defence:
    """A defence and its settings (see the module docstring for each objective).

    Attributes:
        name: one of :data:`DEFENCES`.
        rank: RCE's R (the true token is pushed below rank R; >= the attacker's largest budget).
        floor_rank: RCE's R' (kept above rank R'); ``None`` = half the vocabulary.
        margin: RCE's m, in logits.
        weight: the defence term's weight (RCE's lambda).
        whitebox: RCE on the logit lens of ``layers`` as well as the final logits.
        layers: residual layers (``0..n_layers``) the HP, max-entropy and white-box terms read;
            ``None`` = every block output ``1..n_layers`` (the last ⌈n/3⌉ for white-box RCE; the
            final layer is left out for max-entropy, where it would fight the target).
        k: the HP defence's k (top-k and bottom-k).
        revs_neurons, revs_rank: REVS's number of edited neurons and the rank it demotes to
            (``None`` = half the vocabulary).
        mode: ``"erasure"`` (the defence term is the whole loss, no target: Patil et al.'s
            setting) or ``"target"`` (added to the target NLL); ``None`` = ``"erasure"`` for
            ``fact_erasure`` and Patil et al.'s defences, ``"target"`` for the rest.
    """

    name: str = "none"
    rank: int = 50
    floor_rank: int | None = None
    margin: float = 1.0
    weight: float = 1.0
    whitebox: bool = False
    layers: tuple[int, ...] | None = None
    k: int = 4
    revs_neurons: int = 8
    revs_rank: int | None = None
    mode: Literal["erasure", "target"] | None = None

    def __post_init__(self) -> None:
        if self.name not in DEFENCES:
            raise ValueError(f"unknown defence {self.name!r}; one of {', '.join(DEFENCES)}")
        erasure_default = self.name == "fact_erasure" or self.name in PATIL_DEFENCES
        mode = self.mode if self.mode is not None else ("erasure" if erasure_default else "target")
        if mode not in DEFENCE_MODES:
            raise ValueError(f"mode must be one of {DEFENCE_MODES}; got {self.mode!r}")
        allowed = (
            DEFENCE_MODES
            if self.name in PATIL_DEFENCES
            else (("erasure",) if self.name == "fact_erasure" else ("target",))
        )
        if mode not in allowed:
            raise ValueError(
                f"defence {self.name!r} takes mode {' or '.join(map(repr, allowed))}; got {mode!r}"
            )
        object.__setattr__(self, "mode", mode)
        if self.rank < 1 or self.k < 1 or self.revs_neurons < 1:
            raise ValueError("rank, k and revs_neurons must be >= 1")
        if self.floor_rank is not None and self.floor_rank <= self.rank:
            raise ValueError(f"floor_rank ({self.floor_rank}) must be > rank ({self.rank})")
        if self.margin < 0 or self.weight < 0:
            raise ValueError("margin and weight must be >= 0")

    @property
    def uses_target(self) -> bool:
        """Whether the edit loss includes the sanitized target's NLL (``mode == "target"``)."""
        return self.mode == "target"

    def lens_layers(self, n_layers: int) -> list[int]:
        """The residual layers this defence reads through the logit lens (may be empty)."""
        if self.layers is not None:
            bad = [x for x in self.layers if not 0 <= x <= n_layers]
            if bad:
                raise ValueError(f"defence layer(s) {bad} out of range 0..{n_layers}")
            return sorted(set(self.layers))
        if self.name == "head_projection":
            return list(range(1, n_layers + 1))
        if self.name == "max_entropy":
            return list(range(1, n_layers))
        if self.name == "rce" and self.whitebox:
            k = -(-n_layers // 3)
            return list(range(n_layers - k + 1, n_layers + 1))
        return []


def _index(x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``ids`` (broadcast against ``x``'s leading dims) as a gather index ``(..., 1)``."""
    ids = ids.to(x.device).long()
    return ids[..., None].expand(*x.shape[:-1], 1)


def _order_stat(logits: torch.Tensor, exclude: torch.Tensor, r: int) -> torch.Tensor:
    """The r-th largest entry of each row (1-based) with the ``exclude`` columns left out."""
    masked = logits.masked_fill(exclude, float("-inf"))
    n_valid = int((~exclude).sum(-1).min())
    if not 1 <= r <= n_valid:
        raise ValueError(f"rank {r} out of range: only {n_valid} candidate tokens per row")
    return masked.topk(r, dim=-1).values[..., -1]


def rank_hinge(
    logits: torch.Tensor,
    true_ids: torch.Tensor,
    exclude_ids: torch.Tensor | None = None,
    rank: int = 50,
    floor_rank: int | None = None,
    margin: float = 1.0,
) -> torch.Tensor:
    """RCE's hinge per row: ``max(0, z_s - z_(R) + m) + max(0, z_(R') - z_s + m)``.

    ``logits``: ``(..., vocab)``; ``true_ids``: the sensitive token per row (broadcast over leading
    dims); ``exclude_ids``: tokens left out of the order statistics besides the true one (the
    sanitized target), ``-1`` for none. Zero exactly when the true token is at least ``m`` below
    the R-th other token and at least ``m`` above the R'-th.
    """
    vocab = logits.shape[-1]
    floor_rank = vocab // 2 if floor_rank is None else floor_rank
    idx = _index(logits, true_ids)
    z_s = logits.gather(-1, idx)[..., 0]
    exclude = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, idx, True)
    if exclude_ids is not None:
        ex = _index(logits, exclude_ids)
        exclude = exclude | torch.zeros_like(exclude).scatter(-1, ex.clamp(min=0), ex >= 0)
    top = _order_stat(logits, exclude, rank)
    floor = _order_stat(logits, exclude, floor_rank)
    return torch.relu(z_s - top + margin) + torch.relu(floor - z_s + margin)


def head_projection_margin(probs: torch.Tensor, true_ids: torch.Tensor, k: int) -> torch.Tensor:
    """Patil et al.'s HP defence per row: ``max(0, p_s - p_(k)) + max(0, p_(k, bottom) - p_s)``.

    ``probs``: ``(..., vocab)`` logit-lens probabilities; ``true_ids`` broadcast over leading dims.
    ``p_(k)`` / ``p_(k, bottom)`` are the k-th largest / smallest probabilities of the *other*
    tokens, so each hinge is positive while the true token is still in the top-k / bottom-k (with
    the true token counted in its own order statistic a hinge is zero at rank k: off by one).
    """
    idx = _index(probs, true_ids)
    p_s = probs.gather(-1, idx)[..., 0]
    own = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, idx, True)
    kth_top = _order_stat(probs, own, k)
    kth_bottom = -_order_stat(-probs, own, k)
    return torch.relu(p_s - kth_top) + torch.relu(kth_bottom - p_s)


def lens_entropy(logprobs: torch.Tensor) -> torch.Tensor:
    """Entropy (nats) of each row of log-probabilities ``(..., vocab)``."""
    return -(logprobs.exp() * logprobs).sum(-1)


def defence_term(
    defence: Defence,
    final_logits: torch.Tensor,
    lens_logits: Sequence[torch.Tensor],
    true_ids: torch.Tensor,
    target_ids: torch.Tensor,
) -> torch.Tensor:
    """The defence's loss per row (``(rows,)``), from the rows' answer-position logits.

    ``final_logits``: ``(rows, vocab)``; ``lens_logits``: one ``(rows, vocab)`` per layer of
    :meth:`Defence.lens_layers`; ``true_ids`` / ``target_ids``: ``(rows,)``.
    """
    name = defence.name
    zero = final_logits.new_zeros(final_logits.shape[0])
    if name in ("none", "revs"):
        return zero
    if name in ("fact_erasure", "input_rephrasing"):
        p_true = torch.softmax(final_logits.float(), -1).gather(1, true_ids[:, None])[:, 0]
        return defence.weight * p_true
    if name == "head_projection":
        if not lens_logits:
            return zero
        probs = torch.softmax(torch.stack(list(lens_logits)).float(), -1)
        return defence.weight * head_projection_margin(probs, true_ids, defence.k).mean(0)
    if name == "max_entropy":
        if not lens_logits:
            return zero
        logp = torch.log_softmax(torch.stack(list(lens_logits)).float(), -1)
        return -defence.weight * lens_entropy(logp).mean(0)
    # rce
    stack = [final_logits, *lens_logits] if defence.whitebox else [final_logits]
    hinge = rank_hinge(
        torch.stack(stack).float(),
        true_ids,
        target_ids,
        defence.rank,
        defence.floor_rank,
        defence.margin,
    )
    return defence.weight * hinge.mean(0)
