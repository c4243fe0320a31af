"""The smoke-scale experiment end to end: claims, tables, figures, determinism of the toy."""

import json

import numpy as np
import pytest

pytest.importorskip("torch")

from alignment_geometry.reproduce import SCALES, _toy, reproduce
from paper_common import Report


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("ag_smoke")
    return reproduce("smoke", seed=0, out_dir=out), out


def test_smoke_report(smoke):
    report, out = smoke
    assert len(report.claims) == 10
    cfg = SCALES["smoke"]
    n_runs = len(cfg["seeds"]) * len(cfg["tasks"])
    assert len(report.tables["onset"]) == 2 * n_runs
    assert len(report.tables["fine_tuning"]) == n_runs
    methods = {r["method"] for r in report.tables["mitigations"]}
    assert {
        "gd",
        "project",
        "ewc",
        "fisher_penalty",
        "lora",
        "safe_lora",
        "sgd (control)",
        "adam (control)",
    } <= methods
    # the toy claims are exact mathematics: they hold at every scale
    assert all(c.point_check for c in report.claims[:4])
    # measured (1 thread, torch 2.15): orth slopes 4.16-4.29, plain 2.001-2.007 at r_proj 0.23
    # and 0.67; a plain task is only expected to be quadratic with a gradient component in M
    # (r_proj >= 0.05, the claim's filter), so the others are not checked
    for row in report.tables["onset"]:
        if row["variant"] == "orth":
            assert row["r_proj"] < 1e-12
            assert 3.3 < row["slope"] < 4.7
        elif row["r_proj"] >= 0.05:
            assert 1.8 < row["slope"] < 2.2
    for row in report.tables["fine_tuning"]:
        assert row["task_loss"] < row["task_loss_0"]  # fine-tuning learns the task
        assert row["final_u"] > 0
    for fig in report.figures:
        assert (out / fig).stat().st_size > 1000
    again = Report.from_json(out / "report.json")
    assert [c.value for c in again.claims] == pytest.approx(
        [c.value for c in report.claims], nan_ok=True
    )
    assert json.loads((out / "report.json").read_text())["scale"] == "smoke"


def test_toy_is_deterministic():
    a, b = _toy(SCALES["smoke"]), _toy(SCALES["smoke"])
    assert a["flow"]["slope"] == b["flow"]["slope"]
    assert json.dumps(a["sweep"]) == json.dumps(b["sweep"])  # NaN slopes (c = 0) compare as text


def test_full_config_names_the_papers_setting():
    real = SCALES["full"]["real_models"]
    assert len(real["models"]) == 8
    assert "tatsu-lab/alpaca" in real["benign_sets"]
    assert SCALES["full"]["steps"] == 400
    assert len(SCALES["full"]["tasks"]) == 10
    assert SCALES["quick"]["steps"] == 200
    assert len(SCALES["quick"]["tasks"]) == 6


def test_bad_scale():
    with pytest.raises(ValueError, match="scale"):
        reproduce("huge")


def test_jobs_run_with_one_thread_and_restore_the_callers(monkeypatch):
    import importlib

    import torch

    from paper_common.device import pinned_threads

    ar = importlib.import_module("alignment_geometry.reproduce")  # the package exports the function

    seen = []
    monkeypatch.setattr(ar, "_setup", lambda cfg, seed: seen.append(torch.get_num_threads()))
    monkeypatch.setattr(ar, "_task", lambda *job: seen.append(torch.get_num_threads()))
    with pinned_threads(2, torch=True):
        ar._setup_job((SCALES["smoke"], 0))  # build_system trains here ...
        ar._task_job((SCALES["smoke"], {}, "copy", 0))  # ... and loads from the cache here
        assert torch.get_num_threads() == 2  # was left at 1 in the parent with one worker
    assert seen == [1, 1]


def test_projection_cost_needs_gd_progress():
    from alignment_geometry.reproduce import MIN_TASK_PROGRESS, _projection_claim

    row = {"gd_u": 1.0, "pr_u": 0.1, "l0": 1.0, "gd_loss": 0.5, "pr_loss": 0.52}
    claim = _projection_claim([row])
    assert claim.point_check
    assert claim.value == pytest.approx(10.0)
    # GD barely moved (0.001 nats): the cost was -0.5 or +0.5 depending on noise; 0/0 raised
    for pr_loss in (0.9985, 0.9995):
        tiny = {**row, "gd_loss": 0.999, "pr_loss": pr_loss}
        assert MIN_TASK_PROGRESS > 1.0 - 0.999
        claim = _projection_claim([tiny])
        assert claim.value is None
        assert "task-progress cost on 1 tasks" in claim.note
    assert _projection_claim([{**row, "gd_loss": 1.0}]).value is None  # was ZeroDivisionError
    # no alignment loss either way: the u ratio is undefined; projected 0 alone: infinite
    assert _projection_claim([{**row, "gd_u": 0.0, "pr_u": 0.0}]).value is None
    assert _projection_claim([{**row, "pr_u": 0.0}]).value == float("inf")
    assert _projection_claim([]).value is None


def test_spearman_claims_say_why_they_are_not_measured():
    from alignment_geometry.reproduce import _forecast_claim, _spearman, _spearman_why_not

    assert np.isnan(_spearman(np.array([1.0, 2.0]), np.array([2.0, 1.0])))
    assert _spearman_why_not(np.array([1.0, 2.0]), np.array([2.0, 1.0])) == "2 runs (needs >= 3)"
    assert _spearman_why_not(np.ones(4), np.arange(4.0)) == "a constant input"
    rhos = {"forecast": 0.9, "update norm": float("nan"), "gradient cosine": 0.3}
    why = {"forecast": "", "update norm": "a constant input", "gradient cosine": ""}
    claim = _forecast_claim(rhos, why)
    # a constant baseline used to count as beaten
    assert not claim.point_check
    assert claim.note.startswith("baselines not measured, so not beaten: update norm")
    assert _forecast_claim({**rhos, "update norm": 0.1}, why).point_check
    none = _forecast_claim({**rhos, "forecast": float("nan")}, {**why, "forecast": "2 runs"})
    assert none.value is None
    assert none.note.startswith("not measured: 2 runs")


def test_c4_error_and_slopes_undefined_are_not_measured():
    from alignment_geometry.reproduce import _c4_errors, _slope_claim

    runs = [
        {"orth": {"onset": {"u_over_t4": 1.1}, "c4": 1.0}},
        {"orth": {"onset": {"u_over_t4": 0.0}, "c4": 0.0}},  # was 0/0 = NaN, max() -> NaN
    ]
    rel, undefined = _c4_errors(runs)
    assert rel[0] == pytest.approx(0.1)
    assert np.isnan(rel[1])
    assert undefined == 1
    claim = _slope_claim("s", "m", np.array([4.0, np.nan]), (3.3, 4.7), "d")
    assert claim.value is None
    assert claim.note.startswith("not measured: slope undefined (u <= 0) in 1 of 2 runs")
    assert _slope_claim("s", "m", np.array([4.0, 4.2]), (3.3, 4.7), "d").point_check
    assert _slope_claim("s", "m", np.array([]), (1.8, 2.2), "d").value is None
