"""Five tests of whether the drift direction is orthogonal to correctness and uncertainty.

All work on one layer's features ``x`` (``(n, d)``), standardised inside, and binary labels:

1. :func:`cosine_test`: ``|cos|`` of probe weight vectors, against probes fitted to shuffled labels;
2. :func:`score_correlations`: Pearson ``r`` of drift scores with other detectors' scores;
3. :func:`nullspace_test`: remove one probe's direction, refit the other (bidirectional);
4. :func:`inlp` / :func:`erasure_test`: iterative null-space projection (Ravfogel et al.) and LEACE;
5. :func:`mean_difference_test`: difference-of-means directions and their 2 x 2 AUROC table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg
from scipy.stats import pearsonr
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

from drift_probe.probe import LinearProbe, auroc, check_binary, check_features, grouped_splits

__all__ = [
    "INLPResult",
    "cosine",
    "cosine_test",
    "erased_auroc_after_inlp",
    "erasure_test",
    "inlp",
    "leace_projection",
    "mean_difference_test",
    "nullspace_test",
    "probe_direction",
    "score_correlations",
]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        raise ValueError(f"vectors differ in shape: {a.shape} vs {b.shape}")
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) or 1.0))


def _standardise(x: np.ndarray, n: int | None = None) -> np.ndarray:
    return StandardScaler().fit_transform(check_features(x, n))


def probe_direction(x: np.ndarray, y: Sequence[bool] | np.ndarray, C: float = 0.1) -> np.ndarray:
    """Unit weight vector of an L2 logistic probe on standardised ``x``."""
    return LinearProbe((C,)).fit(x, y).direction_


def cosine_test(
    x: np.ndarray,
    drift: Sequence[bool] | np.ndarray,
    others: Mapping[str, Sequence[bool] | np.ndarray],
    n_null: int = 100,
    C: float = 0.1,
    seed: int = 0,
) -> dict[str, object]:
    """``|cos(w_drift, w_other)|`` for each label in ``others``, and the null distribution of
    ``|cos|`` between probes fitted to independently shuffled drift and other labels.

    Returns ``{"cos": {name: |cos|}, "null": array, "band": 95% quantile of the null}``.
    """
    drift = check_binary(drift, "drift labels")
    x = check_features(x, len(drift))
    w_d = probe_direction(x, drift, C)
    cos = {}
    for name, labels in others.items():
        cos[name] = abs(cosine(w_d, probe_direction(x, check_binary(labels, name), C)))
    rng = np.random.default_rng(seed)
    ref = check_binary(next(iter(others.values()))) if others else drift
    null = np.array(
        [
            abs(
                cosine(
                    probe_direction(x, rng.permutation(drift), C),
                    probe_direction(x, rng.permutation(ref), C),
                )
            )
            for _ in range(n_null)
        ]
    )
    return {"cos": cos, "null": null, "band": float(np.quantile(null, 0.95))}


def score_correlations(
    drift_scores: np.ndarray, others: Mapping[str, np.ndarray]
) -> dict[str, tuple[float, float]]:
    """Pearson ``(r, p)`` (``scipy.stats.pearsonr``) of the drift scores with each other score."""
    d = np.asarray(drift_scores, float)
    out = {}
    for name, s in others.items():
        s = np.asarray(s, float)
        if s.shape != d.shape:
            raise ValueError(f"{name} scores have shape {s.shape}; drift scores {d.shape}")
        if np.ptp(s) == 0 or np.ptp(d) == 0:
            out[name] = (float("nan"), float("nan"))
            continue
        res = pearsonr(d, s)
        out[name] = (float(res.statistic), float(res.pvalue))
    return out


def _project_out(z: np.ndarray, w: np.ndarray) -> np.ndarray:
    w = w / np.linalg.norm(w)
    return z - np.outer(z @ w, w)


Eraser = Callable[[np.ndarray], Callable[[np.ndarray], np.ndarray]]
"""Given the training rows' indices, fit an eraser on them and return it as a feature map."""


def _oof_auroc(
    z: np.ndarray,
    y: np.ndarray,
    groups: Sequence[object],
    n_splits: int,
    seed: int,
    C: float,
    eraser: Eraser | None = None,
) -> float:
    """Out-of-fold AUROC of a fixed-``C`` probe; an ``eraser`` is fitted on each training fold only
    and applied to both sides (fitting it on all rows would leave the held-out fold anti-correlated
    with the erased concept and push its AUROC below chance)."""
    scores = np.empty(len(y))
    for train, test in grouped_splits(groups, n_splits, seed, y):
        f = eraser(train) if eraser is not None else (lambda a: a)
        probe = LinearProbe((C,)).fit(f(z[train]), y[train])
        scores[test] = probe.predict_proba(f(z[test]))
    return auroc(y, scores)


def nullspace_test(
    x: np.ndarray,
    drift: Sequence[bool] | np.ndarray,
    correct: Sequence[bool] | np.ndarray,
    groups: Sequence[object],
    n_splits: int = 5,
    C: float = 0.1,
    seed: int = 0,
) -> dict[str, float]:
    """Bidirectional null-space projection: out-of-fold AUROC of drift before and after removing
    the correctness direction ``X (I - w_c w_c^T)``, and of correctness after removing ``w_d``.

    Directions are fitted on each training fold; every probe uses the fixed inverse L2 strength ``C``.
    """
    drift, correct = check_binary(drift, "drift labels"), check_binary(correct, "correct labels")
    z = _standardise(x, len(drift))

    def remove(labels: np.ndarray) -> Eraser:
        def fit(train: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
            w = probe_direction(z[train], labels[train], C)
            return lambda a: _project_out(a, w)

        return fit

    out = {
        "drift": _oof_auroc(z, drift, groups, n_splits, seed, C),
        "drift_without_correct": _oof_auroc(z, drift, groups, n_splits, seed, C, remove(correct)),
        "correct": _oof_auroc(z, correct, groups, n_splits, seed, C),
        "correct_without_drift": _oof_auroc(z, correct, groups, n_splits, seed, C, remove(drift)),
    }
    out["delta_drift"] = out["drift_without_correct"] - out["drift"]
    out["delta_correct"] = out["correct_without_drift"] - out["correct"]
    return out


@dataclass
class INLPResult:
    """The INLP projector ``P = I - Q Q^T`` (``Q`` an orthonormal basis of the removed directions),
    the ``directions`` removed (one per step) and each step's classifier accuracy before removal."""

    projection: np.ndarray
    directions: np.ndarray
    accuracies: list[float]


def inlp(
    x: np.ndarray, y: Sequence[bool] | np.ndarray, k: int = 10, C: float = 1.0, seed: int = 0
) -> INLPResult:
    """Iterative null-space projection (Ravfogel et al. 2020): ``k`` rounds of a ``LinearSVC`` on the
    projected data, each direction added to the removed span; ``P = I - QQ^T``, ``Q = orth(W^T)``."""
    y = check_binary(y)
    x = check_features(x, len(y))
    d = x.shape[1]
    if not isinstance(k, int) or not 1 <= k < d:
        raise ValueError(f"k must be an int in [1, d); got k={k} with d={d}")
    proj = np.eye(d)
    ws, accs = [], []
    for step in range(k):
        xp = x @ proj
        svc = LinearSVC(C=C, max_iter=5000, random_state=seed + step).fit(xp, y)
        accs.append(float(svc.score(xp, y)))
        ws.append(svc.coef_[0] @ proj)  # the direction in original coordinates, inside range(P)
        q = scipy.linalg.orth(np.array(ws).T)
        proj = np.eye(d) - q @ q.T
    return INLPResult(proj, np.array(ws), accs)


def _leace_eraser(x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    import torch
    from concept_erasure import LeaceEraser

    eraser = LeaceEraser.fit(torch.from_numpy(x), torch.from_numpy(y))
    return lambda a: eraser(torch.from_numpy(np.ascontiguousarray(a))).numpy()


def leace_projection(x: np.ndarray, y: Sequence[bool] | np.ndarray) -> np.ndarray:
    """``x`` with the concept ``y`` erased by LEACE (``concept-erasure``; Belrose et al. 2023)."""
    y = check_binary(y)
    x = check_features(x, len(y))
    return _leace_eraser(x, y)(x)


def erasure_test(
    x: np.ndarray,
    erase: Sequence[bool] | np.ndarray,
    keep: Sequence[bool] | np.ndarray,
    groups: Sequence[object],
    k: int = 10,
    n_splits: int = 5,
    C: float = 0.1,
    seed: int = 0,
) -> dict[str, float]:
    """Erase the concept ``erase`` (INLP with ``k`` steps, and LEACE; each fitted on the training
    folds) and report the out-of-fold AUROC of both labels before and after (logistic probes with
    the fixed ``C``): the erased one should fall to chance, ``keep`` stay."""
    erase, keep = check_binary(erase, "erased labels"), check_binary(keep, "kept labels")
    z = _standardise(x, len(erase))

    def by_inlp(train: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        proj = inlp(z[train], erase[train], k, seed=seed).projection
        return lambda a: a @ proj

    def by_leace(train: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        return _leace_eraser(z[train], erase[train])

    def oof(y: np.ndarray, eraser: Eraser | None = None) -> float:
        return _oof_auroc(z, y, groups, n_splits, seed, C, eraser)

    return {
        "erased": oof(erase),
        "kept": oof(keep),
        "erased_after_inlp": oof(erase, by_inlp),
        "kept_after_inlp": oof(keep, by_inlp),
        "erased_after_leace": oof(erase, by_leace),
        "kept_after_leace": oof(keep, by_leace),
    }


def erased_auroc_after_inlp(
    x: np.ndarray,
    erase: Sequence[bool] | np.ndarray,
    groups: Sequence[object],
    k: int = 10,
    n_splits: int = 5,
    C: float = 0.1,
    seed: int = 0,
) -> float:
    """The out-of-fold AUROC of ``erase`` after INLP on ``erase`` (fitted on each training fold):
    :func:`erasure_test`'s ``erased_after_inlp`` alone, the statistic whose permutation null
    (:func:`drift_probe.probe.permutation_band`) says where this pipeline's chance lies."""
    erase = check_binary(erase, "erased labels")
    z = _standardise(x, len(erase))

    def by_inlp(train: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        proj = inlp(z[train], erase[train], k, seed=seed).projection
        return lambda a: a @ proj

    return _oof_auroc(z, erase, groups, n_splits, seed, C, by_inlp)


def mean_difference_test(
    x: np.ndarray,
    labels: Mapping[str, Sequence[bool] | np.ndarray],
    groups: Sequence[object],
    n_splits: int = 5,
    seed: int = 0,
) -> dict[str, object]:
    """Difference-of-means directions ``mu_1 - mu_0`` of each label (standardised features).

    Returns ``{"cos": {(a, b): cos(mu_a, mu_b)}, "auroc": {(direction, label): AUROC}, "scores":
    {direction: (n,)}}``: the projection on each direction (fitted on training folds, scored out of
    fold) and its AUROC for each label.
    """
    names = list(labels)
    ys = {n: check_binary(v, n) for n, v in labels.items()}
    n = len(next(iter(ys.values())))
    z = _standardise(x, n)

    def mu(rows: np.ndarray, y: np.ndarray) -> np.ndarray:
        return z[rows][y[rows] == 1].mean(0) - z[rows][y[rows] == 0].mean(0)

    every = np.arange(n)
    full = {m: mu(every, ys[m]) for m in names}
    cos = {(a, b): cosine(full[a], full[b]) for i, a in enumerate(names) for b in names[i + 1 :]}
    proj = {m: np.empty(n) for m in names}
    # stratified by the first label (drift in the experiment), grouped by subject
    for train, test in grouped_splits(groups, n_splits, seed, ys[names[0]]):
        for m in names:
            proj[m][test] = z[test] @ mu(train, ys[m])
    table = {(m, lab): auroc(ys[lab], proj[m]) for m in names for lab in names}
    return {"cos": cos, "auroc": table, "scores": proj}
