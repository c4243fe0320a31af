"""Backward samplers for any score function, vectorised over samples, and the copy metric.

Forward OU ``dx = -x dt + sqrt(2) dW``. Going backward from ``T`` to ``t_min`` with ``h = dt``:
reverse SDE ``x <- x + h (x + 2 s(x, t)) + sqrt(2 h) xi`` (Euler-Maruyama), probability-flow ODE
``x <- x + h (x + s(x, t))`` (Euler).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import torch

ScoreFn = Callable[[torch.Tensor, float], torch.Tensor]


def time_grid(t_max: float, t_min: float, steps: int) -> torch.Tensor:
    """Decreasing times from ``t_max`` to ``t_min`` (uniform in log-time, denser near 0)."""
    if not 0 < t_min < t_max or steps < 1:
        raise ValueError("need 0 < t_min < t_max and steps >= 1")
    return torch.logspace(math.log10(t_max), math.log10(t_min), steps + 1, dtype=torch.float64)


def integrate_backward(
    score: ScoreFn,
    x: torch.Tensor,
    times: torch.Tensor,
    method: Literal["sde", "ode"] = "sde",
    gen: torch.Generator | None = None,
) -> torch.Tensor:
    """Integrate from ``times[0]`` down to ``times[-1]`` starting at ``x`` (state at ``times[0]``)."""
    if method not in ("sde", "ode"):
        raise ValueError(f"method must be 'sde' or 'ode', got {method!r}")
    x = x.clone()
    for t0, t1 in zip(times[:-1].tolist(), times[1:].tolist(), strict=True):
        h = t0 - t1
        s = score(x, t0)
        if method == "sde":
            x = (
                x
                + h * (x + 2 * s)
                + math.sqrt(2 * h) * torch.randn(x.shape, generator=gen, dtype=x.dtype)
            )
        else:
            x = x + h * (x + s)
    return x


def sample(
    score: ScoreFn, n: int, d: int, t_max: float = 6.0, t_min: float = 1e-3, steps: int = 400,
    method: Literal["sde", "ode"] = "sde", seed: int = 0,
) -> torch.Tensor:  # fmt: skip
    """``n`` samples: start from ``N(0, I)`` at ``t_max`` and integrate backward to ``t_min``."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=gen, dtype=torch.float64)
    return integrate_backward(score, x, time_grid(t_max, t_min, steps), method, gen)


def copy_fraction(samples: torch.Tensor, train: torch.Tensor, ratio: float = 1 / 3) -> torch.Tensor:
    """Per-sample copy flag: nearest / second-nearest training distance ``< ratio`` (Bonnaire et al.)."""
    if train.shape[0] < 2:
        raise ValueError("need at least two training points")
    if samples.dim() != 2 or samples.shape[1] != train.shape[1]:
        raise ValueError("samples and train must be (n, d) with the same d")
    dist = torch.cdist(samples.double(), train.double())
    two = dist.topk(2, dim=1, largest=False).values
    return two[:, 0] / two[:, 1].clamp_min(1e-300) < ratio
