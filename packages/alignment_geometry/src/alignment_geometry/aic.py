"""The Alignment Instability Condition (AIC), the quartic coefficient and the onset forecasts.

Notation (see the package's seeds note): ``F`` the Fisher of the alignment loss ``u`` at the aligned
point, ``b_i, lambda_i`` its top-``d`` eigenpairs spanning ``M``, ``g`` the initial task gradient,
``H`` the task Hessian. Under gradient flow (``t = lr * steps`` for gradient descent) the update is
``delta(t) = -t g + (t^2 / 2) H g + O(t^3)`` and the logits of a prompt move by
``-t J g + (t^2 / 2) z''`` with ``z'' = J H g + D^2 z[g, g]``. When ``F g = 0`` the first-order
term carries no probability change, so ``u(t) = c4 t^4 + O(t^5)`` with
``c4 = (1/8) E_x z''_x^T C_x z''_x``; otherwise ``u(t) = (t^2 / 2) g^T F g + O(t^3)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch.func import jvp

from alignment_geometry.fisher import CategoricalFisher

__all__ = [
    "AICResult",
    "AICThresholds",
    "alignment_risk_forecast",
    "check_aic",
    "forecast_from_terms",
    "logit_second_derivative",
    "onset_forecast",
    "onset_terms",
    "quadratic_coefficient",
    "quartic_coefficient",
]


@dataclass(frozen=True)
class AICThresholds:
    """Our defaults (not the paper's, whose constants we did not read)."""

    max_r_proj: float = 0.05
    min_sensitivity: float = 10.0
    min_gamma: float = 0.0
    rel_tol: float = 1e-9  # gamma_hat <= rel_tol * sqrt(lambda_1) |H g| counts as zero

    def __post_init__(self) -> None:
        if not 0 < self.max_r_proj < 1:
            raise ValueError(f"max_r_proj must be in (0, 1); got {self.max_r_proj}")
        if self.min_sensitivity <= 1:
            raise ValueError(f"min_sensitivity must be > 1; got {self.min_sensitivity}")


@dataclass
class AICResult:
    """The three conditions, the numbers behind them and whether each holds."""

    sensitivity: float  # mean of the top-d eigenvalues / the (d+1)-th eigenvalue
    r_proj: float  # |P_M g| / |g|
    gamma_hat: float  # sqrt(sum_i lambda_i <b_i, H g>^2)
    eps_hat: float  # sqrt(sum_i lambda_i <b_i, g>^2)
    eigenvalues: list[float]
    conditions: dict[str, bool] = field(default_factory=dict)

    @property
    def holds(self) -> bool:
        """All three conditions: the sufficient condition for quartic-onset degradation."""
        return bool(self.conditions) and all(self.conditions.values())

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "holds": self.holds}


def check_aic(
    eigenvalues: np.ndarray | torch.Tensor,
    eigenvectors: np.ndarray | torch.Tensor,
    g: np.ndarray | torch.Tensor,
    hg: np.ndarray | torch.Tensor,
    d: int,
    thresholds: AICThresholds | None = None,
) -> AICResult:
    """Check the AIC from the Fisher's top eigenpairs, the task gradient ``g`` and ``H g``.

    ``eigenvalues`` (descending) and ``eigenvectors`` (columns) must hold at least ``d + 1`` pairs
    when the parameter count allows (the (d+1)-th eigenvalue is the sensitivity's denominator; with
    exactly ``d`` pairs, or a zero (d+1)-th eigenvalue, the sensitivity is infinite).
    """
    th = thresholds or AICThresholds()
    lam = np.asarray(torch.as_tensor(eigenvalues).detach().cpu(), dtype=np.float64)
    vecs = np.asarray(torch.as_tensor(eigenvectors).detach().cpu(), dtype=np.float64)
    g = np.asarray(torch.as_tensor(g).detach().cpu(), dtype=np.float64).ravel()
    hg = np.asarray(torch.as_tensor(hg).detach().cpu(), dtype=np.float64).ravel()
    if vecs.ndim != 2 or vecs.shape[0] != g.size:
        raise ValueError(f"eigenvectors must be (P, k) with P = {g.size}; got {vecs.shape}")
    if not isinstance(d, int) or not 1 <= d <= min(len(lam), g.size):
        raise ValueError(
            f"d must be an int in [1, {min(len(lam), g.size)}] (eigenpairs given, parameter count); got {d!r}"
        )
    if not np.all(np.diff(lam) <= 1e-12 * max(abs(lam[0]), 1.0)):
        raise ValueError("eigenvalues must be sorted in descending order")
    gnorm = float(np.linalg.norm(g))
    if gnorm == 0:
        raise ValueError("the task gradient is zero: the task is already at a stationary point")
    top, b = lam[:d], vecs[:, :d]
    rest = lam[d] if len(lam) > d else 0.0
    sensitivity = float(top.mean() / rest) if rest > 0 else float("inf")
    proj_g, proj_a = b.T @ g, b.T @ hg
    r_proj = float(np.linalg.norm(proj_g) / gnorm)
    gamma = float(np.sqrt(np.sum(np.clip(top, 0, None) * proj_a**2)))
    eps = float(np.sqrt(np.sum(np.clip(top, 0, None) * proj_g**2)))
    floor = th.rel_tol * np.sqrt(max(lam[0], 0.0)) * float(np.linalg.norm(hg))
    conditions = {
        "low_rank_sensitivity": bool(sensitivity > th.min_sensitivity),
        "orthogonal_gradient": bool(r_proj < th.max_r_proj),
        "curvature_coupling": bool(gamma > max(th.min_gamma, floor)),
    }
    return AICResult(sensitivity, r_proj, gamma, eps, [float(x) for x in top], conditions)


def logit_second_derivative(
    logits_fn: Callable[[torch.Tensor], torch.Tensor],
    theta0: torch.Tensor,
    g: torch.Tensor,
    hg: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(J g, z'')`` with ``z'' = J H g + D^2 z[g, g]``: the first and second derivatives of the
    logits along the gradient-flow path, by ``jvp`` and a nested ``jvp``."""

    def along_g(theta: torch.Tensor) -> torch.Tensor:
        return jvp(logits_fn, (theta,), (g,))[1]

    jg, d2 = jvp(along_g, (theta0,), (g,))
    jhg = jvp(logits_fn, (theta0,), (hg,))[1]
    return jg.detach(), (jhg + d2).detach()


def _c_quadratic(p: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``mean_x a_x^T C_x b_x``."""
    return ((p * a * b).sum(-1) - (p * a).sum(-1) * (p * b).sum(-1)).mean()


def quartic_coefficient(
    logits_fn: Callable[[torch.Tensor], torch.Tensor],
    theta0: torch.Tensor,
    g: torch.Tensor,
    hg: torch.Tensor,
) -> float:
    """``c4 = (1/8) E_x z''_x^T C_x z''_x``: ``u(t) / t^4`` as ``t -> 0`` when ``F g = 0``."""
    return onset_terms(logits_fn, theta0, g, hg)[2] / 8


def quadratic_coefficient(fisher: CategoricalFisher, g: torch.Tensor) -> float:
    """``(1/2) g^T F g``: ``u(t) / t^2`` as ``t -> 0`` (zero exactly when ``F g = 0``)."""
    return 0.5 * fisher.quadratic(g)


def onset_forecast(
    logits_fn: Callable[[torch.Tensor], torch.Tensor],
    theta0: torch.Tensor,
    g: torch.Tensor,
    hg: torch.Tensor,
    t: np.ndarray | float,
) -> np.ndarray:
    """``u(t) ~ (1/2) E_x delta_x^T C_x delta_x`` with ``delta = -t J g + (t^2 / 2) z''``: the
    second-order forecast of the alignment loss along the gradient-flow path, before any training.
    It is ``(t^2 / 2) g^T F g`` at small ``t`` and ``c4 t^4`` when ``F g = 0``."""
    return forecast_from_terms(onset_terms(logits_fn, theta0, g, hg), t)


def onset_terms(
    logits_fn: Callable[[torch.Tensor], torch.Tensor],
    theta0: torch.Tensor,
    g: torch.Tensor,
    hg: torch.Tensor,
) -> tuple[float, float, float]:
    """``(E jg^T C jg, E jg^T C z'', E z''^T C z'')``, the three terms of the onset forecast."""
    with torch.no_grad():
        p = torch.softmax(logits_fn(theta0), -1)
    jg, z2 = logit_second_derivative(logits_fn, theta0, g, hg)
    a, b, c = (float(_c_quadratic(p, x, y)) for x, y in [(jg, jg), (jg, z2), (z2, z2)])
    return a, b, c


def forecast_from_terms(terms: tuple[float, float, float], t: np.ndarray | float) -> np.ndarray:
    """``(1/2) (t^2 a - t^3 b + t^4 c / 4)`` for ``terms = (a, b, c)`` of :func:`onset_terms`."""
    a, b, c = terms
    t = np.asarray(t, dtype=np.float64)
    return 0.5 * (t**2 * a - t**3 * b + t**4 * c / 4)


def alignment_risk_forecast(
    steps: np.ndarray | int,
    lr: float,
    eps_hat: float,
    gamma_hat: float,
    lam_min: float,
) -> np.ndarray:
    """The ``alignment-risk`` package's forecast: ``drift(s) = max(gamma s^2 / 2 - eps s, 0)`` with
    ``eps = lr * eps_hat``, ``gamma = lr^2 * gamma_hat``, and ``Delta u = lam_min drift^2 / 2``
    (``lam_min``: the 10% quantile of the top-d Fisher eigenvalues)."""
    if not lr > 0:
        raise ValueError(f"the learning rate must be > 0; got {lr}")
    s = np.asarray(steps, dtype=np.float64)
    drift = np.maximum(lr**2 * gamma_hat * s**2 / 2 - lr * eps_hat * s, 0.0)
    return lam_min * drift**2 / 2
