"""Lie brackets of vector fields and their finite-difference estimates from ordered rollouts.

Convention: ``[X, Y] = DY . X - DX . Y``, so linear fields ``X = A x``, ``Y = B x`` give
``[X, Y] = (BA - AB) x``. A *flow* is a black box ``flow(x, h, seed) -> x'``: ``x`` is ``(..., m)``
(rows are independent states, e.g. contexts), ``h`` the time (strength) and ``seed`` the random
stream a noisy rollout draws from (``None``: deterministic). "A then B" is ``phi^B_h(phi^A_h(x))``.

- :func:`lie_bracket` is exact (two ``torch.func.jvp``), for fields given as functions.
- :func:`ordered_commutator` is ``C1(h) = (phi^B_h phi^A_h x - phi^A_h phi^B_h x) / h^2`` and
  :func:`loop_commutator` is ``C2(h) = (phi^B_-h phi^A_-h phi^B_h phi^A_h x - x) / h^2``; both are
  ``[X, Y](x) + O(h)`` (C1 is exact for the Heisenberg fields at every ``h``). With a ``readout`` f
  both compare ``f`` of the end points instead, ``~ Df . [X, Y]``, keeping the direction.
- Common random numbers: a rollout's segment ``k`` draws from ``seed + k`` whichever skill runs
  there, so both orders see the same noise and its contribution shrinks from ``O(sigma / h^2)`` to
  ``O(sigma / h)``.
- :func:`richardson` is ``2 C(h/2) - C(h)``, second order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import torch
from scipy.linalg import expm

__all__ = [
    "Field",
    "Flow",
    "commutator_sweep",
    "expm_flow",
    "lie_bracket",
    "loglog_slope",
    "loop_commutator",
    "noisy_flow",
    "ordered_commutator",
    "richardson",
    "rk4_flow",
]

Field = Callable[[torch.Tensor], torch.Tensor]
"""A vector field ``x (..., m) -> dx/dt (..., m)``, batched over leading dimensions."""


class Flow(Protocol):
    """``flow(x, h, seed)``: the state after running for time ``h`` from ``x`` (``(..., m)``)."""

    def __call__(self, x: torch.Tensor, h: float, seed: int | None = None) -> torch.Tensor: ...


# ============================================================================ exact
def lie_bracket(field_x: Field, field_y: Field, x: torch.Tensor) -> torch.Tensor:
    """``[X, Y](x) = DY(x) X(x) - DX(x) Y(x)`` by two forward-mode products; ``x``: ``(..., m)``.

    The fields must act row-wise (row ``i`` of the output depends only on row ``i`` of ``x``), as
    batched fields do; then one jvp with the whole batch of tangents gives every row's product.
    """
    x = _check_state(x)
    _, dy_x = torch.func.jvp(field_y, (x,), (field_x(x),))
    _, dx_y = torch.func.jvp(field_x, (x,), (field_y(x),))
    return dy_x - dx_y


# ============================================================================ flows
def rk4_flow(field: Field, n_steps: int = 8) -> Flow:
    """The flow of ``field`` by classical Runge-Kutta with ``n_steps`` equal steps over ``[0, h]``
    (``h`` may be negative: the flow backwards). Deterministic: ``seed`` is accepted and ignored."""
    if not isinstance(n_steps, int) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive int; got {n_steps!r}")

    def flow(x: torch.Tensor, h: float, seed: int | None = None) -> torch.Tensor:
        dt = float(h) / n_steps
        for _ in range(n_steps):
            k1 = field(x)
            k2 = field(x + 0.5 * dt * k1)
            k3 = field(x + 0.5 * dt * k2)
            k4 = field(x + dt * k3)
            x = x + (dt / 6.0) * (k1 + 2 * k2 + 2 * k3 + k4)
        return x

    return flow


def expm_flow(a: torch.Tensor | np.ndarray) -> Flow:
    """The exact flow ``x -> expm(h A) x`` of the linear field ``x -> A x`` (``scipy.linalg.expm``)."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"A must be a square matrix; got shape {a.shape}")

    def flow(x: torch.Tensor, h: float, seed: int | None = None) -> torch.Tensor:
        e = torch.as_tensor(expm(float(h) * a), dtype=x.dtype, device=x.device)
        return x @ e.T

    return flow


def noisy_flow(flow: Flow, sigma: float) -> Flow:
    """``flow`` plus Gaussian noise ``sigma * N(0, I)`` drawn from ``seed`` (fresh noise when
    ``seed`` is None): a rollout whose outcome is random."""
    if not sigma >= 0:
        raise ValueError(f"sigma must be >= 0; got {sigma}")

    def noisy(x: torch.Tensor, h: float, seed: int | None = None) -> torch.Tensor:
        y = flow(x, h, seed)
        gen = torch.Generator(device=y.device)
        if seed is None:
            gen.seed()
        else:
            gen.manual_seed(int(seed))
        return y + sigma * torch.randn(y.shape, generator=gen, dtype=y.dtype, device=y.device)

    return noisy


# ============================================================================ estimators
def _check_state(x: torch.Tensor) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor; got {type(x).__name__}")
    if x.ndim < 1 or x.shape[-1] < 1:
        raise ValueError(f"x must have shape (..., m) with m >= 1; got {tuple(x.shape)}")
    return x


def _check_h(h: float) -> float:
    h = float(h)
    if not (np.isfinite(h) and h > 0):
        raise ValueError(f"h must be a finite number > 0; got {h}")
    return h


def _run(flow: Flow, x: torch.Tensor, h: float, seed: int | None, who: str) -> torch.Tensor:
    y = flow(x, h, seed)
    if not isinstance(y, torch.Tensor) or y.shape != x.shape:
        got = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
        raise ValueError(
            f"flow {who} must return a tensor of the state's shape {tuple(x.shape)}; got {got}"
        )
    if not torch.isfinite(y).all():
        raise ValueError(f"flow {who} returned non-finite values at h={h}: the rollout diverged")
    return y


def _segment_seed(seed: int | None, k: int) -> int | None:
    return None if seed is None else seed + k


def _compose(
    flows: Sequence[tuple[Flow, float, str]], x: torch.Tensor, seed: int | None, paired: bool
) -> torch.Tensor:
    """Run ``flows`` in order; segment ``k`` draws from ``seed + k`` (paired) or from a stream of
    its own per skill and position (unpaired: ``seed + 1000 * (skill + 1) + k``)."""
    for k, (flow, h, who) in enumerate(flows):
        if paired or seed is None:
            s = _segment_seed(seed, k)
        else:
            s = seed + 1000 * (1 + (who == "B")) + k
        x = _run(flow, x, h, s, who)
    return x


def _readout(
    readout: Callable[[torch.Tensor], torch.Tensor] | None, x: torch.Tensor
) -> torch.Tensor:
    return x if readout is None else readout(x)


def ordered_commutator(
    flow_a: Flow,
    flow_b: Flow,
    x: torch.Tensor,
    h: float,
    readout: Callable[[torch.Tensor], torch.Tensor] | None = None,
    seed: int | None = None,
    paired: bool = True,
) -> torch.Tensor:
    """``C1(h) = (f(phi^B_h phi^A_h x) - f(phi^A_h phi^B_h x)) / h^2`` with ``f`` = ``readout``
    (identity by default): ``[X, Y](x) + O(h)``, or ``Df . [X, Y] + O(h)`` through a readout.

    ``paired`` uses common random numbers (segment ``k`` of both orders draws from ``seed + k``).
    """
    x, h = _check_state(x), _check_h(h)
    ab = _compose([(flow_a, h, "A"), (flow_b, h, "B")], x, seed, paired)
    ba = _compose([(flow_b, h, "B"), (flow_a, h, "A")], x, seed, paired)
    return (_readout(readout, ab) - _readout(readout, ba)) / h**2


def loop_commutator(
    flow_a: Flow,
    flow_b: Flow,
    x: torch.Tensor,
    h: float,
    readout: Callable[[torch.Tensor], torch.Tensor] | None = None,
    seed: int | None = None,
    paired: bool = True,
) -> torch.Tensor:
    """``C2(h) = (f(phi^B_-h phi^A_-h phi^B_h phi^A_h x) - f(x)) / h^2``: the gap that closing the
    loop A, B, -A, -B leaves, ``[X, Y](x) + O(h)``."""
    x, h = _check_state(x), _check_h(h)
    loop = [(flow_a, h, "A"), (flow_b, h, "B"), (flow_a, -h, "A"), (flow_b, -h, "B")]
    end = _compose(loop, x, seed, paired)
    return (_readout(readout, end) - _readout(readout, x)) / h**2


def richardson(estimator: Callable[[float], torch.Tensor], h: float) -> torch.Tensor:
    """``2 C(h/2) - C(h)``: cancels the ``O(h)`` term of a first-order estimator ``C(h)``."""
    h = _check_h(h)
    return 2 * estimator(h / 2) - estimator(h)


def commutator_sweep(
    flow_a: Flow,
    flow_b: Flow,
    x: torch.Tensor,
    hs: Sequence[float],
    kind: str = "ordered",
    readout: Callable[[torch.Tensor], torch.Tensor] | None = None,
    seed: int | None = None,
    paired: bool = True,
) -> list[torch.Tensor]:
    """The commutator estimate at each ``h`` of ``hs`` (``kind``: ``"ordered"`` C1 or ``"loop"`` C2)."""
    if kind not in ("ordered", "loop"):
        raise ValueError(f"kind must be 'ordered' or 'loop'; got {kind!r}")
    if len(hs) == 0:
        raise ValueError("hs must hold at least one step size")
    est = ordered_commutator if kind == "ordered" else loop_commutator
    return [est(flow_a, flow_b, x, h, readout, seed, paired) for h in hs]


def loglog_slope(hs: Sequence[float], errors: Sequence[float]) -> float:
    """Least-squares slope of ``log error`` against ``log h`` (1 for a first-order estimator)."""
    h, e = np.asarray(hs, dtype=float), np.asarray(errors, dtype=float)
    if h.shape != e.shape or h.size < 2:
        raise ValueError(f"need >= 2 matching (h, error) values; got {h.size} and {e.size}")
    if np.any(h <= 0) or np.any(e <= 0):
        raise ValueError("h and errors must be > 0 for a log-log slope")
    return float(np.polyfit(np.log(h), np.log(e), 1)[0])
