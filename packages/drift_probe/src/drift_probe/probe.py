"""Linear probes on residual-stream features, grouped by subject, and AUROC with bootstrap intervals.

:class:`LinearProbe` is the paper's probe: standardised features, L2 logistic regression with ``C``
chosen by grouped cross-validation. :func:`fit_layer_probe` chooses the layer on validation folds
inside each training split (nested, grouped by subject: no subject is ever in both a training and a
test fold) and returns out-of-fold scores for every item.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import rankdata
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GroupKFold, StratifiedGroupKFold
from sklearn.preprocessing import StandardScaler

__all__ = [
    "CS",
    "LayerProbeResult",
    "LinearProbe",
    "NullBand",
    "auroc",
    "auroc_ci",
    "auroc_difference_bootstrap",
    "check_binary",
    "check_features",
    "fit_layer_probe",
    "grouped_splits",
    "out_of_fold",
    "permutation_band",
]

CS: tuple[float, ...] = (1e-3, 1e-2, 1e-1, 1.0, 10.0)
"""The grid of inverse L2 strengths the probes choose from by grouped cross-validation."""


def check_binary(y: Sequence[bool] | np.ndarray, name: str = "labels") -> np.ndarray:
    """``y`` as a 0/1 int array; ``ValueError`` unless it is 1-D and holds both classes."""
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {arr.shape}")
    values = set(np.unique(arr).tolist())
    if not values <= {0, 1}:
        raise ValueError(f"{name} must be binary (0/1 or bool); got values {sorted(values)[:5]}")
    if len(values) < 2:
        raise ValueError(f"{name} hold one class only ({values.pop()}): a probe needs both classes")
    return arr.astype(int)


def check_features(x: np.ndarray, n: int | None = None, name: str = "features") -> np.ndarray:
    """``x`` as a finite float64 ``(n, d)`` array; ``ValueError`` naming what is wrong."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_items, d); got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} have {arr.shape[0]} rows but there are {n} labels")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contain NaN or inf")
    return arr


def auroc(y: Sequence[bool] | np.ndarray, scores: Sequence[float] | np.ndarray) -> float:
    """Area under the ROC curve of ``scores`` for the positive class of ``y`` (scikit-learn)."""
    return float(roc_auc_score(check_binary(y), np.asarray(scores, dtype=float)))


def _resampled_aurocs(y: np.ndarray, scores: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """AUROC of each resample (rows of ``idx``; ``scores`` may be ``(k, n)`` for k score vectors):
    the Mann-Whitney U from row-wise ranks; resamples with one class give NaN."""
    yb = y[idx]
    n1 = yb.sum(-1)
    n0 = idx.shape[-1] - n1
    ranks = rankdata(scores[..., idx], axis=-1)
    u = (ranks * yb).sum(-1) - n1 * (n1 + 1) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n1 > 0) & (n0 > 0), u / (n1 * n0), np.nan)


def auroc_ci(
    y: Sequence[bool] | np.ndarray,
    scores: Sequence[float] | np.ndarray,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    groups: Sequence[object] | None = None,
) -> tuple[float, float, float]:
    """AUROC and its percentile bootstrap interval, ``(auroc, low, high)`` (vectorised): over
    items, or with ``groups`` over groups (a cluster bootstrap: a subject's items together)."""
    y = check_binary(y)
    s = np.asarray(scores, dtype=float)
    if s.shape != y.shape:
        raise ValueError(f"scores have shape {s.shape}, labels {y.shape}")
    rng = np.random.default_rng(seed)
    if groups is None:
        idx = rng.integers(0, len(y), size=(n_resamples, len(y)))
        boot = _resampled_aurocs(y, s, idx)
    else:
        if len(groups) != len(y):
            raise ValueError(f"groups have {len(groups)} entries, labels {len(y)}")
        boot = _weighted_aurocs(y, s, group_bootstrap_weights(groups, n_resamples, rng))
    alpha = (1 - confidence) / 2
    low, high = np.nanquantile(boot, [alpha, 1 - alpha])
    return auroc(y, s), float(low), float(high)


def _weighted_aurocs(y: np.ndarray, scores: np.ndarray, w: np.ndarray) -> np.ndarray:
    """AUROC of ``scores`` (``(n,)``) under each row of item weights ``w`` (``(R, n)``, e.g. how
    often a bootstrap drew each item): ``sum_{pos i, neg j} w_i w_j (1[s_i > s_j] + 1/2 1[tie])``
    over ``W_pos W_neg``; rows with one class weighted give NaN."""
    _, inv = np.unique(scores, return_inverse=True)
    k, r = int(inv.max()) + 1, w.shape[0]
    offsets = (np.arange(r) * k)[:, None]

    def weight_at_each_score(rows: np.ndarray) -> np.ndarray:
        """(R, k): the summed weight of the ``rows`` items at each distinct score (O(R n) memory;
        a dense (n, k) indicator times w was O(n^2) memory and O(R n^2) time)."""
        idx = (offsets + inv[rows][None, :]).ravel()
        return np.bincount(idx, weights=w[:, rows].ravel(), minlength=r * k).reshape(r, k)

    wp, wn = weight_at_each_score(y == 1), weight_at_each_score(y == 0)
    below = np.cumsum(wn, axis=1) - wn  # negative weight strictly below each score
    num = (wp * (below + 0.5 * wn)).sum(1)
    den = wp.sum(1) * wn.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


def group_bootstrap_weights(
    groups: Sequence[object], n_resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """``(n_resamples, n)`` item weights of a cluster bootstrap: each resample draws as many
    groups (subjects) as there are, with replacement, and an item counts as often as its group."""
    _, codes = np.unique(np.asarray(groups), return_inverse=True)
    g = int(codes.max()) + 1
    draws = rng.integers(0, g, size=(n_resamples, g))
    offsets = (np.arange(n_resamples) * g)[:, None]
    counts = np.bincount((draws + offsets).ravel(), minlength=n_resamples * g)
    return counts.reshape(n_resamples, g)[:, codes].astype(float)


def auroc_difference_bootstrap(
    y: Sequence[bool] | np.ndarray,
    scores_a: Sequence[float] | np.ndarray,
    scores_b: Sequence[float] | np.ndarray,
    n_resamples: int = 2000,
    seed: int = 0,
    groups: Sequence[object] | None = None,
) -> np.ndarray:
    """Paired bootstrap replicates of ``AUROC(a) - AUROC(b)`` on the same resampled items
    (resamples with one class dropped). With ``groups`` the resampling unit is the group (a
    subject and all its items: a cluster bootstrap), otherwise the item. Average replicates over
    independent datasets to pool."""
    y = check_binary(y)
    s = np.stack([np.asarray(scores_a, float), np.asarray(scores_b, float)])
    if s.shape[1] != len(y):
        raise ValueError(f"scores have {s.shape[1]} items, labels {len(y)}")
    rng = np.random.default_rng(seed)
    if groups is None:
        idx = rng.integers(0, len(y), size=(n_resamples, len(y)))
        a, b = _resampled_aurocs(y, s, idx)
    else:
        if len(groups) != len(y):
            raise ValueError(f"groups have {len(groups)} entries, labels {len(y)}")
        w = group_bootstrap_weights(groups, n_resamples, rng)
        a, b = _weighted_aurocs(y, s[0], w), _weighted_aurocs(y, s[1], w)
    diff = a - b
    return diff[np.isfinite(diff)]


@dataclass(frozen=True)
class NullBand:
    """The permutation null of a statistic: ``null`` (one value per permutation), its ``centre``
    (median) and the central ``confidence`` band ``[low, high]``: where the statistic falls when the
    label carries nothing, through the same pipeline (so a biased pipeline's chance level shows)."""

    centre: float
    low: float
    high: float
    null: np.ndarray = field(repr=False)

    def distance(self, value: float) -> float:
        """``|value - centre|``: the departure from this pipeline's chance level."""
        return float(abs(value - self.centre))

    def excess(self, value: float) -> float:
        """How far ``value`` lies outside ``[low, high]`` (0 inside)."""
        return float(max(0.0, self.low - value, value - self.high))


def permutation_band(
    statistic: Callable[[np.ndarray], float],
    y: Sequence[bool] | np.ndarray,
    n_perm: int = 100,
    seed: int = 0,
    confidence: float = 0.95,
) -> NullBand:
    """Run ``statistic(labels)`` on ``n_perm`` permutations of ``y`` (the whole pipeline: splits
    grouped by subject, fitting and scoring, as for the real labels) and return its null band.

    The permutation is over items; the grouping the pipeline uses is left as it is, so every
    subject keeps its items together in the folds (ours)."""
    y = check_binary(y)
    if n_perm < 2:
        raise ValueError(f"n_perm must be >= 2; got {n_perm}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got {confidence}")
    rng = np.random.default_rng(seed)
    null = np.array([statistic(rng.permutation(y)) for _ in range(n_perm)], dtype=float)
    alpha = (1 - confidence) / 2
    low, centre, high = np.nanquantile(null, [alpha, 0.5, 1 - alpha])
    return NullBand(float(centre), float(low), float(high), null)


def grouped_splits(
    groups: Sequence[object],
    n_splits: int = 5,
    seed: int = 0,
    y: Sequence[bool] | np.ndarray | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Shuffled splits where no group (subject) is on both sides of any split; with labels ``y``,
    ``StratifiedGroupKFold`` (each fold's label mix as close to the whole's as the groups allow),
    without, ``GroupKFold``."""
    groups = np.asarray(groups)
    n_groups = len(np.unique(groups))
    if n_groups < n_splits:
        raise ValueError(f"{n_splits} folds need at least {n_splits} groups; got {n_groups}")
    if y is None:
        cv = GroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
        return list(cv.split(np.zeros(len(groups)), groups=groups))
    y = np.asarray(y)
    if y.shape != groups.shape:
        raise ValueError(f"labels have shape {y.shape}, groups {groups.shape}")
    strat = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    with warnings.catch_warnings():  # fewer members of a class than folds: still grouped
        warnings.simplefilter("ignore", UserWarning)
        return list(strat.split(np.zeros(len(groups)), y, groups=groups))


class LinearProbe:
    """Standardise, then L2 logistic regression; ``C`` from ``Cs`` by grouped ``cv``-fold AUROC.

    With one value in ``Cs`` no search is run. After :meth:`fit`: ``C_``, ``direction_`` (the unit
    weight vector in standardised coordinates), ``scaler_``, ``model_``.
    """

    def __init__(self, Cs: Sequence[float] = CS, cv: int = 3, seed: int = 0, max_iter: int = 2000):
        if not Cs or any(c <= 0 for c in Cs):
            raise ValueError(f"Cs must be positive; got {Cs}")
        self.Cs, self.cv, self.seed, self.max_iter = tuple(Cs), cv, seed, max_iter

    def fit(
        self, x: np.ndarray, y: Sequence[bool] | np.ndarray, groups: Sequence[object] | None = None
    ) -> LinearProbe:
        y = check_binary(y)
        x = check_features(x, len(y))
        self.scaler_ = StandardScaler().fit(x)
        z = self.scaler_.transform(x)
        if len(self.Cs) == 1:
            self.model_ = LogisticRegression(C=self.Cs[0], max_iter=self.max_iter).fit(z, y)
            self.C_ = self.Cs[0]
        else:
            groups = np.arange(len(y)) if groups is None else np.asarray(groups)
            splits = grouped_splits(groups, self.cv, self.seed, y)
            with (
                warnings.catch_warnings()
            ):  # sklearn 1.8+ announces attribute changes we do not use
                warnings.simplefilter("ignore", FutureWarning)
                self.model_ = LogisticRegressionCV(
                    Cs=list(self.Cs), cv=splits, scoring="roc_auc", max_iter=self.max_iter
                ).fit(z, y)
            self.C_ = float(self.model_.C_[0])
        w = self.model_.coef_[0]
        self.direction_ = w / (np.linalg.norm(w) or 1.0)
        self.n_features_in_ = x.shape[1]
        return self

    def _z(self, x: np.ndarray) -> np.ndarray:
        if not hasattr(self, "model_"):
            raise RuntimeError("call fit() first")
        x = check_features(x)
        if x.shape[1] != self.n_features_in_:
            raise ValueError(
                f"the probe was fitted on {self.n_features_in_} features; got {x.shape[1]}"
            )
        return self.scaler_.transform(x)

    def decision_function(self, x: np.ndarray) -> np.ndarray:
        return self.model_.decision_function(self._z(x))

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """P(positive) per row (1-D)."""
        return self.model_.predict_proba(self._z(x))[:, 1]


def out_of_fold(
    x: np.ndarray,
    y: Sequence[bool] | np.ndarray,
    groups: Sequence[object],
    n_splits: int = 5,
    seed: int = 0,
    Cs: Sequence[float] = CS,
    train_mask: np.ndarray | None = None,
) -> np.ndarray:
    """Out-of-fold P(positive) of a :class:`LinearProbe` for every item, grouped by ``groups``.

    ``train_mask``: items a probe may be fitted on (others are only ever scored), e.g. facts held out.
    """
    y = check_binary(y)
    x = check_features(x, len(y))
    mask = np.ones(len(y), bool) if train_mask is None else np.asarray(train_mask, bool)
    scores = np.empty(len(y))
    for train, test in grouped_splits(groups, n_splits, seed, y):
        train = train[mask[train]]
        probe = LinearProbe(Cs, seed=seed).fit(x[train], y[train], np.asarray(groups)[train])
        scores[test] = probe.predict_proba(x[test])
    return scores


@dataclass
class LayerProbeResult:
    """Out-of-fold ``scores`` of a probe whose layer was chosen on validation in each fold.

    ``layer``: the layer chosen most often (then refitted on all items as ``probe``);
    ``fold_layers``: each fold's choice; ``layer_auroc``: validation AUROC of every layer, averaged
    over the inner splits with both classes on each side and over folds (the by-layer curve);
    ``auroc``/``ci``: of the out-of-fold scores (cluster bootstrap over groups); ``blind_folds``: outer folds where no inner split
    had both classes, which took the layer of the other folds' mean curve.
    """

    scores: np.ndarray
    layer: int
    fold_layers: list[int]
    layer_auroc: np.ndarray
    auroc: float
    ci: tuple[float, float]
    probe: LinearProbe = field(repr=False)
    blind_folds: int = 0


def fit_layer_probe(
    hidden: np.ndarray,
    y: Sequence[bool] | np.ndarray,
    groups: Sequence[object],
    layers: Sequence[int] | None = None,
    n_splits: int = 5,
    inner_splits: int = 3,
    seed: int = 0,
    train_mask: np.ndarray | None = None,
) -> LayerProbeResult:
    """Nested, grouped probing over layers of ``hidden`` (``(n, n_layers, d)``).

    Each outer fold picks the layer with the best inner-validation AUROC (a fixed-``C`` probe for
    the search), fits a :class:`LinearProbe` (``C`` by CV) on it and scores the held-out fold.
    """
    y = check_binary(y)
    hidden = np.asarray(hidden, dtype=np.float64)
    if hidden.ndim != 3 or hidden.shape[0] != len(y):
        raise ValueError(
            f"hidden must be (n_items={len(y)}, n_layers, d); got shape {hidden.shape}"
        )
    n_layers = hidden.shape[1]
    layers = list(range(n_layers)) if layers is None else list(layers)
    for layer in layers:
        if not 0 <= layer < n_layers:
            raise ValueError(f"layer {layer} out of range: hidden has layers 0..{n_layers - 1}")
    groups = np.asarray(groups)
    mask = np.ones(len(y), bool) if train_mask is None else np.asarray(train_mask, bool)
    scores = np.empty(len(y))
    outer = [
        (train[mask[train]], test) for train, test in grouped_splits(groups, n_splits, seed, y)
    ]
    curves = np.array(
        [_layer_curve(hidden, y, groups, train, layers, inner_splits, seed) for train, _ in outer]
    )
    blind = np.isnan(curves).all(
        1
    )  # outer folds where no inner split had both classes on each side
    if blind.all():
        raise ValueError(
            "no inner validation split has both classes in training and validation: the layer "
            f"cannot be chosen (labels: {int(y.sum())} positive of {len(y)})"
        )
    # mean validation AUROC over the folds that measured it; a fold that measured none takes the
    # layer this curve picks instead of layer 0 by default
    curve_all = np.nanmean(curves[~blind], axis=0)
    fold_layers = []
    for (train, test), curve in zip(outer, curves, strict=True):
        # ties (AUROC is a ratio of counts) go to the lowest layer
        best = layers[int(np.argmax(curve_all if np.isnan(curve).all() else curve))]
        probe = LinearProbe(seed=seed).fit(hidden[train, best], y[train], groups[train])
        scores[test] = probe.predict_proba(hidden[test, best])
        fold_layers.append(best)
    layer = max(set(fold_layers), key=lambda v: (fold_layers.count(v), -v))
    final = LinearProbe(seed=seed).fit(hidden[mask, layer], y[mask], groups[mask])
    auc, low, high = auroc_ci(y, scores, seed=seed, groups=groups)
    return LayerProbeResult(
        scores, layer, fold_layers, curve_all, auc, (low, high), final, int(blind.sum())
    )


def _layer_curve(
    hidden: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    train: np.ndarray,
    layers: list[int],
    inner_splits: int,
    seed: int,
) -> np.ndarray:
    """Inner-validation AUROC of a fixed-``C`` probe per layer, averaged over the inner splits that
    have both classes on each side (the same splits for every layer); NaN if none has."""
    inner = [
        (a, b)
        for a, b in grouped_splits(groups[train], inner_splits, seed + 1, y[train])
        if len(np.unique(y[train][a])) == 2 and len(np.unique(y[train][b])) == 2
    ]
    if not inner:
        return np.full(len(layers), np.nan)
    curve = np.zeros(len(layers))
    for j, layer in enumerate(layers):
        x = hidden[train, layer]
        for a, b in inner:
            p = LinearProbe((0.1,)).fit(x[a], y[train][a]).decision_function(x[b])
            curve[j] += roc_auc_score(y[train][b], p) / len(inner)
    return curve
