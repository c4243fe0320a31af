"""Fine-tuning on a flat parameter vector: full-batch gradient descent in float64, logging the
alignment loss, the task loss and the refusal rate at every step.

``finetune`` takes plain functions of ``theta`` (see :mod:`alignment_geometry.fisher`), so the same
loop runs the 2-D toy, the tiny LM, a LoRA subset or a real model. SGD (minibatches: its noise adds
a term linear in steps) and Adam are there as controls; the theory is about gradient descent.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from alignment_geometry.mitigations import Mitigation, PlainGD

__all__ = ["Trajectory", "finetune", "orthogonalised", "task_gradient"]

Optimizer = Literal["gd", "sgd", "adam"]


@dataclass
class Trajectory:
    """Per-step logs of one fine-tuning run (index ``s`` = the parameters after ``s`` steps)."""

    lr: float
    steps: np.ndarray
    task_loss: np.ndarray
    logs: dict[str, np.ndarray]  # what ``monitor`` returned, per step
    delta: torch.Tensor  # theta_final - theta0
    method: str
    optimizer: str

    @property
    def alignment_loss(self) -> np.ndarray:
        """``u`` per step (``monitor`` must return a ``"u"`` entry)."""
        if "u" not in self.logs:
            raise KeyError(
                "this run logged no alignment loss: give finetune a monitor returning 'u'"
            )
        return self.logs["u"]

    @property
    def time(self) -> np.ndarray:
        """Gradient-flow time ``t = lr * steps``."""
        return self.lr * self.steps

    @property
    def final(self) -> dict[str, float]:
        """The last value of the task loss and of every monitored quantity."""
        return {
            "task_loss": float(self.task_loss[-1]),
            **{k: float(v[-1]) for k, v in self.logs.items()},
        }


def task_gradient(loss_fn: Callable[..., torch.Tensor], theta: torch.Tensor) -> torch.Tensor:
    """``grad loss_fn(theta)``, detached."""
    th = theta.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad(loss_fn(th), th)
    return g.detach()


def orthogonalised(
    loss_fn: Callable[..., torch.Tensor], theta0: torch.Tensor, g_fisher: torch.Tensor
) -> Callable[..., torch.Tensor]:
    """``L'(theta) = L(theta) - <g_F, theta - theta0>``: the same Hessian as ``L`` everywhere, and the
    initial gradient ``g - g_F``. With ``g_F`` the part of ``g`` in the Fisher's range
    (:meth:`FisherDecomposition.range_component`), ``F (g - g_F) = 0``."""
    theta0 = theta0.detach()
    g_fisher = g_fisher.detach()

    def fn(theta: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        base = loss_fn(theta) if index is None else loss_fn(theta, index)
        return base - torch.dot(g_fisher, theta - theta0)

    return fn


def finetune(
    task_loss: Callable[..., torch.Tensor],
    theta0: torch.Tensor,
    *,
    steps: int,
    lr: float,
    monitor: Callable[[torch.Tensor], Mapping[str, float]] | None = None,
    mitigation: Mitigation | None = None,
    optimizer: Optimizer = "gd",
    n_examples: int | None = None,
    batch_size: int = 8,
    betas: tuple[float, float] = (0.9, 0.999),
    seed: int = 0,
    progress: bool | None = None,
    desc: str = "finetune",
) -> Trajectory:
    """Run ``steps`` updates of ``theta`` from ``theta0`` on ``task_loss`` and log every step.

    Args:
        task_loss: ``theta -> scalar``; for ``optimizer="sgd"`` it must accept ``(theta, index)``
            (a minibatch of example indices) and ``n_examples`` must be given.
        lr: the step size ``eta`` (gradient-flow time is ``t = eta * steps``).
        monitor: ``theta -> {"u": ..., "refusal": ...}`` (any names), logged at every step, e.g.
            :meth:`alignment_geometry.geometry.AlignedPoint.monitor` (the alignment loss and the
            refusal rate from one forward pass).
        mitigation: changes the update direction (projection, EWC, ...); plain GD by default.
        optimizer: ``"gd"`` (full batch), ``"sgd"`` (minibatches of ``batch_size``) or ``"adam"``.
    """
    if not lr > 0:
        raise ValueError(f"lr (eta) must be > 0; got {lr}")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int; got {steps!r}")
    if optimizer not in ("gd", "sgd", "adam"):
        raise ValueError(f"optimizer must be 'gd', 'sgd' or 'adam'; got {optimizer!r}")
    if optimizer == "sgd" and not n_examples:
        raise ValueError("optimizer='sgd' needs n_examples (and a task_loss taking (theta, index))")
    mitigation = mitigation or PlainGD()
    theta0 = theta0.detach()
    theta = theta0.clone()
    gen = torch.Generator().manual_seed(seed)
    m = torch.zeros_like(theta)
    v = torch.zeros_like(theta)
    logs: dict[str, list[float]] = {}
    l_log: list[float] = []

    def log(th: torch.Tensor, loss: float) -> None:
        if monitor is not None:
            with torch.no_grad():
                for key, value in monitor(th).items():
                    logs.setdefault(key, []).append(float(value))
        l_log.append(loss)

    from tqdm.auto import tqdm

    show = sys.stderr.isatty() if progress is None else progress
    for s in tqdm(range(steps), desc=desc, disable=not show, leave=False):
        th = theta.clone().requires_grad_(True)
        if optimizer == "sgd":
            idx = torch.randint(0, n_examples, (batch_size,), generator=gen)
            (g,) = torch.autograd.grad(task_loss(th, idx), th)
            with torch.no_grad():
                full = float(task_loss(theta))
        else:
            loss = task_loss(th)
            (g,) = torch.autograd.grad(loss, th)
            full = float(loss.detach())
        log(theta, full)
        g = mitigation.direction(theta, theta0, g.detach())
        if optimizer == "adam":
            m = betas[0] * m + (1 - betas[0]) * g
            v = betas[1] * v + (1 - betas[1]) * g**2
            mh, vh = m / (1 - betas[0] ** (s + 1)), v / (1 - betas[1] ** (s + 1))
            step = mh / (vh.sqrt() + 1e-12)
        else:
            step = g
        theta = mitigation.after_step(theta - lr * step, theta0)
    with torch.no_grad():
        log(theta, float(task_loss(theta)))
    return Trajectory(
        lr=float(lr),
        steps=np.arange(steps + 1),
        task_loss=np.array(l_log),
        logs={k: np.array(v) for k, v in logs.items()},
        delta=(theta - theta0).detach(),
        method=mitigation.name,
        optimizer=optimizer,
    )
