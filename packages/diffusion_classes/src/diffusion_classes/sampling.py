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

from .dynamics import Crossing

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


def cloning_curve(
    score: ScoreFn,
    classify: Callable[[torch.Tensor], torch.Tensor],
    d: int,
    stops: list[float] | torch.Tensor,
    n_traj: int = 500,
    n_clones: int = 2,
    t_max: float = 6.0,
    t_min: float = 1e-3,
    steps_per_unit: int = 60,
    seed: int = 0,
) -> dict[str, torch.Tensor]:
    """Speciation by cloning (Biroli et al. 2024): run backward trajectories to each stop ``t_s``,
    continue ``n_clones`` copies of every state with independent noise down to ``t_min``, classify
    the end points, and measure how often all clones land in the same class.

    Returns ``stops`` (decreasing), ``p_same`` ``(S,)`` and ``p_same_by_class`` ``(S, C)`` (a
    trajectory's class = its first clone's class; NaN where a class never occurs).
    """
    if n_clones < 2:
        raise ValueError("need n_clones >= 2")
    stops_t = torch.sort(torch.as_tensor(stops, dtype=torch.float64), descending=True).values
    if not (t_min < stops_t[-1] and stops_t[0] < t_max):
        raise ValueError("stops must lie strictly between t_min and t_max")
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n_traj, d, generator=gen, dtype=torch.float64)
    t_now = t_max
    same, by_class = [], []
    for ts in stops_t.tolist():
        n_steps = max(1, math.ceil((t_now - ts) * steps_per_unit))
        x = integrate_backward(
            score, x, torch.linspace(t_now, ts, n_steps + 1, dtype=torch.float64), "sde", gen
        )
        t_now = ts
        clones = x.repeat(n_clones, 1)
        down = time_grid(ts, t_min, max(1, math.ceil(ts * steps_per_unit) + 20))
        ends = integrate_backward(score, clones, down, "sde", gen)
        cls = classify(ends).reshape(n_clones, n_traj)
        agree = (cls == cls[0]).all(0)
        same.append(agree.double().mean())
        n_cls = int(cls.max()) + 1
        by_class.append(torch.stack([agree[cls[0] == c].double().mean() if (cls[0] == c).any()
                                     else torch.tensor(math.nan, dtype=torch.float64) for c in range(n_cls)]))  # fmt: skip
    width = max(len(b) for b in by_class)
    by = torch.full((len(by_class), width), math.nan, dtype=torch.float64)
    for i, b in enumerate(by_class):
        by[i, : len(b)] = b
    return {"stops": stops_t, "p_same": torch.stack(same), "p_same_by_class": by}


def speciation_time(stops: torch.Tensor, p_same: torch.Tensor, baseline: float) -> Crossing:
    """Largest stop time at which ``p_same`` is still above the midpoint between its chance level
    ``baseline`` and 1, linearly interpolated. The chance level is ``sum_c w_c^2`` for the pooled
    curve and ``w_c`` for class ``c``'s curve.

    Returns a :class:`~.dynamics.Crossing` in the stop times: ``early`` (time ``<= stops.min()``)
    when ``p_same`` is already below the level at the smallest stop, ``censored`` (time ``>=
    stops.max()``) when it never falls below it. Stops where ``p_same`` is NaN (a class that no
    trajectory reached there) are left out; none left: ``Crossing(nan)``, not measured.
    """
    stops_t = torch.as_tensor(stops, dtype=torch.float64)
    p_t = torch.as_tensor(p_same, dtype=torch.float64)
    if stops_t.dim() != 1 or stops_t.shape != p_t.shape:
        raise ValueError(
            f"stops and p_same must be 1-D of one length; got {tuple(stops_t.shape)}, "
            f"{tuple(p_t.shape)}"
        )
    level = (1 + baseline) / 2
    keep = ~torch.isnan(p_t)
    order = torch.argsort(stops_t[keep])  # increasing time: p_same decreases from ~1 to baseline
    t, p = stops_t[keep][order], p_t[keep][order]
    if len(t) == 0:
        return Crossing(math.nan)
    below = (p < level).nonzero()
    if len(below) == 0:
        return Crossing(float(t[-1]), censored=True)
    i = int(below[0])
    if i == 0:
        return Crossing(float(t[0]), early=True)
    a, b = float(p[i - 1]), float(p[i])
    frac = (a - level) / (a - b) if a != b else 0.0
    return Crossing(float(t[i - 1] + frac * (t[i] - t[i - 1])))
