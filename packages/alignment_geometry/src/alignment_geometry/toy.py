"""The two-parameter system where everything has a closed form.

Alignment loss ``u = lam * th2^2 / 2`` (so ``F = diag(0, lam)``, ``M = span(e2)``); task loss
``L = (th1 - a)^2 / 2 + c th1 th2 + mu th2^2 / 2 + offset * th2`` = ``th^T H th / 2 - b^T th + const``
with ``H = [[1, c], [c, mu]]`` and ``b = (a, -offset)``. From ``th = 0`` the task gradient is
``g = (-a, offset)``: orthogonal to ``M`` when ``offset = 0``. Gradient flow has
``th(t) = (integral_0^t e^(-H s) ds) b`` (``= (I - e^(-H t)) H^-1 b`` for invertible ``H``), so
with ``offset = 0``, ``th2 ~ -c a t^2 / 2`` and ``u / t^4 -> lam c^2 a^2 / 8``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp
from scipy.linalg import expm

from alignment_geometry.aic import AICResult, AICThresholds, check_aic

__all__ = ["Toy2D", "loglog_slope"]


@dataclass(frozen=True)
class Toy2D:
    lam: float = 50.0
    a: float = 1.0
    c: float = 0.5
    mu: float = 0.2
    offset: float = 0.0

    def __post_init__(self) -> None:
        if not self.lam > 0:
            raise ValueError(f"lam (the alignment sensitivity) must be > 0; got {self.lam}")

    @property
    def hessian(self) -> np.ndarray:
        return np.array([[1.0, self.c], [self.c, self.mu]])

    @property
    def b(self) -> np.ndarray:
        return np.array([self.a, -self.offset])

    @property
    def fisher(self) -> np.ndarray:
        return np.diag([0.0, self.lam])

    @property
    def gradient0(self) -> np.ndarray:
        """The task gradient at the aligned point ``th = 0``."""
        return -self.b

    @property
    def hessian_norm(self) -> float:
        return float(np.max(np.abs(np.linalg.eigvalsh(self.hessian))))

    def alignment_loss(self, theta: np.ndarray) -> np.ndarray:
        return self.lam * np.asarray(theta)[..., 1] ** 2 / 2

    def task_loss(self, theta: np.ndarray) -> np.ndarray:
        th = np.asarray(theta)
        t1, t2 = th[..., 0], th[..., 1]
        return (t1 - self.a) ** 2 / 2 + self.c * t1 * t2 + self.mu * t2**2 / 2 + self.offset * t2

    def flow(self, t: np.ndarray | float) -> np.ndarray:
        """``th(t)`` of gradient flow from 0, shape ``(len(t), 2)``, exact (a matrix exponential of
        the augmented system, so a singular ``H`` is fine)."""
        ts = np.atleast_1d(np.asarray(t, dtype=np.float64))
        if np.any(ts < 0):
            raise ValueError("times must be >= 0")
        aug = np.zeros((4, 4))
        aug[:2, :2] = -self.hessian
        aug[:2, 2:] = np.eye(2)
        return np.stack([expm(aug * s)[:2, 2:] @ self.b for s in ts])

    def flow_numerical(self, t: np.ndarray, rtol: float = 1e-12) -> np.ndarray:
        """``th(t)`` by numerical integration (``solve_ivp``, DOP853), to check :meth:`flow`."""
        ts = np.asarray(t, dtype=np.float64)
        sol = solve_ivp(
            lambda _, th: self.b - self.hessian @ th,
            (0.0, float(ts.max())),
            np.zeros(2),
            t_eval=ts,
            method="DOP853",
            rtol=rtol,
            atol=1e-22,
        )
        return sol.y.T

    def gradient_descent(self, lr: float, steps: int) -> np.ndarray:
        """Iterates ``th_0 .. th_steps`` of gradient descent from 0, shape ``(steps + 1, 2)``."""
        if not lr > 0:
            raise ValueError(f"lr must be > 0; got {lr}")
        if not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps must be a positive int; got {steps!r}")
        out = np.zeros((steps + 1, 2))
        step = np.eye(2) - lr * self.hessian
        for s in range(steps):  # a 2x2 recursion: the loop is over time, not elements
            out[s + 1] = step @ out[s] + lr * self.b
        return out

    @property
    def c4(self) -> float:
        """``(1/8) g^T H F H g``, the quartic coefficient (meaningful when ``offset = 0``)."""
        hg = self.hessian @ self.gradient0
        return float(hg @ self.fisher @ hg / 8)

    @property
    def c2(self) -> float:
        """``(1/2) g^T F g``, the quadratic onset coefficient."""
        g = self.gradient0
        return float(g @ self.fisher @ g / 2)

    def aic(self, thresholds: AICThresholds | None = None) -> AICResult:
        vals, vecs = np.linalg.eigh(self.fisher)
        order = np.argsort(-vals)
        g = self.gradient0
        return check_aic(
            vals[order], vecs[:, order], g, self.hessian @ g, d=1, thresholds=thresholds
        )


def loglog_slope(t: np.ndarray, u: np.ndarray) -> tuple[float, float]:
    """Least-squares ``log u = k log t + log c``; returns ``(k, c)``. NaN if any ``u <= 0``."""
    t, u = np.asarray(t, dtype=np.float64), np.asarray(u, dtype=np.float64)
    if t.shape != u.shape or t.size < 2:
        raise ValueError("t and u must be arrays of the same shape with at least two points")
    if np.any(u <= 0) or np.any(t <= 0):
        return float("nan"), float("nan")
    k, logc = np.polyfit(np.log(t), np.log(u), 1)
    return float(k), float(np.exp(logc))
