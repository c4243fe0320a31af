"""Coset structure in an S_n embedding: can a linear probe read off the sign or the S_{n-1} coset?

Solutions to S_n composition are built from discrete coset structure (Chughtai et al. 2023; Stander
et al. 2023): the sign (the two cosets of A_n) and the cosets of the point stabiliser S_{n-1}. With
``x = n - 1``, the left coset ``g S_{n-1}`` is labelled by ``g(x)`` and the right coset ``S_{n-1} g``
by ``g^{-1}(x)``. A probe's cross-validated accuracy well above chance (1 / number of cosets) says
the embedding arranges the elements by that coset.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from .tasks import permutation_sign, permutations

__all__ = ["coset_labels", "coset_probe"]


def coset_labels(n: int) -> dict[str, np.ndarray]:
    """Class labels of every element of S_n (lexicographic order) for each coset structure."""
    perms = permutations(n)
    x = n - 1
    return {
        "sign (cosets of A_n)": (permutation_sign(perms) > 0).astype(np.int64),
        "left cosets of S_{n-1}": perms[:, x],
        "right cosets of S_{n-1}": np.argmax(perms == x, axis=1),
    }


def coset_probe(
    embedding: ArrayLike, n: int, folds: int = 5, seed: int = 0
) -> list[dict[str, float | str]]:
    """Cross-validated accuracy of a logistic-regression probe per coset structure.

    ``embedding``: ``(n!, d)`` element embeddings in lexicographic order (extra rows, such as the
    ``=`` token's, are ignored). Stratified ``folds``-fold CV, fewer when a class has fewer members
    (S_3). Returns rows ``{structure, classes, cv_accuracy, chance}``.
    """
    labels = coset_labels(n)
    m = len(next(iter(labels.values())))
    x = np.asarray(embedding, dtype=float)
    if x.ndim != 2 or x.shape[0] < m:
        raise ValueError(f"embedding must be ({m}, d) for S_{n}; got shape {x.shape}")
    x = x[:m]
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise ValueError(f"folds must be an integer >= 2; got {folds!r}")
    rows = []
    for name, y in labels.items():
        k = int(y.max()) + 1
        probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
        cv = StratifiedKFold(
            n_splits=min(folds, int(np.bincount(y).min())), shuffle=True, random_state=seed
        )
        score = cross_val_score(probe, x, y, cv=cv).mean()
        rows.append(
            {"structure": name, "classes": k, "cv_accuracy": float(score), "chance": 1.0 / k}
        )
    return rows
