"""How long memorisation lasts: threshold crossings, the delay, the gap between the curves.

All times are optimisation steps (full-batch, so steps = epochs) at the logged evaluations. A
threshold never reached is **censored at the budget**: its time is reported as the budget with
``censored=True`` (a lower bound), never as zero or as a missing value that a mean would skip.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "Crossing",
    "GrokMetrics",
    "area_between_curves",
    "delay_bounds",
    "first_crossing",
    "grokking_metrics",
    "memorisation_point",
]


@dataclass(frozen=True)
class Crossing:
    """The first logged step at which a curve reached a threshold, or the budget if it never did."""

    step: int
    censored: bool


def _curve(steps: ArrayLike, values: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(steps, dtype=float)
    v = np.asarray(values, dtype=float)
    if s.ndim != 1 or s.shape != v.shape:
        raise ValueError(
            f"steps and values must be 1-D of the same length; got {s.shape}, {v.shape}"
        )
    if s.size == 0:
        raise ValueError("a curve needs at least one logged step")
    if np.any(np.diff(s) <= 0):
        raise ValueError("steps must be strictly increasing")
    return s, v


def first_crossing(steps: ArrayLike, values: ArrayLike, threshold: float, budget: int) -> Crossing:
    """First step with ``value >= threshold``; ``Crossing(budget, censored=True)`` if none."""
    s, v = _curve(steps, values)
    if budget < s[-1]:
        raise ValueError(f"budget {budget} is before the last logged step {int(s[-1])}")
    hit = np.flatnonzero(v >= threshold)
    if hit.size == 0:
        return Crossing(int(budget), True)
    return Crossing(int(s[hit[0]]), False)


def area_between_curves(steps: ArrayLike, train: ArrayLike, test: ArrayLike) -> float:
    """``integral (train_acc - test_acc) d step`` by the trapezoid rule (accuracy x steps)."""
    s, tr = _curve(steps, train)
    _, te = _curve(steps, test)
    gap = tr - te
    return float(np.sum((gap[1:] + gap[:-1]) * np.diff(s)) / 2) if s.size > 1 else 0.0


@dataclass(frozen=True)
class GrokMetrics:
    """The per-run numbers of the paper's argument (times in steps; ``*_censored``: never reached).

    ``delay = t_test95 - t_train99`` (censored when t_test95 is, then a lower bound; NaN when
    training accuracy never reached 99%). ``test_at_train99`` is the test accuracy at the step
    training accuracy first reached 99%: the measurable form of "train and test rise together".
    """

    budget: int
    steps_run: int
    t_train99: int
    t_train99_censored: bool
    t_test95: int
    t_test95_censored: bool
    t_test99: int
    t_test99_censored: bool
    delay: float
    delay_censored: bool
    area_between: float
    test_at_train99: float
    peak_test: float
    final_test: float
    final_train: float
    max_logit_norm: float
    max_residual_norm: float
    final_residual_norm: float

    def as_row(self) -> dict[str, float | int | bool]:
        return asdict(self)


def grokking_metrics(history: Mapping[str, Sequence[float]], budget: int) -> GrokMetrics:
    """Metrics of one run from its logged ``history`` (keys as in :class:`~.train.TrainResult`).

    ``history`` needs ``step``, ``train_acc`` and ``test_acc``; ``logit_norm`` and ``residual_norm``
    are used when present (else NaN).
    """
    for key in ("step", "train_acc", "test_acc"):
        if key not in history:
            raise ValueError(f"history lacks {key!r}; it has {sorted(history)}")
    steps = np.asarray(history["step"], dtype=float)
    train = np.asarray(history["train_acc"], dtype=float)
    test = np.asarray(history["test_acc"], dtype=float)
    tr99 = first_crossing(steps, train, 0.99, budget)
    te95 = first_crossing(steps, test, 0.95, budget)
    te99 = first_crossing(steps, test, 0.99, budget)
    if tr99.censored:
        delay, test_at = math.nan, math.nan
    else:
        delay = float(te95.step - tr99.step)
        test_at = float(test[np.flatnonzero(steps == tr99.step)[0]])
    nan = np.full(steps.shape, np.nan)
    logit = np.asarray(history.get("logit_norm", nan), dtype=float)
    resid = np.asarray(history.get("residual_norm", nan), dtype=float)
    return GrokMetrics(
        budget=int(budget),
        steps_run=int(steps[-1]),
        t_train99=tr99.step,
        t_train99_censored=tr99.censored,
        t_test95=te95.step,
        t_test95_censored=te95.censored,
        t_test99=te99.step,
        t_test99_censored=te99.censored,
        delay=delay,
        delay_censored=te95.censored and not tr99.censored,
        area_between=area_between_curves(steps, train, test),
        test_at_train99=test_at,
        peak_test=float(test.max()),
        final_test=float(test[-1]),
        final_train=float(train[-1]),
        max_logit_norm=float(np.nanmax(logit)) if np.isfinite(logit).any() else math.nan,
        max_residual_norm=float(np.nanmax(resid)) if np.isfinite(resid).any() else math.nan,
        final_residual_norm=float(resid[-1]),
    )


def delay_bounds(
    t_train99: ArrayLike,
    train_censored: ArrayLike,
    t_test95: ArrayLike,
    test_censored: ArrayLike,
) -> tuple[np.ndarray, np.ndarray]:
    """What is known of each run's delay ``t_test95 - t_train99`` when either time may be censored.

    Returns ``(lower, upper)`` per run: exact when both times were reached; ``[budget - t_train99,
    inf)`` when test accuracy never reached 0.95 (a run that never generalises has a delay of *at
    least* the rest of the budget, never 0); ``(-inf, t_test95 - budget]`` when test reached 0.95 but
    train never reached 0.99 (test came first); ``(-inf, inf)`` when neither was reached (a run that
    neither memorised nor generalised says nothing about the delay). Censored times are recorded at
    the budget (see :func:`first_crossing`), which is what the bounds use.
    """
    tr, te = np.asarray(t_train99, dtype=float), np.asarray(t_test95, dtype=float)
    tr_c, te_c = np.asarray(train_censored, dtype=bool), np.asarray(test_censored, dtype=bool)
    if not tr.shape == te.shape == tr_c.shape == te_c.shape:
        raise ValueError("t_train99, t_test95 and their censoring flags must have one shape")
    diff = te - tr  # a censored time sits at the budget, so this is the bound that is known
    lower = np.where(tr_c, -np.inf, diff)
    upper = np.where(te_c, np.inf, diff)
    return lower, upper


def memorisation_point(
    history: Mapping[str, Sequence[float]], threshold: float = 0.99
) -> dict[str, float | bool]:
    """Test accuracy when training accuracy first reaches ``threshold``, else at its maximum.

    Returns ``{"step", "train_acc", "test_acc", "reached"}``; ``reached=False`` says training never
    got to ``threshold`` and the numbers are taken where it came closest (first maximum).
    """
    train = np.asarray(history["train_acc"], dtype=float)
    test = np.asarray(history["test_acc"], dtype=float)
    hit = np.flatnonzero(train >= threshold)
    i = int(hit[0]) if hit.size else int(np.argmax(train))
    return {
        "step": float(history["step"][i]),
        "train_acc": float(train[i]),
        "test_acc": float(test[i]),
        "reached": bool(hit.size),
    }
