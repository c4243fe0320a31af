"""The shared testbed's LM side (issue 46): resumable training, causal tracing, the base model."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from paper_common import lm  # noqa: E402
from paper_common.facts import World  # noqa: E402
from paper_common.lm import base, tracing  # noqa: E402


class _Stop(Exception):
    pass


def test_training_resumes_from_its_checkpoint_exactly(tmp_path):
    w = World(seed=1, n_people=8)
    tok = lm.fixed_tokenizer()
    texts, pairs = w.corpus()
    kw = dict(steps=6, batch_size=8, lr=3e-3, seed=3, mixture=(0.5, 0.5), progress=False)
    whole = lm.tiny_causal_lm(tok, "llama", 1, 32, 2, seed=0)
    full = lm.train_causal_lm(whole, tok, texts, pairs, **kw)

    def stop(step):
        if step == 4:
            raise _Stop

    ckpt = tmp_path / "run.ckpt"
    first = lm.tiny_causal_lm(tok, "llama", 1, 32, 2, seed=0)
    with pytest.raises(_Stop):
        lm.train_causal_lm(
            first,
            tok,
            texts,
            pairs,
            **kw,
            checkpoint=ckpt,
            checkpoint_every=2,
            checkpoint_key="k",
            callback=stop,
            callback_every=4,
        )
    assert ckpt.exists()  # saved at step 2, stopped at step 4 before its save
    second = lm.tiny_causal_lm(tok, "llama", 1, 32, 2, seed=0)
    res = lm.train_causal_lm(
        second, tok, texts, pairs, **kw, checkpoint=ckpt, checkpoint_every=2, checkpoint_key="k"
    )
    assert res.losses == full.losses
    for a, b in zip(whole.parameters(), second.parameters(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="belongs to another run"):
        lm.train_causal_lm(second, tok, texts, pairs, **kw, checkpoint=ckpt, checkpoint_key="other")


def test_subject_token_span_finds_the_subject_tokens():
    tok = lm.fixed_tokenizer()
    w = World(seed=2, n_people=4)
    person = w.entities["person"][0]
    prompt = f"The employer of {person} is"
    a, b = tracing.subject_token_span(tok, prompt, person)
    ids = tok(prompt)["input_ids"]
    assert tok.decode(ids[a:b]).strip() == person
    assert b - a == 2
    with pytest.raises(ValueError, match="not in prompt"):
        tracing.subject_token_span(tok, prompt, "Nobody Here")


@pytest.fixture(scope="module")
def known():
    w = World(seed=3, n_people=16, n_cities=8, n_companies=4, n_countries=4)
    model, tok = lm.fact_lm(w, size="tiny", tokenizer_kind="fixed", cache=False, steps=300)
    return w, model, tok


def test_causal_trace_is_zero_before_the_subject_and_without_noise(known):
    w, model, tok = known
    facts = w.facts(relations=["born_in"])[:3]
    prompts = [f"{f.subject} was born in" for f in facts]
    kw = dict(subjects=[f.subject for f in facts], answers=[f.value for f in facts], samples=4)
    quiet = tracing.causal_trace(model, tok, prompts, noise=0.0, **kw)
    assert np.allclose(quiet.clean, quiet.corrupted)
    assert all(np.abs(e).max() < 1e-6 for e in quiet.effects)
    noisy = tracing.causal_trace(model, tok, prompts, window=1, **kw)
    assert (noisy.corrupted < noisy.clean).mean() >= 2 / 3
    for e, prompt, subject in zip(noisy.effects, prompts, kw["subjects"], strict=True):
        a, _ = tracing.subject_token_span(tok, prompt, subject)
        assert e.shape == (lm.num_layers(model), len(tok(prompt)["input_ids"]))
        assert np.abs(e[:, :a]).max() < 1e-6  # states before the subject never saw the noise
        assert np.abs(e[:, a:]).max() > 0


def test_acceptance_reports_its_numbers_on_a_small_world(known):
    w, model, tok = known
    out = base.acceptance(model, tok, w, n_trace=4)
    assert 0.0 <= out["tf_balanced_accuracy"] <= 1.0
    assert 0.0 <= out["qa_accuracy"] <= 1.0
    assert set(out["subject_recall"]) <= set(out["trace"])
    assert out["passes"] == bool(
        out["subject_recall"]
        and out["tf_balanced_accuracy"] >= base.ACCEPTANCE["tf_balanced_accuracy"]
        and out["qa_accuracy"] >= base.ACCEPTANCE["qa_accuracy"]
    )


def test_base_world_and_new_entities_are_disjoint():
    b = base.base_world()
    new = World(seed=0, n_people=50, exclude=b)
    surnames = {p.split(" ")[1] for p in b.entities["person"]}
    assert not surnames & {p.split(" ")[1] for p in new.entities["person"]}
    assert not set(b.entities["city"]) & set(new.entities["city"])


def test_load_base_lm_says_how_to_get_the_weights(tmp_path):
    with pytest.raises(ValueError, match="make base-lm"):
        base.load_base_lm(tmp_path)
