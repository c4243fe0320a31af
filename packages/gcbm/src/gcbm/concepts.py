"""Graph concepts: a vocabulary of subgraph patterns mined from training graphs.

Concept kinds (all read from node labels, so they work on any labelled graph):

* ``ring``: chordless cycles of length 3..``max_ring`` (``nx.chordless_cycles``), named by length
  alone (``ring3``: the shape, whatever its labels) and by length and label composition
  (``ring6[C6]``);
* ``star``: a node and its neighbours (the depth-1 Weisfeiler-Lehman subtree, readable), e.g.
  ``N(C,O,O)`` for a nitro nitrogen, ``O(C)`` for a hydroxyl oxygen;
* ``chain``: maximal paths of degree-2 atoms outside rings, ``chain3`` .. ``chain8+``;
* ``wl``: deeper Weisfeiler-Lehman subtree patterns (``nx.weisfeiler_lehman_subgraph_hashes``), depth
  2..``wl_depth``, named by depth, centre label and hash, e.g. ``wl2:N:178c8afd``.

A graph becomes a *graph sentence*: its concept occurrences in the order a breadth-first traversal
first reaches them, so neighbouring tokens are neighbouring substructures.

The vocabulary keeps a fixed number of *discriminative* concepts, selected with the training labels
(the paper's "selected discriminative global graph concepts"): candidates within the support bounds
are picked greedily by minimum-redundancy maximum-relevance (mRMR, Peng et al. 2005: the mutual
information of a concept's presence with the class minus its mean mutual information with the
concepts already picked), so a near-synonym of a picked concept (a WL pattern around a ring atom
that is present exactly when the ring is) does not take the place of a second discriminative
concept; a candidate whose presence equals a picked one on every training graph is never picked.
The score is ours: the paper's is not public to us.
:class:`ConceptTransform` applies a fitted vocabulary as a ``torch_geometric`` transform.
"""

from __future__ import annotations

import hashlib
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform
from torch_geometric.utils import to_networkx

__all__ = [
    "ConceptTransform",
    "ConceptVocabulary",
    "Occurrence",
    "clear_cache",
    "graph_labels",
    "mutual_information",
    "to_labelled_graph",
]

KINDS = ("ring", "star", "chain", "wl")
SELECTIONS = ("mi", "support")


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
                occ.append(Occurrence(f"ring{len(cyc)}", tuple(sorted(cyc))))
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
        max_concepts: keep at most this many, the most discriminative first.
        label_names: names of the one-hot node feature columns (e.g. atom symbols).
        selection: ``"mi"`` (default): rank by the mutual information of presence with the class
            labels of the training graphs (synonyms dropped); ``"support"``: the label-free ranking
            (support closest to 1/2) of earlier versions, kept as an ablation.
    """

    def __init__(
        self,
        kinds: Sequence[str] = KINDS,
        max_ring: int = 8,
        wl_depth: int = 2,
        min_support: float = 0.02,
        max_concepts: int = 64,
        label_names: Sequence[str] | None = None,
        selection: str = "mi",
    ) -> None:
        if selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {SELECTIONS}; got {selection!r}")
        self.selection = selection
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
        """All occurrences in ``data`` (also of concepts outside the vocabulary), breadth-first.
        Memoised on the graph's content (node features and edges) and the extraction settings, so
        a graph met again (fit, annotate, transform, another vocabulary) is not extracted again."""
        return list(_cached_occurrences(_content_key(data), self, data))

    def fit(self, graphs: Sequence[Data], labels: Sequence[int] | None = None) -> ConceptVocabulary:
        """Mine candidates from ``graphs`` and keep ``max_concepts`` of them (see the class).
        ``labels`` default to each graph's ``y`` (needed by ``selection="mi"``)."""
        if len(graphs) == 0:
            raise ValueError("need at least one training graph to mine concepts from")
        names: list[set[str]] = [{o.name for o in self.occurrences(g)} for g in graphs]
        counts: Counter[str] = Counter()
        for ns in names:
            counts.update(ns)
        n = len(graphs)
        cands = sorted(
            c for c, k in counts.items() if self.min_support <= k / n <= 1 - self.min_support
        )
        if not cands:
            raise ValueError("no concept passes min_support; lower min_support or add graphs")
        col = {c: i for i, c in enumerate(cands)}
        X = np.zeros((n, len(cands)), dtype=bool)
        for i, ns in enumerate(names):
            X[i, [col[c] for c in ns if c in col]] = True
        support = X.mean(axis=0)
        if self.selection == "support":
            order = sorted(range(len(cands)), key=lambda j: (abs(support[j] - 0.5), cands[j]))
            keep = order[: self.max_concepts]
        else:
            keep = _mrmr(X, self._labels(graphs, labels), cands, self.max_concepts)
        self.concepts = [cands[j] for j in keep]
        self.support = support[keep]
        self._index = {c: i for i, c in enumerate(self.concepts)}
        return self

    @staticmethod
    def _labels(graphs: Sequence[Data], labels: Sequence[int] | None) -> np.ndarray:
        if labels is None:
            if any(getattr(g, "y", None) is None for g in graphs):
                raise ValueError(
                    "selection='mi' ranks concepts with the class labels: give labels or graphs with y"
                )
            return np.array([int(g.y.view(-1)[0]) for g in graphs])
        y = np.asarray(labels)
        if y.shape != (len(graphs),):
            raise ValueError(f"labels must have shape ({len(graphs)},); got {y.shape}")
        return y

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


_CACHE_SIZE = 1 << 14  # graphs; a run's working set (a few thousand) stays in
_cache: OrderedDict[tuple, tuple[Occurrence, ...]] = OrderedDict()


def _content_key(data: Data) -> bytes:
    """A digest of what extraction reads from a graph: node features and edges (values, shapes,
    dtypes), so equal graphs share an entry and a changed graph gets a new one."""
    h = hashlib.blake2b(digest_size=16)
    for t in (getattr(data, "x", None), getattr(data, "edge_index", None)):
        if t is None:
            h.update(b"none")
            continue
        a = t.detach().cpu().contiguous().numpy()
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    h.update(str(data.num_nodes).encode())
    return h.digest()


def _cached_occurrences(key: bytes, vocab: ConceptVocabulary, data: Data) -> tuple[Occurrence, ...]:
    """Occurrences of ``data`` under ``vocab``'s extraction settings, from a bounded LRU cache."""
    label_names = None if vocab.label_names is None else tuple(vocab.label_names)
    full = (key, vocab.kinds, vocab.max_ring, vocab.wl_depth, label_names)
    hit = _cache.get(full)
    if hit is not None:
        _cache.move_to_end(full)
        return hit
    occ = tuple(
        extract(to_labelled_graph(data, label_names), vocab.kinds, vocab.max_ring, vocab.wl_depth)
    )
    _cache[full] = occ
    if len(_cache) > _CACHE_SIZE:
        _cache.popitem(last=False)
    return occ


def clear_cache() -> None:
    """Empty the extraction cache (see :meth:`ConceptVocabulary.occurrences`)."""
    _cache.clear()


def _mrmr(X: np.ndarray, y: np.ndarray, names: Sequence[str], k: int) -> list[int]:
    """Greedy mRMR over Boolean columns of ``X``: relevance ``I(c; y)`` minus the mean ``I(c; s)``
    over the picked ``s``; exact synonyms of a picked column are skipped; ties: the simpler name."""
    relevance = mutual_information(X, y)
    simple = sorted(range(X.shape[1]), key=lambda j: _simplicity(names[j]))
    rank = np.empty(X.shape[1], dtype=int)
    rank[simple] = np.arange(X.shape[1])
    redundancy = np.zeros(X.shape[1])
    alive = np.ones(X.shape[1], dtype=bool)
    keep: list[int] = []
    while len(keep) < k and alive.any():
        score = relevance - (redundancy / len(keep) if keep else 0.0)
        score = np.where(alive, np.round(score, 12), -np.inf)
        best = max(np.flatnonzero(score == score.max()), key=lambda j: -rank[j])
        keep.append(int(best))
        alive &= ~(X[:, [best]] == X).all(axis=0)  # the pick and its exact synonyms
        redundancy += mutual_information(X, X[:, best].astype(int))
    return keep


def _simplicity(name: str) -> tuple[int, int, str]:
    kind = next((i for i, k in enumerate(KINDS) if name.startswith(k)), 1)  # else a star
    return kind, len(name), name


def mutual_information(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``(C,)`` mutual information (nats) between each Boolean column of ``X (n, C)`` and ``y (n,)``,
    from the empirical 2 x K contingency table of each column (the information gain of a split)."""
    X = np.asarray(X, dtype=bool)
    y = np.asarray(y)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"need X (n, C) and y (n,); got {X.shape}, {y.shape}")
    classes = np.unique(y)
    Y = (y[:, None] == classes[None]).astype(float)  # (n, K)
    n = float(len(y))
    on = X.T.astype(float) @ Y  # (C, K) counts with the concept present
    off = Y.sum(0)[None] - on
    py = Y.sum(0) / n
    mi = np.zeros(X.shape[1])
    for joint in (on, off):
        p_xy = joint / n
        p_x = p_xy.sum(1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            term = np.where(p_xy > 0, p_xy * np.log(p_xy / (p_x * py[None])), 0.0)
        mi += term.sum(1)
    return mi


class ConceptTransform(BaseTransform):
    """A ``torch_geometric`` transform: a copy of the graph with the fitted vocabulary's concept
    presence ``concepts (1, C)`` and ``sentence`` attached (what :meth:`ConceptVocabulary.annotate`
    gives), e.g. ``TUDataset(root, name, transform=ConceptTransform(vocab))``."""

    def __init__(self, vocab: ConceptVocabulary) -> None:
        vocab._check()
        self.vocab = vocab

    def forward(self, data: Data) -> Data:
        return self.vocab.annotate([data])[0]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.vocab)} concepts)"
