"""Annotation-free diagnostics of how much semantics and how much local evidence a ViT keeps.

Every function takes tokens: ``cls`` ``(n, dim)`` and/or ``patches`` ``(n, n_patches, dim)`` from
:func:`patch_distill.encode_tokens` (any ViT, or any callable returning patch tokens).

- semantic abstraction: :func:`knn_accuracy`, :func:`linear_probe_accuracy` (image level);
- local evidence: :func:`local_evidence_r2`: cross-validated ridge R^2 of decoding, from one patch
  token alone, that patch's own pixels or its own unpredictable texture code (folds grouped by
  image, so no image is in both train and test);
- spatial correspondence: :func:`correspondence_accuracy`: nearest-neighbour matching of patch
  tokens between two views related by a known transform, scored as the fraction of patches
  matched within ``tol`` patches (max-norm) of the true location, with its chance level;
- dense quality: :func:`dense_probe`: a linear per-patch segmentation probe (accuracy, mean IoU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from .data import ImageSet, ViewPair, chance_within, chebyshev_hits, patchify, view_pair
from .models import Encoder, encode_tokens


def _np(x: torch.Tensor | np.ndarray) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _probe_arrays(
    what: str, *arrays: torch.Tensor | np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(train_x, train_y, test_x, test_y) as numpy, each pair checked as (n, dim) and (n,)."""
    xtr, ytr, xte, yte = map(_np, arrays)
    for split, x, y in (("train", xtr, ytr), ("test", xte, yte)):
        if x.ndim != 2 or y.ndim != 1 or len(x) != len(y):
            raise ValueError(
                f"{what} {split}: features must be (n, dim) and labels (n,), got {x.shape} and {y.shape}"
            )
    return xtr, ytr, xte, yte


def knn_accuracy(
    train_x: torch.Tensor | np.ndarray, train_y: torch.Tensor | np.ndarray,
    test_x: torch.Tensor | np.ndarray, test_y: torch.Tensor | np.ndarray, k: int = 10,
) -> float:  # fmt: skip
    """Cosine k-NN classification accuracy (scikit-learn), majority vote over ``k`` neighbours."""
    from sklearn.neighbors import KNeighborsClassifier

    xtr, ytr, xte, yte = _probe_arrays("knn_accuracy", train_x, train_y, test_x, test_y)
    clf = KNeighborsClassifier(n_neighbors=min(k, len(xtr)), metric="cosine").fit(xtr, ytr)
    return float(clf.score(xte, yte))


def linear_probe_accuracy(
    train_x: torch.Tensor | np.ndarray, train_y: torch.Tensor | np.ndarray,
    test_x: torch.Tensor | np.ndarray, test_y: torch.Tensor | np.ndarray, C: float = 1.0,
) -> float:  # fmt: skip
    """Accuracy of a standardised multinomial logistic-regression probe (scikit-learn)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    xtr, ytr, xte, yte = _probe_arrays("linear_probe_accuracy", train_x, train_y, test_x, test_y)
    clf = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000))
    return float(clf.fit(xtr, ytr).score(xte, yte))


def local_evidence_r2(
    patches: torch.Tensor | np.ndarray,
    targets: torch.Tensor | np.ndarray,
    alpha: float = 1.0,
    n_splits: int = 5,
    max_images: int | None = None,
    seed: int = 0,
) -> float:
    """Cross-validated R^2 of decoding each patch's own ``targets`` from that patch token alone.

    ``patches`` ``(n, P, D)``, ``targets`` ``(n, P, T)`` (its pixels, its texture code, ...). A
    standardised ridge regression (scikit-learn) is fitted on all (image, patch) rows, folds grouped
    by image; the score is the variance-weighted R^2 over the ``T`` target dimensions, pooled over
    the held-out folds. 1 = fully linearly accessible, 0 = nothing beyond the mean.
    """
    from sklearn.linear_model import Ridge
    from sklearn.metrics import r2_score
    from sklearn.model_selection import GroupKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = _np(patches), _np(targets)
    if x.ndim != 3 or y.ndim != 3 or x.shape[:2] != y.shape[:2]:
        raise ValueError(
            f"patches must be (n, P, D) and targets (n, P, T) with the same n, P; got {x.shape}, {y.shape}"
        )
    if x.shape[0] < n_splits:
        raise ValueError(f"need at least n_splits={n_splits} images, got {x.shape[0]}")
    if max_images is not None and x.shape[0] > max_images:
        keep = np.random.default_rng(seed).choice(x.shape[0], max_images, replace=False)
        x, y = x[keep], y[keep]
    n, p = x.shape[:2]
    groups = np.repeat(np.arange(n), p)
    xf, yf = x.reshape(n * p, -1), y.reshape(n * p, -1)
    model = make_pipeline(StandardScaler(), Ridge(alpha=alpha))
    pred = cross_val_predict(model, xf, yf, groups=groups, cv=GroupKFold(n_splits=n_splits))
    return float(r2_score(yf, pred, multioutput="variance_weighted"))


TIE_TOL = 1e-5  # cosine similarities this close are equal at float32 precision (~100 ulps at 1)


def correspondence_scores(
    feats_a: torch.Tensor, feats_b: torch.Tensor, target: torch.Tensor, valid: torch.Tensor,
    grid: tuple[int, int], tol: float = 1.0,
) -> torch.Tensor:  # fmt: skip
    """Per-patch hits ``(n, n_valid)``: is the cosine nearest neighbour in B within ``tol`` of target?

    Ties are explicit: every patch of B whose similarity is within ``TIE_TOL`` of the best (equal
    up to float32 rounding, e.g. duplicated or collapsed tokens) is a nearest neighbour, and the
    hit is the share of them within ``tol``: the expected hit of a uniformly random tie-break, not
    whichever index ``argmax`` meets first. Without ties it is 1.0 or 0.0 (float). A non-finite
    token gives NaN (no neighbour is defined).
    """
    if feats_a.shape != feats_b.shape or feats_a.dim() != 3:
        raise ValueError(
            f"feats_a and feats_b must both be (n, P, D); got {feats_a.shape}, {feats_b.shape}"
        )
    if feats_a.shape[1] != grid[0] * grid[1] or target.shape != (feats_a.shape[1], 2):
        raise ValueError("target must be (P, 2) with P = rows * cols of the grid")
    a = F.normalize(feats_a.float(), dim=-1)[:, valid]
    b = F.normalize(feats_b.float(), dim=-1)
    sims = torch.einsum("npd,nqd->npq", a, b)  # (n, n_valid, P)
    tied = sims >= sims.amax(-1, keepdim=True) - TIE_TOL  # the nearest neighbours; none if NaN
    q = torch.arange(sims.shape[-1], device=sims.device)
    cells = torch.stack([q // grid[1], q % grid[1]], -1)  # (P, 2)
    within = chebyshev_hits(cells[None, None], target[valid][None, :, None], tol)  # (1, n_valid, P)
    n_tied = tied.sum(-1)
    hits = (tied & within).sum(-1).float() / n_tied.clamp(min=1)
    return torch.where(n_tied > 0, hits, torch.full_like(hits, math.nan))


@dataclass(frozen=True)
class Correspondence:
    """Correspondence accuracy of one transform, with the chance level of a random match."""

    kind: str
    accuracy: float
    chance: float
    n_patches: int


def correspondence_accuracy(
    encoder: Encoder, pair: ViewPair | torch.Tensor, kind: str = "shift", amount: float = 4,
    tol: float = 1.0, patch_size: int | None = None,
) -> Correspondence:  # fmt: skip
    """Fraction of view-A patches whose nearest patch token in view B lies within ``tol`` patches.

    ``pair`` is a :class:`ViewPair`, or images from which one is made with ``kind``/``amount``.
    """
    if isinstance(pair, torch.Tensor):
        ps = patch_size if patch_size is not None else _patch_size(encoder, pair)
        pair = view_pair(pair, kind, amount, ps)  # type: ignore[arg-type]
    _, pa = encode_tokens(encoder, pair.a)
    _, pb = encode_tokens(encoder, pair.b)
    hits = correspondence_scores(pa, pb, pair.target, pair.valid, pair.grid, tol)
    return Correspondence(
        pair.kind, float(hits.float().mean()), chance_within(pair.target, pair.valid, pair.grid, tol),
        int(pair.valid.sum()),
    )  # fmt: skip


def _patch_size(encoder: Encoder, images: torch.Tensor) -> int:
    vit = getattr(encoder, "vit", encoder)
    ps = getattr(getattr(vit, "patch_embed", None), "patch_size", None)
    if ps is None:
        raise ValueError("cannot read the patch size from this encoder; pass patch_size=")
    return int(ps[0] if isinstance(ps, tuple | list) else ps)


def dense_probe(
    train_patches: torch.Tensor, train_seg: torch.Tensor, test_patches: torch.Tensor,
    test_seg: torch.Tensor, C: float = 1.0, max_rows: int = 8000, seed: int = 0,
) -> dict[str, float]:  # fmt: skip
    """Linear per-patch segmentation probe: ``accuracy`` and macro mean ``iou`` on the test set."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import jaccard_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    xtr, ytr = _np(train_patches), _np(train_seg)
    xte, yte = _np(test_patches), _np(test_seg)
    if xtr.ndim != 3 or ytr.shape != xtr.shape[:2] or yte.shape != xte.shape[:2]:
        raise ValueError("patches must be (n, P, D) and segmentation labels (n, P)")
    xtr, ytr = xtr.reshape(-1, xtr.shape[-1]), ytr.reshape(-1)
    xte, yte = xte.reshape(-1, xte.shape[-1]), yte.reshape(-1)
    if len(xtr) > max_rows:
        keep = np.random.default_rng(seed).choice(len(xtr), max_rows, replace=False)
        xtr, ytr = xtr[keep], ytr[keep]
    clf = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000)).fit(xtr, ytr)
    pred = clf.predict(xte)
    return {
        "accuracy": float((pred == yte).mean()),
        "iou": float(jaccard_score(yte, pred, average="macro", labels=np.unique(yte))),
    }


def patch_similarity_map(patches: torch.Tensor, query: int, grid: tuple[int, int]) -> torch.Tensor:
    """Cosine similarity of every patch token of one image ``(P, D)`` to patch ``query``, as a grid."""
    if patches.dim() != 2:
        raise ValueError("patches must be (P, D) for one image")
    x = F.normalize(patches.float(), dim=-1)
    return (x @ x[query]).reshape(grid)


def evaluate(
    encoder: Encoder,
    train: ImageSet,
    test: ImageSet,
    transforms: tuple[tuple[str, float], ...] = (("shift", 8), ("zoom", 1.5), ("flip", 0)),
    max_images: int = 400,
) -> dict[str, float]:
    """Every diagnostic on one encoder: the row of a trade-off table.

    Needs ``train``/``test`` with labels; texture codes and patch segmentation are used when the
    set has them (:class:`SyntheticShapes`). Keys: ``knn``, ``linear`` (CLS), ``linear_pooled`` (mean patch token), ``r2_pixels``,
    ``r2_code``, ``dense_acc``, ``dense_iou``, ``corr_<kind>`` (and ``corr_mean``).
    """
    if train.labels is None or test.labels is None:
        raise ValueError("evaluate needs labelled train and test sets")
    ctr, ptr = encode_tokens(encoder, train.images)
    cte, pte = encode_tokens(encoder, test.images)
    out = {
        "knn": knn_accuracy(ctr, train.labels, cte, test.labels),
        "linear": linear_probe_accuracy(ctr, train.labels, cte, test.labels),
        "linear_pooled": linear_probe_accuracy(ptr.mean(1), train.labels, pte.mean(1), test.labels),
    }
    sub = slice(0, min(max_images, len(test)))
    out["r2_pixels"] = local_evidence_r2(pte[sub], patchify(test.images[sub], test.patch_size))
    if test.codes is not None:
        out["r2_code"] = local_evidence_r2(pte[sub], test.codes[sub])
    if train.patch_seg is not None and test.patch_seg is not None:
        d = dense_probe(ptr, train.patch_seg, pte, test.patch_seg)
        out["dense_acc"], out["dense_iou"] = d["accuracy"], d["iou"]
    corr = []
    for kind, amount in transforms:
        c = correspondence_accuracy(
            encoder, test.images[sub], kind, amount, patch_size=test.patch_size
        )
        out[f"corr_{kind}"] = c.accuracy
        corr.append(c.accuracy)
    if corr:
        out["corr_mean"] = float(np.mean(corr))
    return out
