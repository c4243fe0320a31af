"""The exact value of a screening plan.

Units ``i = 1..n`` are vulnerable (``Y_i = 1``) independently with probability ``p_i``. A plan screens a
set ``S`` (``|S| = m``) and observes ``Y_S``; the final allocation of ``K`` slots then takes the screened
positives first and fills the rest with the highest-``p`` unscreened units (the best allocation
given what was observed). With ``P`` the number of positives in ``S`` (Poisson-binomial) and ``C(j)``
the sum of the ``j`` largest unscreened ``p``, the covered vulnerable units have

    E = sum_k P(P = k) [min(k, K) + C(K - min(k, K))]

and, since given ``P = k`` the unscreened part is a sum of independent Bernoullis, the variance adds
``sum_{top K-min(k,K)} p(1-p)`` inside. Everything here is vectorised numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "PlanValue",
    "check_problem",
    "marginal_screening_value",
    "plan_value",
    "poisson_binomial_pmf",
    "simulate",
    "window_values",
]


def check_problem(p: ArrayLike, coverage: int, screen_budget: int = 0) -> np.ndarray:
    """Validate scores in [0, 1] (no NaN), ``0 <= coverage <= n`` and ``0 <= screen_budget <= n``."""
    arr = np.asarray(p, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"p must be a non-empty 1-D array of probabilities; got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError("p contains NaN")
    if arr.min() < 0 or arr.max() > 1:
        raise ValueError(f"p must lie in [0, 1]; got values in [{arr.min():.3g}, {arr.max():.3g}]")
    n = arr.size
    if (
        isinstance(coverage, bool)
        or not isinstance(coverage, int | np.integer)
        or not 0 <= coverage <= n
    ):
        raise ValueError(f"coverage K must be an int in [0, n={n}]; got {coverage!r}")
    if isinstance(screen_budget, bool) or not isinstance(screen_budget, int | np.integer):
        raise ValueError(f"screen_budget m must be an int; got {screen_budget!r}")
    if not 0 <= screen_budget <= n:
        raise ValueError(f"screen_budget m must be in [0, n={n}]; got {screen_budget}")
    return arr


def poisson_binomial_pmf(p: ArrayLike) -> np.ndarray:
    """``P(sum of independent Bernoulli(p_i) = k)`` for ``k = 0..len(p)``, by the O(m^2) recursion.

    ``p`` may be 2-D ``(w, m)``: one distribution per row, computed together.
    """
    q = np.atleast_2d(np.asarray(p, dtype=float))
    w, m = q.shape
    pmf = np.zeros((w, m + 1))
    pmf[:, 0] = 1.0
    for j in range(m):
        pj = q[:, j : j + 1]
        pmf[:, 1 : j + 2] = pmf[:, 1 : j + 2] * (1 - pj) + pmf[:, : j + 1] * pj
        pmf[:, 0] *= 1 - pj[:, 0]
    return pmf[0] if np.ndim(p) == 1 else pmf


@dataclass(frozen=True)
class PlanValue:
    """Expected covered vulnerable units of a plan and its variance."""

    mean: float
    var: float


def _value_from_pmf(
    pmf: np.ndarray, prefix: np.ndarray, prefix_var: np.ndarray, coverage: int
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance per row: ``pmf`` ``(w, m+1)``, prefix sums of the unscreened ``(w, L)``."""
    k = np.arange(pmf.shape[1])
    taken = np.minimum(k, coverage)
    rest = np.minimum(coverage - taken, prefix.shape[1] - 1)
    mu = taken + prefix[:, rest]
    mean = (pmf * mu).sum(1)
    second = (pmf * (prefix_var[:, rest] + mu**2)).sum(1)
    return mean, second - mean**2


def plan_value(
    p: ArrayLike,
    screened: ArrayLike,
    coverage: int,
    use_scores: bool = True,
    truth: ArrayLike | None = None,
) -> PlanValue:
    """Exact mean and variance of covered vulnerable units when screening ``screened`` (indices).

    ``use_scores=False``: the final allocation ignores the scores and takes screened positives only.
    ``truth``: the true probabilities, when the plan ranks units by estimated scores ``p`` (an
    application's plan, valued under the truth); by default ``p`` is the truth.
    """
    arr = check_problem(p, coverage)
    true = arr if truth is None else check_problem(truth, coverage)
    if true.shape != arr.shape:
        raise ValueError(f"truth must match p's shape {arr.shape}; got {true.shape}")
    s = np.unique(np.asarray(screened, dtype=np.int64))
    if s.size and (s.min() < 0 or s.max() >= arr.size):
        raise ValueError(f"screened indices must be in [0, {arr.size})")
    pmf = poisson_binomial_pmf(true[s][None, :])
    if use_scores:
        rest_idx = np.delete(np.arange(arr.size), s)
        rest = true[rest_idx[np.argsort(-arr[rest_idx], kind="stable")]]
    else:
        rest = np.zeros(0)
    prefix = np.concatenate([[0.0], np.cumsum(rest)])[None, :]
    prefix_var = np.concatenate([[0.0], np.cumsum(rest * (1 - rest))])[None, :]
    mean, var = _value_from_pmf(pmf, prefix, prefix_var, coverage)
    return PlanValue(float(mean[0]), float(max(var[0], 0.0)))


def window_values(q_desc: np.ndarray, coverage: int, m: int, starts: np.ndarray) -> np.ndarray:
    """Expected value of screening the ranks ``[s, s + m)`` of the descending scores ``q_desc``, for
    every ``s`` in ``starts`` at once (one Poisson-binomial recursion over all windows; memory
    ``O(len(starts) * m)``, independent of n)."""
    starts = np.asarray(starts, dtype=np.int64)
    if m == 0:
        return np.full(starts.size, q_desc[:coverage].sum())
    n = q_desc.size
    pmf = poisson_binomial_pmf(q_desc[starts[:, None] + np.arange(m)[None, :]])
    full = np.concatenate([[0.0], np.cumsum(q_desc)])
    taken = np.minimum(np.arange(m + 1), coverage)
    j = np.minimum(coverage - taken, n - m)[None, :]  # unscreened units filled, per positives count
    s = starts[:, None]
    # the j best unscreened: the prefix of q_desc with the window cut out
    c = np.where(j <= s, full[j], full[np.minimum(j + m, n)] - (full[s + m] - full[s]))
    return (pmf * (taken[None, :] + c)).sum(1)


def marginal_screening_value(p: ArrayLike, coverage: int) -> np.ndarray:
    """Gain in expected coverage from screening unit ``i`` alone, in closed form.

    With ``q`` the scores sorted down, ``p_in = q_{K-1}`` the marginal included and ``p_out = q_K`` the
    best excluded score: a unit inside the top K gains ``(1 - p_i) p_out`` (a revealed negative frees its
    slot for the best excluded unit); a unit outside gains ``p_i (1 - p_in)`` (a revealed positive
    displaces the marginal unit). Both peak for ``p_i`` at the cut-off, where they are about
    ``p*(1 - p*)``.
    """
    arr = check_problem(p, coverage)
    n = arr.size
    order = np.argsort(-arr, kind="stable")
    q = arr[order]
    p_in = q[coverage - 1] if coverage >= 1 else 1.0
    p_out = q[coverage] if coverage < n else 0.0
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    inside = rank < coverage
    return np.where(inside, (1 - arr) * p_out, arr * (1 - p_in))


def simulate(
    p: ArrayLike,
    screened: ArrayLike,
    coverage: int,
    n_sims: int = 10_000,
    seed: int = 0,
    use_scores: bool = True,
) -> np.ndarray:
    """Monte-Carlo draws of covered vulnerable units under the plan (checks :func:`plan_value`)."""
    arr = check_problem(p, coverage)
    rng = np.random.default_rng(seed)
    s = np.unique(np.asarray(screened, dtype=np.int64))
    y = rng.random((n_sims, arr.size)) < arr
    pos = y[:, s].sum(1)
    taken = np.minimum(pos, coverage)
    if not use_scores:
        return taken.astype(float)
    rest_idx = np.delete(np.arange(arr.size), s)
    rest_idx = rest_idx[np.argsort(-arr[rest_idx], kind="stable")]
    cum = np.concatenate([np.zeros((n_sims, 1)), np.cumsum(y[:, rest_idx], 1)], 1)
    fill = np.minimum(coverage - taken, rest_idx.size)
    return taken + cum[np.arange(n_sims), fill]
