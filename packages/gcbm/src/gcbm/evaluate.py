"""Per-class metrics, the logistic-regression baseline on concept presence, and the intervention
experiment (editing a concept weight of the sparse linear rule to correct misclassifications)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score, recall_score

__all__ = ["Intervention", "class_metrics", "intervene", "presence_logreg"]


def class_metrics(
    y_true: np.ndarray, y_pred: np.ndarray, minority: int | None = None
) -> dict[str, float]:
    """Accuracy, macro-F1 and the recall of the minority class (``minority``, default the least
    frequent class of ``y_true``; ties: the lower label)."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if y_true.shape != y_pred.shape or y_true.ndim != 1 or len(y_true) == 0:
        raise ValueError(f"need equal non-empty 1-d labels; got {y_true.shape}, {y_pred.shape}")
    labels, counts = np.unique(y_true, return_counts=True)
    if minority is None:
        minority = int(labels[np.argmin(counts)])
    return {
        "accuracy": float(np.mean(y_true == y_pred)),
        "macro-F1": float(f1_score(y_true, y_pred, average="macro", zero_division=0)),
        "minority recall": float(
            recall_score(y_true, y_pred, labels=[minority], average="macro", zero_division=0)
        ),
    }


def presence_logreg(
    presence_train: np.ndarray, y_train: np.ndarray, presence_test: np.ndarray, seed: int = 0
) -> np.ndarray:
    """The concept-presence baseline: scikit-learn's logistic regression (default options, L2,
    ``C = 1``) on the Boolean presence of the vocabulary's concepts; predicted test classes."""
    clf = LogisticRegression(max_iter=2000, random_state=seed)
    clf.fit(np.asarray(presence_train, dtype=float), np.asarray(y_train))
    return clf.predict(np.asarray(presence_test, dtype=float))


@dataclass(frozen=True)
class Intervention:
    """The chosen edit ``(class, concept, new weight)`` (``None``: no edit helped on validation)
    and its effect on the test graphs: errors corrected, new errors introduced, test size."""

    edit: tuple[int, int, float] | None
    corrected: int
    introduced: int
    n_test: int

    @property
    def net(self) -> float:
        """(corrected - introduced) / n_test."""
        return (self.corrected - self.introduced) / self.n_test


def _errors(W: np.ndarray, b: np.ndarray, A: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (A @ W.T + b).argmax(axis=1) != y


def intervene(
    weight: np.ndarray,
    bias: np.ndarray,
    act_val: np.ndarray,
    y_val: np.ndarray,
    act_test: np.ndarray,
    y_test: np.ndarray,
    factors: tuple[float, ...] = (0.0, 2.0),
    rng: np.random.Generator | None = None,
) -> Intervention:
    """Edit one concept weight of the linear rule ``logits = W a + b`` to correct errors.

    Candidates: ``W[k, c] <- f W[k, c]`` for every nonzero weight and ``f`` in ``factors`` (0: drop
    the concept from class ``k``'s rule; 2: raise its contribution). The edit with the most
    validation errors corrected net of new ones is applied to the test graphs (none if no edit
    gains on validation). With ``rng``, one random candidate instead (the null of the experiment).
    """
    W, b = np.asarray(weight, dtype=float), np.asarray(bias, dtype=float)
    Av, At = np.asarray(act_val, dtype=float), np.asarray(act_test, dtype=float)
    if W.ndim != 2 or Av.shape[1:] != (W.shape[1],) or At.shape[1:] != (W.shape[1],):
        raise ValueError(
            f"need weight (K, C) and activations (n, C); got {W.shape}, {Av.shape}, {At.shape}"
        )
    if any(f < 0 for f in factors) or not factors:
        raise ValueError(f"factors must be non-negative and non-empty; got {factors}")
    cands = [
        (int(k), int(c), f * W[k, c]) for k, c in zip(*np.nonzero(W), strict=True) for f in factors
    ]
    base_val = _errors(W, b, Av, np.asarray(y_val))
    edit = None
    if rng is not None and cands:
        edit = cands[int(rng.integers(len(cands)))]
    elif cands:
        best = 0
        for k, c, w in cands:
            E = W.copy()
            E[k, c] = w
            err = _errors(E, b, Av, np.asarray(y_val))
            gain = int((base_val & ~err).sum()) - int((~base_val & err).sum())
            if gain > best:
                best, edit = gain, (k, c, float(w))
    before = _errors(W, b, At, np.asarray(y_test))
    if edit is None:
        return Intervention(None, 0, 0, len(At))
    E = W.copy()
    E[edit[0], edit[1]] = edit[2]
    after = _errors(E, b, At, np.asarray(y_test))
    return Intervention(edit, int((before & ~after).sum()), int((~before & after).sum()), len(At))
