"""Preparing graphs for GCBM, explanations, and the post-hoc baseline.

* :func:`prepare`: concept presence, graph sentences and (with a language model) context-aware
  concept embeddings attached to each graph;
* :func:`linear_rules`: the model's soft logical rule (its sparse linear layer) read out per class;
* :func:`graph_contributions`: how much each concept moves one graph's predicted class;
* :func:`fidelity`: agreement of the read-out rules alone (on the model's own concept scores,
  thresholded at 1/2) with the model;
* :func:`posthoc_rules`: the post-hoc route, a decision-tree surrogate fit on concept presence to a
  black box's predictions, read out as rules (the shape of GLGExplainer-style global explanations).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from sklearn.tree import DecisionTreeClassifier
from torch_geometric.data import Batch, Data

from gcbm.concepts import ConceptVocabulary
from gcbm.lm import ConceptLM, PretrainedConceptLM
from gcbm.logic import (
    PRUNE,
    LinearRule,
    Rule,
    extract_rules,
    linear_rules_from,
    predict_with_linear_rules,
    predict_with_rules,
)
from gcbm.model import GCBM, predict

__all__ = [
    "fidelity",
    "graph_contributions",
    "linear_rules",
    "posthoc_rules",
    "prepare",
    "rule_predictions",
    "rules_of",
]


def prepare(
    graphs: Sequence[Data],
    vocab: ConceptVocabulary,
    lm: ConceptLM | PretrainedConceptLM | None = None,
) -> list[Data]:
    """Annotated copies: ``concepts (1, C)``, ``sentence`` and, with ``lm``, ``concept_emb (1, C, dim)``."""
    out = vocab.annotate(graphs)
    if lm is not None:
        emb = lm.embed([g.sentence for g in out])
        for g, e in zip(out, emb, strict=True):
            g.concept_emb = e[None].clone()
    return out


def linear_rules(model: GCBM, vocab: ConceptVocabulary, prune: float = PRUNE) -> list[LinearRule]:
    """The GCBM's soft logical rule per class (``str(rule)`` reads it): the sparse linear layer's
    weights, concepts with ``|W| < prune * max |W|`` left out."""
    if not model.bottleneck or model.head_kind != "linear":
        raise ValueError(
            "only a GCBM with head='linear' has a linear rule; see rules_of for 'tnorm'"
        )
    W = model.head.weight.detach().cpu().numpy()
    b = model.head.bias.detach().cpu().numpy()
    return linear_rules_from(W, b, vocab.concepts, prune)


def rules_of(model: GCBM, vocab: ConceptVocabulary, threshold: float = 0.5) -> list[Rule]:
    """The t-norm ablation's rules in readable form (``str(rule)``)."""
    if not model.bottleneck or model.head_kind != "tnorm":
        raise ValueError("only a GCBM with head='tnorm' has t-norm rules; see linear_rules")
    return extract_rules(model.head, vocab.concepts, threshold)


def rule_predictions(
    model: GCBM, vocab: ConceptVocabulary, activations: np.ndarray, default: int = 0
) -> np.ndarray:
    """Classes from the model's read-out rules alone on Boolean concept ``activations (n, C)``
    (``default``: the t-norm read-out's class where no rule fires)."""
    if model.head_kind == "linear":
        return predict_with_linear_rules(linear_rules(model, vocab), activations, vocab.concepts)
    return predict_with_rules(
        rules_of(model, vocab), activations, vocab.concepts, model.config["n_classes"], default
    )


def fidelity(model: GCBM, vocab: ConceptVocabulary, graphs: Sequence[Data]) -> float:
    """Share of ``graphs`` where the read-out rules on the model's own concept scores, thresholded
    at 1/2, give the model's predicted class."""
    pred, act = predict(model, graphs)
    if act is None:
        raise ValueError("a black-box GNN has no concepts")
    default = int(np.bincount(pred).argmax())
    return float(np.mean(rule_predictions(model, vocab, act > 0.5, default) == pred))


@torch.no_grad()
def graph_contributions(model: GCBM, graph: Data) -> tuple[int, np.ndarray]:
    """``(predicted class, (C,) contributions)``: the drop in the predicted class's probability when
    concept ``c``'s activation is replaced by 0 (negative: the concept argues against the class)."""
    if not model.bottleneck:
        raise ValueError("a black-box GNN has no concepts")
    batch = Batch.from_data_list([graph])
    out = model(batch)
    k = int(out.logits.argmax(1))
    a = out.concepts[0]
    C = len(a)
    ablated = a.repeat(C + 1, 1)
    ablated[torch.arange(C), torch.arange(C)] = 0.0
    logits = model.class_logits(ablated)
    prob = torch.softmax(logits, dim=1)[:, k]
    return k, (prob[C] - prob[:C]).numpy()


def posthoc_rules(
    presence: np.ndarray,
    targets: np.ndarray,
    concepts: Sequence[str],
    max_depth: int = 3,
    seed: int = 0,
) -> tuple[list[Rule], DecisionTreeClassifier]:
    """Fit a depth-limited decision tree on Boolean concept ``presence (n, C)`` to ``targets`` (a
    black box's predictions) and read each leaf as a rule ``class <= path`` weighted by its purity."""
    X = np.asarray(presence, dtype=bool).astype(float)
    tree = DecisionTreeClassifier(max_depth=max_depth, random_state=seed).fit(X, targets)
    t = tree.tree_
    rules: list[Rule] = []

    def walk(node: int, path: tuple[tuple[str, bool], ...]) -> None:
        if t.children_left[node] == -1:
            counts = t.value[node][0]
            rules.append(
                Rule(int(tree.classes_[counts.argmax()]), path, float(counts.max() / counts.sum()))
            )
            return
        name = concepts[t.feature[node]]
        walk(t.children_left[node], (*path, (name, False)))  # x <= 0.5: absent
        walk(t.children_right[node], (*path, (name, True)))

    walk(0, ())
    return rules, tree
