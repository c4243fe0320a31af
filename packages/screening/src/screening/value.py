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

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import fft as sp_fft

__all__ = [
    "PlanValue",
    "check_indices",
    "check_problem",
    "marginal_screening_value",
    "plan_value",
    "poisson_binomial_pmf",
    "simulate",
    "window_values",
]


def check_problem(p: ArrayLike, coverage: int, screen_budget: int = 0) -> np.ndarray:
    """Validate scores in [0, 1] (no NaN), ``0 <= coverage <= n`` and ``0 <= screen_budget <= n``."""
    if np.asarray(p).dtype == bool:
        raise ValueError("p must be probabilities; got a boolean array (outcomes, not scores?)")
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


def check_indices(idx: ArrayLike, n: int, name: str = "screened") -> np.ndarray:
    """Validate unit indices: a 1-D array of integers (not floats, not booleans) in ``[0, n)``,
    without duplicates; returns them sorted as int64. An empty list is the empty set."""
    raw = np.asarray(idx)
    if raw.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of unit indices; got shape {raw.shape}")
    if raw.size == 0:
        return np.zeros(0, np.int64)
    if raw.dtype == bool or not np.issubdtype(raw.dtype, np.integer):
        raise ValueError(f"{name} must hold integer unit indices; got dtype {raw.dtype}")
    s = np.sort(raw.astype(np.int64))
    if s[0] < 0 or s[-1] >= n:
        raise ValueError(f"{name} indices must be in [0, {n}); got values in [{s[0]}, {s[-1]}]")
    if (np.diff(s) == 0).any():
        raise ValueError(f"{name} has duplicate indices: {np.unique(s[1:][np.diff(s) == 0])}")
    return s


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
    s = check_indices(screened, arr.size)
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


def _add_unit(pmf: np.ndarray, p: float) -> np.ndarray:
    """The pmf of one more independent Bernoulli(p) (a copy; ``pmf`` is zero-padded)."""
    out = pmf * (1 - p)
    out[1:] += pmf[:-1] * p
    return out


def window_values(
    q_desc: np.ndarray,
    coverage: int,
    m: int,
    starts: ArrayLike,
    stats: dict[str, int] | None = None,
) -> np.ndarray:
    """Expected value of screening the ranks ``[s, s + m)`` of the descending scores ``q_desc``, for
    every ``s`` in ``starts`` (values in ``[0, n - m]``).

    The windows of one range of starts overlap in all but one rank each, so their Poisson-binomial
    pmfs are built incrementally: the starts are cut into blocks of ``m`` at boundaries ``e``; a
    window ``[s, s + m)`` of a block is ``A = [s, e)`` (a suffix, grown one rank at a time from ``e``
    downwards) and ``B = [e, s + m)`` (a prefix, grown upwards), and its pmf is ``A * B``, one
    circular convolution of length ``m + 1`` by FFT. Suffixes are rebuilt from checkpoints every
    ``sqrt(m)`` ranks, so memory is ``O(m^1.5)``. Per window: O(1) single-unit updates of O(m) each
    and one FFT of length ~m, so ``O(w m log m)`` for ``w`` windows, against ``O(w m^2)`` for a
    recursion per window (``3m + 1`` windows in the planner's band: O(m^2 log m) against O(m^3)).
    ``stats``, when given, receives the operation counts (``unit_updates``, ``fft_rows``,
    ``fft_length``, ``windows``), for tests of the scaling that do not use wall time.
    """
    q = np.asarray(q_desc, dtype=float)
    starts = np.asarray(starts, dtype=np.int64)
    n = q.size
    if isinstance(m, bool) or not isinstance(m, int | np.integer) or not 0 <= m <= n:
        raise ValueError(f"window size m must be an int in [0, n={n}]; got {m!r}")
    if isinstance(coverage, bool) or not isinstance(coverage, int | np.integer):
        raise ValueError(f"coverage K must be an int in [0, n={n}]; got {coverage!r}")
    if not 0 <= coverage <= n:
        raise ValueError(f"coverage K must be an int in [0, n={n}]; got {coverage!r}")
    counts = {"unit_updates": 0, "fft_rows": 0, "fft_length": 0, "windows": int(starts.size)}
    if stats is not None:
        stats.update(counts)
    if starts.size == 0:
        return np.zeros(0)
    if m == 0:
        return np.full(starts.size, q[:coverage].sum())
    if starts.min() < 0 or starts.max() > n - m:
        raise ValueError(f"window starts must lie in [0, n - m = {n - m}]")
    lo, hi = int(starts.min()), int(starts.max())
    full = np.concatenate([[0.0], np.cumsum(q)])
    taken = np.minimum(np.arange(m + 1), coverage)
    j = np.minimum(coverage - taken, n - m)[None, :]  # unscreened units filled, per positives count
    size = sp_fft.next_fast_len(m + 1, real=True)  # A * B has exactly m + 1 coefficients
    chunk = max(8, math.isqrt(m))
    values = np.empty(hi - lo + 1)
    for b0 in range(lo, hi + 1, m):  # windows s in [b0, b_end] share the boundary e = b0 + m
        e, b_end = b0 + m, min(b0 + m - 1, hi)
        ends = {min(c0 + chunk, b_end + 1) for c0 in range(b0, b_end + 1, chunk)}
        suffix = np.zeros(m + 1)
        suffix[0] = 1.0
        checkpoints = {e: suffix} if e in ends else {}
        for x in range(e - 1, b0 - 1, -1):  # the pmf of ranks [x, e), from the bottom up
            suffix = _add_unit(suffix, q[x])
            counts["unit_updates"] += 1
            if x in ends:
                checkpoints[x] = suffix
        prefix = np.zeros(m + 1)
        prefix[0] = 1.0  # the pmf of ranks [e, s + m), grown with s
        for c0 in range(b0, b_end + 1, chunk):
            c1 = min(c0 + chunk, b_end + 1)
            a_rows = np.empty((c1 - c0, m + 1))
            cur = checkpoints[c1]
            for x in range(c1 - 1, c0 - 1, -1):
                cur = _add_unit(cur, q[x])
                counts["unit_updates"] += 1
                a_rows[x - c0] = cur
            b_rows = np.empty((c1 - c0, m + 1))
            for s in range(c0, c1):
                b_rows[s - c0] = prefix
                if s < b_end:
                    prefix = _add_unit(prefix, q[s + m])
                    counts["unit_updates"] += 1
            pmf = sp_fft.irfft(
                sp_fft.rfft(a_rows, size, axis=1) * sp_fft.rfft(b_rows, size, axis=1), size, axis=1
            )[:, : m + 1]
            counts["fft_rows"] += c1 - c0
            s = np.arange(c0, c1)[:, None]
            # the j best unscreened: the prefix of q with the window cut out
            c = np.where(j <= s, full[j], full[np.minimum(j + m, n)] - (full[s + m] - full[s]))
            g = taken[None, :] + c
            # E = g(0) + sum_k pmf(k) (g(k) - g(0)): the large constant g(0) carries no FFT noise
            values[c0 - lo : c1 - lo] = g[:, 0] + (pmf * (g - g[:, :1])).sum(1)
    counts["fft_length"] = size
    if stats is not None:
        stats.update(counts)
    return values[starts - lo]


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
    if isinstance(n_sims, bool) or not isinstance(n_sims, int | np.integer) or n_sims < 1:
        raise ValueError(f"n_sims must be an int >= 1; got {n_sims!r}")
    rng = np.random.default_rng(seed)
    s = check_indices(screened, arr.size)
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
