"""Drift labels, the oracle, the training corpus and the role-timeline loader."""

import json
import math

import numpy as np
import pytest

from drift_probe.crosscutoff import transitioned
from drift_probe.data import VOLATILE, drift_items, oracle_drift, training_corpus
from drift_probe.timelines import load_timelines, timeline_items, to_year


def test_drift_labels_follow_the_world(world, unseen):
    items = drift_items(world, 2020, unseen=unseen)
    assert {i.relation for i in items} == set(VOLATILE)
    for i in items:
        assert i.value_cutoff == world.value_at(i.subject, i.relation, 2020)
        assert i.value_query == world.value_at(i.subject, i.relation, world.end_year)
        assert i.drift == (i.value_cutoff != i.value_query)
        assert i.shown == (i.subject not in unseen)
        assert 0.0 <= i.oracle <= 1.0
    assert 0 < np.mean([i.drift for i in items]) < 1
    # at the last year nothing has drifted yet
    assert not any(i.drift for i in drift_items(world, world.end_year))


def test_oracle_matches_the_generator(world):
    # one year ahead with a cue: exactly the world's own cue precision
    assert oracle_drift(world, "works_for", True, 1) == pytest.approx(
        world.cue_precision("works_for")
    )
    assert oracle_drift(world, "works_for", True, 1) > oracle_drift(world, "works_for", False, 1)
    # longer horizons only add drift; a stable relation never drifts
    assert oracle_drift(world, "lives_in", False, 3) > oracle_drift(world, "lives_in", False, 1)
    assert oracle_drift(world, "born_in", True, 5) == 0.0
    r = world.change_rates["ceo_of"]
    no_cue_1 = oracle_drift(world, "ceo_of", False, 1)
    assert oracle_drift(world, "ceo_of", False, 4) == pytest.approx(
        1 - (1 - no_cue_1) * (1 - r) ** 3
    )


def test_oracle_is_calibrated_on_the_world(world):
    items = drift_items(world, 2019)
    pred, hit = np.array([i.oracle for i in items]), np.array([i.drift for i in items])
    assert abs(pred.mean() - hit.mean()) < 0.1


def test_training_corpus_leaves_out_unseen_subjects(world, unseen):
    texts, pairs = training_corpus(world, 2020, unseen)
    prompts = [p for p, _ in pairs]
    for s in unseen:
        # an unseen subject may appear as someone's value, never as the subject of a fact
        if world.entity_type[s] == "person":
            assert not any(t.startswith((f"{s} lives in", f"{s} works for")) for t in texts)
            assert f"Q: Where does {s} live? A:" not in prompts
        else:
            assert not any(t.startswith(f"{s} is headquartered in") for t in texts)
            assert f"Q: Who is the CEO of {s}? A:" not in prompts
    seen = next(s for s in world.entities["person"] if s not in unseen)
    assert any(t.startswith(f"{seen} lives in") for t in texts)
    full_texts, _ = training_corpus(world, 2020)
    assert len(full_texts) > len(texts)
    # cues up to the cutoff only
    assert not any("In 2021," in t for t in texts)


def test_transitioned_keys_changed_between_cutoffs(world):
    keys = transitioned(world, 2018, 2022, VOLATILE)
    assert keys
    for k in keys:
        assert world.value_at(*k, 2018) != world.value_at(*k, 2022)
    with pytest.raises(ValueError, match="after"):
        transitioned(world, 2022, 2022)


def test_bad_cutoffs_raise(world):
    with pytest.raises(ValueError, match="must not precede"):
        drift_items(world, 2023, query_time=2020)
    with pytest.raises(ValueError, match="t must be in"):
        drift_items(world, 1990)


def test_to_year():
    assert to_year(2021) == 2021.0
    assert to_year("2021") == 2021.0
    assert to_year("2021-07-02") == pytest.approx(2021 + 182 / 365)
    assert to_year("") is None
    with pytest.raises(ValueError, match="as a date"):
        to_year("July 2021")


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_timelines_from_a_file(tmp_path, suffix):
    rows = [
        ("Acme", "ceo_of", "Ann Lee", "2015", "2022-06"),
        ("Acme", "ceo_of", "Bo Chen", "2022-06", ""),
        ("Beta", "ceo_of", "Cy Diaz", "2010", ""),
        ("Gamma", "ceo_of", "Di Egan", "2023", ""),
    ]
    path = tmp_path / f"roles{suffix}"
    if suffix == ".jsonl":
        path.write_text(
            "\n".join(
                json.dumps(
                    dict(zip(("entity", "relation", "holder", "start", "end"), r, strict=True))
                )
                for r in rows
            )
        )
    else:
        path.write_text("entity,relation,holder,start,end\n" + "\n".join(",".join(r) for r in rows))
    spells = load_timelines(path)
    assert len(spells) == 4
    items = timeline_items(
        spells,
        "2021-12",
        "2024-06",
        {"ceo_of": "Q: Who is the CEO of {entity}? A:"},
        {"ceo_of": "The CEO of {entity} is {v}."},
        {"Bo Chen": ("Chen",)},
    )
    by = {i.subject: i for i in items}
    assert set(by) == {"Acme", "Beta"}  # Gamma had no CEO at the cutoff
    assert by["Acme"].drift
    assert by["Acme"].value_cutoff == "Ann Lee"
    assert by["Acme"].aliases_query == ("Chen",)
    assert not by["Beta"].drift
    assert by["Acme"].claim_with("X") == "The CEO of Acme is X."


def test_bad_timeline_files_raise(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"entity": "A", "relation": "r", "start": "2020"}))
    with pytest.raises(ValueError, match="row 1: missing holder"):
        load_timelines(bad)
    bad.write_text(
        json.dumps({"entity": "A", "relation": "r", "holder": "h", "start": "2020", "end": "2019"})
    )
    with pytest.raises(ValueError, match="not after start"):
        load_timelines(bad)
    other = tmp_path / "roles.txt"
    other.write_text("a")
    with pytest.raises(ValueError, match="must be"):
        load_timelines(other)


def test_full_scale_names_the_papers_models_with_readable_cutoffs():
    from drift_probe.reproduce import SCALES

    models = SCALES["full"]["real_models"]
    assert len(models) == 5
    assert all(2022 <= to_year(c) < 2025 for c in models.values())
    full = SCALES["full"]
    assert len(full["archs"]) * math.comb(len(full["cutoffs"]), 2) == 12  # ordered snapshot pairs


def test_change_questions_are_an_opt_in_trained_format(world, unseen):
    """The World's drift signal as a format (issue 46, item 1): "will it change next year?" items
    of format facts up to the cutoff, never about an unseen subject or a stable relation."""
    from drift_probe.data import VOLATILE, training_corpus

    texts, pairs = training_corpus(world, 2022, unseen)
    texts_q, pairs_q = training_corpus(world, 2022, unseen, change_questions=True)
    assert texts_q == texts
    extra = pairs_q[len(pairs) :]
    assert pairs_q[: len(pairs)] == pairs
    asked = [q for q in world.change_questions("train", 2022) if q.year < 2022]
    kept = [q for q in asked if q.fact.subject not in set(unseen) and q.fact.relation in VOLATILE]
    assert extra == [(q.prompt, q.target) for q in kept]
    assert {a for _, a in extra} <= {" Yes", " No"}
    assert len(kept) > 0
