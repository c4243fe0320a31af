import csv
import json
from collections import Counter

import pytest

from halluc_labels.data import (
    ANSWER_TYPES,
    CORRECT_UNSUPPORTED_TYPES,
    DATASETS,
    TYPE_LABELS,
    AliasBook,
    ClaimParser,
    controlled_answers,
    label_answers,
    load_labeled_answers,
    load_qa_dataset,
    make_examples,
    save_labeled_answers,
)
from paper_common.facts import RELATIONS, World


@pytest.fixture(scope="module")
def world() -> World:
    return World(seed=3, n_people=40, n_cities=14, n_companies=10, n_countries=5)


def _all_examples(world: World, split: str = "heldout"):
    return [e for ds in DATASETS for e in make_examples(world, ds, split=split)]


def test_every_answer_type_gets_its_two_labels(world):
    answers = controlled_answers(world, _all_examples(world, "all"))
    assert {a.answer_type for a in answers} == set(ANSWER_TYPES)
    parsed = label_answers(
        world, [a.example for a in answers], [a.answer for a in answers], "check"
    )
    for a, p in zip(answers, parsed, strict=True):
        assert (p.correct, p.faithful) == TYPE_LABELS[a.answer_type], (a.answer_type, a.answer)
        assert p.answer_type == a.answer_type, a.answer
    # the two criteria part exactly on these types
    assert TYPE_LABELS["verbose_correct"] == (True, False)
    assert TYPE_LABELS["outdated_reference"] == (False, False)  # reference-first
    assert TYPE_LABELS["stale_exact"] == (True, True)
    assert all(TYPE_LABELS[t] == (True, False) for t in CORRECT_UNSUPPORTED_TYPES)


def test_labels_follow_the_world_not_the_type_table(world):
    ex = next(e for e in make_examples(world, "onetoken") if e.relation == "born_in")
    truth = world.value_at(ex.subject, "born_in")
    country = world.value_at(truth, "located_in")
    wrong_country = next(c for c in world.entities["country"] if c != country)
    cases = {
        truth: (True, True),
        f"{ex.subject} was born in {truth}.": (True, True),  # restates question + reference
        f"{truth}. {truth} is located in {country}.": (True, False),
        f"{truth}. {truth} is located in {wrong_country}.": (False, False),
        country: (True, False),  # under-specific but true
        wrong_country: (False, False),
        "I do not know.": (True, True),
    }
    got = label_answers(world, [ex] * len(cases), list(cases), "hand")
    assert [(g.correct, g.faithful) for g in got] == list(cases.values())


def test_parser_recovers_planted_claims(world):
    parser = ClaimParser(world)
    ex = make_examples(world, "names")[0]
    person = world.entities["person"][1]
    company = world.value_at(person, "works_for")
    city = world.value_at(person, "lives_in")
    planted = [(person, "works_for", company), (person, "lives_in", city)]
    aka = parser.book.aka[company]
    text = (
        f"{RELATIONS['works_for'].heldout_statements[0].format(s=person, v=company)} "
        f"{RELATIONS['lives_in'].statements[2].format(s=person, v=city)} "
        f"{company} is also known as {aka}."
    )
    parsed = parser.parse(text, ex)
    assert parsed.parsed
    assert list(parsed.claims) == [*planted, (company, "aka", aka)]
    # aliases map back to their entity
    assert parser.entity(aka) == company
    assert parser.entity(world.aliases(person)[0]) == person


def test_unparsable_answers_are_counted_not_guessed(world):
    ex = make_examples(world, "onetoken")[0]
    got = label_answers(world, [ex] * 3, ["banana split", "", "Zzz is located in Qqq."], "g")
    assert [g.answer_type for g in got] == ["unparsable"] * 3
    assert all(g.correct is None and g.faithful is None for g in got)


def test_datasets_shapes_and_determinism(world):
    one = make_examples(world, "onetoken", seed=1)
    assert one == make_examples(world, "onetoken", seed=1)
    assert one != make_examples(world, "onetoken", seed=2)
    names = make_examples(world, "names")
    assert any(e.aliases for e in names)
    assert all(" " in e.reference for e in names)  # multi-word values
    heldout = {e.subject for e in _all_examples(world)}
    assert heldout <= world.target_subjects
    temporal = make_examples(world, "temporal", outdated_fraction=1.0)
    for e in temporal:
        truth = world.value_at(e.subject, e.relation, e.t_query)
        assert e.t_ref < e.t_query
        assert e.reference != truth
    inverse = [e for e in names if e.relation.startswith("inverse:")]
    assert inverse
    for e in inverse:
        base = e.relation.split(":")[1]
        assert world.value_at(e.reference, base) == e.subject
    assert len(make_examples(world, "onetoken", n=5)) == 5
    assert controlled_answers(world, one[:5], seed=4) == controlled_answers(world, one[:5], seed=4)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dataset": "trivia"}, "dataset must be"),
        ({"dataset": "names", "split": "test"}, "split must be"),
        ({"dataset": "temporal", "outdated_fraction": 1.5}, "outdated_fraction"),
        ({"dataset": "names", "n": 0}, "n must be"),
    ],
)
def test_make_examples_bad_input(world, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_examples(world, **kwargs)


def test_controlled_answers_bad_input(world):
    ex = make_examples(world, "onetoken")[:2]
    with pytest.raises(ValueError, match="unknown answer type"):
        controlled_answers(world, ex, types=["fabulous"])
    with pytest.raises(ValueError, match="same length"):
        label_answers(world, ex, ["x"], "g")


def test_alias_book_is_new_and_deterministic(world):
    a, b = AliasBook(world), AliasBook(world)
    assert a.aka == b.aka
    assert len(set(a.aka.values())) == len(a.aka)
    words = {w for name in world.entity_type for w in name.split()}
    assert not set(a.aka.values()) & words


def test_labeled_answer_files_round_trip(world, tmp_path):
    answers = controlled_answers(world, make_examples(world, "names", n=3))
    path = save_labeled_answers(answers, tmp_path / "pairs.jsonl")
    back = load_labeled_answers(path)
    assert [b.answer for b in back] == [a.answer for a in answers]
    assert [b.correct for b in back] == [a.correct for a in answers]
    assert [b.example.references for b in back] == [a.example.references for a in answers]
    assert all(b.faithful is None for b in back)


def test_human_labels_from_csv_and_jsonl(tmp_path):
    rows = [
        {
            "question": "Who wrote Hamlet?",
            "references": "William Shakespeare|Shakespeare",
            "answer": "Shakespeare",
            "label": "correct",
            "generator": "g1",
            "dataset": "triviaqa",
        },
        {
            "question": "Capital of France?",
            "references": "Paris",
            "answer": "Lyon",
            "label": "1",
            "generator": "g2",
            "dataset": "nq_open",
            "error_type": "wrong",
        },
    ]
    path = tmp_path / "human.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[*rows[0], "error_type"])
        writer.writeheader()
        writer.writerows(rows)
    got = load_labeled_answers(path)
    assert [g.correct for g in got] == [True, False]
    assert got[0].example.references == ("William Shakespeare", "Shakespeare")
    assert got[1].answer_type == "wrong"
    assert Counter(g.source for g in got) == Counter({"g1": 1, "g2": 1})
    jsonl = tmp_path / "human.jsonl"
    jsonl.write_text(json.dumps({**rows[0], "references": ["Shakespeare"], "label": False}) + "\n")
    assert load_labeled_answers(jsonl)[0].correct is True


@pytest.mark.parametrize(
    ("row", "match"),
    [
        (
            {"question": "q", "references": "r", "answer": "a", "label": "maybe"},
            "not a hallucination label",
        ),
        ({"question": "q", "references": "r", "answer": "a"}, "missing field 'label'"),
        ({"question": "q", "references": " ", "answer": "a", "label": 1}, "reference is empty"),
        ({"question": "q", "answer": "a", "label": 1}, "needs a 'references'"),
    ],
)
def test_human_labels_bad_rows(tmp_path, row, match):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match=match):
        load_labeled_answers(path)


def test_qa_dataset_loaders(tmp_path):
    trivia = tmp_path / "trivia.json"
    trivia.write_text(
        json.dumps(
            {
                "Data": [
                    {
                        "Question": "Largest planet?",
                        "Answer": {"Value": "Jupiter", "Aliases": ["Jupiter", "Jove"]},
                    },
                ]
            }
        )
    )
    nq = tmp_path / "nq.jsonl"
    nq.write_text(json.dumps({"question": "who sang x", "answer": ["A", "B"]}) + "\n")
    squad = tmp_path / "squad.json"
    squad.write_text(
        json.dumps(
            {
                "data": [
                    {
                        "paragraphs": [
                            {
                                "qas": [
                                    {
                                        "question": "When?",
                                        "answers": [
                                            {"text": "1999"},
                                            {"text": "1999"},
                                            {"text": "in 1999"},
                                        ],
                                    },
                                    {"question": "Unanswerable?", "answers": []},
                                ]
                            }
                        ]
                    }
                ]
            }
        )
    )
    t = load_qa_dataset(trivia, "triviaqa")
    assert (t[0].reference, t[0].aliases) == ("Jupiter", ("Jove",))
    n = load_qa_dataset(nq, "nq_open")
    assert (n[0].reference, n[0].aliases) == ("A", ("B",))
    s = load_qa_dataset(squad, "squad")
    assert len(s) == 1
    assert s[0].references == ("1999", "in 1999")
    with pytest.raises(ValueError, match="kind must be"):
        load_qa_dataset(nq, "hotpot")
    with pytest.raises(ValueError, match="does not exist"):
        load_qa_dataset(tmp_path / "missing.json", "squad")
