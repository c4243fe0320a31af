"""Graph concepts: a vocabulary of subgraph patterns mined from training graphs.

Concept kinds (all read from node labels, so they work on any labelled graph):

* ``ring``: chordless cycles of length 3..``max_ring`` (``nx.chordless_cycles``), named by length
  and atom composition, e.g. ``ring6[C6]``;
* ``star``: a node and its neighbours (the depth-1 Weisfeiler-Lehman subtree, readable), e.g.
  ``N(C,O,O)`` for a nitro nitrogen, ``O(C)`` for a hydroxyl oxygen;
* ``chain``: maximal paths of degree-2 atoms outside rings, ``chain3`` .. ``chain8+``;
* ``wl``: deeper Weisfeiler-Lehman subtree patterns (``nx.weisfeiler_lehman_subgraph_hashes``), depth
  2..``wl_depth``, named by depth, centre label and hash, e.g. ``wl2:N:178c8afd``.

A graph becomes a *graph sentence*: its concept occurrences in the order a breadth-first traversal
first reaches them, so neighbouring tokens are neighbouring substructures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_networkx

__all__ = ["ConceptVocabulary", "Occurrence", "graph_labels", "to_labelled_graph"]

KINDS = ("ring", "star", "chain", "wl")


@dataclass(frozen=True)
class Occurrence:
    """One occurrence of concept ``name`` on ``nodes``."""

    name: str
    nodes: tuple[int, ...]


def graph_labels(data: Data, label_names: Sequence[str] | None = None) -> list[str]:
    """Node label strings: ``label_names[argmax x]`` for one-hot ``x``, else a short hash of the row."""
    if getattr(data, "x", None) is None:
        raise ValueError(
            "graph has no node features x; concepts are read from node labels (one-hot x)"
        )
    x = data.x.detach().cpu().numpy()
    if x.shape[0] == 0:
        raise ValueError("graph has no nodes")
    one_hot = x.ndim == 2 and np.all((x == 0) | (x == 1)) and np.all(x.sum(axis=1) == 1)
    if one_hot:
        idx = x.argmax(axis=1)
        names = label_names if label_names is not None else [str(i) for i in range(x.shape[1])]
        return [names[i] for i in idx]
    return [f"v{abs(hash(tuple(np.round(row, 4)))) % 10_000:04d}" for row in x]


def to_labelled_graph(data: Data, label_names: Sequence[str] | None = None) -> nx.Graph:
    """An undirected networkx graph with a ``label`` attribute per node."""
    labels = graph_labels(data, label_names)
    G = to_networkx(data, to_undirected=True, remove_self_loops=True)
    nx.set_node_attributes(G, dict(enumerate(labels)), "label")
    return G


def _composition(labels: Iterable[str]) -> str:
    return "".join(f"{k}{v}" for k, v in sorted(Counter(labels).items()))


def _bfs_rank(G: nx.Graph) -> dict[int, int]:
    rank: dict[int, int] = {}
    for comp_start in sorted(G.nodes, key=lambda n: (-G.degree(n), n)):
        if comp_start in rank:
            continue
        for node in nx.bfs_tree(G, comp_start):
            rank[node] = len(rank)
    return rank


def extract(
    G: nx.Graph, kinds: Sequence[str] = KINDS, max_ring: int = 8, wl_depth: int = 2
) -> list[Occurrence]:
    """Every concept occurrence in a labelled graph, in breadth-first order (see the module)."""
    lab = nx.get_node_attributes(G, "label")
    occ: list[Occurrence] = []
    ring_nodes: set[int] = set()
    if "ring" in kinds:
        for cyc in nx.chordless_cycles(G, length_bound=max_ring):
            if len(cyc) >= 3:
                ring_nodes.update(cyc)
                occ.append(
                    Occurrence(
                        f"ring{len(cyc)}[{_composition(lab[n] for n in cyc)}]", tuple(sorted(cyc))
                    )
                )
    if "star" in kinds:
        for n in G.nodes:
            neigh = sorted(lab[m] for m in G.neighbors(n))
            occ.append(Occurrence(f"{lab[n]}({','.join(neigh)})", (n, *sorted(G.neighbors(n)))))
    if "chain" in kinds:
        inner = [n for n in G.nodes if G.degree(n) == 2 and n not in ring_nodes]
        for comp in nx.connected_components(G.subgraph(inner)):
            if len(comp) >= 3:
                occ.append(
                    Occurrence(
                        f"chain{min(len(comp), 8)}{'+' if len(comp) >= 8 else ''}",
                        tuple(sorted(comp)),
                    )
                )
    if "wl" in kinds and wl_depth >= 2:
        hashes = nx.weisfeiler_lehman_subgraph_hashes(
            G, node_attr="label", iterations=wl_depth, digest_size=4
        )
        for n, hs in hashes.items():
            for depth in range(2, wl_depth + 1):
                ball = nx.single_source_shortest_path_length(G, n, cutoff=depth)
                occ.append(Occurrence(f"wl{depth}:{lab[n]}:{hs[depth - 1]}", tuple(sorted(ball))))
    rank = _bfs_rank(G)
    occ.sort(key=lambda o: (min(rank[n] for n in o.nodes), o.name))
    return occ


class ConceptVocabulary:
    """Concepts mined from training graphs; maps graphs to presence vectors and concept sentences.

    Args:
        kinds: concept kinds to mine (subset of ``ring``, ``star``, ``chain``, ``wl``).
        max_ring: longest ring; wl_depth: deepest WL pattern (1 = stars only).
        min_support: keep concepts present in at least this fraction of training graphs and absent
            from at least this fraction (a concept in every graph explains nothing).
        max_concepts: keep at most this many, the most informative (support closest to 1/2) first.
        label_names: names of the one-hot node feature columns (e.g. atom symbols).
    """

    def __init__(
        self,
        kinds: Sequence[str] = KINDS,
        max_ring: int = 8,
        wl_depth: int = 2,
        min_support: float = 0.02,
        max_concepts: int = 64,
        label_names: Sequence[str] | None = None,
    ) -> None:
        unknown = set(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown concept kinds {sorted(unknown)}; choose from {KINDS}")
        if not 0 <= min_support < 0.5 or max_concepts < 1:
            raise ValueError(
                f"need 0 <= min_support < 0.5 and max_concepts >= 1; got {min_support}, {max_concepts}"
            )
        self.kinds, self.max_ring, self.wl_depth = tuple(kinds), max_ring, wl_depth
        self.min_support, self.max_concepts = min_support, max_concepts
        self.label_names = None if label_names is None else list(label_names)
        self.concepts: list[str] = []
        self.support: np.ndarray = np.zeros(0)

    def occurrences(self, data: Data) -> list[Occurrence]:
        """All occurrences in ``data`` (also of concepts outside the vocabulary), breadth-first."""
        return extract(
            to_labelled_graph(data, self.label_names), self.kinds, self.max_ring, self.wl_depth
        )

    def fit(self, graphs: Sequence[Data]) -> ConceptVocabulary:
        if len(graphs) == 0:
            raise ValueError("need at least one training graph to mine concepts from")
        counts: Counter[str] = Counter()
        for g in graphs:
            counts.update({o.name for o in self.occurrences(g)})
        n = len(graphs)
        keep = [
            (c, k / n)
            for c, k in counts.items()
            if self.min_support <= k / n <= 1 - self.min_support
        ]
        keep.sort(key=lambda cs: (abs(cs[1] - 0.5), cs[0]))
        keep = keep[: self.max_concepts]
        if not keep:
            raise ValueError("no concept passes min_support; lower min_support or add graphs")
        self.concepts = [c for c, _ in keep]
        self.support = np.array([s for _, s in keep])
        self._index = {c: i for i, c in enumerate(self.concepts)}
        return self

    def __len__(self) -> int:
        return len(self.concepts)

    def index(self, name: str) -> int:
        """Column of concept ``name``."""
        self._check()
        if name not in self._index:
            raise KeyError(
                f"unknown concept {name!r}; the vocabulary has {len(self)} concepts, e.g. {self.concepts[:5]}"
            )
        return self._index[name]

    def _check(self) -> None:
        if not self.concepts:
            raise RuntimeError("call fit(graphs) first")

    def sentence(self, data: Data) -> list[int]:
        """Concept ids of ``data`` in breadth-first order (a graph sentence; unknown concepts dropped)."""
        self._check()
        return [self._index[o.name] for o in self.occurrences(data) if o.name in self._index]

    def transform(self, graphs: Sequence[Data]) -> np.ndarray:
        """``(n_graphs, n_concepts)`` occurrence counts."""
        self._check()
        out = np.zeros((len(graphs), len(self)))
        for i, g in enumerate(graphs):
            ids = self.sentence(g)
            if ids:
                np.add.at(out[i], ids, 1.0)
        return out

    def annotate(self, graphs: Sequence[Data]) -> list[Data]:
        """Copies of ``graphs`` with ``concepts`` (presence, ``(1, C)``) and ``sentence`` attached."""
        out = []
        for g in graphs:
            h = g.clone()
            ids = self.sentence(g)
            pres = torch.zeros(1, len(self))
            pres[0, ids] = 1.0
            h.concepts = pres
            h.sentence = ids
            out.append(h)
        return out
