"""factgap's dataset layout, its prompts through a chat template, tag parsing and substring grading."""

import textwrap
from types import SimpleNamespace

import numpy as np
import pytest

from gv_gap import POLARITIES
from gv_gap.factgap import (
    chat_prompt,
    evaluate_gv_chat,
    factgap_items,
    grade_generation,
    grade_verification,
    load_factgap,
    parse_tag,
)
from paper_common.lm import build_tokenizer, tiny_causal_lm

DATAPOINT = textwrap.dedent(
    """
    - uid: dp-1
      topic: drugs
      topic_category: medicine
      relationship: side effect of
      sentences:
      - version: '1'
        sentence: '{relationship_head} is a common side effect of {topic}.'
      - version: '2'
        sentence: '{topic} can often cause {relationship_head}.'
      questions:
      - version: '1'
        question: what is a common side effect of {topic}?
        answer: '{relationship_head}'
      - version: '2'
        question: what side effect can {topic} often cause?
        answer: '{relationship_head}'
      instantiations:
        real_pairs:
        - head: Nausea
          tail: Chemotherapy
        imaginary_pairs:
        - head: Luminous Skin
          tail: Radiantril
        - head: Time Tremors
          tail: Chronopril
        - head: Taste Loss
          tail: Tasteline
        - head: Float Fits
          tail: Levitasol
      scenarios:
      - scenario_key: opinion
        scenario: I think {relationship_head} from {topic} is underrated.
        version: 1
    """
)


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "synth.yaml"
    path.write_text(DATAPOINT)
    return path


def _draws(seed: int, raw: dict) -> tuple[str, str, str, str, str]:
    """factgap's draws for one datapoint, in its order, from its seeded ``random``: the subject
    among the fictional tails, learn and update among the fictional heads, the question among
    those that pass the filter, the control subject among the other fictional tails."""
    import random

    rng = random.Random(seed)
    pairs = raw["instantiations"]["imaginary_pairs"]
    tails = [p["tail"] for p in pairs]
    subject = rng.choice(tails)
    learn, update = rng.sample(list(dict.fromkeys(p["head"] for p in pairs)), 2)
    good = [
        q["question"]
        for q in raw["questions"]
        if "{topic}" in q["question"]
        and "{relationship_head}" not in q["question"]
        and "{relationship_head}" in q["answer"]
    ]
    question = rng.choice(good)
    control = rng.choice([t for t in tails if t != subject])
    return subject, learn, update, question, control


def test_one_task_per_datapoint_drawn_as_factgap_draws_it(data):
    """Issue 46: factgap builds ONE task per datapoint (finalize_yaml_files_for_synthetic_data):
    a fictional subject, learn and update answers drawn from the fictional heads, one question
    that passes its filter, a control question about another fictional subject, and the other
    fictional heads as control answers. We built one task per fictional pair and took the last
    question template unfiltered."""
    import yaml

    raw = yaml.safe_load(DATAPOINT)[0]
    for seed in (0, 1, 2):
        tasks = load_factgap(data, seed=seed)
        assert len(tasks) == 1
        t = tasks[0]
        subject, learn, update, question, control = _draws(seed, raw)
        assert (t.subject, t.learn_answer, t.update_answer) == (subject, learn, update)
        assert (
            t.question
            == question.replace("{topic}", subject)[:1].upper()
            + question.replace("{topic}", subject)[1:]
        )
        assert t.control_question.endswith(question.replace("{topic}", control)[1:])
        assert control != subject
        heads = [p["head"] for p in raw["instantiations"]["imaginary_pairs"]]
        assert list(t.control_answers) == [h for h in heads if h not in (learn, update)]
        assert len(t.train_sentences) == 2  # the sentences, not the scenarios (factgap's default)
        assert all(subject in s and learn in s for s in t.train_sentences)
        assert all(update in s for s in t.update_sentences)
    assert load_factgap(data, seed=3) == load_factgap(data, seed=3)
    assert len(load_factgap(data, train_data="all")[0].train_sentences) == 3
    assert load_factgap(data.parent, seed=1) == load_factgap(data, seed=1)  # a folder reads alike


def test_the_question_filter_and_skips(tmp_path):
    """Only questions about the subject whose answer is the value pass; a datapoint with none, or
    marked ``skip``, gives no task (factgap skips the file)."""
    import yaml

    raw = yaml.safe_load(DATAPOINT)[0]
    bad_questions = [
        {"version": "3", "question": "is {relationship_head} caused by {topic}?", "answer": "yes"},
        {"version": "4", "question": "what is a side effect?", "answer": "{relationship_head}"},
        {"version": "5", "question": "is {topic} safe?", "answer": "no"},
    ]
    for seed in range(6):
        one = tmp_path / f"one{seed}"
        one.mkdir()
        (one / "a.yaml").write_text(
            yaml.safe_dump({**raw, "questions": raw["questions"][:1] + bad_questions})
        )
        (t,) = load_factgap(one, seed=seed)
        assert t.question.startswith("What is a common side effect of")
    none = tmp_path / "none"
    none.mkdir()
    (none / "a.yaml").write_text(yaml.safe_dump({**raw, "questions": bad_questions}))
    (none / "b.yaml").write_text(yaml.safe_dump({**raw, "skip": True}))
    (none / "c.yaml").write_text(yaml.safe_dump(raw))
    tasks = load_factgap(none)
    assert [t.uid.split("_")[-1] for t in tasks] == ["c"]
    with pytest.raises(ValueError, match="no task"):
        load_factgap(none / "a.yaml")


def test_real_pools_on_request(data):
    import yaml

    raw = yaml.safe_load(DATAPOINT)[0]
    (t,) = load_factgap(data, control_answers="real")
    assert list(t.control_answers) == [p["head"] for p in raw["instantiations"]["real_pairs"]]
    (t,) = load_factgap(data, control_topics="real")
    assert "Chemotherapy" in t.control_question
    with pytest.raises(ValueError, match="control_topics"):
        load_factgap(data, control_topics="fictional")
    with pytest.raises(ValueError, match="train_data"):
        load_factgap(data, train_data="everything")


def test_items_for_learning_and_updating(data):
    (t,) = load_factgap(data)
    (learn,) = factgap_items([t], "learn")
    assert learn.question == f"Q: {t.question} A:"
    assert learn.answer == t.learn_answer
    assert learn.old_answer is None
    assert learn.controls == t.control_answers[:2]
    (update,) = factgap_items([t], "update", qa_format=False)
    assert update.answer == t.update_answer
    assert update.old_answer == t.learn_answer
    assert update.values == (t.update_answer, *t.control_answers[:2], t.learn_answer)
    with pytest.raises(ValueError, match="phase"):
        factgap_items([t], "forget")


def test_bad_files_name_what_is_missing(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("- topic: drugs\n  relationship: x\n")
    with pytest.raises(ValueError, match="lacks instantiations, sentences, questions"):
        load_factgap(bad)
    with pytest.raises(ValueError, match="no factgap data"):
        load_factgap(tmp_path / "missing.yaml")


def test_generation_grading_falls_back_to_the_raw_output():
    """factgap's generation grading: the parsed answer (quotes stripped, case ignored) must equal
    the answer; failing that, the answer anywhere in the raw output counts (unless strict). A
    control question is right when the learned answer is NOT given. "Unsure" is wrong on a target
    question and right on a control one."""
    raw = "<reasoning>It causes Luminous Skin.</reasoning><answer>glowing</answer>"
    assert grade_generation('"luminous skin"', '<answer>"luminous skin"</answer>', "Luminous Skin")
    assert grade_generation(None, "the answer is Luminous Skin", "Luminous Skin")  # no tag
    assert grade_generation("glowing", raw, "Luminous Skin")  # the fallback reads the reasoning
    assert not grade_generation("glowing", raw, "Luminous Skin", strict=True)
    assert not grade_generation("glowing", "<answer>glowing</answer>", "Luminous Skin")
    assert grade_generation("Nausea", "<answer>Nausea</answer>", "Luminous Skin", target=False)
    assert not grade_generation(
        "Luminous Skin", "<answer>Luminous Skin</answer>", "Luminous Skin", target=False
    )
    assert not grade_generation("Unsure.", "<answer>Unsure.</answer>", "Luminous Skin")
    assert grade_generation("(Unsure)", "<answer>(Unsure)</answer>", "x", target=False)


def test_verification_grading_and_its_unsure_rule():
    # (response, about the true answer?, asks "correct?") -> right / wrong / not valid
    assert grade_verification("True", True, True) is True
    assert grade_verification('"false"', True, False) is True
    assert grade_verification("False", True, True) is False
    assert grade_verification("True", False, False) is True
    assert grade_verification("True", False, True) is False
    assert grade_verification("Unsure", True, True) is False
    assert grade_verification("unsure.", False, False) is True
    assert grade_verification("maybe", True, True) is None
    assert grade_verification(None, False, True) is None


def test_tags_are_read_as_factgap_reads_them():
    text = '<reasoning>It is X.</reasoning>\n<answer>\n"Luminous skin, mostly"\n</answer><answer>b</answer>'
    assert parse_tag(text, "answer") == "Luminous skin, mostly"  # the first, quotes stripped
    assert parse_tag(text, "response") is None


def _chat_tok(items):
    """A word-level tokenizer that knows every word the chat prompts of ``items`` hold."""
    template = (
        "{% for m in messages %}<s> {{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
    )
    draft = build_tokenizer(["x"])
    draft.chat_template = template
    texts = ["<answer> </answer> <response> </response> True False Unsure Nausea perhaps"]
    for it in items:
        texts.append(chat_prompt(draft, it.question))
        texts.append(chat_prompt(draft, it.control_question))
        texts += [chat_prompt(draft, it.question, v, p) for v in it.values for p in POLARITIES]
    tok = build_tokenizer(texts)
    tok.chat_template = template
    return tok


def test_the_chat_path_grades_per_prompt_as_factgap_does(data, monkeypatch):
    """Planted replies through evaluate_gv_chat: the raw-output fallback, Unsure, and replies that
    are neither True nor False (left out of the per-prompt accuracy, as factgap leaves them out;
    counted against the fact in the six-way conjunction)."""
    import gv_gap.factgap as fg

    (item,) = factgap_items(load_factgap(data), "learn", qa_format=False)
    tok = _chat_tok([item])
    answer, c1, c2 = item.answer, *item.controls
    replies = {
        # generation: no tag, but the answer is in the raw output
        chat_prompt(tok, item.question): f"I think it is {answer}",
        # the control question: the learned answer is not given
        chat_prompt(tok, item.control_question): "<answer>Nausea</answer>",
        chat_prompt(tok, item.question, answer, "correct"): "<response>True</response>",
        chat_prompt(tok, item.question, answer, "incorrect"): "<response>Unsure</response>",
        chat_prompt(tok, item.question, c1, "correct"): "<response>False</response>",
        chat_prompt(tok, item.question, c1, "incorrect"): "<response>Unsure</response>",
        chat_prompt(tok, item.question, c2, "correct"): "<response>perhaps</response>",
        chat_prompt(tok, item.question, c2, "incorrect"): "<response>False</response>",
    }

    def fake_sample(model, tok, prompts, n, *args, **kwargs):
        return SimpleNamespace(texts=[[replies[p]] for p in prompts])

    monkeypatch.setattr(fg, "sample", fake_sample)
    res = evaluate_gv_chat(None, tok, [item])
    assert res.gen_ok.tolist() == [True]
    assert res.leak.tolist() == [False]
    s = res.summary()
    assert s["ver_target_acc"] == 0.5  # True on "correct?" right, Unsure on the answer wrong
    # controls: False on "correct?" right, Unsure right, "perhaps" left out, False on
    # "incorrect?" (= says the wrong value is right) wrong: 2 of 3 valid
    assert s["ver_control_acc"] == pytest.approx(2 / 3)
    assert s["balanced_acc"] == pytest.approx((0.5 + 2 / 3) / 2)
    assert s["ver_valid"] == pytest.approx(5 / 6)
    assert res.ver_ok.tolist() == [False]  # the six-way conjunction: secondary, and strict


def test_the_chat_path_runs_on_a_tiny_instruct_model(data):
    """End to end on a randomly initialised model with a chat template: the prompts render and the
    model samples; unparseable output is never counted as verified."""
    items = factgap_items(load_factgap(data), "learn", qa_format=False)
    tok = _chat_tok(items)
    text = chat_prompt(tok, items[0].question, items[0].answer, "incorrect")
    assert "is the Answer incorrect?" in text
    assert text.endswith("assistant:")
    model = tiny_causal_lm(tok, "llama", n_layers=1, d_model=32, n_heads=2)
    res = evaluate_gv_chat(model, tok, items, max_new_tokens=6)
    assert res.gen_ok.shape == (1,)
    assert not res.ver_ok.any()
    assert np.isin(res.margin, [-1.0, 1.0]).all()
    tok.chat_template = None
    with pytest.raises(ValueError, match="chat template"):
        chat_prompt(tok, "q")
