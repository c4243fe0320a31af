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
        else:
            assert all(a.correct for a in labelled), style
    short = label_answers(
        world, examples, [style_answer(world, book, e, "short") for e in examples], "s", book
    )
    # short answers are faithful except where the reference is outdated
    assert all(a.faithful == (a.example.t_ref == a.example.t_query) for a in short)
    with pytest.raises(ValueError, match="style must be"):
        style_answer(world, book, examples[0], "poem")


def test_judge_pairs_are_balanced_per_prompt(world):
    answers = controlled_answers(world, _examples(world, "train"))
    pairs = judge_pairs(answers, np.random.default_rng(0))
    for p in PROMPTS:
        verdicts = [t for text, t in pairs if PROMPTS[p] in text]
        assert verdicts.count(" Yes") == verdicts.count(" No") > 0


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
    # held-out facts: entailment of the reference itself, not of another value or an extra claim
    assert by_type["exact"] > by_type["wrong_value"] + 0.25, by_type
    assert by_type["exact"] > by_type["verbose_correct"] + 0.25, by_type
