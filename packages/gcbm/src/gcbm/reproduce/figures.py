"""Figures: a test graph with its most contributing concepts, and GCBM's rule weights."""

from __future__ import annotations

import networkx as nx
import numpy as np
from matplotlib.figure import Figure

from gcbm.concepts import ConceptVocabulary
from gcbm.data import ATOMS
from gcbm.explain import graph_contributions
from gcbm.model import GCBM
from paper_common import new_figure

__all__ = ["graph_concepts", "rule_weights"]

COLOURS = ["#E69F00", "#56B4E9", "#009E73", "#CC79A7"]


def graph_concepts(te: list, vocab: ConceptVocabulary, model: GCBM, prepared: list) -> Figure:
    """A class-1 test graph, its four most contributing concepts highlighted, and their effects."""
    idx = next((i for i, g in enumerate(te) if g.y.item() == 1), 0)
    k, contrib = graph_contributions(model, prepared[idx])
    top = np.argsort(-np.abs(contrib), kind="stable")[:4]
    names = {vocab.concepts[c] for c in top}
    occ = [o for o in vocab.occurrences(te[idx]) if o.name in names]
    G = nx.Graph(te[idx].edge_index.T.tolist())
    labels = dict(enumerate(ATOMS[i] for i in te[idx].x.argmax(1).tolist()))
    fig, (ax, bx) = new_figure(1, 2, size=(11, 4.2))
    pos = nx.kamada_kawai_layout(G)
    nx.draw_networkx_edges(G, pos, ax=ax, alpha=0.5)
    seen: dict[str, str] = {}
    for o in occ:
        col = seen.setdefault(o.name, COLOURS[len(seen) % 4])
        nx.draw_networkx_nodes(G, pos, nodelist=list(o.nodes), node_color=col, node_size=520,
                               ax=ax, alpha=0.45)  # fmt: skip
    nx.draw_networkx_nodes(G, pos, node_color="white", edgecolors="black", node_size=220, ax=ax)
    nx.draw_networkx_labels(G, pos, labels, font_size=8, ax=ax)
    for name, col in seen.items():
        ax.scatter([], [], color=col, alpha=0.6, s=80, label=name)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, frameon=False)
    ax.set_title(f"test graph (label {te[idx].y.item()}, predicted {k}); top concepts")
    ax.axis("off")
    bx.barh([vocab.concepts[c] for c in top[::-1]], contrib[top[::-1]], color="#0072B2")
    bx.set_xlabel(f"drop in P(class {k}) when the concept is switched off")
    return fig


def rule_weights(model: GCBM, vocab: ConceptVocabulary, k: int = 10) -> Figure:
    """GCBM's soft logical rule: class-1 minus class-0 weight of the ``k`` largest concepts."""
    W = model.head.weight.detach().numpy()
    margin = W[1] - W[0]
    top = np.argsort(-np.abs(margin), kind="stable")[:k][::-1]
    fig, ax = new_figure(1, 1, size=(7, 4))
    ax.barh([vocab.concepts[c] for c in top], margin[top],
            color=["#009E73" if margin[c] > 0 else "#D55E00" for c in top])  # fmt: skip
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlabel("weight for class 1 minus class 0 (sparse linear rule)")
    ax.set_title("GCBM's rule, molecule_rules seed 0")
    return fig
