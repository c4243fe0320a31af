"""The few statistics several packages need and scipy / scikit-learn do not provide in one call.

Everything else (tests, metrics, regressions) should call scipy.stats or sklearn.metrics directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

__all__ = [
    "Bounds",
    "ConfidenceInterval",
    "PairedComparison",
    "bootstrap_ci",
    "censored_median",
    "cohens_d",
    "decide_all",
    "extreme_interval",
    "log_t_interval",
    "median_bounds",
    "paired_comparison",
    "proportion_interval",
    "ratio_bounds",
    "t_interval",
]


@dataclass(frozen=True)
class ConfidenceInterval:
    """``estimate`` (the statistic on the full sample) with a ``confidence``-level interval."""

    estimate: float
    low: float
    high: float
    confidence: float

    def __contains__(self, value: float) -> bool:
        return self.low <= value <= self.high

    def __str__(self) -> str:
        return f"{self.estimate:.4g} [{self.low:.4g}, {self.high:.4g}]"


def _as_1d(x: ArrayLike, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {arr.shape}")
    if arr.size < 2:
        raise ValueError(f"{name} needs at least 2 values; got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def bootstrap_ci(
    data: ArrayLike,
    statistic: Callable[..., float] = np.mean,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    method: Literal["BCa", "percentile", "basic"] = "BCa",
    seed: int | np.random.Generator = 0,
) -> ConfidenceInterval:
    """Bootstrap confidence interval of ``statistic(data)`` (a 1-D sample), via ``scipy.stats.bootstrap``.

    ``statistic`` must accept an ``axis`` keyword (numpy reductions do). Degenerate samples (all values
    equal) give the point interval instead of scipy's NaN.
    """
    x = _as_1d(data, "data")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got {confidence}")
    if n_resamples < 100:
        raise ValueError(f"n_resamples must be >= 100; got {n_resamples}")
    estimate = float(statistic(x, axis=-1))
    if np.ptp(x) == 0:
        return ConfidenceInterval(estimate, estimate, estimate, confidence)
    res = sps.bootstrap(
        (x,),
        statistic,
        confidence_level=confidence,
        n_resamples=n_resamples,
        method=method,
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return ConfidenceInterval(estimate, low, high, confidence)


def t_interval(values: ArrayLike, confidence: float = 0.95) -> ConfidenceInterval:
    """Student-t interval of the mean of a few independent replicates (seeds): the interval a claim
    over seeds is decided on. Needs at least 2 finite values; equal values give the point interval.

    >>> ci = t_interval([1.0, 2.0, 3.0])
    >>> round(ci.low, 3), ci.estimate, round(ci.high, 3)
    (-0.484, 2.0, 4.484)
    """
    x = _as_1d(values, "values")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got {confidence}")
    mean = float(x.mean())
    if np.ptp(x) == 0:
        return ConfidenceInterval(mean, mean, mean, confidence)
    half = float(sps.t.ppf(0.5 + confidence / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))
    return ConfidenceInterval(mean, mean - half, mean + half, confidence)


def log_t_interval(values: ArrayLike, confidence: float = 0.95) -> ConfidenceInterval:
    """Interval of a positive ratio over a few replicates (seeds): the geometric mean and the
    t-interval of the log ratios, exponentiated, so the interval stays positive and a 10x spread is
    symmetric. A replicate where the ratio is 0 (the numerator exact) or ``inf`` (only the
    denominator exact) has a log of -inf or inf, and so does the t-interval's spread: unless every
    replicate is equal (then the point), the interval is ``[0, inf]`` and the estimate the median.
    (The replicates' range would be narrower the more extreme one of them is.)

    >>> ci = log_t_interval([2.0, 8.0, 4.0])
    >>> round(ci.estimate, 6), ci.low < 2.0, ci.high > 8.0
    (4.0, True, True)
    >>> str(log_t_interval([0.0, 0.5, 0.0])), str(log_t_interval([0.0, 0.0]))
    ('0 [0, inf]', '0 [0, 0]')
    """
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size < 2:
        raise ValueError(f"values must be 1-D with at least 2 replicates; got shape {v.shape}")
    if np.isnan(v).any() or (v < 0).any():
        raise ValueError(f"ratios must be >= 0 and not NaN; got {v.tolist()}")
    if np.all(v == v[0]):  # equal replicates (inf - inf would make ptp NaN)
        return ConfidenceInterval(float(v[0]), float(v[0]), float(v[0]), confidence)
    if (v == 0).any() or np.isinf(v).any():
        return ConfidenceInterval(float(np.median(v)), 0.0, float("inf"), confidence)
    ci = t_interval(np.log(v), confidence)
    return ConfidenceInterval(
        float(np.exp(ci.estimate)), float(np.exp(ci.low)), float(np.exp(ci.high)), confidence
    )


def extreme_interval(
    intervals: Iterable[ConfidenceInterval], largest: bool = True
) -> ConfidenceInterval:
    """The interval of the largest (``largest``) or smallest of several quantities, each known
    within its own interval: ``[max of the lows, max of the highs]`` (or the mins), the estimate the
    max (min) of the estimates. A claim "for every group" is decided on it: the whole interval
    meets the target iff every group's does. Undefined (NaN) when any interval has a NaN end,
    whatever the order of the groups.

    >>> a, b = ConfidenceInterval(1.0, 0.5, 1.5, 0.95), ConfidenceInterval(2.0, 1.0, 4.0, 0.95)
    >>> str(extreme_interval([a, b])), str(extreme_interval([a, b], largest=False))
    ('2 [1, 4]', '1 [0.5, 1.5]')
    """
    cis = list(intervals)
    if not cis:
        raise ValueError("extreme_interval needs at least one interval")
    ends = np.array([[c.estimate, c.low, c.high] for c in cis], dtype=float)
    if np.isnan(ends).any():
        return ConfidenceInterval(np.nan, np.nan, np.nan, cis[0].confidence)
    pick = ends.max(axis=0) if largest else ends.min(axis=0)
    return ConfidenceInterval(float(pick[0]), float(pick[1]), float(pick[2]), cis[0].confidence)


def proportion_interval(
    successes: int, trials: int, confidence: float = 0.95
) -> ConfidenceInterval:
    """Exact (Clopper-Pearson) interval of a share ``successes / trials``.

    >>> ci = proportion_interval(300, 300)
    >>> ci.estimate, round(ci.low, 4), ci.high
    (1.0, 0.9878, 1.0)
    """
    if not 0 <= successes <= trials or trials < 1:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1; got {successes}/{trials}")
    ci = sps.binomtest(int(successes), int(trials)).proportion_ci(confidence, method="exact")
    return ConfidenceInterval(successes / trials, float(ci.low), float(ci.high), confidence)


def cohens_d(a: ArrayLike, b: ArrayLike, paired: bool = False) -> float:
    """Standardised mean difference ``(mean(a) - mean(b)) / s``.

    Unpaired: ``s`` is the pooled standard deviation (ddof=1). Paired: Cohen's d_z, the mean of the
    differences over their standard deviation. Returns 0.0 when both the difference and spread are 0,
    and ``±inf`` for a non-zero difference with zero spread.
    """
    x, y = _as_1d(a, "a"), _as_1d(b, "b")
    if paired:
        if x.shape != y.shape:
            raise ValueError(f"paired samples must have the same length; got {x.size} and {y.size}")
        diff = x - y
        num, s = float(diff.mean()), float(diff.std(ddof=1))
        constant = np.ptp(diff) == 0
    else:
        nx, ny = x.size, y.size
        num = float(x.mean() - y.mean())
        s = float(np.sqrt(((nx - 1) * x.var(ddof=1) + (ny - 1) * y.var(ddof=1)) / (nx + ny - 2)))
        constant = np.ptp(x) == 0 and np.ptp(y) == 0
    if constant:  # exact test: var() of equal values can round to a tiny non-zero number
        return 0.0 if num == 0 else float(np.copysign(np.inf, num))
    return num / s


@dataclass(frozen=True)
class PairedComparison:
    """Paired comparison of method ``a`` against ``b`` on the same units (seeds, tasks, datasets).

    ``mean_diff`` and its bootstrap ``ci`` are of ``a - b``; ``wins``/``ties``/``losses`` count units
    where ``a`` is higher / equal / lower; ``p_t`` is the paired t-test, ``p_wilcoxon`` the signed-rank
    test (two-sided; NaN when every difference is zero).
    """

    n: int
    mean_diff: float
    ci: ConfidenceInterval
    effect_size: float
    p_t: float
    p_wilcoxon: float
    wins: int
    ties: int
    losses: int

    def as_row(self) -> dict[str, float | int]:
        return {
            "n": self.n,
            "mean_diff": self.mean_diff,
            "ci_low": self.ci.low,
            "ci_high": self.ci.high,
            "d_z": self.effect_size,
            "p_t": self.p_t,
            "p_wilcoxon": self.p_wilcoxon,
            "wins": self.wins,
            "ties": self.ties,
            "losses": self.losses,
        }


def paired_comparison(
    a: ArrayLike,
    b: ArrayLike,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int | np.random.Generator = 0,
) -> PairedComparison:
    """Compare paired samples ``a`` and ``b`` (same length, unit ``i`` in both): effect, CI, tests."""
    x, y = _as_1d(a, "a"), _as_1d(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"paired samples must have the same length; got {x.size} and {y.size}")
    diff = x - y
    ci = bootstrap_ci(diff, np.mean, confidence=confidence, n_resamples=n_resamples, seed=seed)
    if np.all(diff == 0):
        p_t = p_w = float("nan")
    else:
        p_t = float(sps.ttest_rel(x, y).pvalue) if np.ptp(diff) > 0 else 0.0
        p_w = float(sps.wilcoxon(x, y, zero_method="wilcox").pvalue)
    return PairedComparison(
        n=int(x.size),
        mean_diff=float(diff.mean()),
        ci=ci,
        effect_size=cohens_d(x, y, paired=True),
        p_t=p_t,
        p_wilcoxon=p_w,
        wins=int(np.sum(diff > 0)),
        ties=int(np.sum(diff == 0)),
        losses=int(np.sum(diff < 0)),
    )


Op = Literal[">", ">=", "<", "<="]


@dataclass(frozen=True)
class Bounds:
    """A quantity known only to lie in ``[low, high]`` (``high`` may be ``inf``): the median of a
    sample with censored values, or a ratio of two such medians. ``low == high``: known exactly.

    ``nan`` in either end means undefined (``0 / 0``); :meth:`decide` then answers ``None``.
    """

    low: float
    high: float

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError(f"Bounds need low <= high; got [{self.low}, {self.high}]")

    @property
    def exact(self) -> bool:
        return self.low == self.high

    @property
    def defined(self) -> bool:
        return not (np.isnan(self.low) or np.isnan(self.high))

    def decide(self, op: Op, threshold: float) -> bool | None:
        """``True`` if every value in the bounds satisfies ``value <op> threshold``, ``False`` if none
        does, ``None`` if the bounds straddle the threshold or are undefined."""
        if op not in (">", ">=", "<", "<="):
            raise ValueError(f"op must be one of >, >=, <, <=; got {op!r}")
        if not self.defined:
            return None
        test = {
            ">": lambda v: v > threshold,
            ">=": lambda v: v >= threshold,
            "<": lambda v: v < threshold,
            "<=": lambda v: v <= threshold,
        }[op]
        lo, hi = test(self.low), test(self.high)
        return lo if lo == hi else None

    def less(self, other: Bounds) -> bool | None:
        """``self < other`` for every pair of values the two allow (``True``), for none
        (``False``), or undecided (``None``): an observed time before a censored one is ``True``,
        two censored times are ``None``."""
        if not (self.defined and other.defined):
            return None
        if self.high < other.low:
            return True
        if self.low >= other.high:
            return False
        return None

    def __str__(self) -> str:
        if not self.defined:
            return "undefined (0/0)"
        if self.exact:
            return f"{self.low:.4g}"
        if self.high == np.inf:
            return f">= {self.low:.4g}"
        if self.low == -np.inf:
            return f"<= {self.high:.4g}"
        return f"in [{self.low:.4g}, {self.high:.4g}]"


def decide_all(verdicts: Iterable[bool | None]) -> bool | None:
    """Three-valued AND of verdicts from :meth:`Bounds.decide` / :meth:`Bounds.less`: ``False`` if
    any is ``False``, else ``None`` if any is undecided, else ``True`` (``True`` for none)."""
    verdicts = list(verdicts)
    if any(v is False for v in verdicts):
        return False
    return None if any(v is None for v in verdicts) else True


def median_bounds(lower: ArrayLike, upper: ArrayLike) -> Bounds:
    """Bounds on the median of a sample whose ``i``-th value is only known to lie in
    ``[lower[i], upper[i]]``: an exact value has ``lower == upper``, a value right-censored at a
    budget has ``upper = inf``, an unknown one ``[-inf, inf]``.

    The median is monotone in every value, so it lies in ``[median(lower), median(upper)]``; the
    bounds meet when the uncertain values cannot reach the middle of the sample. No assumption on
    the censoring is made (unlike a Kaplan-Meier median), so the bounds are conservative.
    """
    lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    if lo.ndim != 1 or lo.shape != hi.shape:
        raise ValueError(f"lower and upper must be 1-D of one length; got {lo.shape}, {hi.shape}")
    if lo.size == 0:
        raise ValueError("the median of an empty sample is undefined")
    if np.isnan(lo).any() or np.isnan(hi).any():
        raise ValueError(
            "bounds contain NaN: give a value that was never measured as [-inf, inf] (unknown) "
            "or [bound, inf] (censored), or leave it out explicitly"
        )
    if np.any(lo > hi):
        raise ValueError("every lower bound must be <= its upper bound")
    return Bounds(float(np.median(lo)), float(np.median(hi)))


def censored_median(values: ArrayLike, censored: ArrayLike) -> Bounds:
    """Bounds on the median of ``values`` where ``censored[i]`` marks ``values[i]`` as a lower bound
    (an event that had not happened by the budget): see :func:`median_bounds`.

    >>> str(censored_median([100, 200, 300], [False, False, True]))
    '200'
    >>> str(censored_median([100, 300, 300], [False, True, True]))
    '>= 300'
    """
    v = np.asarray(values, dtype=float)
    c = np.asarray(censored, dtype=bool)
    if v.shape != c.shape:
        raise ValueError(f"values and censored must have one shape; got {v.shape}, {c.shape}")
    return median_bounds(v, np.where(c, np.inf, v))


def ratio_bounds(num: Bounds, den: Bounds, floor: float = 0.0) -> Bounds:
    """Bounds on ``num / den`` for two non-negative quantities (times, delays, errors), each first
    raised to ``floor``, the measurement's resolution (a time below one evaluation interval is
    reported as that interval, never divided by as 0).

    With ``floor = 0`` a denominator that may be 0 gives ``high = inf``, and ``0 / 0`` gives undefined
    bounds (``nan``), which :meth:`Bounds.decide` never counts as support. A negative value (a delay
    that can be below zero) needs a positive ``floor``.
    """
    if not floor >= 0:
        raise ValueError(f"floor must be >= 0; got {floor}")
    if floor == 0 and min(num.low, den.low) < 0:
        raise ValueError(
            f"ratio_bounds needs non-negative quantities; got {num} / {den}: pass floor= the "
            "measurement's resolution to raise values below it"
        )
    a, b = (max(num.low, floor), max(num.high, floor)), (max(den.low, floor), max(den.high, floor))

    def div(x: float, y: float) -> float:
        if y == 0:
            return np.nan if x == 0 else np.inf
        return x / y  # x / inf = 0; inf / y = inf

    low, high = div(a[0], b[1]), div(a[1], b[0])
    if np.isnan(low) or np.isnan(high):  # 0 / 0 inside the range: the data do not bound the ratio
        return Bounds(np.nan, np.nan)
    return Bounds(low, high)
