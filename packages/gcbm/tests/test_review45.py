"""Review of issue 45: concept extraction once per graph, the fidelity read-out is the printed
(pruned) rule and its null can fail, the intervention never looks at test labels."""

import numpy as np
import pytest
import torch

import gcbm.concepts as concepts_mod
from gcbm import GCBM, ConceptVocabulary, intervene, linear_rules, molecule_rules
from gcbm.concepts import clear_cache, extract, to_labelled_graph
from gcbm.explain import rule_predictions
from gcbm.logic import PRUNE, predict_with_linear_rules


def test_extraction_runs_once_per_graph_and_matches_uncached(monkeypatch):
    graphs = molecule_rules(40, seed=123)
    clear_cache()
    calls = []
    real = concepts_mod.extract

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(concepts_mod, "extract", counting)
    vocab = ConceptVocabulary(max_concepts=12).fit(graphs)
    vocab.annotate(graphs)
    vocab.transform(graphs)
    [vocab.sentence(g) for g in graphs]
    ConceptVocabulary(max_concepts=12).fit(graphs, np.arange(40) % 2)  # another vocabulary
    assert len(calls) == 40  # once per graph, not once per use
    for g in graphs[:5]:
        assert vocab.occurrences(g) == real(to_labelled_graph(g, None))
    # another extraction setting or changed content is a new entry, never a stale one
    ConceptVocabulary(max_concepts=12, wl_depth=1).fit(graphs)
    assert len(calls) == 80
    h = graphs[0].clone()
    h.x = h.x[:, [1, 0, *range(2, h.x.shape[1])]]
    assert vocab.occurrences(h) == list(extract(to_labelled_graph(h, None)))
    assert len(calls) == 81


def _model_with(W: np.ndarray, b: np.ndarray) -> GCBM:
    m = GCBM(3, W.shape[1], W.shape[0], seed=0)
    with torch.no_grad():
        m.head.weight.copy_(torch.tensor(W, dtype=torch.float32))
        m.head.bias.copy_(torch.tensor(b, dtype=torch.float32))
    return m


class _Vocab:
    def __init__(self, names):
        self.concepts = list(names)


def test_fidelity_read_out_is_the_printed_pruned_rule():
    # concept c2's weight is below PRUNE * max |W|: the printed rule leaves it out, and on this
    # activation it is the only thing that tips the full layer to class 1
    small = 0.5 * PRUNE * 4.0
    W = np.array([[0.0, 0.0, 0.0], [4.0, -4.0, small]])
    b = np.array([0.0, -small / 2])
    m, vocab = _model_with(W, b), _Vocab(["c0", "c1", "c2"])
    A = np.array([[True, True, True], [True, True, False]])
    full = (A @ W.T + b).argmax(1)
    assert full.tolist() == [1, 0]
    printed = linear_rules(m, vocab)
    assert all("c2" not in [c for c, _ in r.terms] for r in printed)
    got = rule_predictions(m, vocab, A)
    assert got.tolist() == predict_with_linear_rules(printed, A, vocab.concepts).tolist()
    assert got.tolist() == [0, 0]  # the printed rule, not the full W


def test_intervention_edit_never_depends_on_test_labels():
    rng = np.random.default_rng(5)
    W = rng.normal(size=(2, 6))
    b = np.zeros(2)
    Av, At = rng.random((50, 6)), rng.random((80, 6))
    yv = rng.integers(0, 2, 50)
    edits = {intervene(W, b, Av, yv, At, rng.integers(0, 2, 80)).edit for _ in range(5)}
    assert len(edits) == 1
    # and the edit is the best on validation: brute force over the same candidates
    best, arg = 0, None
    for k, c in zip(*np.nonzero(W), strict=True):
        for f in (0.0, 2.0):
            E = W.copy()
            E[k, c] *= f
            base = (Av @ W.T + b).argmax(1) != yv
            err = (Av @ E.T + b).argmax(1) != yv
            gain = int((base & ~err).sum()) - int((~base & err).sum())
            if gain > best:
                best, arg = gain, (int(k), int(c), float(E[k, c]))
    assert edits.pop() == arg


@pytest.mark.parametrize("seed", [1, 2])
def test_fidelity_null_with_permuted_rule_can_fail(seed):
    from gcbm.reproduce.run import permuted_rule_predictions

    rng = np.random.default_rng(seed)
    C = 8
    W = np.zeros((2, C))
    W[1, :3] = [3.0, 2.0, -2.5]
    m, vocab = _model_with(W, np.array([0.0, -1.0])), _Vocab([f"c{i}" for i in range(C)])
    A = rng.random((400, C)) > 0.5
    own = rule_predictions(m, vocab, A)
    null = permuted_rule_predictions(m, vocab, A, np.random.default_rng(seed))
    assert np.mean(own == (A @ W.T + [0.0, -1.0]).argmax(1)) == 1.0
    assert np.mean(null == own) < 0.9


def test_tu_loader_with_partial_raw_files_raises_instead_of_downloading(tmp_path, monkeypatch):
    from gcbm import load_tu

    raw = tmp_path / "DHFR" / "raw"
    raw.mkdir(parents=True)
    (raw / "DHFR_A.txt").write_text("1, 2\n2, 1\n")  # graph_indicator missing
    from torch_geometric.datasets import TUDataset

    def no_download(*a, **k):
        raise AssertionError("tried to download")

    monkeypatch.setattr(TUDataset, "download", no_download)
    with pytest.raises(FileNotFoundError, match="graph_indicator"):
        load_tu("DHFR", tmp_path)
