"""Preparing graphs for GCBM, explanations, and the post-hoc baseline.

* :func:`prepare`: concept presence, graph sentences and (with a language model) context-aware
  concept embeddings attached to each graph;
* :func:`graph_contributions`: how much each concept moves one graph's predicted class;
* :func:`fidelity`: agreement of the extracted rules alone with the model;
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
from gcbm.lm import ConceptLM
from gcbm.logic import Rule, extract_rules, predict_with_rules
from gcbm.model import GCBM, predict

__all__ = ["fidelity", "graph_contributions", "posthoc_rules", "prepare", "rules_of"]


def prepare(
    graphs: Sequence[Data], vocab: ConceptVocabulary, lm: ConceptLM | None = None
) -> list[Data]:
    """Annotated copies: ``concepts (1, C)``, ``sentence`` and, with ``lm``, ``concept_emb (1, C, dim)``."""
    out = vocab.annotate(graphs)
    if lm is not None:
        emb = lm.embed([g.sentence for g in out])
        for g, e in zip(out, emb, strict=True):
            g.concept_emb = e[None].clone()
    return out


def rules_of(model: GCBM, vocab: ConceptVocabulary, threshold: float = 0.5) -> list[Rule]:
    """The model's rules in readable form (``str(rule)``)."""
    if not model.bottleneck or model.head_kind != "logic":
        raise ValueError("only a GCBM with head='logic' has rules")
    return extract_rules(model.head, vocab.concepts, threshold)


def fidelity(
    model: GCBM, vocab: ConceptVocabulary, graphs: Sequence[Data], threshold: float = 0.5
) -> float:
    """Fraction of ``graphs`` where the hard rules on the model's own (thresholded) concept
    activations give the model's predicted class."""
    pred, act = predict(model, graphs)
    rules = rules_of(model, vocab, threshold)
    default = int(np.bincount(pred).argmax())
    by_rules = predict_with_rules(
        rules, act > 0.5, vocab.concepts, model.config["n_classes"], default
    )
    return float(np.mean(by_rules == pred))


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
    logits = model.head.logits(ablated) if model.head_kind == "logic" else model.head(ablated)
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
