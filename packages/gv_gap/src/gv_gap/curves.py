"""Reading training curves: when a capability is learned, how much of it survives, and the test of
which of generation and verification comes first on the same facts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import binomtest

__all__ = [
    "Discordance",
    "discordance_test",
    "learning_epoch",
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


def learning_epoch(
    values: Sequence[float],
    epochs: Sequence[float] | None = None,
    fraction: float = 0.8,
    last: int = 3,
    min_rise: float = 0.05,
) -> float:
    """First epoch at which a curve covers ``fraction`` of its rise from the start to its plateau:
    ``y >= y[0] + fraction (plateau − y[0])`` (so chance levels cancel).

    ``epochs`` default to ``0, 1, 2, ...`` (index 0 = before training). NaN when the curve never
    rises by ``min_rise`` (nothing was learned, so there is no learning time).
    """
    y = _curve(values)
    x = np.arange(len(y), dtype=float) if epochs is None else np.asarray(epochs, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"epochs ({x.shape}) must align with values ({y.shape})")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1]; got {fraction}")
    top = plateau(y, last)
    if top - y[0] < min_rise:
        return float("nan")
    hit = np.nonzero(y >= y[0] + fraction * (top - y[0]) - 1e-12)[0]
    return float(x[hit[0]])


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


def retention_gap(
    gen_start: Sequence[bool],
    gen_end: Sequence[bool],
    ver_start: Sequence[bool],
    ver_end: Sequence[bool],
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``ver_end/ver_start − gen_end/gen_start`` (pooled rates, 1 = nothing lost) with a percentile
    bootstrap interval over facts (the four arrays are per fact, aligned). NaN when either
    capability starts at 0 (nothing to retain)."""
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
        return value, value, value
    idx = np.random.default_rng(seed).integers(0, data.shape[1], (n_boot, data.shape[1]))
    boots = stat(np.moveaxis(data[:, idx], 0, 1))  # (n_boot, 4, n) -> per resample
    boots = boots[np.isfinite(boots)]
    alpha = (1 - confidence) / 2
    return value, float(np.quantile(boots, alpha)), float(np.quantile(boots, 1 - alpha))
