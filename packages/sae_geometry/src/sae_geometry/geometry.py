"""Layerwise geometry of an activation cloud: intrinsic dimension, curvature, normal residual, PR.

All estimators take ``x`` of shape ``(n_points, ambient_dim)``. :func:`summarize` first rescales a
layer to unit mean squared norm (so layers and models are comparable) and returns the four summaries
Stage 2 regresses on. The paper names curvature and intrinsic dimension; the normal-residual ratio
and the participation ratio are our choice for the other two (seeds note).

* **TwoNN** (Facco et al. 2017): ``mu = r2 / r1`` is Pareto(d) on a d-manifold. With the largest
  ``discard`` fraction of ratios dropped (noise and outliers), the maximum-likelihood estimate of the
  truncated law is ``d = (1 + f log f / (1 - f)) / mean(log mu_kept)``, ``f`` the discarded
  fraction; at ``f = 0`` it is the classic ``n / sum log mu``. ``method="linear"`` is Facco's
  regression of ``-log(1 - F(mu))`` on ``log mu`` through the origin (scikit-dimension's default).
* **Curvature** ``kappa``: at anchor points, local PCA of the ``k`` nearest neighbours gives a tangent
  basis (top ``d``) and a normal basis (the next ``d (d + 1) / 2`` directions, the most a second
  fundamental form can span); normal coordinates are regressed on ``[1, u, u_i u_j]`` of the tangent
  coordinates ``u``, which gives the second fundamental form ``II_a = Hessian of normal a``. The
  RMS principal curvature is ``sqrt(sum_a ||II_a||_F^2 / d)`` (``1/R`` on a radius-``R`` sphere,
  ``1/r`` on a product of circles of radius ``r``); the median over anchors is reported.
* **Normal-residual ratio** ``rho = sum_{i>d} lambda_i / sum_{i<=d} lambda_i`` of the same local
  PCA spectra (median over anchors): how much of a neighbourhood a d-flat misses.
* **Participation ratio** ``(sum lambda)^2 / sum lambda^2`` of the global covariance.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

import numpy as np
import torch
from sklearn.neighbors import NearestNeighbors

__all__ = [
    "Geometry",
    "curvature",
    "deduplicate",
    "local_pca",
    "normal_ratio",
    "participation_ratio",
    "reference_dimensions",
    "summarize",
    "two_nn",
    "unit_mean_square",
]


def _check_points(x: Any, min_points: int = 3, name: str = "x") -> np.ndarray:
    a = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"{name} must be (n_points, dim); got shape {a.shape}")
    if len(a) < min_points:
        raise ValueError(f"{name} needs at least {min_points} points; got {len(a)}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} has non-finite values (NaN or inf); clean the activations first")
    return a


def deduplicate(x: Any, rel_tol: float = 1e-5) -> np.ndarray:
    """The distinct rows of ``x``, rows closer than ``rel_tol`` x the RMS row norm counted once
    (activations of repeated contexts differ only by float rounding, and a zero nearest-neighbour
    distance breaks TwoNN and local PCA)."""
    a = _check_points(x, 1)
    scale = np.sqrt(np.mean(np.sum(a * a, axis=1))) or 1.0
    _, first = np.unique(np.round(a / (scale * rel_tol)), axis=0, return_index=True)
    return a[np.sort(first)]


def unit_mean_square(x: Any) -> np.ndarray:
    """``x`` rescaled so that the mean squared norm of its rows is 1."""
    a = _check_points(x, 1)
    scale = np.sqrt(np.mean(np.sum(a * a, axis=1)))
    if scale == 0:
        raise ValueError("x is all zeros; there is no scale to normalise")
    return a / scale


def _neighbours(a: np.ndarray, k: int, queries: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    nn = NearestNeighbors(n_neighbors=k + (queries is None), algorithm="auto").fit(a)
    dist, idx = nn.kneighbors(a if queries is None else queries)
    return (dist[:, 1:], idx[:, 1:]) if queries is None else (dist, idx)


def two_nn(x: Any, discard: float = 0.1, method: Literal["mle", "linear"] = "mle") -> float:
    """TwoNN intrinsic dimension of ``x`` ``(n, D)`` (near-duplicate rows are dropped first).

    ``inf`` when every kept ratio ``r2 / r1`` is 1 up to rounding (``mean log mu < 1e-12``:
    equidistant neighbours, a lattice): the Pareto law's maximum-likelihood dimension diverges
    there (a rounding-level mean would read ~1e15); callers that need a finite ``d`` must check.
    """
    a = deduplicate(_check_points(x, 3))
    if len(a) < 3:
        raise ValueError(f"x has {len(a)} distinct rows; TwoNN needs at least 3")
    if not 0 <= discard < 1:
        raise ValueError(f"discard must be in [0, 1); got {discard}")
    dist, _ = _neighbours(a, 2)
    dist = dist[dist[:, 0] > 0]  # points closer than float precision count as duplicates
    if len(dist) < 2:
        raise ValueError("fewer than 2 points have a nonzero nearest-neighbour distance")
    mu = np.sort(dist[:, 1] / dist[:, 0])
    keep = max(2, int(np.floor(len(mu) * (1 - discard))))
    log_mu = np.log(mu[:keep])
    f = 1 - keep / len(mu)
    if method not in ("mle", "linear"):
        raise ValueError(f"method must be 'mle' or 'linear'; got {method!r}")
    if log_mu.mean() < 1e-12:  # every ratio is 1 up to rounding (mu >= 1): d -> inf
        return float("inf")
    if method == "mle":
        correction = 1 + (f * np.log(f) / (1 - f) if f > 0 else 0.0)
        return float(correction / log_mu.mean())
    if method == "linear":
        cdf = np.arange(1, keep + 1) / len(mu)
        y = -np.log1p(-cdf)
        return float((log_mu @ y) / (log_mu @ log_mu))
    raise ValueError(f"method must be 'mle' or 'linear'; got {method!r}")


def participation_ratio(x: Any) -> float:
    """``(sum lambda)^2 / sum lambda^2`` of the covariance of ``x`` ``(n, D)``."""
    a = _check_points(x, 2)
    lam = np.clip(np.linalg.eigvalsh(np.cov(a, rowvar=False)), 0, None)
    return float(lam.sum() ** 2 / (lam**2).sum())


@dataclass(frozen=True)
class LocalPCA:
    """Neighbourhoods of ``n_anchors`` points: centred neighbours ``(A, k, D)``, eigenvalues
    ``(A, D)`` (descending) and eigenvectors ``(A, D, D)`` (columns) of each local covariance."""

    neighbours: torch.Tensor
    eigenvalues: torch.Tensor
    eigenvectors: torch.Tensor


def local_pca(x: Any, k: int = 64, n_anchors: int = 500, seed: int = 0) -> LocalPCA:
    """Local PCA of the ``k`` nearest neighbours (anchor included) of random anchor points."""
    a = _check_points(x, 3)
    if not 2 <= k < len(a):
        raise ValueError(f"k must be in [2, n_points={len(a)}); got {k}")
    rng = np.random.default_rng(seed)
    anchors = rng.choice(len(a), size=min(n_anchors, len(a)), replace=False)
    _, idx = _neighbours(a, k, a[anchors])
    nb = torch.from_numpy(a[idx])  # (A, k, D), the anchor is its own nearest neighbour
    nb = nb - nb.mean(1, keepdim=True)
    lam, vec = torch.linalg.eigh(nb.transpose(1, 2) @ nb / k)
    return LocalPCA(nb, lam.flip(-1).clamp_min(0), vec.flip(-1))


def _fit_terms(d: int) -> int:
    """Columns of the local quadratic fit in ``d`` tangent coordinates: ``1 + d + d (d + 1) / 2``."""
    return 1 + d + d * (d + 1) // 2


def _max_fit_dim(k: int) -> int:
    """The largest d whose quadratic fit ``k`` neighbours determine (``k > _fit_terms(d)``)."""
    d = 1
    while _fit_terms(d + 1) < k:
        d += 1
    return d


def _resolve_dim(x: np.ndarray, d: int | None) -> int:
    if d is None:
        dim = two_nn(x)
        if not np.isfinite(dim):
            raise ValueError(f"TwoNN gives d = {dim} (equidistant neighbours): pass d explicitly")
        d = max(1, round(dim))
    if not isinstance(d, int | np.integer) or d < 1 or d >= x.shape[1]:
        raise ValueError(f"d must be an int in [1, ambient dim {x.shape[1]}); got {d!r}")
    return int(d)


def curvature(
    x: Any,
    d: int | None = None,
    k: int = 64,
    n_anchors: int = 500,
    seed: int = 0,
    pca: LocalPCA | None = None,
) -> float:
    """Median RMS principal curvature of the manifold sampled by ``x`` ``(n, D)`` (units 1/|x|).

    ``d`` defaults to the rounded TwoNN estimate. Needs ``k`` well above the number of quadratic
    terms ``1 + d + d (d + 1) / 2``.
    """
    a = _check_points(x, 3)
    d = _resolve_dim(a, d)
    n_quad = d * (d + 1) // 2
    n_terms = _fit_terms(d)
    if k <= n_terms:
        raise ValueError(f"k={k} is too small for a quadratic fit in d={d}: need k > {n_terms}")
    pca = pca or local_pca(a, k, n_anchors, seed)
    n_normal = min(n_quad, a.shape[1] - d)
    tangent = pca.eigenvectors[..., :d]
    normal = pca.eigenvectors[..., d : d + n_normal]
    u = pca.neighbours @ tangent  # (A, k, d)
    v = pca.neighbours @ normal  # (A, k, n_normal)
    iu, ju = np.triu_indices(d)
    quad = u[..., iu] * u[..., ju]  # (A, k, n_quad)
    design = torch.cat([torch.ones_like(u[..., :1]), u, quad], dim=-1)
    coef = torch.linalg.lstsq(design, v).solution[:, 1 + d :]  # (A, n_quad, n_normal)
    # v_a = sum_{i<=j} c_ij u_i u_j  ->  Hessian H_ii = 2 c_ii, H_ij = H_ji = c_ij
    diag = torch.from_numpy(iu == ju)
    frob = (4 * coef[:, diag].pow(2)).sum((1, 2)) + (2 * coef[:, ~diag].pow(2)).sum((1, 2))
    return float(torch.sqrt(frob / d).median())


def normal_ratio(
    x: Any,
    d: int | None = None,
    k: int = 64,
    n_anchors: int = 500,
    seed: int = 0,
    pca: LocalPCA | None = None,
) -> float:
    """Median over anchors of ``sum_{i>d} lambda_i / sum_{i<=d} lambda_i`` of local PCA spectra."""
    a = _check_points(x, 3)
    d = _resolve_dim(a, d)
    lam = (pca or local_pca(a, k, n_anchors, seed)).eigenvalues
    return float((lam[:, d:].sum(1) / lam[:, :d].sum(1).clamp_min(1e-300)).median())


@dataclass(frozen=True)
class Geometry:
    """The four layer summaries Stage 2 regresses on (``x`` at unit mean squared norm)."""

    intrinsic_dim: float
    curvature: float
    normal_ratio: float
    participation_ratio: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


SUMMARIES = tuple(f.name for f in fields(Geometry))


def summarize(
    x: Any, k: int = 64, n_anchors: int = 500, max_points: int = 10_000, seed: int = 0
) -> Geometry:
    """The four summaries of one layer's activations ``x`` ``(n, D)``, on at most ``max_points``
    distinct rows (a seeded subsample) rescaled to unit mean squared norm."""
    a = deduplicate(x)
    if len(a) < k + 1:
        raise ValueError(f"x has {len(a)} distinct rows; need more than k={k}")
    if len(a) > max_points:
        a = a[np.random.default_rng(seed).choice(len(a), max_points, replace=False)]
    a = unit_mean_square(a)
    dim = two_nn(a)  # may be inf (equidistant neighbours): reported, and d clipped to the fit's max
    d = round(float(np.clip(dim, 1, min(a.shape[1] - 1, _max_fit_dim(k)))))
    pca = local_pca(a, k, n_anchors, seed)
    return Geometry(
        intrinsic_dim=dim,
        curvature=curvature(a, d, k, pca=pca),
        normal_ratio=normal_ratio(a, d, pca=pca),
        participation_ratio=participation_ratio(a),
    )


def reference_dimensions(x: Any) -> dict[str, float]:
    """scikit-dimension's TwoNN, lPCA and MLE on ``x`` (the check on our TwoNN)."""
    import skdim

    a = _check_points(x, 10)
    with np.errstate(divide="ignore", invalid="ignore"):  # lPCA divides by zero variances
        return _reference(a, skdim)


def _reference(a: np.ndarray, skdim: Any) -> dict[str, float]:
    return {
        "skdim_twonn": float(skdim.id.TwoNN().fit(a).dimension_),
        "skdim_lpca": float(skdim.id.lPCA().fit(a).dimension_),
        "skdim_mle": float(skdim.id.MLE().fit(a).dimension_),
    }
