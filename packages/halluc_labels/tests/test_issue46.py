"""Issue 46, item 7: the package aligned with Valjakka et al. (LPHB). One test per named defect;
each failed before its fix."""

import csv

import numpy as np
import pytest

from halluc_labels.data import (
    DATASETS,
    TYPE_LABELS,
    AliasBook,
    controlled_answers,
    label_answers,
    make_examples,
)
from paper_common.facts import World


@pytest.fixture(scope="module")
def world() -> World:
    return World(seed=3, n_people=40, n_cities=14, n_companies=10, n_countries=5)


def _examples(world, split="heldout"):
    return [e for ds in DATASETS for e in make_examples(world, ds, split=split)]


# ---- defect 1: correctness is reference-first (a core answer that conflicts with the reference
# is a hallucination even if true; one that matches it is not, even if the World has moved on)
def test_correctness_is_reference_first(world):
    assert TYPE_LABELS["outdated_reference"][0] is False  # true now, conflicts with the reference
    assert TYPE_LABELS["other_valid"][0] is False  # another valid entity: conflicts
    assert TYPE_LABELS["stale_exact"][0] is True  # matches the reference
    answers = controlled_answers(world, _examples(world, "all"))
    got = label_answers(world, [a.example for a in answers], [a.answer for a in answers], "x")
    for kind in ("outdated_reference", "other_valid", "stale_exact"):
        rows = [g for a, g in zip(answers, got, strict=True) if a.answer_type == kind]
        assert rows, kind
        assert {g.correct for g in rows} == {TYPE_LABELS[kind][0]}, kind


# ---- defect 2: an abstention claims nothing the reference contradicts: faithful
def test_abstention_is_faithful(world):
    assert TYPE_LABELS["abstention"] == (True, True)
    ex = _examples(world)[0]
    (got,) = label_answers(world, [ex], ["I do not know."], "x")
    assert (got.correct, got.faithful) == (True, True)


# ---- defect 3: lexical thresholds chosen per generator (full set and 3-fold CV), max kappa
def test_threshold_maximises_kappa_per_generator():
    from halluc_labels.analysis import kappa, select_threshold, threshold_labels

    rng = np.random.default_rng(0)
    truth = rng.random(300) < 0.4
    # generator a separates at 0.3, generator b at 0.7
    scores = np.where(truth, 0.0, 1.0) * 0.0
    groups = np.repeat(["a", "b"], 150)
    cut = np.where(groups == "a", 0.3, 0.7)
    scores = np.where(truth, cut - 0.1, cut + 0.1) + rng.normal(0, 0.02, 300)
    t_a = select_threshold(scores[:150], truth[:150])
    t_b = select_threshold(scores[150:], truth[150:])
    assert 0.2 < t_a < 0.4
    assert 0.6 < t_b < 0.8
    out = threshold_labels(scores, truth, groups, n_folds=3, seed=0)
    assert kappa(out.oracle, truth) > 0.95
    assert kappa(out.cv, truth) > 0.9
    assert set(out.thresholds) == {"a", "b"}
    assert len(out.thresholds["a"]["cv"]) == 3
    # one global threshold of 0.5 fails generator a's correct answers
    assert kappa(scores < 0.5, truth) < 0.8
    with pytest.raises(ValueError, match="n_folds"):
        threshold_labels(scores, truth, groups, n_folds=1)


# ---- defect 4: the NLI premise is the reference alone
def test_nli_premise_is_the_reference_alone():
    from halluc_labels.labelers import nli_premise

    assert nli_premise("Where was A born?", ["Paris", "Lutetia"]) == "Paris (also: Lutetia)."
    assert "Where" not in nli_premise("Where was A born?", "Paris")


# ---- defect 5: the paper's prompts (P1, P2, P3 and the P1s / P2t controls), JSON verdict
def test_judge_prompts_follow_the_paper():
    from halluc_labels.labelers import (
        PROMPT_CRITERION,
        PROMPTS,
        judge_prompt,
        parse_judge_reply,
    )

    assert set(PROMPTS) == {"p1", "p2", "p3", "p1s", "p2t"}
    assert PROMPT_CRITERION == {
        "p1": "faithfulness",
        "p1s": "faithfulness",
        "p2": "correctness",
        "p2t": "correctness",
        "p3": "correctness",
    }
    text = judge_prompt("Where was A born?", "Paris", "Paris.", "p2")
    assert text.rstrip().endswith('{"label":')
    assert "confidence" in text
    assert len(PROMPTS["p2"]) > 3 * len(PROMPTS["p1"]) / 2  # structured: a decision tree
    assert parse_judge_reply(' {"label": 1, "confidence": 0.8}') == (1, 0.8)
    assert parse_judge_reply(' 0, "confidence": 0.3}') == (0, 0.3)
    assert parse_judge_reply("maybe") == (None, None)


# ---- defect 6: per-generator agreement, bias, FP share, FPR / FNR (and McNemar)
def test_label_metrics_as_the_paper_reports_them():
    from halluc_labels.analysis import label_metrics

    truth = np.array([1, 1, 1, 0, 0, 0, 0, 0], bool)
    pred = np.array([1, 1, 0, 1, 1, 0, 0, 0], bool)
    m = label_metrics(pred, truth)
    assert (m["fp"], m["fn"]) == (2, 1)
    assert m["bias"] == pytest.approx(4 / 8 - 3 / 8)
    assert m["fp_share"] == pytest.approx(2 / 3)
    assert m["fpr"] == pytest.approx(2 / 5)
    assert m["fnr"] == pytest.approx(1 / 3)
    assert m["n"] == 8


# ---- defect 7: judges and the NLI model never see a label where the two criteria differ
def test_judges_and_nli_are_not_trained_on_the_evaluated_criteria(world):
    from halluc_labels.models import JudgeSpec, NLISpec, _judge_data, _nli_data

    book = AliasBook(world)
    _, pairs = _judge_data(world, book, JudgeSpec("j", steps=10))
    judged = [(p, y) for p, y in pairs if '{"label":' in p]
    assert judged
    # same item, every prompt: the same verdict (the prompt carries no label information)
    by_item: dict[str, set[str]] = {}
    for p, y in judged:
        item = p[p.index("Reference answer:") :]
        by_item.setdefault(item, set()).add(y)
    assert all(len(v) == 1 for v in by_item.values())
    prem, hyp, _labels = _nli_data(world, book, NLISpec(steps=10))
    from halluc_labels.labelers import nli_premise

    train = controlled_answers(world, _examples(world, "train"), book=book)
    differ = {
        (nli_premise(a.example.question, a.example.references), a.answer)
        for a in train
        if a.correct != a.faithful
    }
    assert differ
    assert not differ & set(zip(prem, hyp, strict=True))


# ---- defect 8: a loader for the released LPHB master CSV
LPHB_COLUMNS = [
    "item_id", "qid", "dataset", "model", "question", "ref_str", "answer_text",
    "annotator1_label", "annotator2_label", "label_gpt_5_mini_p1", "label_gpt_5_mini_p2",
]  # fmt: skip


def _write(path, rows, columns=LPHB_COLUMNS):
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        for r in rows:
            w.writerow({k: r[k] for k in columns})


def _row(i, label, model="llama3-8b"):
    return {
        "item_id": i, "qid": f"q{i}", "dataset": "triviaqa", "model": model,
        "question": f"Question {i}?", "ref_str": "Paris | Lutetia", "answer_text": "Paris.",
        "annotator1_label": label, "annotator2_label": -1,
        "label_gpt_5_mini_p1": 1, "label_gpt_5_mini_p2": 0,
    }  # fmt: skip


def test_lphb_loader(tmp_path):
    from halluc_labels.data import load_lphb

    path = tmp_path / "human_judge_release_master.csv"
    _write(path, [_row(1, 0), _row(2, 1, "gemma-2-9b"), _row(3, -1)])
    data = load_lphb(path)
    assert len(data.answers) == 2  # the -1 row is dropped and counted
    assert data.n_dropped == 1
    a, b = data.answers
    assert a.example.references == ("Paris", "Lutetia")
    assert (a.correct, b.correct) == (True, False)
    assert (a.source, b.source) == ("llama3-8b", "gemma-2-9b")
    assert a.example.dataset == "triviaqa"
    assert a.faithful is None
    np.testing.assert_array_equal(data.judge_labels["gpt_5_mini"]["p1"], [True, True])
    np.testing.assert_array_equal(data.judge_labels["gpt_5_mini"]["p2"], [False, False])

    bad = tmp_path / "bad.csv"
    _write(bad, [_row(1, 0)], [c for c in LPHB_COLUMNS if c != "ref_str"])
    with pytest.raises(ValueError, match="ref_str"):
        load_lphb(bad)


# ---- common: a measurement that takes any HF causal LM + tokenizer as the judge
def test_evaluate_judge_takes_model_and_tokenizer(world):
    import torch

    from halluc_labels.analysis import evaluate_judge
    from halluc_labels.models import world_tokenizer
    from paper_common.lm import tiny_causal_lm

    book = AliasBook(world)
    tok = world_tokenizer(world, book)
    torch.manual_seed(0)
    model = tiny_causal_lm(tok, "llama", 1, 32, 2, seed=0)
    answers = controlled_answers(world, _examples(world)[:6], book=book)
    out = evaluate_judge(model, tok, answers, prompts=("p1", "p2"), n_resamples=200)
    assert out.model == type(model).__name__
    assert {r["prompt"] for r in out.rows} == {"p1", "p2"}
    assert {"kappa", "bias", "fp_share", "fpr", "fnr", "generator"} <= set(out.rows[0])
    assert out.switch.n == len(answers)
