"""Review of issue 46 items 1-3: defects found on held-out Worlds and seeds (each test failed before its fix)."""

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from paper_common import lm  # noqa: E402
from paper_common.facts import COMPANY_SUFFIXES, World, arithmetic_tasks  # noqa: E402
from paper_common.lm import base, tracing  # noqa: E402
from paper_common.lm import train as train_mod  # noqa: E402


def _words(world):
    return {w for names in world.entities.values() for n in names for w in n.split(" ")}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_fact_with_one_possible_value_never_changes_to_itself(seed):
    # a country with a single city cannot move its capital: no version may repeat its predecessor
    w = World(seed=seed, n_cities=6, n_countries=5, change_rates={"capital_of": 0.5})
    repeats = [
        (a, b)
        for versions in w.history.values()
        for a, b in itertools.pairwise(versions)
        if a.value == b.value
    ]
    assert repeats == []
    # and the change questions never call a non-change a change
    for q in w.change_questions("all"):
        if q.label:
            assert w.value_at(q.fact.subject, q.fact.relation, q.year + 1) != q.fact.value


def test_change_rates_for_a_fixed_relation_are_refused():
    with pytest.raises(ValueError, match="located_in"):
        World(seed=0, change_rates={"located_in": 0.5})
    World(seed=0, change_rates={"located_in": 0.0})  # zero is what it is anyway


def test_exclude_takes_several_worlds():
    a = World(seed=1, n_people=10)
    b = World(seed=2, n_people=10, exclude=a)
    c = World(seed=3, n_people=10, exclude=[a, b])
    first_names = {n.split(" ")[0] for n in [*a.entities["person"], *b.entities["person"]]}
    first_names |= {n.split(" ")[0] for n in c.entities["person"]}
    shared = (_words(c) & (_words(a) | _words(b))) - first_names - set(COMPANY_SUFFIXES)
    assert shared == set()
    assert not any(w.startswith("World(") for w in c.config["exclude"])
    with pytest.raises(TypeError, match="exclude"):
        World(seed=3, exclude=[a, 3])


def test_change_questions_refuse_a_negative_number_of_uncued_years():
    w = World(seed=0, n_people=6)
    with pytest.raises(ValueError, match="uncued_per_cue"):
        w.change_questions(uncued_per_cue=-1)


def test_arithmetic_with_a_two_digit_modulus_encodes_without_unk():
    tok = lm.fixed_tokenizer()
    tasks = arithmetic_tasks(20, "mod", digits=2, modulus=13, seed=0)
    for t in tasks:
        ids = tok(t.prompt + " " + t.answer, add_special_tokens=False)["input_ids"]
        assert tok.unk_token_id not in ids
        x, y = (int(s.replace(" ", "")) for s in t.prompt[3:].split(" mod ")[0].split(" + "))
        assert t.reward(t.answer) == 1.0
        assert int(t.answer.replace(" ", "")) == (x + y) % 13


def test_a_checkpoint_of_other_data_is_refused_even_without_a_key(tmp_path):
    tok = lm.fixed_tokenizer()
    w = World(seed=1, n_people=8)
    texts, pairs = w.corpus()
    kw = dict(steps=3, batch_size=4, seed=0, progress=False, checkpoint=tmp_path / "c.ckpt")
    lm.train_causal_lm(lm.tiny_causal_lm(tok, "llama", 1, 32, 2), tok, texts, pairs, **kw)
    other = World(seed=2, n_people=8).corpus()
    model = lm.tiny_causal_lm(tok, "llama", 1, 32, 2)
    with pytest.raises(ValueError, match="belongs to another run"):
        lm.train_causal_lm(model, tok, *other, **kw)
    with pytest.raises(ValueError, match="belongs to another run"):
        lm.train_causal_lm(model, tok, texts, pairs, **{**kw, "batch_size": 8})
    # the same data and settings resume (here: nothing left to do)
    res = lm.train_causal_lm(model, tok, texts, pairs, **kw)
    assert len(res.losses) == 3


def test_a_checkpoint_is_read_onto_the_cpu(tmp_path, monkeypatch):
    # the sampler's generator lives on the CPU: reading the file onto the model's device (a GPU)
    # would hand it a CUDA tensor and fail on resume; torch moves the model and optimizer state
    tok = lm.fixed_tokenizer()
    texts, pairs = World(seed=1, n_people=8).corpus()
    kw = dict(steps=2, batch_size=4, progress=False, checkpoint=tmp_path / "c.ckpt")
    lm.train_causal_lm(lm.tiny_causal_lm(tok, "llama", 1, 32, 2), tok, texts, pairs, **kw)
    seen = []
    real = torch.load

    def spy(*args, **kwargs):
        seen.append(kwargs.get("map_location"))
        return real(*args, **kwargs)

    monkeypatch.setattr(train_mod.torch, "load", spy)
    lm.train_causal_lm(lm.tiny_causal_lm(tok, "llama", 1, 32, 2), tok, texts, pairs, **kw)
    assert seen == ["cpu"]


def test_noise_scale_is_the_std_over_every_subject_token_occurrence():
    # ROME (collect_embedding_std): embeddings of each subject's tokens, concatenated with repeats
    tok = lm.fixed_tokenizer()
    model = lm.tiny_causal_lm(tok, "llama", 1, 32, 2, seed=0)
    w = World(seed=4, n_people=6)
    subjects = [w.entities["person"][0]] * 5 + [w.entities["city"][0]]
    emb = model.get_input_embeddings().weight.detach()
    rows = [emb[tok(" " + s, add_special_tokens=False)["input_ids"]] for s in subjects]
    expected = 3.0 * float(torch.cat(rows).std())
    assert tracing.embedding_noise_scale(model, tok, subjects) == pytest.approx(expected, rel=1e-6)


def test_acceptance_buckets_cover_every_exposure():
    tok = lm.fixed_tokenizer()
    model = lm.tiny_causal_lm(tok, "llama", 1, 32, 2, seed=0)
    w = World(seed=5, n_people=12, n_cities=8, n_companies=6, exposure=0.3, max_exposure=32)
    top = max(w.exposure[q.fact.key] for q in w.qa_pairs("heldout"))
    assert top > 16  # the world has facts past the base world's cap
    out = base.acceptance(model, tok, w, n_trace=4)
    covered = [tuple(map(int, k.split("-"))) for k in out["qa_accuracy_by_exposure"]]
    assert any(lo <= top <= hi for lo, hi in covered)
    assert np.isfinite(list(out["qa_accuracy_by_exposure"].values())).all()


def test_subject_span_indexes_the_ids_the_trace_runs_on_for_a_rendered_template():
    # a prompt that already starts with the BOS text is encoded without a second BOS (_encode):
    # the span must index those ids, not the tokenizer's default encoding
    from paper_common.lm.anatomy import _encode

    tok = lm.fixed_tokenizer()
    w = World(seed=6, n_people=6)
    person = w.entities["person"][0]
    for prompt in (f"{person} was born in", f"<s>{person} was born in"):
        ids = _encode(tok, [prompt])[0]
        a, b = tracing.subject_token_span(tok, prompt, person)
        assert tok.decode(ids[a:b]).strip() == person


def test_exposure_extremes():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        w = World(seed=0, n_people=10, exposure=1e-6, max_exposure=8)
    assert set(w.exposure.values()) == {8}  # P(m >= 8) = 8^-1e-6: nearly every fact at the cap
    assert set(World(seed=0, n_people=10, exposure=1e6).exposure.values()) == {1}
    with pytest.raises(ValueError, match="exposure"):
        World(seed=0, exposure=True)
    with pytest.raises(ValueError, match="max_exposure"):
        World(seed=0, exposure=1.0, max_exposure=True)
