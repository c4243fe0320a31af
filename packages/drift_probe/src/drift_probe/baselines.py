"""Confidence-based detectors the paper compares against, behind one interface.

Every detector has ``fit(model, tok, items, labels=None) -> self`` and ``score(model, tok, items)``
returning one number per item, higher meaning "this answer is suspect" (the direction a drift
detector would use). Unsupervised detectors ignore ``fit``.

- :class:`TokenEntropy`: entropy of the first answer token.
- :class:`SemanticEntropy` (Kuhn, Gal & Farquhar 2023; Farquhar et al. 2024): ``n`` samples at
  temperature 1, clustered by bidirectional entailment; the discrete estimator (cluster
  frequencies) or the likelihood-weighted one (cluster probability mass from sequence
  log-likelihoods). Entailment is pluggable: :class:`AliasEquivalence` ("same entity or alias") for
  synthetic worlds, :class:`NLIEquivalence` (an NLI model from a local path) for real text.
- :class:`CCS` (Burns et al. 2022): contrast pairs ("... True" / "... False") of the model's own
  answer as a claim, each side mean-centred, a linear probe trained on consistency + confidence,
  best of 10 restarts; oriented on the fit labels (accuracy ``max(a, 1 - a)``); score ``1 - p(true)``.
- :class:`SAPLMA` (Azaria & Mitchell 2023): an MLP (256-128-64) on a middle layer's last-token
  state, trained on true/false statements with the test relation held out; score ``1 - p(true)``.
- :class:`CorrectnessProbe`: a linear probe of correctness on the residual; score ``1 - p(correct)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

from drift_probe.data import DriftItem
from drift_probe.features import _check_items
from drift_probe.probe import LinearProbe, check_binary
from paper_common.facts import World, normalize_answer
from paper_common.lm import (
    greedy_answer,
    next_token_logprobs,
    num_layers,
    residual_stream,
    sample,
)

__all__ = [
    "CCS",
    "SAPLMA",
    "AliasEquivalence",
    "CorrectnessProbe",
    "Detector",
    "NLIEquivalence",
    "SemanticEntropy",
    "TokenEntropy",
    "cluster_answers",
    "semantic_entropy",
]


class Detector(Protocol):
    def fit(
        self, model: torch.nn.Module, tok: object, items: Sequence[DriftItem], labels: object = None
    ) -> Detector: ...

    def score(
        self, model: torch.nn.Module, tok: object, items: Sequence[DriftItem]
    ) -> np.ndarray: ...


class TokenEntropy:
    """Entropy (nats) of the model's next-token distribution after the prompt."""

    def fit(
        self, model: torch.nn.Module, tok: object, items: Sequence[DriftItem], labels: object = None
    ) -> TokenEntropy:
        return self

    def score(self, model: torch.nn.Module, tok: object, items: Sequence[DriftItem]) -> np.ndarray:
        logp = next_token_logprobs(model, tok, [i.prompt for i in _check_items(items)])
        return (-(logp.exp() * logp).sum(-1)).numpy()


# ----------------------------------------------------------------------------- semantic entropy
Equivalence = Callable[[str, str, str], bool]
"""``equivalent(question, answer_a, answer_b)``: bidirectional entailment of the two answers."""


class AliasEquivalence:
    """Two answers are equivalent when they name the same entity of ``world`` (name or alias),
    or, failing that, are equal after normalisation."""

    def __init__(self, world: World | None = None):
        self.canonical: dict[str, str] = {}
        if world is not None:
            for names in world.entities.values():
                for name in names:
                    for form in (name, *world.aliases(name)):
                        self.canonical.setdefault(normalize_answer(form), name)

    def _key(self, answer: str) -> str:
        norm = normalize_answer(answer)
        return self.canonical.get(norm, norm)

    def __call__(self, question: str, a: str, b: str) -> bool:
        return self._key(a) == self._key(b)


class NLIEquivalence:
    """Bidirectional entailment by an NLI model loaded from a local path (e.g. DeBERTa-large-MNLI):
    ``a`` and ``b`` are equivalent iff each, after the question, entails the other."""

    def __init__(self, path: str | Path, device: str = "cpu"):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        path = Path(path)
        if not (path / "config.json").exists():
            raise ValueError(f"{path} holds no saved NLI model (config.json missing)")
        self.tok = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForSequenceClassification.from_pretrained(path).to(device).eval()
        labels = {v.lower(): int(k) for k, v in self.model.config.id2label.items()}
        if "entailment" not in labels:
            raise ValueError(f"{path}: the model's labels {sorted(labels)} have no 'entailment'")
        self.entail = labels["entailment"]

    @torch.no_grad()
    def _entails(self, premise: str, hypothesis: str) -> bool:
        enc = self.tok(premise, hypothesis, return_tensors="pt").to(self.model.device)
        return int(self.model(**enc).logits.argmax(-1)) == self.entail

    def __call__(self, question: str, a: str, b: str) -> bool:
        return self._entails(f"{question} {a}", f"{question} {b}") and self._entails(
            f"{question} {b}", f"{question} {a}"
        )


def cluster_answers(question: str, answers: Sequence[str], equivalent: Equivalence) -> np.ndarray:
    """Greedy clustering as in Kuhn et al.: each answer joins the first cluster whose representative
    it is equivalent to, else starts a new one. Returns the cluster id of each answer."""
    reps: list[str] = []
    ids = np.empty(len(answers), dtype=int)
    for i, a in enumerate(answers):
        for c, r in enumerate(reps):
            if equivalent(question, a, r):
                ids[i] = c
                break
        else:
            ids[i] = len(reps)
            reps.append(a)
    return ids


def semantic_entropy(
    cluster_ids: np.ndarray, logliks: np.ndarray | None = None, estimator: str = "discrete"
) -> float:
    """Semantic entropy of one question's samples.

    ``discrete``: entropy of the cluster frequencies. ``weighted``: each cluster's probability is the
    log-sum-exp of its members' sequence log-likelihoods, normalised over the clusters.
    """
    ids = np.asarray(cluster_ids)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError("cluster_ids must be a non-empty 1-D array")
    k = ids.max() + 1
    if estimator == "discrete":
        p = np.bincount(ids, minlength=k) / ids.size
    elif estimator == "weighted":
        if logliks is None or len(logliks) != ids.size:
            raise ValueError("the weighted estimator needs one log-likelihood per sample")
        ll = np.asarray(logliks, float)
        mass = np.array([np.logaddexp.reduce(ll[ids == c]) for c in range(k)])
        p = np.exp(mass - np.logaddexp.reduce(mass))
    else:
        raise ValueError(f"estimator must be 'discrete' or 'weighted'; got {estimator!r}")
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


class SemanticEntropy:
    """Semantic entropy of ``n_samples`` answers at ``temperature`` (higher = more uncertain)."""

    def __init__(
        self,
        equivalent: Equivalence | None = None,
        n_samples: int = 10,
        temperature: float = 1.0,
        estimator: str = "discrete",
        max_new_tokens: int = 8,
        seed: int = 0,
        batch_size: int = 512,
    ):
        if estimator not in ("discrete", "weighted"):
            raise ValueError(f"estimator must be 'discrete' or 'weighted'; got {estimator!r}")
        if n_samples < 2:
            raise ValueError(f"n_samples must be >= 2; got {n_samples}")
        self.equivalent = equivalent or AliasEquivalence()
        self.n_samples, self.temperature, self.estimator = n_samples, temperature, estimator
        self.max_new_tokens, self.seed, self.batch_size = max_new_tokens, seed, batch_size

    def fit(
        self, model: torch.nn.Module, tok: object, items: Sequence[DriftItem], labels: object = None
    ) -> SemanticEntropy:
        return self

    def score(self, model: torch.nn.Module, tok: object, items: Sequence[DriftItem]) -> np.ndarray:
        return self.score_both(model, tok, items)[self.estimator]

    def score_both(
        self, model: torch.nn.Module, tok: object, items: Sequence[DriftItem]
    ) -> dict[str, np.ndarray]:
        """Both estimators from one set of samples: ``{"discrete": ..., "weighted": ...}``."""
        items = _check_items(items)
        out = sample(
            model,
            tok,
            [i.prompt for i in items],
            n=self.n_samples,
            temperature=self.temperature,
            max_new_tokens=self.max_new_tokens,
            seed=self.seed,
            batch_size=self.batch_size,
        )
        scores: dict[str, list[float]] = {"discrete": [], "weighted": []}
        for item, texts, lps in zip(items, out.texts, out.logprobs, strict=True):
            ids = cluster_answers(item.prompt, texts, self.equivalent)
            ll = np.array([float(lp.sum()) for lp in lps])
            scores["discrete"].append(semantic_entropy(ids))
            scores["weighted"].append(semantic_entropy(ids, ll, "weighted"))
        return {k: np.array(v) for k, v in scores.items()}


# ----------------------------------------------------------------------------- CCS
def _claims(
    model: torch.nn.Module, tok: object, items: Sequence[DriftItem], answers: Sequence[str] | None
) -> list[str]:
    if answers is None:
        answers = greedy_answer(model, tok, [i.prompt for i in items])
    return [i.claim_with(a) for i, a in zip(items, answers, strict=True)]


def _middle(model: torch.nn.Module) -> int:
    return (num_layers(model) + 1) // 2


class CCS:
    """Contrast-Consistent Search on ``"Claim: <statement> True or false? A: True|False"`` pairs.

    The statement is the item's claim filled with the model's greedy answer. Each side's hidden
    states (``layer``, default the middle) are mean-centred and scaled by statistics fitted at
    :meth:`fit` time and reused for scoring (one item alone scores as in a batch); a linear probe with a
    sigmoid is trained on ``(p+ - (1 - p-))^2 + min(p+, p-)^2`` from ``restarts`` random starts,
    the lowest loss kept. ``p(true) = (p+ + 1 - p-) / 2``, oriented on ``fit``'s labels (whether the
    answer is correct) so that accuracy is ``max(a, 1 - a)``; the score is ``1 - p(true)``.
    """

    def __init__(
        self,
        layer: int | None = None,
        restarts: int = 10,
        epochs: int = 1000,
        lr: float = 1e-2,
        seed: int = 0,
    ):
        self.layer, self.restarts, self.epochs, self.lr, self.seed = (
            layer,
            restarts,
            epochs,
            lr,
            seed,
        )

    def pairs(
        self,
        model: torch.nn.Module,
        tok: object,
        items: Sequence[DriftItem],
        answers: Sequence[str] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Hidden states of the "... True" and "... False" sides of each item's claim (filled with
        ``answers``, default the model's greedy answers): compute once, then :meth:`fit_pairs` and
        :meth:`p_true_pairs` on them."""
        claims = _claims(model, tok, _check_items(items), answers)
        layer = _middle(model) if self.layer is None else self.layer
        pos = [f"Claim: {c} True or false? A: True" for c in claims]
        neg = [f"Claim: {c} True or false? A: False" for c in claims]
        h = residual_stream(model, tok, pos + neg, layers=[layer])[:, 0].numpy()
        return h[: len(claims)], h[len(claims) :]

    @staticmethod
    def _fit_normaliser(x: np.ndarray) -> tuple[np.ndarray, float]:
        """Mean and scale of one side at fit time (the scale makes the mean row norm sqrt(d))."""
        mean = x.mean(0)
        scale = float(np.linalg.norm(x - mean, axis=1).mean() / np.sqrt(x.shape[1]) + 1e-8)
        return mean, scale

    def _normalise(self, x: np.ndarray, side: int) -> np.ndarray:
        """``x`` centred and scaled by the statistics fitted on its side (0: True, 1: False)."""
        mean, scale = self.norm_[side]
        if x.ndim != 2 or x.shape[1] != mean.shape[0]:
            raise ValueError(f"CCS was fitted on {mean.shape[0]} features; got shape {x.shape}")
        return (x - mean) / scale

    def fit_pairs(self, x_pos: np.ndarray, x_neg: np.ndarray, labels: object = None) -> CCS:
        """Train on contrast-pair states directly (``(n, d)`` each). Each side's mean and scale
        are fitted here and reused when scoring (so an item's score does not depend on the batch)."""
        if x_pos.shape != x_neg.shape or x_pos.ndim != 2:
            raise ValueError(
                f"contrast pairs must be two (n, d) arrays of one shape; got {x_pos.shape}, {x_neg.shape}"
            )
        self.norm_ = (self._fit_normaliser(x_pos), self._fit_normaliser(x_neg))
        xp = torch.tensor(self._normalise(x_pos, 0), dtype=torch.float32)
        xn = torch.tensor(self._normalise(x_neg, 1), dtype=torch.float32)
        gen = torch.Generator().manual_seed(self.seed)
        best, best_loss = None, np.inf
        for _ in range(self.restarts):
            w = (torch.randn(xp.shape[1], generator=gen) / np.sqrt(xp.shape[1])).requires_grad_()
            b = torch.zeros(1, requires_grad=True)
            opt = torch.optim.AdamW([w, b], lr=self.lr, weight_decay=0.01)
            for _ in range(self.epochs):
                p_pos, p_neg = torch.sigmoid(xp @ w + b), torch.sigmoid(xn @ w + b)
                loss = ((p_pos - (1 - p_neg)) ** 2).mean() + (
                    torch.minimum(p_pos, p_neg) ** 2
                ).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            final = float(loss.detach())
            if final < best_loss:
                best_loss, best = final, (w.detach().clone(), b.detach().clone())
        self.w_, self.b_, self.loss_ = best[0], best[1], best_loss
        self.sign_ = 1
        if labels is not None:
            y = check_binary(labels)
            acc = float(((self._p_true(x_pos, x_neg) > 0.5) == y).mean())
            self.sign_ = 1 if acc >= 0.5 else -1
            self.accuracy_ = max(acc, 1 - acc)
        return self

    def _p_true(self, x_pos: np.ndarray, x_neg: np.ndarray) -> np.ndarray:
        xp = torch.tensor(self._normalise(np.asarray(x_pos, float), 0), dtype=torch.float32)
        xn = torch.tensor(self._normalise(np.asarray(x_neg, float), 1), dtype=torch.float32)
        with torch.no_grad():
            p = 0.5 * (
                torch.sigmoid(xp @ self.w_ + self.b_) + 1 - torch.sigmoid(xn @ self.w_ + self.b_)
            )
        return p.numpy()

    def p_true_pairs(self, x_pos: np.ndarray, x_neg: np.ndarray) -> np.ndarray:
        if not hasattr(self, "w_"):
            raise RuntimeError("call fit() first")
        p = self._p_true(x_pos, x_neg)
        return p if self.sign_ == 1 else 1 - p

    def fit(
        self,
        model: torch.nn.Module,
        tok: object,
        items: Sequence[DriftItem],
        labels: object = None,
        answers: Sequence[str] | None = None,
    ) -> CCS:
        return self.fit_pairs(*self.pairs(model, tok, items, answers), labels)

    def score(
        self,
        model: torch.nn.Module,
        tok: object,
        items: Sequence[DriftItem],
        answers: Sequence[str] | None = None,
    ) -> np.ndarray:
        return 1 - self.p_true_pairs(*self.pairs(model, tok, items, answers))


# ----------------------------------------------------------------------------- SAPLMA
class SAPLMA:
    """An MLP (256-128-64, ReLU) on the last-token state of a statement at ``layer`` (default the
    middle), trained on true/false statements. Relations are held out: the classifier that scores
    an item never saw a statement of its relation (one fit per relation in the scored items)."""

    def __init__(
        self,
        layer: int | None = None,
        hidden: Sequence[int] = (256, 128, 64),
        seed: int = 0,
        max_iter: int = 300,
    ):
        self.layer, self.hidden, self.seed, self.max_iter = layer, tuple(hidden), seed, max_iter

    def fit_statements(
        self,
        model: torch.nn.Module,
        tok: object,
        statements: Sequence[str],
        labels: Sequence[bool],
        relations: Sequence[str],
    ) -> SAPLMA:
        """Train on ``statements`` with truth ``labels``; ``relations`` names each one's relation."""
        y = check_binary(labels)
        if not len(statements) == len(y) == len(relations):
            raise ValueError("statements, labels and relations must have the same length")
        self.layer_ = _middle(model) if self.layer is None else self.layer
        self.x_ = residual_stream(model, tok, list(statements), layers=[self.layer_])[:, 0].numpy()
        self.y_, self.relations_ = y, np.asarray(relations)
        self.models_: dict[str, tuple[StandardScaler, MLPClassifier]] = {}
        return self

    def _model_without(self, relation: str) -> tuple[StandardScaler, MLPClassifier]:
        if relation not in self.models_:
            keep = self.relations_ != relation
            if len(np.unique(self.y_[keep])) < 2:
                raise ValueError(f"no true and false statements outside relation {relation!r}")
            scaler = StandardScaler().fit(self.x_[keep])
            mlp = MLPClassifier(
                self.hidden, max_iter=self.max_iter, early_stopping=True, random_state=self.seed
            )
            self.models_[relation] = (
                scaler,
                mlp.fit(scaler.transform(self.x_[keep]), self.y_[keep]),
            )
        return self.models_[relation]

    def fit(
        self, model: torch.nn.Module, tok: object, items: Sequence[DriftItem], labels: object = None
    ) -> SAPLMA:
        raise TypeError(
            "SAPLMA trains on true/false statements: call fit_statements(model, tok, statements, labels, relations)"
        )

    def score(
        self,
        model: torch.nn.Module,
        tok: object,
        items: Sequence[DriftItem],
        answers: Sequence[str] | None = None,
    ) -> np.ndarray:
        if not hasattr(self, "x_"):
            raise RuntimeError("call fit_statements() first")
        items = _check_items(items)
        claims = _claims(model, tok, items, answers)
        x = residual_stream(model, tok, claims, layers=[self.layer_])[:, 0].numpy()
        rels = np.array([i.relation for i in items])
        out = np.empty(len(items))
        for rel in np.unique(rels):
            scaler, mlp = self._model_without(str(rel))
            rows = rels == rel
            out[rows] = 1 - mlp.predict_proba(scaler.transform(x[rows]))[:, 1]
        return out


class CorrectnessProbe:
    """A :class:`~drift_probe.probe.LinearProbe` of answer correctness at ``layer`` (default the
    middle); the score is ``1 - P(correct)``."""

    def __init__(self, layer: int | None = None, seed: int = 0):
        self.layer, self.seed = layer, seed

    def fit(
        self, model: torch.nn.Module, tok: object, items: Sequence[DriftItem], labels: object = None
    ) -> CorrectnessProbe:
        if labels is None:
            raise ValueError("CorrectnessProbe.fit needs labels (whether each answer is correct)")
        items = _check_items(items)
        self.layer_ = _middle(model) if self.layer is None else self.layer
        x = residual_stream(model, tok, [i.prompt for i in items], layers=[self.layer_])[
            :, 0
        ].numpy()
        self.probe_ = LinearProbe(seed=self.seed).fit(x, labels, [i.subject for i in items])
        return self

    def score(self, model: torch.nn.Module, tok: object, items: Sequence[DriftItem]) -> np.ndarray:
        if not hasattr(self, "probe_"):
            raise RuntimeError("call fit() first")
        items = _check_items(items)
        x = residual_stream(model, tok, [i.prompt for i in items], layers=[self.layer_])[
            :, 0
        ].numpy()
        return 1 - self.probe_.predict_proba(x)
