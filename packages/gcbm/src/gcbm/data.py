"""Graph-classification datasets that run offline, with known ground truth.

* :func:`molecule_rules`: molecule-like graphs (atoms C, N, O) built from a carbon backbone and
  planted functional groups; the label is a known logical rule over the groups, so rule recovery
  can be measured.
* :func:`ba_motifs` / :func:`ba_2motifs`: Barabasi-Albert trees with one planted motif (house,
  5-cycle or 3x3 grid; house vs 5-cycle is the BA-2Motifs benchmark of Luo et al. 2020); the label
  is the motif.
* :func:`load_tu`: the TU datasets (DHFR, MUTAG, PROTEINS, NCI1, ...) through
  ``torch_geometric`` from a local copy of the raw files (a download only when asked).
"""

from __future__ import annotations

import os
from pathlib import Path

import networkx as nx
import numpy as np
import torch
from torch_geometric.data import Data

__all__ = [
    "ATOMS",
    "GROUPS",
    "RULE",
    "RULES",
    "ba_2motifs",
    "from_networkx_labelled",
    "load_tu",
    "molecule_rules",
]

ATOMS = ("C", "N", "O")
GROUPS = ("ring6", "nitro", "hydroxyl", "amine")
#: the planted rules of :func:`molecule_rules`, over :data:`GROUPS`. ``"2-of-3"`` (the default) is a
#: threshold rule, the kind a sparse linear layer over concepts expresses (equal weights on three
#: concepts, none on the amine); ``"or-of-ands"`` is not linearly separable in the groups (the
#: earlier default, kept for the t-norm ablation).
RULES = {
    "2-of-3": "y = 1 iff at least two of ring6, nitro, hydroxyl (amine is a distractor)",
    "or-of-ands": "y = (ring6 AND nitro) OR (hydroxyl AND NOT ring6)",
}
RULE = RULES["2-of-3"]


def _rule(g: np.ndarray, rule: str = "2-of-3") -> int:
    ring6, nitro, hydroxyl, _amine = g.astype(bool)
    if rule == "2-of-3":
        return int(int(ring6) + int(nitro) + int(hydroxyl) >= 2)
    return int((ring6 and nitro) or (hydroxyl and not ring6))


def from_networkx_labelled(
    G: nx.Graph, labels: list[int], n_labels: int, y: int, **extra: torch.Tensor
) -> Data:
    """A PyG ``Data`` with one-hot node features ``x`` from integer ``labels`` (nodes ``0..n-1``)."""
    edges = np.array(list(G.edges()), dtype=np.int64).reshape(-1, 2)
    edge_index = torch.as_tensor(np.concatenate([edges, edges[:, ::-1]]).T.copy())
    x = torch.zeros(G.number_of_nodes(), n_labels)
    x[torch.arange(len(labels)), torch.as_tensor(labels)] = 1.0
    return Data(x=x, edge_index=edge_index, y=torch.tensor([y]), **extra)


def _attach(
    G: nx.Graph, labels: list[int], anchor: int, group: nx.Graph, group_labels: list[int], root: int
) -> None:
    offset = G.number_of_nodes()
    G.add_nodes_from(range(offset, offset + group.number_of_nodes()))
    G.add_edges_from((u + offset, v + offset) for u, v in group.edges())
    labels.extend(group_labels)
    G.add_edge(anchor, root + offset)


def molecule_rules(
    n_graphs: int = 600, seed: int = 0, p_group: float = 0.5, rule: str = "2-of-3"
) -> list[Data]:
    """Molecule-like graphs labelled by ``RULES[rule]`` (default :data:`RULE`).

    A random carbon tree of 6-14 atoms (degree at most 3) gets each group with probability
    ``p_group``: a six-carbon ring, a nitro group N(O)(O), a hydroxyl O and an amine N (a
    distractor the rule ignores), each bonded to a backbone carbon. Every graph stores the planted
    group indicators in ``groups`` (shape ``(1, 4)``, order :data:`GROUPS`).
    """
    if n_graphs < 1 or not 0 < p_group < 1:
        raise ValueError(f"need n_graphs >= 1 and 0 < p_group < 1; got {n_graphs}, {p_group}")
    if rule not in RULES:
        raise ValueError(f"rule must be one of {tuple(RULES)}; got {rule!r}")
    rng = np.random.default_rng(seed)
    c, n_, o = range(3)  # atom type columns: C, N, O
    ring = nx.cycle_graph(6)
    nitro = nx.Graph([(0, 1), (0, 2)])
    single = nx.empty_graph(1)
    parts = {
        "ring6": (ring, [c] * 6),
        "nitro": (nitro, [n_, o, o]),
        "hydroxyl": (single, [o]),
        "amine": (single, [n_]),
    }
    out = []
    for _ in range(n_graphs):
        n = int(rng.integers(6, 15))
        G = nx.empty_graph(1)
        for i in range(1, n):
            free = [j for j in range(i) if G.degree(j) < 3]
            G.add_edge(i, int(rng.choice(free)))
        labels = [c] * n
        present = rng.random(len(GROUPS)) < p_group
        for name, on in zip(GROUPS, present, strict=True):
            if on:
                free = [j for j in range(n) if G.degree(j) < 3]
                group, glabels = parts[name]
                _attach(G, labels, int(rng.choice(free)), group, glabels, 0)
        perm = rng.permutation(G.number_of_nodes())  # node order carries no information
        G = nx.relabel_nodes(G, {i: int(perm[i]) for i in range(len(perm))})
        labels = [labels[i] for i in np.argsort(perm)]
        out.append(
            from_networkx_labelled(
                G,
                labels,
                len(ATOMS),
                _rule(present, rule),
                groups=torch.as_tensor(present[None], dtype=torch.float32),
            )
        )
    return out


MOTIFS = ("house", "cycle", "grid")


def _motif(name: str) -> nx.Graph:
    from torch_geometric.datasets.motif_generator import CycleMotif, GridMotif, HouseMotif

    makers = {"house": HouseMotif, "cycle": lambda: CycleMotif(5), "grid": GridMotif}
    if name not in makers:
        raise ValueError(f"unknown motif {name!r}; choose from {MOTIFS}")
    data = makers[name]()()
    G = nx.empty_graph(data.num_nodes)
    G.add_edges_from(data.edge_index.T.tolist())
    return G


def ba_motifs(
    n_graphs: int = 600,
    seed: int = 0,
    base_nodes: int = 20,
    motifs: tuple[str, ...] = ("house", "cycle"),
) -> list[Data]:
    """Barabasi-Albert trees (``m = 1``) with one planted motif each, joined by one edge; the label is
    the motif's index in ``motifs`` (PyG's house, 5-cycle and 3x3 grid generators); constant node
    features; ``groups`` holds the one-hot motif. ``("house", "cycle")`` is BA-2Motifs (Luo et al. 2020)."""
    if n_graphs < 1 or base_nodes < 2 or len(motifs) < 2:
        raise ValueError(
            f"need n_graphs >= 1, base_nodes >= 2, >= 2 motifs; got {n_graphs}, {base_nodes}, {motifs}"
        )
    shapes = [_motif(m) for m in motifs]
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_graphs):
        y = i % len(motifs)
        G = nx.barabasi_albert_graph(base_nodes, 1, seed=int(rng.integers(2**31)))
        motif = shapes[y]
        labels = [0] * (base_nodes + motif.number_of_nodes())
        _attach(
            G,
            [],
            int(rng.integers(base_nodes)),
            motif,
            [],
            int(rng.integers(motif.number_of_nodes())),
        )
        perm = rng.permutation(G.number_of_nodes())
        G = nx.relabel_nodes(G, {j: int(perm[j]) for j in range(len(perm))})
        groups = torch.nn.functional.one_hot(torch.tensor([y]), len(motifs)).float()
        out.append(from_networkx_labelled(G, labels, 1, y, groups=groups))
    order = rng.permutation(n_graphs)
    return [out[j] for j in order]


def ba_2motifs(n_graphs: int = 600, seed: int = 0, base_nodes: int = 20) -> list[Data]:
    """BA-2Motifs: a house (label 0) or a 5-cycle (label 1) on a BA tree; see :func:`ba_motifs`."""
    return ba_motifs(n_graphs, seed, base_nodes, ("house", "cycle"))


def load_tu(name: str, root: str | os.PathLike[str], download: bool = False) -> list[Data]:
    """A TU dataset (``DHFR``, ``MUTAG``, ``PROTEINS``, ``NCI1``, ...) via
    ``torch_geometric.datasets.TUDataset`` from ``root/name/raw/name_*.txt``.

    Raises ``FileNotFoundError`` when the raw files are absent, unless ``download=True``.
    """
    from torch_geometric.datasets import TUDataset

    raw = Path(root) / name / "raw"
    # TUDataset downloads when any of its raw files (A, graph_indicator) is missing: check both
    missing = [
        f"{name}_{k}.txt"
        for k in ("A", "graph_indicator")
        if not (raw / f"{name}_{k}.txt").exists()
    ]
    if not download and missing:
        raise FileNotFoundError(
            f"TU dataset {name!r} not found: {missing} missing under {raw} (also needed: "
            "_graph_labels, _node_labels); copy the raw files there or pass download=True"
        )
    ds = TUDataset(str(root), name)
    graphs = [ds[i] for i in range(len(ds))]
    if graphs and graphs[0].x is None:
        raise ValueError(f"{name} has no node features; gcbm needs node labels or attributes in x")
    return graphs
