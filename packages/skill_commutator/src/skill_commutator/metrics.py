"""Geometry of skills: Jacobian alignment across realizations, reachability of brackets, statistics.

- :func:`principal_angles`: ``scipy.linalg.subspace_angles`` between column spaces (radians, largest
  first); :func:`jacobian_alignment` compares each skill's activation and prefix ``col(J)`` per context
  (same skill) against every other skill's (cross skill).
- :func:`novelty` ``arcsin(|(I - P_S0) b| / |b|)`` and :func:`entropy_gain` ``H([S0, b]) - H(S0)``
  with ``H`` the entropy of the normalised singular values (``p_i = sigma_i / sum sigma`` or ``sigma^2``).
- :func:`spearman_table`: rank correlation of predictors with a gap, averaged over seeds, with a paired
  bootstrap over pairs for the differences.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from scipy.linalg import orth, subspace_angles
from scipy.stats import spearmanr

from paper_common.stats import cohens_d

__all__ = [
    "cohens_d_ci",
    "entropy_gain",
    "jacobian_alignment",
    "novelty",
    "principal_angles",
    "spearman_table",
    "spectral_entropy",
]


def principal_angles(a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> np.ndarray:
    """Principal angles (radians, descending) between ``col(a)`` and ``col(b)``, ``(d, k)`` each."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[0]:
        raise ValueError(f"need two (d, k) matrices with the same d; got {a.shape} and {b.shape}")
    return subspace_angles(a, b)


def jacobian_alignment(
    jac_a: np.ndarray | torch.Tensor, jac_b: np.ndarray | torch.Tensor
) -> dict[str, np.ndarray]:
    """Principal angles between ``col(J)`` of two realizations, per skill pair and context.

    ``jac_a``, ``jac_b``: ``(n_skills, contexts, d, m)``. Returns ``mean`` and ``max`` angle arrays of
    shape ``(n_skills, n_skills, contexts)``: entry ``[s, t, c]`` compares skill ``s`` of the first
    realization with skill ``t`` of the second in context ``c`` (the diagonal is same-skill); NaN
    where either Jacobian is 0 (no column space).
    """
    ja, jb = np.asarray(jac_a, dtype=float), np.asarray(jac_b, dtype=float)
    if ja.ndim != 4 or ja.shape[:3] != jb.shape[:3]:
        raise ValueError(
            f"need (skills, contexts, d, m) arrays alike; got {ja.shape} and {jb.shape}"
        )
    n, c = ja.shape[:2]
    mean = np.empty((n, n, c))
    worst = np.empty((n, n, c))
    for s in range(n):
        for t in range(n):
            for k in range(c):
                ang = subspace_angles(ja[s, k], jb[t, k])
                if ang.size == 0:  # a zero Jacobian has no column space: no angle
                    mean[s, t, k] = worst[s, t, k] = np.nan
                else:
                    mean[s, t, k], worst[s, t, k] = ang.mean(), ang.max()
    return {"mean": mean, "max": worst}


def cohens_d_ci(
    same: np.ndarray, cross: np.ndarray, n_boot: int = 1000, seed: int = 0
) -> tuple[float, float, float]:
    """Cohen's d (pooled SD) of ``same`` against ``cross`` and a 95% percentile bootstrap interval
    (each sample resampled on its own)."""
    same, cross = np.asarray(same, dtype=float).ravel(), np.asarray(cross, dtype=float).ravel()
    d = cohens_d(same, cross)
    rng = np.random.default_rng(seed)
    boots = np.array(
        [
            cohens_d(rng.choice(same, same.size), rng.choice(cross, cross.size))
            for _ in range(n_boot)
        ]
    )
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return float(d), float(lo), float(hi)


def _as_matrix(x: np.ndarray | torch.Tensor) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return x[:, None] if x.ndim == 1 else x


def novelty(s0: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> float:
    """``arcsin(|(I - P_S0) b| / |b|)`` in radians: how far ``b`` leaves ``col(S0)`` (0: inside,
    pi/2: orthogonal; a zero ``b`` is 0, a zero ``S0`` spans nothing, so any ``b != 0`` is pi/2).
    ``s0``: ``(d, k)``, ``b``: ``(d,)``."""
    s0, b = _as_matrix(s0), np.asarray(b, dtype=float).ravel()
    nb = np.linalg.norm(b)
    if nb == 0:
        return 0.0
    q = orth(s0)  # the column space proper: a zero or rank-deficient S0 spans fewer directions
    resid = b - q @ (q.T @ b)
    return float(np.arcsin(min(1.0, np.linalg.norm(resid) / nb)))


def spectral_entropy(m: np.ndarray | torch.Tensor, power: int = 1) -> float:
    """Entropy (nats) of ``p_i = sigma_i^power / sum_j sigma_j^power`` over the singular values."""
    if power not in (1, 2):
        raise ValueError(f"power must be 1 or 2; got {power}")
    s = np.linalg.svd(_as_matrix(m), compute_uv=False) ** power
    p = s[s > 0] / s.sum()
    return float(-(p * np.log(p)).sum())


def entropy_gain(
    s0: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor, power: int = 1
) -> float:
    """``H([S0, b]) - H(S0)``: the spread the bracket ``b`` adds to the reachable directions."""
    s0 = _as_matrix(s0)
    both = np.concatenate([s0, np.asarray(b, dtype=float).reshape(-1, 1)], axis=1)
    return spectral_entropy(both, power) - spectral_entropy(s0, power)


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0  # a constant predictor carries no rank information
    return float(spearmanr(x, y)[0])


def spearman_table(
    predictors: Mapping[str, np.ndarray],
    gap: np.ndarray,
    reference: str,
    n_boot: int = 1000,
    seed: int = 0,
) -> list[dict[str, float | str]]:
    """Spearman's rho of each predictor with ``gap`` and the difference to ``reference``.

    Arrays are ``(n_seeds, n_pairs)``: rho is computed within each seed and averaged. The bootstrap
    resamples pairs (the same draw for every seed and predictor) for a 95% interval of rho and of
    ``rho_reference - rho_predictor``. A constant predictor scores rho = 0.
    """
    gap = np.atleast_2d(np.asarray(gap, dtype=float))
    preds = {k: np.atleast_2d(np.asarray(v, dtype=float)) for k, v in predictors.items()}
    if reference not in preds:
        raise ValueError(f"reference {reference!r} is not among the predictors {list(preds)}")
    for k, v in preds.items():
        if v.shape != gap.shape:
            raise ValueError(f"predictor {k!r} has shape {v.shape}; the gap has {gap.shape}")
    n_seeds, n_pairs = gap.shape
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_pairs, size=(n_boot, n_pairs))

    def rho(p: np.ndarray, idx: np.ndarray | slice) -> float:
        return float(np.mean([_spearman(p[s, idx], gap[s, idx]) for s in range(n_seeds)]))

    boots = {k: np.array([rho(v, d) for d in draws]) for k, v in preds.items()}
    rows: list[dict[str, float | str]] = []
    for k, v in preds.items():
        diff = boots[reference] - boots[k]
        lo, hi = np.percentile(boots[k], [2.5, 97.5])
        dlo, dhi = np.percentile(diff, [2.5, 97.5])
        rows.append(
            {
                "predictor": k,
                "rho": rho(v, slice(None)),
                "rho_low": float(lo),
                "rho_high": float(hi),
                "diff_vs_ref": rho(preds[reference], slice(None)) - rho(v, slice(None)),
                "diff_low": float(dlo),
                "diff_high": float(dhi),
            }
        )
    return rows
