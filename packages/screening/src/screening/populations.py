"""Populations with controllable aleatoric uncertainty, the two worked applications, and a loader.

* :func:`pmt_population`: the proxy-means-test form: log consumption ``= X beta + eps``,
  ``eps ~ N(0, sigma^2)``, poor iff below the line ``z``; the true score is
  ``p(x) = Phi((z - X beta) / sigma)``, so ``sigma`` is the aleatoric knob.
* :func:`beta_population`: scores ``~ Beta`` at a fixed mean, concentration as the knob.
* :func:`demining_population`: a grid of parcels with spatially correlated mine presence driven by
  conflict history and distance to roads.
* :func:`calibrated_scores`: a scikit-learn classifier calibrated with ``CalibratedClassifierCV`` on
  training units, scoring held-out units: the honest pipeline of an application.
* :func:`margin_uncertainty`: mean ``p(1-p)`` of the units around the cut-off.
* :func:`load_scores_csv`: a user's file with a score and an outcome column.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike
from scipy import ndimage, stats

__all__ = [
    "Population",
    "beta_population",
    "calibrated_scores",
    "demining_population",
    "load_scores_csv",
    "margin_uncertainty",
    "pmt_population",
]


@dataclass(frozen=True)
class Population:
    """Units with features ``X``, true vulnerability probability ``p`` and one realised status ``y``."""

    X: np.ndarray
    p: np.ndarray
    y: np.ndarray


def pmt_population(
    n: int, sigma: float = 0.5, poverty_rate: float = 0.3, seed: int = 0
) -> Population:
    """Households: log assets, household size, an urban dummy, and consumption with noise ``sigma``."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise ValueError(f"n must be an int >= 2; got {n!r}")
    if n < 2 or not sigma > 0 or not 0 < poverty_rate < 1:
        raise ValueError(
            f"need n >= 2, sigma > 0, 0 < poverty_rate < 1; got {n}, {sigma}, {poverty_rate}"
        )
    rng = np.random.default_rng(seed)
    assets = rng.normal(0, 1, n)
    size = rng.poisson(3, n) + 1
    urban = (rng.random(n) < 0.4).astype(float)
    X = np.column_stack([assets, size, urban])
    mean_logc = 1.0 + 0.6 * assets - 0.15 * size + 0.3 * urban
    # the poverty line that gives the wanted rate for this population (Monte-Carlo free: mixture quantile)
    z = _mixture_quantile(mean_logc, sigma, poverty_rate)
    p = stats.norm.cdf((z - mean_logc) / sigma)
    y = (mean_logc + rng.normal(0, sigma, n) < z).astype(int)
    return Population(X, p, y)


def _mixture_quantile(means: np.ndarray, sigma: float, q: float) -> float:
    from scipy.optimize import brentq

    f = lambda z: stats.norm.cdf((z - means) / sigma).mean() - q  # noqa: E731
    return float(brentq(f, means.min() - 10 * sigma, means.max() + 10 * sigma))


def beta_population(
    n: int, mean: float = 0.3, concentration: float = 2.0, seed: int = 0
) -> Population:
    """Scores ``~ Beta(mean c, (1 - mean) c)``: small ``c`` pushes scores to 0/1 (little aleatoric
    uncertainty), large ``c`` piles them at ``mean`` (much)."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"n must be an int >= 1; got {n!r}")
    if not 0 < mean < 1 or not concentration > 0:
        raise ValueError(f"need 0 < mean < 1 and concentration > 0; got {mean}, {concentration}")
    rng = np.random.default_rng(seed)
    p = rng.beta(mean * concentration, (1 - mean) * concentration, n)
    return Population(p[:, None], p, (rng.random(n) < p).astype(int))


def demining_population(side: int = 40, seed: int = 0, smoothing: float = 3.0) -> Population:
    """Parcels on a ``side x side`` grid. Mine presence follows a logistic model of a spatially
    smoothed conflict-intensity field and the distance to the nearest road; the features a planner
    sees are a noisy conflict record, the road distance and the parcel's coordinates."""
    if isinstance(side, bool) or not isinstance(side, int | np.integer) or side < 3:
        raise ValueError(f"side must be an int >= 3 (three roads each way); got {side!r}")
    rng = np.random.default_rng(seed)
    conflict = ndimage.gaussian_filter(rng.normal(size=(side, side)), smoothing)
    conflict = (conflict - conflict.mean()) / conflict.std()
    roads = np.zeros((side, side), bool)
    roads[:, rng.choice(side, 3, replace=False)] = True
    roads[rng.choice(side, 3, replace=False), :] = True
    dist = ndimage.distance_transform_edt(~roads) / side
    logit = -1.5 + 1.4 * conflict + 2.0 * dist
    p = (1 / (1 + np.exp(-logit))).ravel()
    yy, xx = np.mgrid[0:side, 0:side]
    record = conflict.ravel() + rng.normal(0, 0.5, side * side)
    X = np.column_stack([record, dist.ravel(), yy.ravel() / side, xx.ravel() / side])
    return Population(X, p, (rng.random(p.size) < p).astype(int))


def calibrated_scores(
    X_train: ArrayLike,
    y_train: ArrayLike,
    X_test: ArrayLike,
    method: str = "isotonic",
    seed: int = 0,
) -> np.ndarray:
    """Scores for held-out units from a gradient-boosting classifier calibrated by cross-validation."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.ensemble import HistGradientBoostingClassifier

    clf = CalibratedClassifierCV(
        HistGradientBoostingClassifier(max_iter=100, random_state=seed), method=method, cv=3
    )
    clf.fit(np.asarray(X_train), np.asarray(y_train))
    return np.clip(clf.predict_proba(np.asarray(X_test))[:, 1], 0.0, 1.0)


def margin_uncertainty(p: ArrayLike, coverage: int, width: int | None = None) -> float:
    """Mean ``p(1-p)`` of the ``2 * width`` units ranked around the cut-off K (default width K/4)."""
    arr = np.sort(np.asarray(p, float))[::-1]
    if isinstance(coverage, bool) or not isinstance(coverage, int | np.integer):
        raise ValueError(f"coverage must be an int in [1, n={arr.size}]; got {coverage!r}")
    if not 1 <= coverage <= arr.size:
        raise ValueError(f"coverage must be an int in [1, n={arr.size}]; got {coverage!r}")
    if width is not None and (
        isinstance(width, bool) or not isinstance(width, int | np.integer) or width < 1
    ):
        raise ValueError(f"width must be None or an int >= 1; got {width!r}")
    w = max(1, coverage // 4) if width is None else int(width)
    band = arr[max(0, coverage - w) : coverage + w]
    return float(np.mean(band * (1 - band))) if band.size else 0.0


def load_scores_csv(
    path: str | os.PathLike[str], score_col: str = "score", outcome_col: str = "outcome"
) -> tuple[np.ndarray, np.ndarray]:
    """Read scores and 0/1 outcomes from a CSV with a header; validates both columns."""
    with Path(path).open(newline="") as f:
        reader = csv.DictReader(f)
        if (
            reader.fieldnames is None
            or score_col not in reader.fieldnames
            or outcome_col not in reader.fieldnames
        ):
            raise ValueError(
                f"{path} needs columns {score_col!r} and {outcome_col!r}; has {reader.fieldnames}"
            )
        rows = list(reader)
    if not rows:
        raise ValueError(f"{path} has no rows")
    p = np.array([float(r[score_col]) for r in rows])
    y = np.array([float(r[outcome_col]) for r in rows])
    if not np.isin(y, (0, 1)).all():  # checked before the cast: 0.7 is not truncated to 0
        raise ValueError(f"{outcome_col} must be 0 or 1")
    y = y.astype(int)
    if np.isnan(p).any() or p.min() < 0 or p.max() > 1:
        raise ValueError(f"{score_col} must be probabilities in [0, 1]")
    return p, y
