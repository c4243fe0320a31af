"""Rule read-outs over concept activations.

* :class:`LinearRule` / :func:`linear_rules_from` / :func:`predict_with_linear_rules`: the paper's
  soft logical rule, the sparse linear layer read out per class as weighted concepts (pruned to the
  concepts that carry weight), and predictions from that read-out alone;
 * :class:`TNormRuleLayer` (an ablation of ours, the package's earlier predictor) gives class ``k`` the value of a soft disjunction of ``R`` soft conjunctions
(product t-norm) over concept literals:

``literal_c = p_c a_c + (1 - p_c)(1 - a_c)``  (``p`` the polarity: 1 = the concept, 0 = its negation)
``rule = prod_c (1 - alpha_c (1 - literal_c))``  (``alpha`` the relevance: 0 drops the concept)
``class = 1 - prod_r (1 - beta_r rule_r)``  (``beta`` the rule's weight)

``alpha``, ``p`` and ``beta`` are sigmoids of free parameters, so at 0/1 inputs and 0/1 parameters
the layer is exactly Boolean logic, and in between each concept's share in a class is the weight
``sum_r beta_r alpha_rc (2 p_rc - 1)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

__all__ = [
    "LinearRule",
    "Rule",
    "TNormRuleLayer",
    "extract_rules",
    "linear_rules_from",
    "predict_with_linear_rules",
    "predict_with_rules",
]

#: a concept enters a class's read-out when |W[k, c]| >= PRUNE * max |W| (ours)
PRUNE = 0.05


@dataclass(frozen=True)
class LinearRule:
    """Class ``label``'s soft logical rule: ``score = bias + sum weight * [concept]`` over ``terms``
    ``(concept, weight)`` (largest |weight| first)."""

    label: int
    terms: tuple[tuple[str, float], ...]
    bias: float

    def __str__(self) -> str:
        body = " ".join(f"{w:+.2f}*[{c}]" for c, w in self.terms) or "(no concept)"
        return f"class {self.label}: {self.bias:+.2f} {body}"


def linear_rules_from(
    weight: np.ndarray, bias: np.ndarray, concepts: Sequence[str], prune: float = PRUNE
) -> list[LinearRule]:
    """Per class, the concepts with ``|W[k, c]| >= prune * max |W|`` and their weights."""
    W = np.asarray(weight, dtype=float)
    b = np.asarray(bias, dtype=float)
    if W.ndim != 2 or W.shape[1] != len(concepts) or b.shape != (W.shape[0],):
        raise ValueError(
            f"need weight (K, {len(concepts)}) and bias (K,); got {W.shape}, {b.shape}"
        )
    if not 0 <= prune < 1:
        raise ValueError(f"prune must be in [0, 1); got {prune}")
    cut = prune * np.abs(W).max()
    rules = []
    for k in range(W.shape[0]):
        keep = [
            c
            for c in np.argsort(-np.abs(W[k]), kind="stable")
            if abs(W[k, c]) >= cut and W[k, c] != 0
        ]
        rules.append(LinearRule(k, tuple((concepts[c], float(W[k, c])) for c in keep), float(b[k])))
    return rules


def predict_with_linear_rules(
    rules: Sequence[LinearRule], activations: np.ndarray, concepts: Sequence[str]
) -> np.ndarray:
    """Classes from the read-out alone: ``argmax_k bias_k + sum weight [concept]`` on
    ``activations (n, C)`` (Boolean presence or concept scores in [0, 1])."""
    A = np.asarray(activations, dtype=float)
    if A.ndim != 2 or A.shape[1] != len(concepts):
        raise ValueError(f"activations must be (n, {len(concepts)}); got {A.shape}")
    col = {c: i for i, c in enumerate(concepts)}
    score = np.zeros((len(A), len(rules)))
    for rule in rules:
        score[:, rule.label] = rule.bias
        for name, w in rule.terms:
            if name not in col:
                raise KeyError(f"rule uses unknown concept {name!r}")
            score[:, rule.label] += w * A[:, col[name]]
    return score.argmax(axis=1)


EPS = 1e-6


class TNormRuleLayer(nn.Module):
    """``(batch, n_concepts)`` activations in [0, 1] -> ``(batch, n_classes)`` class truth values."""

    def __init__(
        self, n_concepts: int, n_classes: int, rules_per_class: int = 3, seed: int | None = None
    ) -> None:
        super().__init__()
        if n_concepts < 1 or n_classes < 1 or rules_per_class < 1:
            raise ValueError(
                f"need n_concepts, n_classes, rules_per_class >= 1; got {n_concepts}, {n_classes}, {rules_per_class}"
            )
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        shape = (n_classes, rules_per_class, n_concepts)
        self.relevance = nn.Parameter(-2.0 + 0.5 * torch.randn(shape, generator=gen))
        self.polarity = nn.Parameter(0.5 * torch.randn(shape, generator=gen))
        self.weight = nn.Parameter(torch.zeros(n_classes, rules_per_class))

    @property
    def alpha(self) -> torch.Tensor:
        return torch.sigmoid(self.relevance)

    @property
    def p(self) -> torch.Tensor:
        return torch.sigmoid(self.polarity)

    @property
    def beta(self) -> torch.Tensor:
        return torch.sigmoid(self.weight)

    def rules(self, a: torch.Tensor) -> torch.Tensor:
        """``(batch, n_classes, rules_per_class)`` truth values of every conjunction."""
        lit = self.p * a[:, None, None, :] + (1 - self.p) * (1 - a[:, None, None, :])
        return torch.exp(torch.log((1 - self.alpha * (1 - lit)).clamp_min(EPS)).sum(-1))

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        if a.ndim != 2 or a.shape[1] != self.alpha.shape[-1]:
            raise ValueError(
                f"activations must be (batch, {self.alpha.shape[-1]}); got {tuple(a.shape)}"
            )
        return 1 - torch.exp(torch.log((1 - self.beta * self.rules(a)).clamp_min(EPS)).sum(-1))

    def logits(self, a: torch.Tensor) -> torch.Tensor:
        """Class logits ``log v - log (1 - v)`` of the truth values ``v``."""
        v = self(a).clamp(EPS, 1 - EPS)
        return torch.log(v) - torch.log1p(-v)

    def contributions(self) -> torch.Tensor:
        """``(n_classes, n_concepts)``: ``sum_r beta_r alpha_rc (2 p_rc - 1)``, signed concept weights."""
        return (self.beta[..., None] * self.alpha * (2 * self.p - 1)).sum(1)

    def sparsity(self) -> torch.Tensor:
        """Mean relevance (an L1 penalty that keeps rules short)."""
        return self.alpha.mean()


@dataclass(frozen=True)
class Rule:
    """``label <= literal AND literal ...`` with weight ``weight``; literals ``(concept, positive)``."""

    label: int
    literals: tuple[tuple[str, bool], ...]
    weight: float

    def __str__(self) -> str:
        body = " AND ".join(name if pos else f"NOT {name}" for name, pos in self.literals) or "TRUE"
        return f"class {self.label} <= {body} ({self.weight:.2f})"


def extract_rules(
    layer: TNormRuleLayer, concepts: Sequence[str], threshold: float = 0.5
) -> list[Rule]:
    """Hard rules: literals with relevance > ``threshold``, rules with weight > ``threshold``
    (duplicates merged, highest weight kept), sorted by class then weight."""
    alpha, p, beta = (t.detach().cpu().numpy() for t in (layer.alpha, layer.p, layer.beta))
    if alpha.shape[-1] != len(concepts):
        raise ValueError(
            f"layer has {alpha.shape[-1]} concepts but {len(concepts)} names were given"
        )
    best: dict[tuple[int, tuple[tuple[str, bool], ...]], float] = {}
    for k, r in zip(*np.nonzero(beta > threshold), strict=True):
        lits = tuple(
            (concepts[c], bool(p[k, r, c] > 0.5)) for c in np.flatnonzero(alpha[k, r] > threshold)
        )
        key = (int(k), lits)
        best[key] = max(best.get(key, 0.0), float(beta[k, r]))
    return sorted(
        (Rule(k, lits, w) for (k, lits), w in best.items()), key=lambda r: (r.label, -r.weight)
    )


def predict_with_rules(
    rules: Sequence[Rule],
    presence: np.ndarray,
    concepts: Sequence[str],
    n_classes: int,
    default: int = 0,
) -> np.ndarray:
    """Classes from hard rules alone on Boolean ``presence (n, C)``: the class with the largest summed
    weight of firing rules (equal sums: the lower class); ``default`` where none fires."""
    presence = np.asarray(presence, dtype=bool)
    col = {c: i for i, c in enumerate(concepts)}
    score = np.zeros((len(presence), n_classes))
    for rule in rules:
        fire = np.ones(len(presence), dtype=bool)
        for name, pos in rule.literals:
            if name not in col:
                raise KeyError(f"rule uses unknown concept {name!r}")
            fire &= presence[:, col[name]] == pos
        score[:, rule.label] += rule.weight * fire
    pred = score.argmax(axis=1)
    pred[score.max(axis=1) == 0] = default
    return pred
