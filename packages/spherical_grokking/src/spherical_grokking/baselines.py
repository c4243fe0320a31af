"""The arms compared side by side: the paper's interventions, the null, and published delay-shorteners.

An :class:`Arm` is a model variant plus what it changes in training (weight decay, train fraction,
Grokfast). :data:`METHOD_ARMS` are the paper's: the standard LayerNorm transformer (the null), the
bounded sphere, uniform attention with either, and the sphere without weight decay.
:func:`baseline_arms` are the comparisons the paper's related work proposes for shortening the
delay: more weight decay, more data, and Grokfast-EMA gradient filtering (Lee et al. 2024).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .model import VARIANTS

__all__ = ["METHOD_ARMS", "Arm", "GrokfastEMA", "baseline_arms"]


class GrokfastEMA:
    """Grokfast-EMA (arXiv 2405.20233): amplify the slow component of the gradient.

    Before each optimiser step, ``ema <- alpha * ema + (1 - alpha) * grad`` (``ema`` starts at the
    first gradient) and ``grad <- grad + lamb * ema``. Defaults are the paper's algorithmic-task
    setting (alpha 0.98, lamb 2).
    """

    def __init__(self, alpha: float = 0.98, lamb: float = 2.0) -> None:
        if not 0 <= alpha < 1:
            raise ValueError(f"alpha must be in [0, 1); got {alpha}")
        if lamb < 0:
            raise ValueError(f"lamb must be >= 0; got {lamb}")
        self.alpha, self.lamb = alpha, lamb
        self.ema: dict[int, torch.Tensor] = {}

    @torch.no_grad()
    def __call__(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        for p in parameters:
            if p.grad is None:
                continue
            ema = self.ema.get(id(p))
            if ema is None:
                ema = self.ema[id(p)] = p.grad.detach().clone()
            else:
                ema.mul_(self.alpha).add_(p.grad, alpha=1 - self.alpha)
            p.grad.add_(ema, alpha=self.lamb)


@dataclass(frozen=True)
class Arm:
    """One experimental condition.

    Attributes:
        name: label in tables and plots.
        variant: a model in :data:`~spherical_grokking.model.VARIANTS`.
        weight_decay: overrides the run's weight decay (None: keep it).
        train_fraction: overrides the run's train fraction (None: keep it).
        grokfast: ``(alpha, lamb)`` to train with Grokfast-EMA, else None.
        model: further :class:`~spherical_grokking.model.ModelConfig` overrides (e.g. ``head``).
    """

    name: str
    variant: str
    weight_decay: float | None = None
    train_fraction: float | None = None
    grokfast: tuple[float, float] | None = None
    model: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("Arm.name must be non-empty")
        if self.variant not in VARIANTS:
            raise ValueError(
                f"Arm.variant must be one of {', '.join(VARIANTS)}; got {self.variant!r}"
            )
        if self.weight_decay is not None and self.weight_decay < 0:
            raise ValueError(f"Arm.weight_decay must be >= 0; got {self.weight_decay}")
        if self.train_fraction is not None and not 0 < self.train_fraction < 1:
            raise ValueError(f"Arm.train_fraction must be in (0, 1); got {self.train_fraction}")

    @property
    def head(self) -> str:
        """The unembedding this arm trains with (recorded in every report)."""
        return dict(self.model).get("head", VARIANTS[self.variant]["head"])


METHOD_ARMS: dict[str, Arm] = {
    arm.name: arm
    for arm in (
        Arm("layernorm", "layernorm"),
        Arm("sphere", "sphere"),
        Arm("layernorm+uniform", "layernorm+uniform"),
        Arm("sphere+uniform", "sphere+uniform"),
        Arm("sphere wd=0", "sphere", weight_decay=0.0),
    )
}
"""The paper's arms; the null is ``layernorm``."""


def baseline_arms(
    weight_decays: Sequence[float] = (0.3, 3.0),
    train_fraction: float | None = 0.6,
    grokfast: tuple[float, float] | None = (0.98, 2.0),
    variant: str = "layernorm",
) -> list[Arm]:
    """Published ways to shorten the delay, each applied to the null model ``variant``.

    A weight-decay sweep (one arm per value), a larger train fraction (data), and Grokfast-EMA.
    """
    arms = [Arm(f"{variant} wd={wd:g}", variant, weight_decay=wd) for wd in weight_decays]
    if train_fraction is not None:
        arms.append(
            Arm(f"{variant} frac={train_fraction:g}", variant, train_fraction=train_fraction)
        )
    if grokfast is not None:
        arms.append(Arm(f"{variant} + grokfast", variant, grokfast=grokfast))
    return arms
