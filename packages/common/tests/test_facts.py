import itertools
from collections import Counter

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


# ------------------------------------------------------------------ issue 46: the testbed
def _one_word_names(world: World) -> set[str]:
    from paper_common.facts import COMPANY_SUFFIXES

    return {
        part
        for names in world.entities.values()
        for name in names
        for part in name.split(" ")
        if part not in COMPANY_SUFFIXES
    } - {name.split(" ")[0] for name in world.entities["person"]}


def test_names_come_from_the_fixed_pools_and_exclude_keeps_worlds_disjoint():
    from paper_common.facts import name_pools

    pools = name_pools()
    base = World(seed=3, n_people=150, n_cities=40, n_companies=30, n_countries=10)
    new = World(seed=4, n_people=60, n_cities=20, n_companies=10, n_countries=5, exclude=base)
    for w in (base, new):
        assert set(w.entities["city"]) <= set(pools["city"])
        assert set(w.entities["country"]) <= set(pools["country"])
        surnames = [p.split(" ")[1] for p in w.entities["person"]]
        assert len(set(surnames)) == len(surnames)  # the alias is unique within a World
        assert set(surnames) <= set(pools["surname"])
    assert _one_word_names(base) & _one_word_names(new) == set()
    # the same seed without exclude reuses some of base's names (so exclude did the work)
    assert _one_word_names(base) & _one_word_names(World(seed=4, n_people=60, n_cities=20)) != set()
    with pytest.raises(ValueError, match="country names but the fixed pool has"):
        World(seed=0, n_countries=79, n_cities=80, exclude=base)
    with pytest.raises(ValueError, match="fixed vocabulary's years"):
        World(seed=0, start_year=1900)


def test_exposure_is_heavy_tailed_recorded_and_leaves_the_facts_alone():
    plain = World(seed=2, n_people=400, n_cities=60, n_companies=60)
    heavy = World(seed=2, n_people=400, n_cities=60, n_companies=60, exposure=1.0, max_exposure=64)
    assert plain.history == heavy.history
    assert set(plain.exposure.values()) == {1}
    m = np.array(list(heavy.exposure.values()))
    assert m.min() >= 1
    assert m.max() <= 64
    # P(m >= k) = k^-alpha for a discrete Pareto with alpha = 1: about 1/2 and 1/8
    for k in (2, 8):
        assert abs(np.mean(m >= k) - 1 / k) < 4 * np.sqrt((1 / k) * (1 - 1 / k) / m.size)
    with pytest.raises(ValueError, match="exposure must be None or a tail index"):
        World(seed=0, exposure=0)


def test_corpus_documents_each_fact_as_often_as_documentation_says():
    w = World(seed=5, n_people=40, exposure=1.2, max_exposure=6)
    docs = w.documentation()
    texts, _ = w.corpus(history=False, cues=False, augmentation=2)
    first = {f: w.statements("train", facts=[f])[0].text for f in docs}
    counts = Counter(texts)
    for f, n in docs.items():
        assert counts[first[f]] == 2 * n
    bios, _ = w.corpus(history=False, cues=False, style="biographies", augmentation=2)
    sentences = Counter(s.strip() + "." for doc in bios for s in doc.split(".") if s.strip())
    for f, n in docs.items():
        rendered = {s.text for s in w.statements("train", facts=[f])}
        assert sum(sentences[r] for r in rendered) == 2 * n


def test_biographies_hold_several_facts_in_varying_order_with_the_full_name():
    w = World(seed=6, n_people=30, exposure=0.8, max_exposure=8)
    bios, _ = w.corpus(history=False, cues=False, style="biographies")
    person = w.entities["person"]
    multi = [d for d in bios if d.count(".") >= 2]
    assert multi
    for doc in multi:
        subject = next(p for p in person + w.entities["company"] if doc.count(p) >= 2)
        assert all(subject in s for s in doc.split(".") if s.strip())
    # the order of relations changes between documents of the same subject
    orders = set()
    for doc in multi:
        rels = []
        for s in doc.split(". "):
            for f in w.facts():
                if f.subject in s and f.value in s:
                    rels.append(f.relation)
                    break
        orders.add(tuple(rels))
    assert len(orders) > 3


def test_documentation_lag_leaves_recent_changes_partly_under_the_old_value():
    w = World(seed=7, n_people=120, exposure=1.0, max_exposure=30, documentation_lag=3)
    key, versions = next(
        (k, v)
        for k, v in w.history.items()
        if len(v) >= 2 and v[-1].valid_from <= w.end_year - 3 and w.exposure[k] >= 6
    )
    new, old, m = versions[-1], versions[-2], w.exposure[key]
    at_change = w.documentation(new.valid_from)
    assert at_change[new] == max(1, round(m / 4))
    assert at_change[old] == round(m * 3 / 4)
    later = w.documentation(new.valid_from + 3)
    assert later[new] == m
    assert old not in later
    unlagged = World(seed=7, n_people=120, exposure=1.0, max_exposure=30)
    assert unlagged.documentation(new.valid_from)[new] == m


def test_true_false_in_both_polarities_and_judge_items():
    w = World(seed=8, n_people=20)
    pos = w.verification_items("train")
    neg = w.verification_items("train", negated=True)
    assert [v.label for v in pos] == [True, False] * (len(pos) // 2)
    assert [v.label for v in neg] == [False, True] * (len(neg) // 2)
    for v in neg:
        assert " not " in v.prompt
        assert (v.claimed_value == v.fact.value) != v.label
    judge = w.judge_items("train")
    for j in judge:
        assert j.label == (j.proposed == j.fact.value)
        assert j.target == (" Yes" if j.label else " No")


def test_change_questions_follow_the_history_and_the_split():
    w = World(seed=9, n_people=60, cue_recall=0.9, false_cue_rate=0.05)
    items = w.change_questions("train")
    assert items
    assert all(q.fact.subject not in w.target_subjects for q in items)
    starts = {k: {f.valid_from for f in v[1:]} for k, v in w.history.items()}
    cue_years = {(c.fact.key, int(c.text.split(",")[0].split()[1])) for c in w.cues}
    for q in items:
        assert q.label == ((q.year + 1) in starts[q.fact.key])
        assert q.cued == ((q.fact.key, q.year) in cue_years)
        assert q.fact.holds_at(q.year)
    cued = [q.label for q in items if q.cued]
    uncued = [q.label for q in items if not q.cued]
    assert np.mean(cued) > np.mean(uncued) + 0.3  # cues carry the signal a model can learn
    held = w.change_questions("heldout")
    assert all(q.fact.subject in w.target_subjects for q in held)


def test_default_corpus_is_one_statement_per_template_per_fact():
    w = World(seed=10, n_people=15)
    texts, pairs = w.corpus()
    expected = [s.text for s in w.statements("train")]
    expected += [s.text for s in w.history_statements()] + [c.text for c in w.cue_statements()]
    assert texts == expected
    qa = [(q.question, q.target) for q in w.qa_pairs("train")]
    tf = [(v.prompt, v.target) for v in w.verification_items("train")]
    assert pairs == qa + tf
    with pytest.raises(ValueError, match="unknown formats"):
        w.corpus(formats=("qa", "essay"))


@pytest.mark.parametrize("lag", [1, 2, 3])
def test_documentation_of_a_fact_adds_up_to_its_exposure(lag):
    w = World(seed=0, n_people=200, exposure=0.8, max_exposure=16, documentation_lag=lag)
    for t in (w.start_year + 1, w.end_year - 1, w.end_year):
        total = Counter()
        for f, n in w.documentation(t).items():
            total[f.key] += n
        assert total == Counter(w.exposure)


def test_past_tense_history_waits_for_the_lag():
    w = World(seed=1, n_people=120, documentation_lag=3)
    t = w.end_year
    texts, _ = w.corpus(t, cues=False)
    recent = [s for s in w.history_statements(t) if s.fact.valid_to > t - 3]
    settled = [s for s in w.history_statements(t) if s.fact.valid_to <= t - 3]
    assert recent
    assert settled
    assert not {s.text for s in recent} & set(texts)
    assert {s.text for s in settled} <= set(texts)
