import numpy as np
import pytest
import torch

from halluc_labels.data import (
    DATASETS,
    AliasBook,
    controlled_answers,
    label_answers,
    make_examples,
)
from halluc_labels.labelers import PROMPTS, NLILabeler, judge_prompt
from halluc_labels.models import (
    STYLES,
    GeneratorSpec,
    JudgeSpec,
    NLISpec,
    judge_pairs,
    nli_label,
    style_answer,
    train_model,
    world_tokenizer,
)
from paper_common.facts import World
from paper_common.lm import build_tokenizer

SMALL = {"n_people": 24, "n_cities": 10, "n_companies": 8, "n_countries": 4}


@pytest.fixture(scope="module")
def world() -> World:
    return World(seed=5, **SMALL)


@pytest.fixture(scope="module")
def tok(world):
    return world_tokenizer(world)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PAPER_CACHE_DIR", str(tmp_path))
    return tmp_path


def _examples(world, split="heldout"):
    return [e for ds in DATASETS for e in make_examples(world, ds, split=split)]


def test_tokenizer_covers_every_text(world, tok):
    examples = _examples(world, "all")
    answers = controlled_answers(world, examples)
    texts = [a.answer for a in answers[:400]]
    texts += [
        judge_prompt(a.example.question, a.example.references, a.answer, p, True, True)
        for a in answers[:200]
        for p in PROMPTS
    ]
    ids = tok(texts)["input_ids"]
    assert all(tok.unk_token_id not in row for row in ids)


def test_styled_answers_are_true(world):
    book = AliasBook(world)
    examples = _examples(world, "train")
    for style in STYLES:
        answers = [style_answer(world, book, e, style) for e in examples]
        labelled = label_answers(world, examples, answers, style, book)
        if style == "abstain":
            assert {a.answer_type for a in labelled} == {"abstention"}
        else:  # reference-first: a true answer that clashes with an outdated reference is not
            current = [a.example.t_ref == a.example.t_query for a in labelled]
            assert all(a.correct for a, c in zip(labelled, current, strict=True) if c), style
    short = label_answers(
        world, examples, [style_answer(world, book, e, "short") for e in examples], "s", book
    )
    # short answers are faithful except where the reference is outdated
    assert all(a.faithful == (a.example.t_ref == a.example.t_query) for a in short)
    with pytest.raises(ValueError, match="style must be"):
        style_answer(world, book, examples[0], "poem")


def test_judge_pairs_are_balanced_per_prompt(world):
    from halluc_labels.labelers import COMPACT_PROMPTS

    answers = controlled_answers(world, _examples(world, "train"))
    pairs = judge_pairs(answers, np.random.default_rng(0))
    for p in PROMPTS:
        verdicts = [t for text, t in pairs if text.startswith(COMPACT_PROMPTS[p] + " ")]
        assert verdicts.count(" 0") == verdicts.count(" 1") > 0


def test_nli_labels_by_type(world):
    answers = controlled_answers(world, make_examples(world, "onetoken"))
    got = {a.answer_type: nli_label(a) for a in answers}
    assert got["exact"] == 0
    assert got["verbose_correct"] == got["abstention"] == 1
    assert got["wrong_value"] == got["outdated_answer"] == 2


def test_models_are_cached_and_reloaded(world, tok, cache):
    spec = GeneratorSpec("g", d_model=32, steps=5)
    model, _ = train_model(world, spec, tok)
    again, tok2 = train_model(world, spec, tok)
    assert again.info["seconds"] == model.info["seconds"]
    ids = tok(["Q: Where was x born? A:"], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, again(ids).logits)
    assert len(tok2) == len(tok)
    assert any((cache / "halluc_labels").iterdir())
    nli, _ = train_model(world, NLISpec(d_model=32, steps=5), tok)
    assert nli.config.id2label[0] == "entailment"
    assert train_model(world, NLISpec(d_model=32, steps=5), tok)[0].info == nli.info


def test_train_model_bad_specs(world, tok):
    with pytest.raises(TypeError, match="spec must be"):
        train_model(world, {"steps": 5}, tok, cache=False)
    with pytest.raises(ValueError, match="knowledge must be"):
        train_model(world, JudgeSpec("j", knowledge=1.5), tok, cache=False)
    with pytest.raises(ValueError, match="styles needs"):
        train_model(world, GeneratorSpec("g", styles=(1.0,), steps=2), tok, cache=False)


def test_a_tuned_nli_classifier_tells_exact_from_wrong(world, tok):
    nli, _ = train_model(world, NLISpec(steps=500), tok, cache=False)
    answers = controlled_answers(
        world, _examples(world), types=("exact", "wrong_value", "verbose_correct")
    )
    labeler = NLILabeler(nli, tok)
    scores = labeler.score(
        [a.example.question for a in answers],
        [a.example.references for a in answers],
        [a.answer for a in answers],
    )
    by_type = {
        t: scores[[a.answer_type == t for a in answers]].mean()
        for t in ("exact", "wrong_value", "verbose_correct")
    }
    # held-out facts: entailment of the reference itself, not of another value or an extra claim.
    # Measured (1 thread, torch 2.15): exact 0.72, wrong value 0.23, verbose 0.00 (136-137 answers
    # each): margins 0.49 and 0.71 against the 0.25 asserted
    assert by_type["exact"] > by_type["wrong_value"] + 0.25, by_type
    assert by_type["exact"] > by_type["verbose_correct"] + 0.25, by_type


def _cached(cache):
    return sorted(p for p in (cache / "halluc_labels").iterdir() if p.is_dir())


def test_the_cache_key_covers_the_tokenizer_and_the_training_data(world, tok, cache, monkeypatch):
    import halluc_labels.models as hm

    spec = GeneratorSpec("g", d_model=32, steps=2)
    train_model(world, spec, tok)
    # another vocabulary: a new model, not the one trained on `tok`'s ids (before: a cache hit
    # that returned the old tokenizer with it)
    other = world_tokenizer(World(seed=6, **SMALL))
    _, tok2 = train_model(world, spec, other)
    assert tok2.get_vocab() == other.get_vocab()
    assert len(_cached(cache)) == 2
    # another training-data recipe: trained anew
    real = hm._generator_data
    monkeypatch.setattr(
        hm, "_generator_data", lambda w, b, s: (real(w, b, s)[0][:-1], real(w, b, s)[1])
    )
    train_model(world, spec, tok)
    assert len(_cached(cache)) == 3
    # a cached model whose vocabulary is not the one asked for is refused, not used
    with pytest.raises(RuntimeError, match="another vocabulary"):
        hm._load(_cached(cache)[0], spec, build_tokenizer(["a few words"]))


def test_models_trained_in_workers_load_in_the_parent(world, tok, cache):
    """At quick the parent runs with 2 threads and workers train with 1; the cache is keyed by the
    thread count, so the parent must look the models up under the workers' pin."""
    from halluc_labels.reproduce import _JOB, _load_models, _train_job
    from paper_common.device import pinned_threads

    spec = GeneratorSpec("g", d_model=32, steps=2)
    _JOB.update(world=world, tok=tok, workers=2)
    with pinned_threads(2, torch=True):
        _train_job(spec)  # as in a worker
        assert torch.get_num_threads() == 2
        models = _load_models(world, [spec], tok)
    assert len(_cached(cache)) == 1  # loaded, not trained a second time at 2 threads
    assert models["g"].info["spec"]["name"] == "g"
