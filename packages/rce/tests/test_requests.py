"""Edit requests from a World and from ROME's CounterFact / zsRE JSON, with clear errors."""

import json

import pytest

pytest.importorskip("torch")

from paper_common.facts import RELATIONS
from rce.requests import (
    EditRequest,
    as_template,
    load_counterfact,
    load_zsre,
    relation_templates,
    utility_prompts,
    world_requests,
)


def test_relation_templates_split_editor_and_attacker_prompts():
    prompt, paraphrases, attack = relation_templates("born_in")
    assert prompt == "{} was born in"
    assert "{} is a native of" in paraphrases
    assert all(p.count("{}") == 1 for p in (*paraphrases, *attack))
    assert not set(paraphrases) & set(attack)
    assert any(p.startswith("Q: ") for p in attack)


def test_world_requests_edit_known_facts_to_same_type_values(fact_model, smoke_world):
    model, tok = fact_model
    reqs = world_requests(smoke_world, model, tok, n=6, seed=1)
    cities = set(smoke_world.entities["city"])
    edited = {r.subject for r in reqs}
    for r in reqs:
        assert r.true == smoke_world.value_at(r.subject, "born_in")
        assert r.target in cities
        assert r.target != r.true
        assert r.decoy in cities
        assert r.decoy not in (r.true, r.target)
        assert r.neighbours
        assert not any(p.startswith(s) for p, _ in r.neighbours for s in edited)
    assert reqs == world_requests(smoke_world, model, tok, n=6, seed=1)
    with pytest.raises(ValueError, match="knows"):
        world_requests(smoke_world, model, tok, n=10_000)
    with pytest.raises(ValueError, match="dummy"):
        world_requests(smoke_world, model, tok, n=2, target="dummy")
    with pytest.raises(ValueError, match="not one token"):
        world_requests(smoke_world, model, tok, relation="works_for", n=2)


def test_utility_prompts_avoid_the_edited_relation(smoke_world):
    items = utility_prompts(smoke_world, ("born_in",), n=15)
    assert len(items) == 15
    assert all(q.startswith("Q: ") and " " not in a for q, a in items)
    born = {
        f"Q: {q.format(s=p)} A:"
        for q in RELATIONS["born_in"].heldout_questions
        for p in smoke_world.entities["person"]
    }
    assert not born & {q for q, _ in items}


def test_counterfact_and_zsre_loaders(tmp_path, small_tok, small_world):
    person = small_world.entities["person"][0]
    city, other = small_world.entities["city"][:2]
    cf = [
        {
            "case_id": 0,
            "requested_rewrite": {
                "prompt": "{} was born in",
                "subject": person,
                "target_true": {"str": city},
                "target_new": {"str": other},
                "relation_id": "P19",
            },
            "paraphrase_prompts": [f"Q: Where was {person} born? A:"],
            "neighborhood_prompts": [f"{small_world.entities['person'][1]} was born in"],
        },
        {  # two-token true answer: dropped
            "case_id": 1,
            "requested_rewrite": {
                "prompt": "{} was born in",
                "subject": person,
                "target_true": {"str": f"{city} {other}"},
                "target_new": {"str": other},
            },
        },
    ]
    path = tmp_path / "counterfact.json"
    path.write_text(json.dumps(cf))
    reqs = load_counterfact(path, small_tok)
    assert len(reqs) == 1
    assert reqs[0].attack_prompts == ("Q: Where was {} born? A:",)
    assert reqs[0].neighbours[0][1] == city
    assert reqs[0].relation == "P19"
    zs = [
        {
            "subject": person,
            "src": f"Where was {person} born?",
            "answers": [city],
            "alt": other,
            "rephrase": f"In which city was {person} born?",
            "loc": "nq question: who",
            "loc_ans": other,
        }
    ]
    zpath = tmp_path / "zsre.json"
    zpath.write_text(json.dumps(zs))
    (z,) = load_zsre(zpath, small_tok)
    assert z.prompt == "Where was {} born?"
    assert z.true == city
    assert z.target == other
    with pytest.raises(FileNotFoundError):
        load_counterfact(tmp_path / "missing.json", small_tok)


def test_bad_requests_raise():
    with pytest.raises(ValueError, match="absent"):
        as_template("nothing here", "Alice")
    with pytest.raises(ValueError, match="equals the true"):
        EditRequest("{} lives in", "Alice", "Paris", "Paris")
    with pytest.raises(ValueError, match="exactly one"):
        EditRequest("{} and {}", "Alice", "Paris", "Rome")
    with pytest.raises(ValueError, match="unknown relation"):
        relation_templates("likes")


def test_counterfact_requests_get_decoys_from_other_records(tmp_path, small_tok, small_world):
    """Chance for CounterFact: each request's decoy is another record's one-token true answer,
    neither its own true answer nor its target (was None: no chance level, claims inconclusive)."""
    people, cities = small_world.entities["person"], small_world.entities["city"]
    cf = [
        {
            "case_id": i,
            "requested_rewrite": {
                "prompt": "{} was born in",
                "subject": people[i],
                "target_true": {"str": cities[i]},
                "target_new": {"str": cities[(i + 1) % 5]},
                "relation_id": "P19",
            },
        }
        for i in range(5)
    ]
    path = tmp_path / "cf.json"
    path.write_text(json.dumps(cf))
    reqs = load_counterfact(path, small_tok, seed=0)
    trues = {r.true for r in reqs}
    for r in reqs:
        assert r.decoy in trues
        assert r.decoy not in (r.true, r.target)
    assert reqs == load_counterfact(path, small_tok, seed=0)


def test_empty_response_target_may_be_several_tokens(fact_model, smoke_world):
    """Empty Response's dummy answer was forced to one token; the editors and metrics take any
    answer the tokenizer knows (an unknown word still raises)."""
    model, tok = fact_model
    a, b = smoke_world.entities["city"][:2]
    reqs = world_requests(smoke_world, model, tok, n=2, target="dummy", dummy=f"{a} {b}", seed=2)
    assert {r.target for r in reqs} == {f"{a} {b}"}
    with pytest.raises(ValueError, match="unknown"):
        world_requests(smoke_world, model, tok, n=2, target="dummy", dummy="Zzqx")
