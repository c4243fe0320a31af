"""Per-class learning curves of the random-features model along its exact gradient flow.

For class ``c`` and readout ``A``, with ``phi`` the features of noised inputs at diffusion time ``t``:

- **generalisation error** ``E_c(A) = (1/d) E ||s_A(x_t) - s*(x_t)||^2`` on fresh class-``c`` data,
  ``s*`` the exact mixture score: quadratic in ``A`` (``G = E phi phi^T``, ``H = E phi s*^T``);
- **train / test DSM loss** of class ``c``: the quadratic loss built from that class's training points
  and from fresh points of that class; **memorisation gap** = test - train.

Times are threshold crossings of these curves on a log-spaced grid of flow times ``tau``:
``tau_gen,c`` = first ``tau`` at which ``E_c`` is within ``gen_tol`` (relative to its total drop)
of its minimum; ``tau_mem,c`` = first ``tau`` at which the gap exceeds ``mem_tol`` times the
class's initial test loss. A threshold never crossed on the grid is **censored** (a
:class:`Crossing` with ``censored=True``: the time is at least the grid's end), never NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from paper_common.stats import Bounds

from .mixture import DTYPE, GaussianMixture, delta
from .random_features import QuadraticLoss, RandomFeatures, dsm_quadratic


@dataclass(frozen=True)
class ScoreError:
    """``(1/d) E ||s_A - s*||^2`` as ``(G, H, c0)``."""

    G: torch.Tensor
    H: torch.Tensor
    c0: float
    d: int
    p: int

    def values(self, As: torch.Tensor) -> torch.Tensor:
        """For a stack of readouts ``(T, d, p)``: ``(T,)`` errors."""
        p = self.p
        quad = torch.einsum("tij,jk,tik->t", As, self.G, As) / p
        lin = torch.einsum("tij,ji->t", As, self.H) * (2 / math.sqrt(p))
        return (quad - lin + self.c0) / self.d


def score_error(
    rf: RandomFeatures, mixture: GaussianMixture, c: int, t: float, n: int = 4000, seed: int = 0
) -> ScoreError:
    x0 = mixture.sample_class(c, n, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    xt = math.exp(-t) * x0 + float(delta(t)) ** 0.5 * torch.randn(
        x0.shape, generator=gen, dtype=DTYPE
    )
    phi = rf.features(xt)
    s = mixture.score(xt, t)
    return ScoreError(phi.T @ phi / n, phi.T @ s / n, float((s**2).sum(1).mean()), rf.d, rf.p)


def _losses(q: QuadraticLoss, As: torch.Tensor) -> torch.Tensor:
    dl, p = q.delta, q.p
    quad = torch.einsum("tij,jk,tik->t", As, q.U, As) * dl / p
    lin = torch.einsum("tij,ji->t", As, q.V) * 2 * math.sqrt(dl / p)
    return (quad + lin + q.d) / q.d


@dataclass(frozen=True)
class Crossing:
    """When a curve first crossed a level on a grid of times, with what the grid cannot say.

    ``time``: the crossing, log-interpolated between grid points. ``censored``: the curve never
    crossed on the grid, ``time`` is the grid's last (finite) point and the true time a lower bound
    (``>= time``). ``early``: the curve had already crossed at the grid's first point, ``time`` is
    that point and the true time an upper bound (``<= time``). ``time`` is NaN when nothing was
    measured (no finite point on the curve).
    """

    time: float
    censored: bool = False
    early: bool = False

    def __post_init__(self) -> None:
        if self.censored and self.early:
            raise ValueError("a crossing cannot be both censored and early")

    @property
    def bounds(self) -> Bounds:
        """The times (``>= 0``) the crossing can have: ``[time, time]`` when it was observed,
        ``[time, inf)`` when censored, ``[0, time]`` when early, ``[0, inf)`` when not measured."""
        if math.isnan(self.time):
            return Bounds(0.0, math.inf)
        if self.censored:
            return Bounds(self.time, math.inf)
        if self.early:
            return Bounds(0.0, self.time)
        return Bounds(self.time, self.time)


def crossing(taus: np.ndarray, curve: np.ndarray, level: float, above: bool) -> Crossing:
    """First ``tau`` at which ``curve`` goes above (or below) ``level``, log-interpolated.

    Never crossed: ``Crossing(last tau, censored=True)`` (the time is at least the grid's end).
    Crossed at the first point: ``Crossing(taus[0], early=True)``. Points where ``curve`` is NaN
    (a diverged loss) are left out; the censoring is then at the last finite point.
    """
    taus, curve = np.asarray(taus, dtype=float), np.asarray(curve, dtype=float)
    if taus.ndim != 1 or taus.shape != curve.shape:
        raise ValueError(
            f"taus and curve must be 1-D of one length; got {taus.shape}, {curve.shape}"
        )
    if math.isnan(level):
        raise ValueError("level is NaN")
    ok = ~np.isnan(curve)
    taus, curve = taus[ok], curve[ok]
    if taus.size == 0:
        return Crossing(math.nan)
    hit = curve > level if above else curve < level
    if not hit.any():
        return Crossing(float(taus[-1]), censored=True)
    i = int(np.argmax(hit))
    if i == 0:
        return Crossing(float(taus[0]), early=True)
    a, b = curve[i - 1], curve[i]
    frac = 0.0 if b == a else (level - a) / (b - a)
    return Crossing(
        float(np.exp(np.log(taus[i - 1]) + frac * (np.log(taus[i]) - np.log(taus[i - 1]))))
    )


@dataclass
class ClassCurves:
    """Per-class curves on the flow-time grid ``taus`` and the times read off them (a censored
    :class:`Crossing` when the threshold is not crossed by ``taus[-1]``)."""

    taus: np.ndarray
    gen_error: dict[int, np.ndarray]
    train_loss: dict[int, np.ndarray]
    test_loss: dict[int, np.ndarray]
    tau_gen: dict[int, Crossing]
    tau_mem: dict[int, Crossing]


def class_curves(
    rf: RandomFeatures, mixture: GaussianMixture, train: torch.Tensor, labels: torch.Tensor, t: float,
    taus: np.ndarray, n_noise: int = 32, gen_tol: float = 0.05, mem_tol: float = 0.02, seed: int = 0,
) -> ClassCurves:  # fmt: skip
    """Exact-flow curves per class from ``A_0 = 0`` with the loss on all of ``train``."""
    q = dsm_quadratic(rf, train, t, n_noise, seed)
    As = q.flow(torch.zeros(rf.d, rf.p, dtype=DTYPE), torch.as_tensor(taus, dtype=DTYPE))
    out = ClassCurves(np.asarray(taus), {}, {}, {}, {}, {})
    for c in range(mixture.n_classes):
        idx = labels == c
        if int(idx.sum()) == 0:
            continue
        fresh = mixture.sample_class(c, max(2000, int(idx.sum())), seed + 100 + c)
        err = score_error(rf, mixture, c, t, seed=seed + 200 + c).values(As).numpy()
        tr = _losses(dsm_quadratic(rf, train[idx], t, n_noise, seed + 300 + c), As).numpy()
        te = _losses(dsm_quadratic(rf, fresh, t, n_noise, seed + 400 + c), As).numpy()
        out.gen_error[c], out.train_loss[c], out.test_loss[c] = err, tr, te
        lo = err.min()
        if err[0] <= lo:  # the error never drops below its start: at its minimum from the start
            out.tau_gen[c] = Crossing(float(out.taus[0]), early=True)
        else:
            out.tau_gen[c] = crossing(out.taus, err, lo + gen_tol * (err[0] - lo), above=False)
        out.tau_mem[c] = crossing(out.taus, te - tr, mem_tol * te[0], above=True)
    return out
