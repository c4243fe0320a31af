"""Full-batch AdamW training with a tidy log of train/test loss and accuracy every ``eval_every`` steps.

Step ``t`` in the log means "after t optimiser updates": the training forward pass at step t both
scores the log and gives the gradient of update t + 1, so train and test numbers on one row come
from the same weights. No gradient clipping, weight decay on every parameter (as the paper's code).
"""

from __future__ import annotations

import logging
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from paper_common import pick_device

from .baselines import GrokfastEMA
from .metrics import GrokMetrics, grokking_metrics
from .tasks import Split

__all__ = ["HISTORY_KEYS", "TrainConfig", "TrainResult", "evaluate", "train"]

log = logging.getLogger(__name__)

HISTORY_KEYS = (
    "step",
    "train_loss",
    "train_acc",
    "test_loss",
    "test_acc",
    "logit_norm",
    "residual_norm",
)
"""Columns of the training log. ``logit_norm``: the largest L2 norm of a training example's logit
vector; ``residual_norm``: the mean L2 norm of the residual stream before the last normalisation
(``resid_pre3``) at the answer position, over training examples."""


@dataclass(frozen=True)
class TrainConfig:
    """Optimiser and schedule (defaults: the paper's Z_113 setting at lr 6e-4).

    Attributes:
        lr, betas, weight_decay: AdamW's; weight decay applies to every parameter.
        steps: the budget, in full-batch steps (= epochs).
        eval_every: log (and check early stopping) every this many steps, and at the last step.
        stop_at: stop once test accuracy >= this (None: always run the whole budget).
        grokfast_alpha, grokfast_lamb: when ``grokfast_alpha`` is set, Grokfast-EMA gradient
            filtering (a baseline; see :class:`~spherical_grokking.baselines.GrokfastEMA`).
        device: torch device name; None picks one (``PAPER_DEVICE`` overrides, CPU here).
    """

    lr: float = 6e-4
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 1.0
    steps: int = 15_000
    eval_every: int = 100
    stop_at: float | None = 0.99
    grokfast_alpha: float | None = None
    grokfast_lamb: float = 2.0
    device: str | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"TrainConfig.lr must be > 0; got {self.lr!r}")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ValueError(f"TrainConfig.betas must be two numbers in [0, 1); got {self.betas!r}")
        if not self.weight_decay >= 0:
            raise ValueError(f"TrainConfig.weight_decay must be >= 0; got {self.weight_decay!r}")
        for name in ("steps", "eval_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TrainConfig.{name} must be a positive integer; got {value!r}")
        if self.stop_at is not None and not 0 < self.stop_at <= 1:
            raise ValueError(f"TrainConfig.stop_at must be in (0, 1] or None; got {self.stop_at!r}")
        if self.grokfast_alpha is not None and not 0 <= self.grokfast_alpha < 1:
            raise ValueError(
                f"TrainConfig.grokfast_alpha must be in [0, 1) or None; got {self.grokfast_alpha!r}"
            )
        if not self.grokfast_lamb >= 0:
            raise ValueError(f"TrainConfig.grokfast_lamb must be >= 0; got {self.grokfast_lamb!r}")


@dataclass
class TrainResult:
    """The log (one array per :data:`HISTORY_KEYS` column), its metrics and how the run ended."""

    history: dict[str, np.ndarray]
    metrics: GrokMetrics
    config: TrainConfig
    stopped_early: bool
    diverged: bool
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    def rows(self) -> list[dict[str, float]]:
        """The log as a tidy table: one dict per logged step."""
        keys = list(self.history)
        return [
            dict(zip(keys, vals, strict=True)) for vals in zip(*self.history.values(), strict=True)
        ]


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """``(loss, accuracy)`` of ``model`` on tokens ``x`` (N, L) with labels ``y`` (N,)."""
    was_training = model.training
    model.eval()
    logits = model(x)
    model.train(was_training)
    return float(F.cross_entropy(logits, y)), float((logits.argmax(-1) == y).float().mean())


def train(
    model: nn.Module,
    data: Split,
    config: TrainConfig | None = None,
    progress: bool | None = None,
) -> TrainResult:
    """Train ``model`` full-batch on ``data``'s training examples; log train/test every ``eval_every``.

    ``model`` maps ``(N, L)`` tokens to ``(N, n_classes)`` logits and accepts a ``cache`` dict (as
    :class:`~spherical_grokking.model.GrokTransformer` does); if it has ``project_weights()`` (nGPT),
    that is called after every step. A non-finite loss ends the run (``diverged=True``).
    ``progress``: a tqdm bar (None: only on a terminal).
    """
    config = config or TrainConfig()
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig; got {type(config).__name__}")
    if not isinstance(data, Split):
        raise TypeError(
            f"data must be a Split (see spherical_grokking.split); got {type(data).__name__}"
        )
    device = pick_device(config.device)
    model.to(device).train()
    train_x, train_y, test_x, test_y = (t.to(device) for t in data.tensors())
    opt = torch.optim.AdamW(
        model.parameters(),
        lr=config.lr,
        betas=config.betas,
        weight_decay=config.weight_decay,
        fused=device.type in ("cpu", "cuda"),  # one kernel for every tensor: 4x faster step on CPU
    )
    grad_filter = (
        GrokfastEMA(config.grokfast_alpha, config.grokfast_lamb)
        if config.grokfast_alpha is not None
        else None
    )
    project = getattr(model, "project_weights", None)
    history: dict[str, list[float]] = {k: [] for k in HISTORY_KEYS}
    stopped = diverged = False
    show = sys.stderr.isatty() if progress is None else progress
    bar = tqdm(total=config.steps, disable=not show, desc=data.task.name, leave=False)
    start = time.perf_counter()
    for step in range(config.steps + 1):
        logged = step % config.eval_every == 0 or step == config.steps
        cache: dict[str, torch.Tensor] | None = {} if logged else None
        logits = model(train_x, cache)
        loss = F.cross_entropy(logits, train_y)
        if not torch.isfinite(loss):
            diverged = True
            log.warning("%s: non-finite loss at step %d; stopping", data.task.name, step)
        if logged or diverged:
            test_loss, test_acc = evaluate(model, test_x, test_y)
            with torch.no_grad():
                row = {
                    "step": step,
                    "train_loss": float(loss),
                    "train_acc": float((logits.argmax(-1) == train_y).float().mean()),
                    "test_loss": test_loss,
                    "test_acc": test_acc,
                    "logit_norm": float(logits.norm(dim=-1).max()),
                    "residual_norm": float(cache["resid_pre3"].norm(dim=-1).mean())
                    if cache
                    else math.nan,
                }
            for k, v in row.items():
                history[k].append(v)
            bar.set_postfix(train=f"{row['train_acc']:.3f}", test=f"{test_acc:.3f}", refresh=False)
            if config.stop_at is not None and test_acc >= config.stop_at and not diverged:
                stopped = step < config.steps
                break
        if diverged or step == config.steps:
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if grad_filter is not None:
            grad_filter(model.parameters())
        opt.step()
        if project is not None:
            project()
        bar.update(1)
    bar.close()
    arrays = {k: np.asarray(v, dtype=float) for k, v in history.items()}
    return TrainResult(
        history=arrays,
        metrics=grokking_metrics(arrays, config.steps),
        config=config,
        stopped_early=stopped,
        diverged=diverged,
        seconds=time.perf_counter() - start,
    )
