"""Per-class timescales from the spectrum of the feature covariance, via Gaussian equivalence.

Bonnaire et al. (2025) replace the random features of one Gaussian class by a Gaussian-equivalent
model whose covariance ``U`` has two bulks: a *generalisation* bulk of rank ``d`` (the features'
linear response to the data) and a *memorisation* bulk of rank ``n`` (each training point's own
nonlinear part). Mode ``k`` relaxes under gradient flow at rate ``2 Delta_t lambda_k / (d p)``.

We extend the equivalence class by class (our derivation; the exact equations of Nicoletti et al.
were not available to us, see ``seeds/diffusion_classes.md``). For feature ``i`` and a noised point
of class ``c``, the pre-activation is ``h = m_ic + alpha_ic u + beta_i v`` with ``m_ic = e^{-t} w_i .
mu_c / sqrt(d)``, ``alpha_ic^2 = e^{-2t} w_i^T Sigma_c w_i / d`` (data) and ``beta_i^2 = Delta_t
|w_i|^2 / d`` (noise); ``u, v ~ N(0, 1)``. Gauss-Hermite quadrature gives

- ``kappa_ic = E sigma(h)`` (the class mean feature: centroid geometry enters here);
- ``g_ic = E[u sigma(h)] / alpha_ic`` (linear response to the data);
- ``nu_ic^2 = Var_u(E_v sigma(h)) - E[u sigma(h)]^2`` (point-specific nonlinear part);
- ``b_ic = E[v sigma(h)] / beta_i`` and ``s_ic^2`` the remainder (noise parts).

Then ``U ~ (1/n) sum_nu f_nu f_nu^T + noise terms`` with ``f_nu = kappa_c + g_c o (e^{-t} W (x_nu -
mu_c) / sqrt(d)) + nu_c o omega_nu``. Class ``c``'s generalisation bulk is ``B_c = pi_c e^{-2t}
diag(g_c) W Sigma_c W^T diag(g_c) / d`` (``pi_c = n_c / n``) and its memorisation bulk is made of
``n_c`` directions of eigenvalue ``~ |nu_c|^2 / n``. Hence the predictions

    tau_gen,c = d p / (2 Delta_t lambda_gen,c),   lambda_gen,c = median nonzero eigenvalue of B_c,
    tau_mem,c = d p / (2 Delta_t lambda_mem,c),   lambda_mem,c = |nu_c|^2 / n,

so the generalisation order is set by ``pi_c g_c^2 sigma_c^2`` (variance first, imbalance
modulating) and the memorisation order by ``nu_c`` (variance; sample count only through ``n``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .mixture import DTYPE, GaussianMixture, delta
from .random_features import RandomFeatures


def _gauss_hermite(k: int) -> tuple[np.ndarray, np.ndarray]:
    x, w = np.polynomial.hermite_e.hermegauss(k)
    return x, w / w.sum()


@dataclass(frozen=True)
class EquivalentCoefficients:
    """Gaussian-equivalence coefficients, each ``(C, p)`` (class, feature)."""

    kappa: np.ndarray
    g: np.ndarray
    nu2: np.ndarray
    b: np.ndarray
    s2: np.ndarray


def equivalent_coefficients(
    rf: RandomFeatures, mixture: GaussianMixture, t: float, nodes: int = 48
) -> EquivalentCoefficients:
    """Per class and feature, the coefficients of the Gaussian-equivalent features at time ``t``."""
    if rf.d != mixture.d:
        raise ValueError(f"features expect d = {rf.d}, mixture has d = {mixture.d}")
    if t <= 0:
        raise ValueError("t must be > 0")
    W = rf.W.numpy()
    d = rf.d
    a, dl = math.exp(-t), float(delta(t))
    m = a * mixture.means.numpy() @ W.T / math.sqrt(d)  # (C, p)
    alpha = a * np.sqrt(np.einsum("pd,cd,pd->cp", W, mixture.variances.numpy(), W) / d)
    beta = np.sqrt(dl * (W**2).sum(1) / d)[None, :].repeat(len(m), 0)
    u, wu = _gauss_hermite(nodes)
    h = m[..., None, None] + alpha[..., None, None] * u[:, None] + beta[..., None, None] * u[None]
    sig = rf.activation(torch.as_tensor(h)).numpy()  # (C, p, k_u, k_v)
    ww = wu[:, None] * wu[None]
    kappa = (sig * ww).sum((-1, -2))
    eu = (sig * ww * u[:, None]).sum((-1, -2))
    ev = (sig * ww * u[None]).sum((-1, -2))
    inner = (sig * wu[None]).sum(-1)  # E_v sigma, as a function of u: (C, p, k_u)
    var_inner = (inner**2 * wu).sum(-1) - kappa**2
    total = (sig**2 * ww).sum((-1, -2)) - kappa**2
    nu2 = np.clip(var_inner - eu**2, 0, None)
    s2 = np.clip(total - var_inner - ev**2, 0, None)
    return EquivalentCoefficients(kappa, eu / alpha, nu2, ev / beta, s2)


@dataclass(frozen=True)
class TimescalePrediction:
    """Predicted per-class eigenvalue scales and gradient-flow times."""

    lambda_gen: np.ndarray
    lambda_mem: np.ndarray
    tau_gen: np.ndarray
    tau_mem: np.ndarray


def predict_timescales(
    rf: RandomFeatures, mixture: GaussianMixture, counts: list[int] | np.ndarray, t: float
) -> TimescalePrediction:
    """``tau_gen,c`` and ``tau_mem,c`` for ``counts[c]`` training points of each class (see module)."""
    counts = np.asarray(counts, dtype=float)
    if counts.shape != (mixture.n_classes,) or (counts < 0).any() or counts.sum() < 1:
        raise ValueError(f"counts must be {mixture.n_classes} non-negative numbers, not all 0")
    co = equivalent_coefficients(rf, mixture, t)
    n, pi = counts.sum(), counts / counts.sum()
    W = rf.W.numpy()
    d, p, dl = rf.d, rf.p, float(delta(t))
    lam_gen = np.empty(mixture.n_classes)
    for c in range(mixture.n_classes):
        # nonzero eigenvalues of B_c = pi_c e^{-2t} G W S W^T G / d equal those of the d x d
        # matrix pi_c e^{-2t} S^{1/2} W^T G^2 W S^{1/2} / d
        sq = np.sqrt(mixture.variances[c].numpy())
        small = (W * sq).T @ ((co.g[c] ** 2)[:, None] * (W * sq)) / d
        ev = np.linalg.eigvalsh(pi[c] * math.exp(-2 * t) * small)
        lam_gen[c] = np.median(ev) if pi[c] > 0 else 0.0
    lam_mem = co.nu2.sum(1) / n
    scale = d * p / (2 * dl)
    with np.errstate(divide="ignore"):
        return TimescalePrediction(lam_gen, lam_mem, scale / lam_gen, scale / lam_mem)


def equivalent_covariance(
    rf: RandomFeatures, mixture: GaussianMixture, train: torch.Tensor, labels: torch.Tensor,
    t: float, seed: int = 0,
) -> torch.Tensor:  # fmt: skip
    """The Gaussian-equivalent ``U`` for this training set (to compare its spectrum with the
    empirical one): Gaussian ``omega_nu`` and noise parts in place of the nonlinearity."""
    co = equivalent_coefficients(rf, mixture, t)
    train = torch.as_tensor(train, dtype=DTYPE)
    labels = torch.as_tensor(labels)
    gen = torch.Generator().manual_seed(seed)
    W = rf.W
    d, _p = rf.d, rf.p
    kap, g = torch.as_tensor(co.kappa)[labels], torch.as_tensor(co.g)[labels]
    nu = torch.as_tensor(co.nu2)[labels].sqrt()
    centred = train - mixture.means[labels]
    f = kap + g * (math.exp(-t) * centred @ W.T / math.sqrt(d))
    f = f + nu * torch.randn(f.shape, generator=gen, dtype=DTYPE)
    n = train.shape[0]
    U = f.T @ f / n
    pi = torch.bincount(labels, minlength=mixture.n_classes).to(DTYPE) / n
    dl = float(delta(t))
    for c in range(mixture.n_classes):
        if pi[c] == 0:
            continue
        bw = torch.as_tensor(co.b[c])[:, None] * W
        U = U + pi[c] * (dl * bw @ bw.T / d + torch.diag(torch.as_tensor(co.s2[c])))
    return U


def same_class_probability(
    mixture: GaussianMixture, times: np.ndarray | list[float], n: int = 20000, seed: int = 0
) -> np.ndarray:
    """Exact cloning curve of the exact score: ``(T, C)`` with entry ``E_{x_t | c} P(c | x_t)``.

    Two clones continued from the same ``x_t`` end in class ``c`` independently with probability
    ``P(c | x_t)`` (the backward process samples ``p(x_0 | x_t)``), so the chance that a clone lands
    in class ``c`` given that the other did is ``E[P(c|x_t)^2] / E[P(c|x_t)]``, which is this
    expectation over the noised class-``c`` law. Its chance level is ``w_c``.
    """
    out = np.empty((len(times), mixture.n_classes))
    for c in range(mixture.n_classes):
        x0 = mixture.sample_class(c, n, seed + c)
        z = torch.randn(x0.shape, generator=torch.Generator().manual_seed(seed + 100 + c),
                        dtype=DTYPE)  # fmt: skip
        for i, t in enumerate(times):
            xt = math.exp(-t) * x0 + float(delta(t)) ** 0.5 * z
            out[i, c] = float(mixture.posterior(xt, t)[:, c].mean())
    return out


def two_class_speciation_time(
    distance2: float, variance: float, weight: float, level: float | None = None, nodes: int = 64
) -> float:
    """Imbalance-corrected speciation time of a class of weight ``weight`` against one other class
    with centroids ``distance2 = |mu_c - mu_o|^2`` apart and equal isotropic ``variance``.

    The posterior log-odds of the class on its own noised points is Gaussian, ``L ~ N(b + S/2, S)``
    with ``b = log(w / (1 - w))`` and ``S = e^{-2t} distance2 / (e^{-2t} variance + Delta_t)``; we
    solve ``E sigmoid(L) = level`` (default the midpoint ``(1 + w) / 2``) for ``S``, then for ``t``.
    For ``w = 1/2`` and ``distance2 >> 1`` this is ``(1/2) log(distance2) - const``: the
    ``(1/2) log Lambda`` law; the minority (``w -> 0``) needs ``S ~ 2 log(1 / w)``, a later time.
    """
    if not 0 < weight < 1 or distance2 <= 0 or variance <= 0:
        raise ValueError("need 0 < weight < 1, distance2 > 0 and variance > 0")
    level = (1 + weight) / 2 if level is None else level
    x, w = _gauss_hermite(nodes)
    bias = math.log(weight / (1 - weight))

    def mean_post(S: float) -> float:
        return float((w / (1 + np.exp(-(bias + S / 2 + math.sqrt(S) * x)))).sum())

    lo, hi = 1e-8, 1e4
    for _ in range(200):  # bisection on log S: mean_post increases with S
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if mean_post(mid) < level else (lo, mid)
    S = math.sqrt(lo * hi)
    # S = e^{-2t} D / (e^{-2t} v + 1 - e^{-2t})  =>  e^{-2t} = S / (D - S v + S)
    denom = distance2 - S * variance + S
    if denom <= S:
        return math.nan  # the classes are never separated enough at this level
    return 0.5 * math.log(denom / S)
