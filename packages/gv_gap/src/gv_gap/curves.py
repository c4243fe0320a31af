"""Reading training curves: when a capability is learned, how much of it survives, and the test of
which of generation and verification comes first on the same facts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np
from scipy.stats import binomtest

from paper_common.stats import Bounds

__all__ = [
    "Discordance",
    "LearningTime",
    "RetentionGap",
    "discordance_test",
    "learning_epoch",
    "learning_time",
    "plateau",
    "retention",
    "retention_gap",
]


def _curve(values: Sequence[float], name: str = "curve") -> np.ndarray:
    y = np.asarray(values, dtype=float)
    if y.ndim != 1 or len(y) < 2:
        raise ValueError(
            f"{name} must be a 1-d sequence of at least 2 evaluations; got shape {y.shape}"
        )
    if not np.isfinite(y).all():
        raise ValueError(f"{name} has non-finite values")
    return y


def plateau(values: Sequence[float], last: int = 3) -> float:
    """The level a curve settles at: the mean of its last ``last`` evaluations."""
    y = _curve(values)
    if last < 1:
        raise ValueError(f"last must be >= 1; got {last}")
    return float(y[-min(last, len(y)) :].mean())


@dataclass(frozen=True)
class LearningTime:
    """When a curve was learned, or how late it is at least.

    ``epoch``: the learning time when it was observed (``censored`` is ``""``); for a censored curve
    a lower bound: ``"no rise"`` (never rose by ``min_rise``: not learned within the budget, so at
    least the next evaluation after the last) or ``"still rising"`` (the last evaluations still
    climb, the plateau is not reached: at least the first epoch at ``fraction`` of the rise to the
    highest value seen, since the plateau is at least that high).
    """

    epoch: float
    censored: Literal["", "no rise", "still rising"] = ""

    @property
    def bounds(self) -> Bounds:
        """``[epoch, epoch]`` when observed, ``[epoch, inf]`` when censored."""
        return Bounds(self.epoch, np.inf if self.censored else self.epoch)

    @property
    def value(self) -> float:
        """The observed time, NaN when censored."""
        return float("nan") if self.censored else self.epoch

    def __str__(self) -> str:
        if not self.censored:
            return f"{self.epoch:.0f}"
        return f">= {self.epoch:.0f} ({self.censored})"


def learning_time(
    values: Sequence[float],
    epochs: Sequence[float] | None = None,
    fraction: float = 0.8,
    last: int = 3,
    min_rise: float = 0.05,
    rise_tol: float = 0.05,
) -> LearningTime:
    """First epoch at which a curve covers ``fraction`` of its rise from the start to its plateau:
    ``y >= y[0] + fraction (plateau − y[0])`` (so chance levels cancel), the plateau being the
    mean of the last ``last`` evaluations.

    The plateau must be one: a curve whose last ``last`` evaluations still rise by more than
    ``rise_tol`` (``y[-1] − y[-last] > rise_tol``, in the curve's units) was still being learned
    at the budget, and its time is censored (a lower bound, see :class:`LearningTime`), not the
    early crossing of a level that was not the plateau. A curve that never rises by ``min_rise``
    (nothing was learned) is censored past the last evaluation.

    ``epochs`` default to ``0, 1, 2, ...`` (index 0 = before training).
    """
    y = _curve(values)
    x = np.arange(len(y), dtype=float) if epochs is None else np.asarray(epochs, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"epochs ({x.shape}) must align with values ({y.shape})")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1]; got {fraction}")
    if not rise_tol >= 0:
        raise ValueError(f"rise_tol must be >= 0; got {rise_tol}")
    top = plateau(y, last)
    if top - y[0] < min_rise:
        return LearningTime(float(x[-1] + (x[-1] - x[-2])), "no rise")
    if y[-1] - y[-min(last, len(y))] > rise_tol:
        reached = np.nonzero(y >= y[0] + fraction * (y.max() - y[0]) - 1e-12)[0]
        return LearningTime(float(x[reached[0]]), "still rising")
    hit = np.nonzero(y >= y[0] + fraction * (top - y[0]) - 1e-12)[0]
    return LearningTime(float(x[hit[0]]))


def learning_epoch(
    values: Sequence[float],
    epochs: Sequence[float] | None = None,
    fraction: float = 0.8,
    last: int = 3,
    min_rise: float = 0.05,
    rise_tol: float = 0.05,
) -> float:
    """The observed learning time of :func:`learning_time`; NaN when it is censored (the curve
    never rose by ``min_rise``, or was still rising at the budget). Use :func:`learning_time` for
    the censoring and the lower bound."""
    return learning_time(values, epochs, fraction, last, min_rise, rise_tol).value


def retention(values: Sequence[float], start: float | None = None) -> np.ndarray:
    """A curve relative to its value at the start (``values[0]`` unless ``start`` is given):
    1 = nothing lost. NaN where the start is 0."""
    y = _curve(values)
    s = y[0] if start is None else float(start)
    if s == 0:
        return np.full_like(y, np.nan)
    return y / s


@dataclass(frozen=True)
class Discordance:
    """Facts one capability has and the other lacks, and the exact binomial test of their split."""

    ver_only: int  # ver ✓ and gen ✗
    gen_only: int  # gen ✓ and ver ✗
    p_value: float  # one-sided: P(ver_only this large | each discordant fact a fair coin)

    @property
    def n(self) -> int:
        return self.ver_only + self.gen_only

    @property
    def ver_share(self) -> float:
        return self.ver_only / self.n if self.n else float("nan")


def discordance_test(gen_ok: Sequence[bool], ver_ok: Sequence[bool]) -> Discordance:
    """McNemar's exact form: among facts where generation and verification disagree, is
    "verified but not generated" more common than the reverse? ``scipy.stats.binomtest``,
    alternative ``greater`` (p = 1 when there are no discordant facts)."""
    g, v = np.asarray(gen_ok, dtype=bool), np.asarray(ver_ok, dtype=bool)
    if g.shape != v.shape or g.ndim != 1:
        raise ValueError(f"gen_ok and ver_ok must be 1-d and aligned; got {g.shape}, {v.shape}")
    ver_only, gen_only = int((v & ~g).sum()), int((g & ~v).sum())
    n = ver_only + gen_only
    p = binomtest(ver_only, n, 0.5, alternative="greater").pvalue if n else 1.0
    return Discordance(ver_only, gen_only, float(p))


class RetentionGap(NamedTuple):
    """:func:`retention_gap`'s answer: the gap, its bootstrap interval, and the share of resamples
    left out of the interval because a capability started at 0 in them (the gap is undefined
    there): the interval is conditional on the resamples where it exists."""

    value: float
    low: float
    high: float
    dropped: float


def retention_gap(
    gen_start: Sequence[bool],
    gen_end: Sequence[bool],
    ver_start: Sequence[bool],
    ver_end: Sequence[bool],
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> RetentionGap:
    """``ver_end/ver_start − gen_end/gen_start`` (pooled rates, 1 = nothing lost) with a percentile
    bootstrap interval over facts (the four arrays are per fact, aligned). NaN when either
    capability starts at 0 (nothing to retain). ``dropped``: the share of resamples in which one
    starts at 0 (1 True of 30 facts: about 36%), left out of the interval; NaN if the gap is."""
    arrays = [np.asarray(a, dtype=float) for a in (gen_start, gen_end, ver_start, ver_end)]
    if len({a.shape for a in arrays}) != 1 or arrays[0].ndim != 1 or not len(arrays[0]):
        raise ValueError("the four per-fact arrays must be 1-d, non-empty and aligned")
    if n_boot < 100:
        raise ValueError(f"n_boot must be >= 100; got {n_boot}")
    data = np.stack(arrays)  # (4, n)

    def stat(d: np.ndarray) -> np.ndarray:
        m = d.mean(axis=-1)  # (..., 4)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(
                (m[..., 0] > 0) & (m[..., 2] > 0),
                m[..., 3] / m[..., 2] - m[..., 1] / m[..., 0],
                np.nan,
            )

    value = float(stat(data[None])[0])
    if np.isnan(value):
        return RetentionGap(value, value, value, value)
    idx = np.random.default_rng(seed).integers(0, data.shape[1], (n_boot, data.shape[1]))
    boots = stat(np.moveaxis(data[:, idx], 0, 1))  # (n_boot, 4, n) -> per resample
    kept = np.isfinite(boots)
    dropped = float(1 - kept.mean())
    if not kept.any():
        return RetentionGap(value, float("nan"), float("nan"), dropped)
    boots = boots[kept]
    alpha = (1 - confidence) / 2
    return RetentionGap(
        value, float(np.quantile(boots, alpha)), float(np.quantile(boots, 1 - alpha)), dropped
    )
