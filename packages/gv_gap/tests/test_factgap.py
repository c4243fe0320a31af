"""factgap's dataset layout, its prompts through a chat template, tag parsing and substring grading."""

import textwrap

import numpy as np
import pytest

from gv_gap.factgap import (
    chat_prompt,
    evaluate_gv_chat,
    factgap_items,
    grade_substring,
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


def test_loader_builds_one_task_per_fictional_pair(data):
    tasks = load_factgap(data)
    assert len(tasks) == 4
    t = tasks[0]
    assert (t.subject, t.learn_answer, t.update_answer) == (
        "Radiantril",
        "Luminous Skin",
        "Time Tremors",
    )
    assert t.train_sentences == (
        "Luminous Skin is a common side effect of Radiantril.",
        "Radiantril can often cause Luminous Skin.",
    )
    assert t.update_sentences[1] == "Radiantril can often cause Time Tremors."
    assert t.question == "What side effect can Radiantril often cause?"  # the held-out version
    assert t.control_question == "What side effect can Chemotherapy often cause?"
    assert t.control_answer == "Nausea"
    assert set(t.control_answers) == {"Taste Loss", "Float Fits"}
    assert tasks[-1].update_answer == "Luminous Skin"  # wraps around
    assert len(load_factgap(data, scenarios=True)[0].train_sentences) == 3
    assert load_factgap(data.parent)[0] == t  # a folder of files reads the same


def test_items_for_learning_and_updating(data):
    tasks = load_factgap(data)
    learn = factgap_items(tasks, "learn")
    assert learn[0].question == "Q: What side effect can Radiantril often cause? A:"
    assert learn[0].answer == "Luminous Skin"
    assert learn[0].old_answer is None
    update = factgap_items(tasks, "update", qa_format=False)
    assert update[0].answer == "Time Tremors"
    assert update[0].old_answer == "Luminous Skin"
    assert update[0].values == ("Time Tremors", "Taste Loss", "Float Fits", "Luminous Skin")
    with pytest.raises(ValueError, match="phase"):
        factgap_items(tasks, "forget")


def test_bad_files_name_what_is_missing(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("- topic: drugs\n  relationship: x\n")
    with pytest.raises(ValueError, match="lacks instantiations, sentences, questions"):
        load_factgap(bad)
    with pytest.raises(ValueError, match="no factgap data"):
        load_factgap(tmp_path / "missing.yaml")


def test_tags_and_substring_grading():
    text = '<reasoning>It is X.</reasoning>\n<answer>\n"Luminous skin, mostly"\n</answer>'
    assert parse_tag(text, "answer") == "Luminous skin, mostly"
    assert parse_tag(text, "response") is None
    assert grade_substring(parse_tag(text, "answer"), "Luminous Skin")
    assert not grade_substring("Time tremors", "Luminous Skin")
    assert not grade_substring(None, "Luminous Skin")


def test_the_chat_path_runs_on_a_tiny_instruct_model(data):
    """End to end on a randomly initialised model with a chat template: the prompts render, the
    model samples, and unparseable output counts against every fact (never as verified)."""
    items = factgap_items(load_factgap(data), "learn", qa_format=False)[:2]
    tok = build_tokenizer(
        ["user assistant <answer> </answer> <response> True False"] + [it.question for it in items]
    )
    tok.chat_template = (
        "{% for m in messages %}<s> {{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
    )
    text = chat_prompt(tok, items[0].question, "Luminous Skin", "incorrect")
    assert "is the Answer incorrect?" in text
    assert text.endswith("assistant:")
    model = tiny_causal_lm(tok, "llama", n_layers=1, d_model=32, n_heads=2)
    res = evaluate_gv_chat(model, tok, items, max_new_tokens=6)
    assert res.gen_ok.shape == (2,)
    assert not res.ver_ok.any()
    assert np.isin(res.margin, [-1.0, 0.0, 1.0]).all()
    tok.chat_template = None
    with pytest.raises(ValueError, match="chat template"):
        chat_prompt(tok, "q")
