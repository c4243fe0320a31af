"""Planners: which units to screen and which to target directly, behind one interface.

``planner.plan(p, coverage, screen_budget) -> Plan``. A :class:`Plan` knows its screened units, the
units it targets for sure (``direct``), its exact expected value, and turns observed outcomes of the
screened units into the final allocation (``plan.allocate(observed)``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from screening.value import (
    check_indices,
    check_problem,
    plan_value,
    poisson_binomial_pmf,
    window_values,
)

__all__ = [
    "NoScreening",
    "OptimalPlanner",
    "Oracle",
    "Plan",
    "Planner",
    "ScreenOnly",
    "ScreenRandom",
    "ScreenTop",
    "ScreenUncertain",
    "brute_force_plan",
    "first_near_max",
    "is_contiguous",
    "is_margin_window",
    "local_search",
]


@dataclass
class Plan:
    """A two-stage plan on scores ``p``.

    Attributes:
        screened: indices screened before allocating (sorted).
        direct: indices allocated whatever the screening shows (the top unscreened units that fill
            the slots even if every screened unit is positive).
        coverage: K, the slots of the final allocation.
        expected_value: exact expected number of vulnerable units covered.
        variance: its variance.
        use_scores: False for a plan that allocates screened positives only (no model).
    """

    p: np.ndarray = field(repr=False)
    screened: np.ndarray
    coverage: int
    expected_value: float
    variance: float
    use_scores: bool = True
    direct: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        rest = self._unscreened_order()
        n_direct = max(0, self.coverage - self.screened.size) if self.use_scores else 0
        self.direct = np.sort(rest[:n_direct])

    def _unscreened_order(self) -> np.ndarray:
        rest = np.setdiff1d(np.arange(self.p.size), self.screened)
        return rest[np.argsort(-self.p[rest], kind="stable")]

    def allocate(self, observed: ArrayLike) -> np.ndarray:
        """The final allocation (sorted indices) given ``observed`` outcomes (0/1) of the screened
        units, in the order of :attr:`screened`: positives first, then the best unscreened units."""
        y = np.asarray(observed)
        if y.shape != self.screened.shape:
            raise ValueError(
                f"observed must give one outcome per screened unit ({self.screened.size})"
            )
        if not np.isin(y, (0, 1)).all():
            raise ValueError("observed outcomes must be 0 or 1")
        positives = self.screened[y.astype(bool)][: self.coverage]
        if not self.use_scores:
            return np.sort(positives)
        fill = self._unscreened_order()[: self.coverage - positives.size]
        return np.sort(np.concatenate([positives, fill]))


class Planner:
    """Base class: subclasses choose the screened set in :meth:`choose`."""

    name = "planner"
    use_scores = True

    def choose(self, p: np.ndarray, coverage: int, m: int) -> np.ndarray:
        raise NotImplementedError

    def plan(self, p: ArrayLike, coverage: int, screen_budget: int) -> Plan:
        arr = check_problem(p, coverage, screen_budget)
        s = np.sort(np.asarray(self.choose(arr, coverage, int(screen_budget)), dtype=np.int64))
        v = plan_value(arr, s, coverage, use_scores=self.use_scores)
        return Plan(arr, s, int(coverage), v.mean, v.var, self.use_scores)


class NoScreening(Planner):
    """Algorithmic targeting only: the top K by score."""

    name = "no screening"

    def choose(self, p: np.ndarray, coverage: int, m: int) -> np.ndarray:
        return np.zeros(0, np.int64)


class ScreenTop(Planner):
    """Screen the m highest scores, then allocate."""

    name = "screen top"

    def choose(self, p: np.ndarray, coverage: int, m: int) -> np.ndarray:
        return np.argsort(-p, kind="stable")[:m]


class ScreenUncertain(Planner):
    """Screen the m units whose score is closest to 0.5 (most uncertain)."""

    name = "screen most uncertain"

    def choose(self, p: np.ndarray, coverage: int, m: int) -> np.ndarray:
        return np.argsort(np.abs(p - 0.5), kind="stable")[:m]


class ScreenRandom(Planner):
    """Screen m units at random (seeded)."""

    name = "screen random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def choose(self, p: np.ndarray, coverage: int, m: int) -> np.ndarray:
        return np.random.default_rng(self.seed).choice(p.size, m, replace=False)


class ScreenOnly(ScreenRandom):
    """No model: screen m units at random and allocate to the positives found."""

    name = "screening only"
    use_scores = False


class OptimalPlanner(Planner):
    """The structured optimum: target the top units directly and screen a contiguous window of m
    ranks in score order, the window chosen by exact value.

    ``search="band"`` (default) tries every window start in ``[K - 2m, K + m]`` (windows touching the
    cut-off); ``"all"`` tries every start. Windows whose values agree within a relative ``1e-12``
    (:func:`first_near_max`) are tied and the highest-ranked (smallest start) is screened. Brute
    force over all subsets (:func:`brute_force_plan`) and :func:`local_search` check the structure
    on small and medium instances.
    """

    name = "optimal (margin window)"

    def __init__(self, search: str = "band") -> None:
        if search not in ("band", "all"):
            raise ValueError(f"search must be 'band' or 'all'; got {search!r}")
        self.search = search

    def window_band(self, n: int, coverage: int, m: int) -> tuple[int, int]:
        """First and last window start searched."""
        if self.search == "all":
            return 0, n - m
        return max(0, coverage - 2 * m), min(n - m, coverage + m)

    def choose(self, p: np.ndarray, coverage: int, m: int) -> np.ndarray:
        if m == 0:
            return np.zeros(0, np.int64)
        order = np.argsort(-p, kind="stable")
        lo, hi = self.window_band(p.size, coverage, m)
        values = window_values(p[order], coverage, m, np.arange(lo, hi + 1))
        best = lo + first_near_max(values)
        return order[best : best + m]


TIE_RTOL = 1e-12
"""Values within this relative distance of the best are ties (windows on a plateau of equal scores
differ only in floating-point noise, which depends on the CPU's summation order)."""


def first_near_max(values: ArrayLike, rtol: float = TIE_RTOL) -> int:
    """Index of the first value within ``rtol * max(1, |max|)`` of the maximum.

    The tie rule of :class:`OptimalPlanner` (the highest-ranked of tied windows) and of
    :func:`screening.costs.optimal_split` (the fewest screenings among tied splits): a value must beat
    an earlier one by more than rounding noise to be preferred. ``values`` must be finite.
    """
    v = np.asarray(values, float)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"values must be a non-empty 1-D array; got shape {v.shape}")
    if not np.isfinite(v).all():
        raise ValueError("values must be finite")
    top = float(v.max())
    return int(np.flatnonzero(v >= top - rtol * max(1.0, abs(top)))[0])


class Oracle(Planner):
    """The upper bound: every status known, so min(#vulnerable, K) are covered (value only)."""

    name = "oracle (status known)"

    def plan(self, p: ArrayLike, coverage: int, screen_budget: int = 0) -> Plan:
        arr = check_problem(p, coverage, screen_budget)
        pmf = poisson_binomial_pmf(arr)
        k = np.arange(pmf.size)
        mean = float((pmf * np.minimum(k, coverage)).sum())
        var = float((pmf * np.minimum(k, coverage) ** 2).sum() - mean**2)
        return Plan(arr, np.arange(arr.size), int(coverage), mean, max(var, 0.0), use_scores=False)


def brute_force_plan(p: ArrayLike, coverage: int, screen_budget: int) -> Plan:
    """The exact optimum over all ``C(n, m)`` screening sets (small n only); sets whose values agree
    within a relative ``1e-12`` are tied and the lexicographically first wins."""
    arr = check_problem(p, coverage, screen_budget)
    if arr.size > 22:
        raise ValueError(f"brute force is for n <= 22; got n={arr.size}")
    best, best_v = None, -np.inf
    for s in itertools.combinations(range(arr.size), screen_budget):
        v = plan_value(arr, list(s), coverage).mean
        if best is None or v > best_v + TIE_RTOL * max(1.0, abs(best_v)):
            best, best_v = s, v
    v = plan_value(arr, list(best), coverage)
    return Plan(arr, np.array(best, np.int64), int(coverage), v.mean, v.var)


def is_contiguous(p: ArrayLike, screened: ArrayLike) -> bool:
    """Whether ``screened`` is a contiguous block of ranks in score order under some ordering of
    tied scores: every unit scored strictly between the block's lowest and highest score is in it
    (units tied with its ends may be ranked on either side, so a part of a plateau is contiguous)."""
    arr = check_problem(p, 0)
    s = check_indices(screened, arr.size)
    if s.size == 0:
        return True
    lo, hi = arr[s].min(), arr[s].max()
    strictly_inside = (arr > lo) & (arr < hi)
    return int(strictly_inside.sum()) == int(strictly_inside[s].sum())


def is_margin_window(
    p: ArrayLike, screened: ArrayLike, coverage: int, direct: ArrayLike | None = None
) -> bool:
    """Whether ``screened`` is the structure of the paper's optimum: a contiguous block of ranks
    that touches the algorithmic cut-off ``coverage`` (K). With ``above`` the units scored strictly
    above the block and ``through`` the units scored at least its lowest score:
    ``above <= K <= through`` (ties count either way).

    ``direct`` (a plan's units targeted whatever the screening shows, :attr:`Plan.direct`), when
    given, must be the top of the ranking: ``max(0, K - m)`` units, none screened, none scored below
    an unscreened unit left out of it.

    A block at the top of the ranking with ``K > m`` is contiguous but not at the margin:

    >>> p = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
    >>> is_margin_window(p, [0, 1], coverage=4), is_margin_window(p, [3, 4], coverage=4)
    (False, True)
    >>> is_margin_window(p, [3, 4], 4, direct=[0, 1]), is_margin_window(p, [3, 4], 4, direct=[0, 5])
    (True, False)
    """
    arr = check_problem(p, 0)
    s = check_indices(screened, arr.size)
    if isinstance(coverage, bool) or not isinstance(coverage, int | np.integer) or coverage < 0:
        raise ValueError(f"coverage must be a non-negative int; got {coverage!r}")
    if direct is not None:
        d = check_indices(direct, arr.size, name="direct")
        if d.size != max(0, coverage - s.size) or np.isin(d, s).any():
            return False
        left_out = np.setdiff1d(np.setdiff1d(np.arange(arr.size), s), d)
        if d.size and left_out.size and arr[d].min() < arr[left_out].max():
            return False
    if s.size == 0:
        return True
    if not is_contiguous(arr, s):
        return False
    above = int(np.sum(arr > arr[s].max()))
    through = int(np.sum(arr >= arr[s].min()))
    return above <= coverage <= through


def local_search(p: ArrayLike, coverage: int, plan: Plan, max_rounds: int = 20) -> Plan:
    """Improve ``plan`` by single swaps (screened <-> unscreened) while the exact value rises."""
    arr = check_problem(p, coverage)
    s = list(plan.screened)
    best = plan_value(arr, s, coverage).mean
    for _ in range(max_rounds):
        improved = False
        for i in range(len(s)):
            for j in np.setdiff1d(np.arange(arr.size), s):
                cand = s.copy()
                cand[i] = int(j)
                v = plan_value(arr, cand, coverage).mean
                if v > best + 1e-12:
                    s, best, improved = cand, v, True
        if not improved:
            break
    v = plan_value(arr, s, coverage)
    return Plan(arr, np.sort(np.array(s, np.int64)), int(coverage), v.mean, v.var)
