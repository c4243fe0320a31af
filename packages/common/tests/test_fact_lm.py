"""fact_lm really memorises a World, within the time budget, and its cache loads back exactly."""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from paper_common import lm  # noqa: E402
from paper_common.facts import World, is_correct  # noqa: E402

pytestmark = pytest.mark.xdist_group(name="fact_lm")


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    # shared by the xdist workers of this run: fact_lm's file lock lets one train, the other load
    base = tmp_path_factory.getbasetemp()
    path = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "fact_lm_cache"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session")
def world():
    return World(seed=1, n_people=30, n_cities=12, n_companies=8, n_countries=4)


@pytest.fixture(scope="session")
def trained(world, cache):
    mp = pytest.MonkeyPatch()
    mp.setenv("PAPER_CACHE_DIR", str(cache))
    model, tok = lm.fact_lm(world, steps=400, seed=0, progress=False)
    yield model, tok, model.fact_lm_info["seconds"]  # training time, whichever worker trained
    mp.undo()


def accuracy(model, tok, items):
    preds = lm.greedy_answer(model, tok, [q.question for q in items], max_new_tokens=6)
    return float(np.mean([is_correct(p, q) for p, q in zip(preds, items, strict=True)]))


def test_memorises_the_training_facts(world, trained):
    model, tok, _ = trained
    assert accuracy(model, tok, world.qa_pairs("train")) >= 0.95


def test_answers_facts_it_only_read_as_statements(world, trained):
    model, tok, _ = trained
    # measured 0.86-0.93 over World seeds 0-2; chance is about 1/12
    assert accuracy(model, tok, world.qa_pairs("heldout")) >= 0.6


def test_true_answers_rank_first(world, trained):
    model, tok, _ = trained
    items = world.qa_pairs("train")
    cities = [q for q in items if q.fact.relation == "born_in"]
    res = lm.answer_rank(
        model,
        tok,
        [q.question for q in cities],
        [q.answer for q in cities],
        candidates=world.entities["city"],
    )
    assert np.mean(res.first_token_rank == 1) >= 0.95
    assert np.mean(res.sequence_rank == 1) >= 0.95


def test_cache_loads_back_with_identical_logits(world, trained, cache, monkeypatch):
    model, tok, _ = trained
    monkeypatch.setenv("PAPER_CACHE_DIR", str(cache))
    saved = [p for p in (cache / "fact_lm").iterdir() if p.is_dir()]
    assert len(saved) >= 1
    assert (saved[0] / "config.json").exists()
    again, tok2 = lm.fact_lm(world, steps=400, seed=0)
    prompts = [q.question for q in world.qa_pairs("all")[:10]]
    assert torch.equal(
        lm.next_token_logprobs(model, tok, prompts), lm.next_token_logprobs(again, tok2, prompts)
    )
    assert again.fact_lm_info["config"]["world"] == world.fingerprint()
    assert again.fact_lm_info["seconds"] == model.fact_lm_info["seconds"]  # the same cache entry


def test_bad_input(world):
    with pytest.raises(ValueError, match="size"):
        lm.fact_lm(world, size="huge")
    with pytest.raises(ValueError, match="t must be in"):
        lm.fact_lm(world, cutoff=1900)
    with pytest.raises(TypeError, match="World"):
        lm.fact_lm("world")


@pytest.mark.slow
def test_cutoff_snapshot_then_continued_training_updates_knowledge(world, cache, monkeypatch):
    monkeypatch.setenv("PAPER_CACHE_DIR", str(cache))
    t = 2012
    model, tok = lm.fact_lm(world, cutoff=t, steps=400, progress=False)
    changed = [f for f in world.changed_after(t) if f.relation == "works_for"]
    keys = {f.key for f in changed}
    items_then = [q for q in world.qa_pairs("all", t=t) if q.fact.key in keys]
    items_now = [q for q in world.qa_pairs("all") if q.fact.key in keys]
    assert accuracy(model, tok, items_then) > accuracy(model, tok, items_now)
    texts, pairs = world.corpus()
    lm.train_causal_lm(model, tok, texts, pairs, steps=300, lr=1e-3, progress=False)
    assert accuracy(model, tok, items_now) > accuracy(model, tok, items_then)
