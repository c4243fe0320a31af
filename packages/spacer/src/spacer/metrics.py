"""Error metrics of the learning-augmented frequency-estimation literature, exact against true counts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from spacer.base import FrequencySketch, as_items

__all__ = [
    "Errors",
    "evaluate",
    "heavy_hitter_scores",
    "true_counts",
    "unweighted_error",
    "weighted_error",
]


def true_counts(stream: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ids of a stream and their exact frequencies (``np.unique``, not a Counter)."""
    return np.unique(as_items(stream, "stream"), return_counts=True)


def _check(f: ArrayLike, f_hat: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    f, f_hat = np.asarray(f, float), np.asarray(f_hat, float)
    if f.shape != f_hat.shape or f.ndim != 1:
        raise ValueError(
            f"true and estimated counts must be 1-D of one shape; got {f.shape}, {f_hat.shape}"
        )
    if f.size == 0 or f.sum() <= 0:
        raise ValueError("need at least one item with a positive true count")
    return f, f_hat


def weighted_error(f: ArrayLike, f_hat: ArrayLike) -> float:
    """``sum_i f_i |f_i - f_hat_i| / sum_i f_i``: the expected error of a query drawn from the stream."""
    f, f_hat = _check(f, f_hat)
    return float(np.sum(f * np.abs(f - f_hat)) / np.sum(f))


def unweighted_error(f: ArrayLike, f_hat: ArrayLike) -> float:
    """Mean absolute error over the distinct items of the stream."""
    f, f_hat = _check(f, f_hat)
    return float(np.mean(np.abs(f - f_hat)))


def heavy_hitter_scores(f: ArrayLike, f_hat: ArrayLike, threshold: float) -> tuple[float, float]:
    """Precision and recall of reporting items with ``f_hat >= threshold`` as heavy (truth ``f >= threshold``)."""
    f, f_hat = _check(f, f_hat)
    true, pred = f >= threshold, f_hat >= threshold
    tp = int(np.sum(true & pred))
    precision = tp / int(pred.sum()) if pred.any() else 1.0
    recall = tp / int(true.sum()) if true.any() else 1.0
    return precision, recall


@dataclass(frozen=True)
class Errors:
    weighted: float
    unweighted: float
    hh_precision: float
    hh_recall: float
    memory_words: int


def evaluate(sketch: FrequencySketch, ids: np.ndarray, f: np.ndarray, phi: float = 1e-3) -> Errors:
    """All metrics of ``sketch`` on the distinct ``ids`` with true counts ``f`` (heavy: ``f >= phi N``)."""
    f_hat = sketch.estimate(ids)
    p, r = heavy_hitter_scores(f, f_hat, phi * float(np.sum(f)))
    return Errors(weighted_error(f, f_hat), unweighted_error(f, f_hat), p, r, sketch.memory_words)
