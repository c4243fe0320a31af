"""The alpha rules people use today, and LoRA-alpha, behind one interface.

A :class:`Method` is a rule for the scale of ``B @ A`` plus the optimiser that goes with it:

============  ===============================  ==============================================
name          peft config                      applied scale / optimiser
============  ===============================  ==============================================
standard      ``lora_alpha=alpha``             ``alpha / r`` (alpha fixed across ranks), AdamW
rslora        ``lora_alpha=alpha, use_rslora``  ``alpha / sqrt(r)`` (Kalajdzievski 2023), AdamW
alpha_2r      ``lora_alpha=2r``                ``2`` at every rank (Biderman et al. 2024), AdamW
loraplus      ``lora_alpha=alpha``             ``alpha / r``; B's learning rate x ``ratio``
                                               (Hayou et al. 2024, peft's LoRA+ optimiser)
lora_alpha    ``lora_alpha=c*sqrt(r)``         ``c / sqrt(r)``, AdamW (the scale of rsLoRA with
                                               ``alpha = c``: LoRA-alpha(c) is rsLoRA(alpha=c))
============  ===============================  ==============================================

Extra ``peft.LoraConfig`` fields pass through :meth:`Method.lora_config`, except those the rule
sets (``r``, ``lora_alpha``, ``use_rslora``); a ``rank_pattern`` module gets the rule's alpha at
its own rank (``alpha_pattern``), and an ``alpha_pattern`` off the rule is rejected.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from lora_alpha.config import (
    DEFAULT_C,
    LoraAlphaConfig,
    _check_rank,
    check_lora_kwargs,
    law_patterns,
)

RULES = ("standard", "rslora", "alpha_2r", "loraplus", "lora_alpha")


@dataclass(frozen=True)
class Method:
    """A LoRA scaling rule and its optimiser.

    Args:
        rule: one of :data:`RULES`.
        alpha: ``lora_alpha`` of the ``standard``, ``rslora`` and ``loraplus`` rules.
        c: coefficient of ``lora_alpha`` (``alpha = c * sqrt(r)``).
        loraplus_ratio: LoRA+'s ratio of B's to A's learning rate.
        weight_decay: AdamW weight decay.
    """

    rule: str = "lora_alpha"
    alpha: float = 16.0
    c: float = DEFAULT_C
    loraplus_ratio: float = 16.0
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}; got {self.rule!r}")
        for name in ("alpha", "c", "loraplus_ratio"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0; got {v!r}")
        if not self.weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0; got {self.weight_decay}")

    @property
    def name(self) -> str:
        if self.rule == "lora_alpha":
            return f"LoRA-alpha (c={self.c:g})"
        if self.rule == "alpha_2r":
            return "alpha=2r"
        label = {"standard": "standard", "rslora": "rsLoRA", "loraplus": "LoRA+"}[self.rule]
        return f"{label} (alpha={self.alpha:g})"

    def lora_alpha(self, r: int) -> float:
        """The ``lora_alpha`` handed to peft at rank ``r``."""
        _check_rank(r)
        if self.rule == "alpha_2r":
            return 2.0 * r
        if self.rule == "lora_alpha":
            return LoraAlphaConfig(r, self.c).alpha
        return float(self.alpha)

    def scaling(self, r: int) -> float:
        """The factor applied to ``B @ A`` at rank ``r``."""
        a = self.lora_alpha(r)
        return a / math.sqrt(r) if self.rule == "rslora" else a / r

    def lora_config(
        self, r: int, target_modules: Sequence[str] | str | None = None, **lora_kwargs: Any
    ) -> Any:
        """The ``peft.LoraConfig`` of this rule at rank ``r``."""
        from peft import LoraConfig

        check_lora_kwargs(lora_kwargs, f"Method({self.rule!r})")
        rule = {"standard": f"alpha = {self.alpha:g}", "rslora": f"alpha = {self.alpha:g}",
                "loraplus": f"alpha = {self.alpha:g}", "alpha_2r": "alpha = 2r",
                "lora_alpha": f"alpha = c * sqrt(r) with c = {self.c:g}"}[self.rule]  # fmt: skip
        kwargs = {"lora_dropout": 0.0, **law_patterns(lora_kwargs, r, self.lora_alpha, rule)}
        targets = (
            list(target_modules) if isinstance(target_modules, list | tuple) else target_modules
        )
        return LoraConfig(
            r=r,
            lora_alpha=self.lora_alpha(r),
            use_rslora=self.rule == "rslora",
            target_modules=targets,
            **kwargs,
        )

    def optimizer(self, model: torch.nn.Module, lr: float) -> torch.optim.Optimizer:
        """AdamW over the trainable parameters; LoRA+ through peft's ``create_loraplus_optimizer``."""
        if not (math.isfinite(lr) and lr > 0):
            raise ValueError(f"lr must be a finite number > 0; got {lr!r}")
        if self.rule == "loraplus":
            from peft.optimizers import create_loraplus_optimizer

            return create_loraplus_optimizer(
                model,
                torch.optim.AdamW,
                lr=lr,
                loraplus_lr_ratio=self.loraplus_ratio,
                weight_decay=self.weight_decay,
            )
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise ValueError("the model has no trainable parameters; wrap it with peft first")
        return torch.optim.AdamW(params, lr=lr, weight_decay=self.weight_decay)


def standard(alpha: float = 16.0) -> Method:
    """Fixed ``alpha`` (peft's ``alpha / r``)."""
    return Method("standard", alpha=alpha)


def rslora(alpha: float = 16.0) -> Method:
    """rank-stabilised LoRA: ``alpha / sqrt(r)``."""
    return Method("rslora", alpha=alpha)


def alpha_2r() -> Method:
    """``alpha = 2r`` (scale 2 at every rank)."""
    return Method("alpha_2r")


def loraplus(alpha: float = 16.0, ratio: float = 16.0) -> Method:
    """LoRA+: B's learning rate ``ratio`` times A's."""
    return Method("loraplus", alpha=alpha, loraplus_ratio=ratio)


def lora_alpha(c: float = DEFAULT_C) -> Method:
    """LoRA-alpha: ``alpha = c * sqrt(r)``."""
    return Method("lora_alpha", c=c)
