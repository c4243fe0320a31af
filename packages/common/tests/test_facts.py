import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paper_common.facts import (
    RELATIONS,
    QAItem,
    World,
    arithmetic_tasks,
    is_correct,
    read_jsonl,
    write_jsonl,
)


@pytest.fixture(scope="module")
def world():
    return World(seed=11, n_people=40, n_cities=12, n_companies=10, n_countries=4)


def test_same_seed_same_world_other_seed_other_world():
    a, b, c = World(seed=5, n_people=10), World(seed=5, n_people=10), World(seed=6, n_people=10)
    assert a.history == b.history
    assert a.target_subjects == b.target_subjects
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


def test_histories_cover_every_year_exactly_once(world):
    years = range(world.start_year, world.end_year + 1)
    for (subject, relation), versions in world.history.items():
        for t in years:
            holding = [f for f in versions if f.holds_at(t)]
            assert len(holding) == 1
            assert world.value_at(subject, relation, t) == holding[0].value
        values = [f.value for f in versions]
        assert all(x != y for x, y in itertools.pairwise(values)), "a change must change"
        if RELATIONS[relation].change_rate == 0:
            assert len(versions) == 1


def test_capitals_are_cities_of_their_country(world):
    for country in world.entities["country"]:
        capital = world.value_at(country, "capital_of")
        assert world.value_at(capital, "located_in") == country


@settings(max_examples=25, deadline=None)
@given(st.integers(2000, 2024))
def test_changed_after_lists_exactly_the_later_versions(t):
    w = World(seed=2, n_people=20)
    changed = w.changed_after(t)
    assert all(f.valid_from > t for f in changed)
    keys = {f.key for f in changed}
    for key in w.history:
        if w.value_at(*key, t) != w.value_at(*key, w.end_year):
            assert key in keys


def test_change_rates_and_cue_precision_match_the_generator():
    w = World(seed=0, n_people=400, n_companies=4, n_cities=8, n_countries=2)
    versions = [v for (s, r), v in w.history.items() if r == "works_for"]
    changes = sum(len(v) - 1 for v in versions)
    rate = changes / (len(versions) * (w.end_year - w.start_year))
    assert rate == pytest.approx(w.change_rates["works_for"], abs=0.015)
    cues = [c for c in w.cues if c.fact.relation == "works_for"]
    precision = np.mean([c.leads_to_change for c in cues])
    r, p, q = w.change_rates["works_for"], w.cue_recall, w.false_cue_rate
    assert w.cue_precision("works_for") == pytest.approx(r * p / (r * p + (1 - r) * q))
    assert precision == pytest.approx(w.cue_precision("works_for"), abs=0.05)
    with pytest.raises(ValueError, match="never changes"):
        w.cue_precision("born_in")


def test_format_split_keeps_target_facts_out_of_qa_training(world):
    train_subjects = {q.fact.subject for q in world.qa_pairs("train")}
    heldout_subjects = {q.fact.subject for q in world.qa_pairs("heldout")}
    assert train_subjects
    assert heldout_subjects
    assert not train_subjects & heldout_subjects
    assert heldout_subjects <= world.target_subjects
    texts, pairs = world.corpus()
    prompts = {p for p, _ in pairs}
    target_prompts = {q.question for q in world.qa_pairs("heldout")}
    target_prompts |= {v.prompt for v in world.verification_items("heldout")}
    assert not prompts & target_prompts
    # ... but every fact, target facts included, is stated in the training text
    stated = {(s.fact.subject, s.fact.relation) for s in world.statements("train")}
    assert stated == set(world.history)
    assert len(texts) >= 4 * len(world.history)


def test_heldout_templates_are_never_training_text(world):
    train = {s.text for s in world.statements("train")}
    heldout = world.statements("heldout")
    assert heldout
    assert all(s.heldout_template for s in heldout)
    assert not train & {s.text for s in heldout}
    q_train = {q.question for q in world.qa_pairs("all")}
    q_held = {q.question for q in world.qa_pairs("all", templates="heldout")}
    assert not q_train & q_held


def test_corpus_at_a_cutoff_holds_only_what_was_true_then(world):
    t = 2010
    texts, _pairs = world.corpus(t)
    later = [f for f in world.changed_after(t) if f.valid_from > t]
    assert later
    for f in later[:20]:
        tpl = RELATIONS[f.relation].statements[0].format(s=f.subject, v=f.value)
        if world.value_at(f.subject, f.relation, t) != f.value:
            assert tpl not in texts
    for s in world.history_statements(t):
        assert s.fact.valid_to <= t
    assert all(int(c.text.split()[1].rstrip(",")) <= t for c in world.cue_statements(t))


def test_verification_and_multiple_choice_items(world):
    items = world.verification_items("train")
    assert len(items) == 2 * len(world.facts("train"))
    assert np.mean([v.label for v in items]) == 0.5
    for v in items:
        truth = world.value_at(v.fact.subject, v.fact.relation)
        assert (v.claimed_value == truth) == v.label
        assert world.entity_type[v.claimed_value] == RELATIONS[v.fact.relation].value
        assert v.target == (" True" if v.label else " False")
    for m in world.multiple_choice("heldout", n_options=4):
        assert m.options[m.answer_index] == m.fact.value
        assert len(set(m.options)) == len(m.options) == 4
        assert m.target == " " + "ABCD"[m.answer_index]


def test_verifiable_tasks_have_exact_checkers(world):
    tasks = arithmetic_tasks(50, "add", digits=3, seed=1)
    for task in tasks:
        a, b = (int(x.replace(" ", "")) for x in task.prompt[3:-5].split("+"))
        assert task.answer.replace(" ", "") == str(a + b)
        assert task.reward(" " + task.answer) == 1.0
        assert task.reward(" 9 9 9 9 9") == 0.0
        assert task.is_valid(" 1 2")
        assert not task.is_valid(" twelve")
    mod = arithmetic_tasks(20, "mod", digits=2, modulus=7, seed=0)
    assert all(0 <= int(t.answer) < 7 for t in mod)
    for task in world.multihop_tasks():
        assert task.reward(task.answer + ".") == 1.0
        assert task.is_valid(world.entities["city"][0])
        assert not task.is_valid("Nowhere Land")
    company = world.entities["company"][0]
    hop = next(t for t in world.multihop_tasks() if company in t.prompt and "CEO" in t.prompt)
    assert hop.answer == world.value_at(world.value_at(company, "ceo_of"), "born_in")


def test_answer_matching_normalises_and_accepts_aliases(world):
    item = next(q for q in world.qa_pairs("all") if q.fact.relation == "works_for")
    assert is_correct(item.answer.upper() + ".", item)
    assert is_correct(item.aliases[0], item)
    assert not is_correct("", item)
    person_item = next(q for q in world.qa_pairs("all") if q.fact.relation == "ceo_of")
    assert person_item.aliases == (person_item.answer.split(" ", 1)[1],)


def test_jsonl_round_trips(world, tmp_path):
    world.to_jsonl(tmp_path / "world.jsonl")
    again = World.from_jsonl(tmp_path / "world.jsonl")
    assert again.history == world.history
    items = world.qa_pairs("train")[:5] + world.verification_items("heldout")[:3]
    write_jsonl(items, tmp_path / "items.jsonl")
    back = read_jsonl(tmp_path / "items.jsonl")
    assert back == items
    assert isinstance(back[0], QAItem)
    lines = (tmp_path / "world.jsonl").read_text().splitlines()
    (tmp_path / "bad.jsonl").write_text("\n".join([lines[0], lines[2], lines[1], *lines[3:]]))
    with pytest.raises(ValueError, match="facts differ"):
        World.from_jsonl(tmp_path / "bad.jsonl")


def test_bad_input_raises(world):
    person = world.entities["person"][0]
    with pytest.raises(ValueError, match="unknown relation 'married_to'"):
        world.value_at(person, "married_to", 2010)
    with pytest.raises(ValueError, match="applies to a country"):
        world.value_at(person, "capital_of")
    with pytest.raises(ValueError, match="unknown subject"):
        world.value_at("Nobody", "born_in")
    with pytest.raises(ValueError, match="t must be in"):
        world.value_at(person, "born_in", 1990)
    with pytest.raises(ValueError, match="split"):
        world.qa_pairs("test")
    with pytest.raises(ValueError, match="n_people"):
        World(n_people=1)
    with pytest.raises(ValueError, match="change_rates"):
        World(change_rates={"works_for": 1.5})
    with pytest.raises(ValueError, match="digits"):
        arithmetic_tasks(3, digits=0)
