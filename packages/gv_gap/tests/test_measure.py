"""evaluate_gv on real tiny models: a trained model's verification is read correctly, multiple
choice is the argmax of the sequence log-probs, the saved-and-loaded model measures the same, and
bad items are refused."""

import dataclasses
import functools
import operator
import re

import numpy as np
import pytest
import torch

from gv_gap import GVItem, evaluate_gv, format_pairs, measure_song_gap, world_items
from gv_gap.items import vocabulary_texts
from paper_common.facts import World
from paper_common.lm import (
    build_tokenizer,
    load_lm,
    save_lm,
    sequence_logprob,
    tiny_causal_lm,
    train_causal_lm,
)


@pytest.fixture(scope="module")
def world():
    return World(seed=5, n_people=8, n_cities=6, n_companies=3, n_countries=3)


@pytest.fixture(scope="module")
def tok(world):
    return build_tokenizer(vocabulary_texts(world))


@pytest.fixture(scope="module")
def items(world):
    facts = [f for f in world.facts("all") if f.relation in ("born_in", "lives_in")][:10]
    return world_items(world, facts, n_controls=2, seed=0)


@pytest.fixture(scope="module")
def trained(tok, items):
    """A model that has memorised the QA and verification pairs of ``items``: 1000 steps, not 400.
    At 400 steps the model had learned each verification prompt's majority answer (one correct
    answer against two controls: "correct?" -> False, "incorrect?" -> True) and not yet the facts,
    so balanced accuracy sat at chance (0.5) on the fixed-vocabulary World; trained to memorisation,
    a reader that works must give back what was taught."""
    model = tiny_causal_lm(tok, "llama", n_layers=2, d_model=64, n_heads=4, seed=0)
    train_causal_lm(model, tok, pairs=format_pairs(items), steps=1000, lr=3e-3, batch_size=32)
    return model


def test_a_trained_model_generates_and_verifies_what_it_was_taught(trained, tok, items):
    res = evaluate_gv(trained, tok, items)
    s = res.summary()
    assert s["gen_acc"] >= 0.9
    # a memorised training set read back: the headline (each verification prompt on its own,
    # chance 0.5) and the six-way conjunction per fact (chance 1/64) both near 1, the bars of the
    # test before issue 46 (not lowered to fit a number)
    assert s["balanced_acc"] >= 0.9
    assert s["ver_acc"] >= 0.8
    assert s["gen_rank3"] >= 0.9
    fresh = tiny_causal_lm(tok, "llama", n_layers=2, d_model=64, n_heads=4, seed=1)
    s0 = evaluate_gv(fresh, tok, items).summary()
    assert s0["gen_acc"] == 0.0
    assert s0["ver_acc"] <= 0.2


def test_multiple_choice_picks_the_highest_log_prob_option(trained, tok, items):
    res = evaluate_gv(trained, tok, items, likelihood=False)
    options = [[f" {v}" for v in (it.answer, *it.controls)] for it in items]
    lp = sequence_logprob(
        trained,
        tok,
        [it.question for it in items for _ in range(3)],
        functools.reduce(operator.iadd, options, []),
    ).reshape(len(items), 3)
    assert res.mc_ok.tolist() == (lp.argmax(1) == 0).tolist()
    # the likelihood verifier reads the statement prefix: same rule on its own prompts
    res_ll = evaluate_gv(trained, tok, items, choices=False)
    lp_s = sequence_logprob(
        trained,
        tok,
        [it.claim_prefix for it in items for _ in range(3)],
        functools.reduce(operator.iadd, options, []),
    ).reshape(len(items), 3)
    assert res_ll.ll_ok.tolist() == (lp_s[:, 0] > lp_s[:, 1:].amax(1)).tolist()


def test_a_saved_model_loaded_with_from_pretrained_measures_the_same(trained, tok, items, tmp_path):
    save_lm(trained, tok, tmp_path / "m")
    model, tok2 = load_lm(tmp_path / "m")
    a, b = evaluate_gv(trained, tok, items), evaluate_gv(model, tok2, items)
    assert a.generated == b.generated
    np.testing.assert_allclose(a.margin, b.margin, atol=1e-5)


def test_song_gap_runs_on_sampled_answers_and_is_seeded(trained, tok, items):
    g1 = measure_song_gap(trained, tok, items[:5], n=4, seed=3)
    g2 = measure_song_gap(trained, tok, items[:5], n=4, seed=3)
    # equal field by field, nan included (relative_gap is nan when every answer is right)
    np.testing.assert_equal(dataclasses.astuple(g1), dataclasses.astuple(g2))
    assert 0.0 <= g1.accuracy <= 1.0
    assert -1.0 <= g1.gap <= 1.0


def test_world_items_draw_clean_controls_and_control_questions(world):
    facts = world.facts("heldout")
    known = world.facts("train")
    items = world_items(world, facts, n_controls=2, seed=4, control_subjects=known)
    for it, f in zip(items, facts, strict=True):
        assert f.value not in it.controls
        assert f.subject not in it.controls
        assert len(set(it.controls)) == 2
        if it.control_question:
            assert f.subject not in it.control_question
    assert items == world_items(world, facts, n_controls=2, seed=4, control_subjects=known)


def test_bad_items_are_refused(world, tok, trained, items):
    with pytest.raises(ValueError, match="no controls"):
        GVItem("k", "Q: x A:", "Zurin", ())
    with pytest.raises(ValueError, match="equals the old value"):
        GVItem("k", "Q: x A:", "Zurin", ("Brae",), old_answer="zurin")
    with pytest.raises(ValueError, match="repeats the answer"):
        GVItem("k", "Q: x A:", "Zurin", ("Zurin",))
    with pytest.raises(ValueError, match="at least one item"):
        evaluate_gv(trained, tok, [])
    mixed = [items[0], GVItem("k", items[1].question, items[1].answer, items[1].controls[:1])]
    with pytest.raises(ValueError, match="same number of controls"):
        evaluate_gv(trained, tok, mixed)
    with pytest.raises(ValueError, match="n_controls"):
        world_items(world, world.facts("all")[:2], n_controls=0)
    assert torch.is_grad_enabled()  # evaluation left autograd as it was


def test_words_the_tokenizer_does_not_know_are_refused(trained, tok, items):
    """Issue 46: a prompt with a word the tokenizer maps to <unk> was scored silently (the model
    read <unk> in its place); now every entry point names the item and the unknown word."""
    it = items[0]
    unknown = "Xyzzyqua"
    assert tok.unk_token_id in tok(f" {unknown}", add_special_tokens=False)["input_ids"]
    in_question = GVItem(it.key, it.question.replace("?", f" {unknown}?"), it.answer, it.controls)
    in_control = GVItem(it.key, it.question, it.answer, (unknown, *it.controls[1:]))
    in_prefix = GVItem(it.key, it.question, it.answer, it.controls, claim_prefix=unknown)
    for bad in (in_question, in_control, in_prefix):
        with pytest.raises(ValueError, match=rf"{re.escape(it.key)}.*{unknown}"):
            evaluate_gv(trained, tok, [items[1], bad])
    with pytest.raises(ValueError, match=unknown):
        measure_song_gap(trained, tok, [in_question], n=2)
    # the likelihood verifier is the only reader of the claim prefix: off, it is not checked
    evaluate_gv(trained, tok, [in_prefix], likelihood=False, choices=False)
