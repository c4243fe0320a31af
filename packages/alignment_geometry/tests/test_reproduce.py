"""The smoke-scale experiment end to end: claims, tables, figures, determinism of the toy."""

import json

import numpy as np
import pytest

pytest.importorskip("torch")

from alignment_geometry.reproduce import SCALES, _toy, reproduce
from paper_common import Report
from paper_common.claims import VERDICTS


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
    for c in report.claims:
        assert c.verdict in VERDICTS
        assert c.missing_parts() == []
        assert not c.defect, c.statement
    # the toy claims are exact mathematics: they hold at every scale, and each one's negative
    # control (the other onset, a constant checker) is refuted by the same rule
    assert [c.verdict for c in report.claims[:4]] == ["supported"] * 4
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
    from alignment_geometry.reproduce import (
        MIN_TASK_PROGRESS,
        _projection_claim,
        rotated_gd_rows,
    )

    row = {"gd_u": 1.0, "pr_u": 0.1, "l0": 1.0, "gd_loss": 0.5, "pr_loss": 0.52}
    claim = _projection_claim([row, {**row, "pr_u": 0.08}, {**row, "pr_u": 0.12}])
    assert claim.low > 5  # 8-12x on every task, cost 4%: inside
    assert claim.negative.verdict == "refuted"
    assert claim.verdict == "supported"
    # issue 43: the null is plain GD against itself with the task pairing rotated (the old one,
    # the arms swapped, was the mirror image 1 / cut); around tasks the rotated ratios telescope
    varied = [{**row, "gd_u": g, "pr_u": g / 10} for g in (1.0, 1.2, 1.5)]
    claim = _projection_claim(varied)
    assert claim.negative.value == pytest.approx(1.0)
    assert "rotated" in claim.negative.description
    assert claim.negative.verdict == "refuted"
    assert claim.verdict == "supported"
    null = rotated_gd_rows(varied)
    assert [r["pr_u"] for r in null] == [1.2, 1.5, 1.0]
    assert [r["pr_loss"] for r in null] == pytest.approx([0.5, 0.5, 0.5])
    # plain GD's final u spread 4x over 3 tasks: the self-null straddles 5x, so no verdict
    spread = [{**row, "gd_u": g, "pr_u": g / 10} for g in (1.0, 2.0, 4.0)]
    assert _projection_claim(spread).negative.verdict == "inconclusive"
    assert _projection_claim(spread).verdict == "inconclusive"
    # a projection that costs 20% of the task progress earns no cut (1): outside, refuted
    costly = {**row, "pr_loss": 0.6}
    assert _projection_claim([costly, costly, costly]).verdict == "refuted"
    # GD barely moved (0.001 nats): the cost is undefined, the positive control fails
    tiny = {**row, "gd_loss": 0.999, "pr_loss": 0.9995}
    assert MIN_TASK_PROGRESS > 1.0 - 0.999
    claim = _projection_claim([tiny, row])
    assert claim.value is None
    assert claim.verdict == "inconclusive"
    assert not claim.positive.passed
    assert _projection_claim([{**row, "gd_loss": 1.0}, row]).value is None  # was ZeroDivisionError
    # no alignment loss either way: not measured; one task: no interval
    assert _projection_claim([{**row, "gd_u": 0.0, "pr_u": 0.0}, row]).value is None
    assert _projection_claim([row]).value is None
    assert _projection_claim([]).value is None


def test_forecast_margin_planted():
    from alignment_geometry.reproduce import (
        _spearman,
        _spearman_why_not,
        forecast_margin,
        rank_identical,
    )

    assert np.isnan(_spearman(np.array([1.0, 2.0]), np.array([2.0, 1.0])))
    assert _spearman_why_not(np.array([1.0, 2.0]), np.array([2.0, 1.0])) == "2 runs (needs >= 3)"
    assert _spearman_why_not(np.ones(4), np.arange(4.0)) == "a constant input"
    rng = np.random.default_rng(0)
    du = np.arange(30.0)
    good = {"forecast": du + rng.normal(0, 1, 30), "noise": rng.normal(size=30)}
    m, (lo, hi) = forecast_margin(good, du)
    assert lo > 0  # inside: rho ~ 1 beats 0.5 and the noise baseline
    # issue 43: a baseline that ranks every run as the forecast does (the alignment-risk forecast,
    # the same expansion up to constants) made the margin 0 in every draw, so the claim could never
    # be supported; it is detected and left out, and the claim decided against the others
    rescaled = {**good, "risk": 3.0 * good["forecast"] + 1.0}
    assert rank_identical(rescaled) == ["risk"]
    m, (lo, hi) = forecast_margin(rescaled, du)
    assert lo > 0
    assert (m, lo, hi) == forecast_margin(good, du)[:1] + forecast_margin(good, du)[1]
    assert rank_identical(good) == []
    near = {**good, "near": good["forecast"][::-1].copy()}  # a different ranking is kept
    assert rank_identical(near) == []
    const = {"forecast": good["forecast"], "constant": np.ones(30)}
    assert np.isnan(forecast_margin(const, du)[0])  # a constant baseline cannot be beaten


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
    two = [{"seed": 0}, {"seed": 1}, {"seed": 2}]
    quartic, quadratic = np.array([4.0, 4.05, 4.1]), np.array([2.0, 2.01, 2.02])
    args = ("s", "m", two)
    claim = _slope_claim(*args, np.array([4.0, np.nan, 4.1]), 4.0, 0.7, two, quadratic, "t^2", "d")
    assert claim.verdict == "inconclusive"
    assert not claim.positive.passed
    claim = _slope_claim(*args, quartic, 4.0, 0.7, two, quadratic, "t^2 runs", "d")
    assert claim.negative.verdict == "refuted"  # the t^2 runs miss the quartic band by far
    assert claim.verdict == "supported"
    claim = _slope_claim(*args, quadratic, 4.0, 0.7, two, quadratic, "t^2 runs", "d")
    assert claim.verdict == "refuted"
    empty = _slope_claim("s", "m", [], np.array([]), 2.0, 0.2, [], np.array([]), "n", "d")
    assert empty.verdict == "inconclusive"
    assert empty.negative.missing


def test_seed_worst_is_the_worst_run_with_a_prediction_bound():
    """Issue 43: "every run" is decided on the worst run over seeds (not the mean over seeds of
    each seed's worst), up to the prediction bound of a further seed's worst run."""
    from alignment_geometry.reproduce import seed_worst

    runs = [{"seed": s} for s in (0, 0, 1, 1, 2, 2)]
    worst, ci = seed_worst(runs, np.array([0.1, 0.2, 0.1, 0.9, 0.1, 0.3]))
    assert worst == 0.9  # the mean of the per-seed worst (0.2, 0.9, 0.3) would be 0.47
    assert ci.low == 0.9
    assert ci.high > 0.9
    flat = seed_worst(runs, np.array([0.1, 0.2, 0.1, 0.2, 0.1, 0.2]))[1]
    assert flat.low == pytest.approx(0.2)
    assert flat.high == pytest.approx(0.2)  # no spread: the bound is the worst run
    assert seed_worst(runs[:2], np.array([0.1, 0.2]))[1] is None  # one seed: no interval
