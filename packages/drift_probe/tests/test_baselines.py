"""Baselines against known answers: semantic entropy of even clusters, CCS on a planted contrast,
and every detector's score on a real tiny LM."""

import numpy as np
import pytest
import torch

from drift_probe.baselines import (
    CCS,
    SAPLMA,
    AliasEquivalence,
    CorrectnessProbe,
    NLIEquivalence,
    SemanticEntropy,
    TokenEntropy,
    cluster_answers,
    semantic_entropy,
)
from drift_probe.data import drift_items


@pytest.mark.parametrize(("n", "k"), [(10, 1), (10, 2), (10, 5), (12, 3)])
def test_even_clusters_give_log_k(n, k):
    ids = np.arange(n) % k
    assert semantic_entropy(ids) == pytest.approx(np.log(k))
    # equal likelihoods: the weighted estimator agrees
    assert semantic_entropy(ids, np.full(n, -2.0), "weighted") == pytest.approx(np.log(k))


def test_weighted_estimator_follows_likelihood():
    ids = np.array([0, 0, 1])
    # cluster 1's single answer is far more likely than cluster 0's two
    low = semantic_entropy(ids, np.array([-9.0, -9.0, -0.1]), "weighted")
    assert low < semantic_entropy(ids)
    assert low < 0.01
    with pytest.raises(ValueError, match="estimator"):
        semantic_entropy(ids, estimator="other")


def test_alias_clustering(world):
    person = world.entities["person"][0]
    surname = world.aliases(person)[0]
    eq = AliasEquivalence(world)
    ids = cluster_answers("q", [person, surname.lower(), "Nowhere", person + "."], eq)
    assert ids.tolist() == [0, 0, 1, 0]


def test_ccs_recovers_a_planted_contrast_direction():
    rng = np.random.default_rng(0)
    n, d = 400, 20
    truth = rng.random(n) < 0.5
    direction = rng.normal(size=d)
    direction /= np.linalg.norm(direction)
    base = rng.normal(size=(n, d))
    sign = np.where(truth, 1.0, -1.0)[:, None]
    x_pos = base + 3 * sign * direction + 0.3 * rng.normal(size=(n, d))
    x_neg = base - 3 * sign * direction + 0.3 * rng.normal(size=(n, d))
    ccs = CCS(restarts=5, epochs=300, seed=0).fit_pairs(x_pos, x_neg, truth)
    assert ccs.accuracy_ > 0.95
    w = ccs.w_.numpy()
    assert abs(w @ direction) / np.linalg.norm(w) > 0.8
    p = ccs.p_true_pairs(x_pos, x_neg)
    assert ((p > 0.5) == truth).mean() > 0.95
    with pytest.raises(ValueError, match="contrast pairs"):
        ccs.fit_pairs(x_pos, x_neg[:, :5])


def test_ccs_scores_one_item_with_the_fit_time_normalisation():
    """Issue 46: CCS normalised the states it scored by their own mean, so one item alone was
    centred to zero and always scored 0.5; the fitted mean and scale are now reused."""
    rng = np.random.default_rng(0)
    n, d = 200, 10
    truth = rng.random(n) < 0.5
    direction = rng.normal(size=d)
    direction /= np.linalg.norm(direction)
    base = rng.normal(size=(n, d)) + 5.0  # far from the origin: centring matters
    sign = np.where(truth, 1.0, -1.0)[:, None]
    x_pos = base + 3 * sign * direction
    x_neg = base - 3 * sign * direction
    ccs = CCS(restarts=3, epochs=200, seed=0).fit_pairs(x_pos, x_neg, truth)
    batch = ccs.p_true_pairs(x_pos, x_neg)
    one = np.array([ccs.p_true_pairs(x_pos[i : i + 1], x_neg[i : i + 1])[0] for i in range(20)])
    np.testing.assert_allclose(one, batch[:20], atol=1e-6)
    assert np.abs(one - 0.5).min() > 0.1
    assert ((one > 0.5) == truth[:20]).mean() > 0.9
    # a different batch of items scores each item the same as before
    np.testing.assert_allclose(
        ccs.p_true_pairs(x_pos[20:60], x_neg[20:60]), batch[20:60], atol=1e-6
    )


def test_detectors_score_every_item_on_a_real_lm(world, random_lm, tok):
    items = drift_items(world, 2022)[:24]
    ent = TokenEntropy().score(random_lm, tok, items)
    assert ent.shape == (24,)
    assert np.all(ent >= 0)
    assert np.all(ent <= np.log(len(tok)) + 1e-4)
    se = SemanticEntropy(AliasEquivalence(world), n_samples=4, max_new_tokens=3, seed=0)
    both = se.score_both(random_lm, tok, items)
    assert np.all(both["discrete"] <= np.log(4) + 1e-9)
    np.testing.assert_array_equal(se.score(random_lm, tok, items), both["discrete"])
    labels = np.arange(24) % 2
    ccs = CCS(restarts=2, epochs=50).fit(random_lm, tok, items, labels)
    s = ccs.score(random_lm, tok, items)
    assert s.shape == (24,)
    assert np.all((s >= 0) & (s <= 1))
    statements = [v.prompt for v in world.verification_items("all")][:60]
    truth = [v.label for v in world.verification_items("all")][:60]
    rels = [v.fact.relation for v in world.verification_items("all")][:60]
    sap = SAPLMA(hidden=(16, 8), max_iter=50).fit_statements(
        random_lm, tok, statements, truth, rels
    )
    assert np.all(sap.score(random_lm, tok, items) >= 0)
    corr = CorrectnessProbe().fit(random_lm, tok, items, labels)
    assert corr.score(random_lm, tok, items).shape == (24,)


def test_detector_errors(world, tmp_path):
    with pytest.raises(ValueError, match="needs labels"):
        CorrectnessProbe().fit(None, None, drift_items(world, 2022)[:4])
    with pytest.raises(ValueError, match="n_samples"):
        SemanticEntropy(n_samples=1)
    with pytest.raises(ValueError, match="holds no saved NLI model"):
        NLIEquivalence(tmp_path)
    with pytest.raises(RuntimeError, match="fit_statements"):
        SAPLMA().score(None, None, drift_items(world, 2022)[:4])
    with pytest.raises(TypeError, match="DriftItem"):
        TokenEntropy().score(None, None, ["not an item"])


def test_nli_equivalence_from_a_local_path(tmp_path):
    """The real loading path, on a tiny random NLI classifier saved to disk."""
    from transformers import BertConfig, BertForSequenceClassification

    from paper_common.lm import build_tokenizer

    tok = build_tokenizer(["Q: where ? A: Paris Rome"])
    config = BertConfig(
        vocab_size=len(tok),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=3,
        id2label={0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"},
        label2id={"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2},
    )
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    eq = NLIEquivalence(tmp_path)
    assert eq.entail == 2
    assert isinstance(eq("Q: where ? A:", "Paris", "Rome"), bool)
