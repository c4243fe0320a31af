"""The agent language, task files for real models, the trained LM and the from_pretrained path."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from skill_commutator.reproduce import measure  # noqa: E402
from skill_commutator.task import (  # noqa: E402
    ACTIONS,
    AgentLanguage,
    Skill,
    TaskSpec,
    agent_task,
    load_task_spec,
)


def test_policy_is_a_distribution_that_follows_its_rules():
    lang = AgentLanguage(p_rule=0.75)
    rng = np.random.default_rng(0)
    for _ in range(200):
        s = lang.state(rng)
        probs = lang.action_probs(s)
        assert set(probs) == set(ACTIONS)
        assert sum(probs.values()) == pytest.approx(1.0)
        if s.rock and s.hammer:
            assert max(probs, key=probs.get) == "use"


def test_skill_contexts_are_labelled_by_the_policy():
    lang = AgentLanguage()
    pos, neg = lang.skill_contexts("go_left", 20, seed=1)
    assert len(pos) == len(neg) == 20
    assert all(" west " in c or " here " in c or " rock hammer " in c for c in pos)
    pos, neg = lang.skill_contexts("formal", 10, seed=1)
    assert all(" formal " in c for c in pos)
    assert not any(" formal " in c for c in neg)


def test_agent_task_is_deterministic():
    lang = AgentLanguage()
    a, b = agent_task(lang, 5, 8, seed=3), agent_task(lang, 5, 8, seed=3)
    assert a == b
    assert a != agent_task(lang, 5, 8, seed=4)
    assert len(a.skills) == 6
    assert len(a.contexts) == 5
    assert a.with_filler()[0].startswith("note note note note ")


def test_trained_lm_learns_the_policy(task_lm, spec):
    """After 150 steps the tiny LM already writes "kindly" in formal contexts (the untrained model
    has no preference); the action rules take the longer training of `reproduce`."""
    from paper_common.lm import next_token_logprobs

    model, tok, info = task_lm
    # measured on 1 thread (the fixture pins it): final loss 0.66, log-prob gap 2.6 nats
    assert info["final_loss"] < 1.5
    formal = "note note note note east clear none fresh formal left :"
    plain = "note note note note east clear none fresh plain left :"
    lp = next_token_logprobs(model, tok, [formal, plain])
    kindly = tok(" kindly", add_special_tokens=False)["input_ids"][0]
    assert float(lp[0, kindly]) > float(lp[1, kindly]) + 1.0


def test_load_task_spec_round_trip_and_errors(tmp_path):
    data = {
        "contexts": ["call the tool", "answer now"],
        "filler": "note",
        "p": 2,
        "skills": [
            {"name": "a", "targets": ["left"], "positive": ["x", "y"], "negative": ["z", "w"]},
            {"name": "b", "targets": ["right"], "positive": ["x", "y"], "negative": ["z", "w"]},
        ],
    }
    path = tmp_path / "task.json"
    path.write_text(json.dumps(data))
    spec = load_task_spec(path)
    assert spec.p == 2
    assert [s.name for s in spec.skills] == ["a", "b"]
    assert spec.with_filler() == ["note note call the tool", "note note answer now"]
    del data["skills"][1]["negative"]
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="misses"):
        load_task_spec(path)
    with pytest.raises(ValueError, match="no task file"):
        load_task_spec(tmp_path / "missing.json")
    with pytest.raises(ValueError, match=">= 2 skills"):
        TaskSpec((spec.skills[0],), ("c",))
    with pytest.raises(ValueError, match="at least one target"):
        Skill("s", (), ("a", "b"), ("c", "d"))


def test_measure_runs_on_a_model_loaded_with_from_pretrained(task_lm, spec, tmp_path):
    from paper_common.lm import float64_exact, load_lm, save_lm

    model, tok, _ = task_lm
    save_lm(model, tok, tmp_path / "lm")
    loaded, tok2 = load_lm(tmp_path / "lm")
    loaded = float64_exact(loaded).requires_grad_(False)
    small = TaskSpec(spec.skills[:3], spec.contexts[:4])
    out = measure(loaded, tok2, small, "prefix", 1, 2, 2, [0.1, 0.05])
    ref = measure(model, tok, small, "prefix", 1, 2, 2, [0.1, 0.05])
    assert len(out["pairs"]) == 3
    assert out["J"].shape == (3, 4, 32, 2)
    assert out["h0"] == pytest.approx(ref["h0"], rel=1e-9)
    assert [p["C"] for p in out["pairs"]] == pytest.approx([p["C"] for p in ref["pairs"]], rel=1e-8)
    assert all(p["C"] > 0 for p in out["pairs"])
    assert all(p["o_gap"] > 0 for p in out["pairs"])


def test_full_scale_real_model_branch_reads_local_paths(task_lm, spec, tmp_path, monkeypatch):
    """`full`'s real-model part on a saved model and a task file written here (as for Qwen)."""
    from paper_common.lm import save_lm
    from skill_commutator.reproduce import SCALES, _real_model

    model, tok, _ = task_lm
    save_lm(model, tok, tmp_path / "lm")
    skills = [
        {
            "name": s.name,
            "targets": list(s.targets),
            "positive": list(s.positive)[:6],
            "negative": list(s.negative)[:6],
        }
        for s in spec.skills[:3]
    ]
    (tmp_path / "task.json").write_text(
        json.dumps({"contexts": list(spec.contexts[:4]), "skills": skills})
    )
    rm = dict(SCALES["full"]["real_model"], layer=1)
    cfg = {"real_model": rm, "m": 2, "commutator_contexts": 2, "h_factors": [0.1, 0.05]}
    assert _real_model(cfg) is None  # paths unset: the report says how to set them
    monkeypatch.setenv(rm["path_env"], str(tmp_path / "lm"))
    monkeypatch.setenv(rm["task_env"], str(tmp_path / "task.json"))
    rows = _real_model(cfg)
    assert len(rows) == 2 * 3  # two realizations x three pairs
    assert {r["realization"] for r in rows} == {"activation", "prefix"}
    assert all(r["C"] > 0 for r in rows)
    assert len({tuple(r) for r in rows}) == 1  # one set of columns: a valid report table


def test_task_lm_cache_is_keyed_by_the_training_texts(tmp_path, monkeypatch):
    """A change to the text generator (same config) must train a new model, not load the old
    one; the cached model carries its info.json, written with it."""
    from paper_common.device import pinned_threads
    from skill_commutator.task import TaskConfig, build_task_lm

    monkeypatch.setenv("PAPER_CACHE_DIR", str(tmp_path))
    cfg = TaskConfig(n_layers=1, d_model=16, n_heads=2, steps=2, n_texts=20, batch_size=4)
    cache = tmp_path / "skill_commutator"
    with pinned_threads(1, torch=True):
        _, _, info = build_task_lm(cfg, seed=0, progress=False)
        _, _, again = build_task_lm(cfg, seed=0, progress=False)  # loaded
        assert again == info
        dirs = [p for p in cache.iterdir() if p.is_dir()]
        assert len(dirs) == 1
        assert (dirs[0] / "info.json").exists()
        original = AgentLanguage.texts
        monkeypatch.setattr(
            AgentLanguage,
            "texts",
            lambda self, n, seed: [t.upper() for t in original(self, n, seed)],
        )
        build_task_lm(cfg, seed=0, progress=False)
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 2
