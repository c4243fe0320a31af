import networkx as nx
import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from gcbm import (
    ATOMS,
    GROUPS,
    ConceptVocabulary,
    ba_2motifs,
    ba_motifs,
    from_networkx_labelled,
    load_tu,
    molecule_rules,
)
from gcbm.concepts import extract, to_labelled_graph

CARBON, NITROGEN, OXYGEN = range(3)


def nitrobenzene_with_chain() -> Data:
    """Ring 0-5 (C), N 6 on ring atom 0 with O 7, 8; a propyl chain 9-10-11 on ring atom 3."""
    G = nx.cycle_graph(6)
    G.add_edges_from([(0, 6), (6, 7), (6, 8), (3, 9), (9, 10), (10, 11)])
    labels = [CARBON] * 6 + [NITROGEN, OXYGEN, OXYGEN] + [CARBON] * 3
    return from_networkx_labelled(G, labels, 3, 1)


def test_mining_finds_planted_motifs_exactly():
    g = nitrobenzene_with_chain()
    occ = extract(to_labelled_graph(g, ATOMS), wl_depth=1)
    by_name: dict[str, list[tuple[int, ...]]] = {}
    for o in occ:
        by_name.setdefault(o.name, []).append(o.nodes)
    assert by_name["ring6[C6]"] == [(0, 1, 2, 3, 4, 5)]
    assert by_name["ring6"] == [(0, 1, 2, 3, 4, 5)]  # the shape, whatever its labels
    assert by_name["N(C,O,O)"] == [(6, 0, 7, 8)]
    assert sorted(by_name["O(N)"]) == [(7, 6), (8, 6)]
    assert by_name["C(C,C,N)"] == [(0, 1, 5, 6)]
    assert not any(n.startswith("ring") and n not in ("ring6", "ring6[C6]") for n in by_name)
    # the chain 9-10 has only 2 inner atoms (11 is a leaf): no chain concept
    assert not any(n.startswith("chain") for n in by_name)
    G = nx.path_graph(7)
    chain = extract(
        to_labelled_graph(from_networkx_labelled(G, [CARBON] * 7, 3, 0), ATOMS), kinds=("chain",)
    )
    assert [(o.name, o.nodes) for o in chain] == [("chain5", (1, 2, 3, 4, 5))]


def test_house_and_cycle_motifs_are_separated_by_ring_concepts():
    graphs = ba_2motifs(60, seed=1)
    vocab = ConceptVocabulary(kinds=("ring",), min_support=0.0, selection="support").fit(graphs)
    X = vocab.transform(graphs) > 0
    y = np.array([g.y.item() for g in graphs])
    # a house is a square plus a triangle, the other motif a 5-cycle; BA trees (m = 1) have no cycles
    np.testing.assert_array_equal(X[:, vocab.index("ring5[05]")], y == 1)
    np.testing.assert_array_equal(X[:, vocab.index("ring4[04]")], y == 0)
    np.testing.assert_array_equal(X[:, vocab.index("ring3[03]")], y == 0)


def test_molecule_labels_follow_the_planted_rule():
    graphs = molecule_rules(200, seed=3)
    groups = np.concatenate([g.groups.numpy() for g in graphs]).astype(bool)
    ring6, nitro, hydroxyl = (groups[:, GROUPS.index(n)] for n in ("ring6", "nitro", "hydroxyl"))
    y = np.array([g.y.item() for g in graphs])
    np.testing.assert_array_equal(y, ring6.astype(int) + nitro + hydroxyl >= 2)
    assert 0.35 < y.mean() < 0.65
    old = molecule_rules(200, seed=3, rule="or-of-ands")
    y_old = np.array([g.y.item() for g in old])
    np.testing.assert_array_equal(y_old, (ring6 & nitro) | (hydroxyl & ~ring6))
    with pytest.raises(ValueError, match="rule"):
        molecule_rules(5, rule="xor")
    vocab = ConceptVocabulary(label_names=ATOMS, selection="support").fit(graphs)
    X = vocab.transform(graphs) > 0
    np.testing.assert_array_equal(X[:, vocab.index("ring6[C6]")], ring6)
    np.testing.assert_array_equal(X[:, vocab.index("N(C,O,O)")], nitro)
    np.testing.assert_array_equal(X[:, vocab.index("O(C)")], hydroxyl)
    # determinism by seed
    a, b = molecule_rules(5, seed=3), molecule_rules(5, seed=3)
    assert all(
        torch.equal(p.edge_index, q.edge_index) and torch.equal(p.x, q.x)
        for p, q in zip(a, b, strict=True)
    )


def test_vocabulary_is_invariant_to_node_order_and_sentences_follow_bfs():
    g = nitrobenzene_with_chain()
    perm = torch.randperm(g.num_nodes, generator=torch.Generator().manual_seed(0))
    inv = torch.argsort(perm)
    h = Data(x=g.x[perm], edge_index=inv[g.edge_index], y=g.y)
    # one graph: every concept is a synonym of every other, so keep them all (label-free ranking)
    vocab = ConceptVocabulary(label_names=ATOMS, min_support=0.0, selection="support").fit([g])
    np.testing.assert_array_equal(vocab.transform([g]), vocab.transform([h]))
    assert sorted(vocab.sentence(g)) == sorted(vocab.sentence(h))
    assert len(vocab.sentence(g)) == len(vocab.occurrences(g))


def test_tu_loader_reads_local_raw_files(tmp_path):
    raw = tmp_path / "TOY" / "raw"
    raw.mkdir(parents=True)
    # two graphs: a triangle (label 1) and a path of 3 (label 2); nodes numbered from 1
    edges = [(1, 2), (2, 3), (3, 1), (4, 5), (5, 6)]
    both = [e for u, v in edges for e in ((u, v), (v, u))]
    (raw / "TOY_A.txt").write_text("\n".join(f"{u}, {v}" for u, v in both) + "\n")
    (raw / "TOY_graph_indicator.txt").write_text("1\n1\n1\n2\n2\n2\n")
    (raw / "TOY_graph_labels.txt").write_text("1\n2\n")
    (raw / "TOY_node_labels.txt").write_text("0\n1\n0\n0\n0\n1\n")
    graphs = load_tu("TOY", tmp_path)  # local raw files: no download
    assert len(graphs) == 2
    assert graphs[0].x.shape == (3, 2)
    vocab = ConceptVocabulary(min_support=0.0, selection="support").fit(graphs)
    assert "ring3[0211]" in vocab.concepts  # a triangle with atom types 0, 1, 0


def test_bad_input_raises_clear_errors():
    g = nitrobenzene_with_chain()
    vocab = ConceptVocabulary(label_names=ATOMS).fit(molecule_rules(50))
    with pytest.raises(ValueError, match="no node features"):
        vocab.transform([Data(edge_index=g.edge_index, num_nodes=12)])
    with pytest.raises(ValueError, match="no nodes"):
        vocab.transform([Data(x=torch.zeros(0, 3), edge_index=torch.zeros(2, 0, dtype=torch.long))])
    with pytest.raises(KeyError, match="unknown concept"):
        vocab.index("ring9[C9]")
    with pytest.raises(ValueError, match="unknown concept kinds"):
        ConceptVocabulary(kinds=("ring", "clique"))
    with pytest.raises(RuntimeError, match="fit"):
        ConceptVocabulary().transform([g])
    with pytest.raises(ValueError, match="n_graphs"):
        molecule_rules(0)


def test_three_motifs_have_their_ring_signatures():
    graphs = ba_motifs(90, seed=2, motifs=("house", "cycle", "grid"))
    y = np.array([g.y.item() for g in graphs])
    assert np.bincount(y).tolist() == [30, 30, 30]
    counts = ConceptVocabulary(kinds=("ring",), min_support=0.0, selection="support").fit(graphs)
    X = counts.transform(graphs)
    ring3, ring4, ring5 = (X[:, counts.index(f"ring{k}[0{k}]")] for k in (3, 4, 5))
    np.testing.assert_array_equal(ring3 > 0, y == 0)  # the house's roof
    np.testing.assert_array_equal(ring5 > 0, y == 1)
    np.testing.assert_array_equal(
        ring4, np.select([y == 0, y == 2], [1, 4], 0)
    )  # a 3x3 grid has 4 squares
    with pytest.raises(ValueError, match="unknown motif"):
        ba_motifs(4, motifs=("house", "star"))


def test_tiny_graphs_single_node_and_no_edges():
    lone = Data(
        x=torch.tensor([[1.0, 0.0, 0.0]]),
        edge_index=torch.zeros(2, 0, dtype=torch.long),
        y=torch.tensor([0]),
    )
    pair = Data(
        x=torch.eye(3)[[0, 2]], edge_index=torch.zeros(2, 0, dtype=torch.long), y=torch.tensor([1])
    )
    vocab = ConceptVocabulary(label_names=ATOMS, min_support=0.0, wl_depth=1).fit([lone, pair])
    assert set(vocab.concepts) == {"C()", "O()"}
    X = vocab.transform([lone, pair])
    np.testing.assert_array_equal(X[:, vocab.index("C()")], [1, 1])
    np.testing.assert_array_equal(X[:, vocab.index("O()")], [0, 1])
