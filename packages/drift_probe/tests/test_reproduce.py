"""The smoke-scale experiment end to end: claims, tables, figures, determinism."""

import json

import numpy as np
import pytest

pytest.importorskip("torch")

from drift_probe.reproduce import SCALES, reproduce
from paper_common import Report


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("drift_smoke")
    return reproduce("smoke", seed=0, out_dir=out), out


def test_smoke_report(smoke):
    report, out = smoke
    assert len(report.claims) == 10
    assert any("Cross-cutoff" in c.statement for c in report.claims)
    for name in (
        "drift_auroc",
        "models",
        "orthogonality",
        "mean_directions",
        "cross_cutoff",
        "timing",
    ):
        assert report.tables[name], name
    cfg = SCALES["smoke"]
    assert len(report.tables["models"]) == len(cfg["seeds"]) * len(cfg["cutoffs"])
    methods = {r["method"]: r for r in report.tables["drift_auroc"]}
    assert 0.0 <= methods["drift_probe"]["mean_auroc"] <= 1.0
    assert methods["oracle"]["mean_auroc"] > 0.6  # the generator's own likelihood is informative
    for row in report.tables["models"]:
        assert row["n_confabulation"] > 0
        assert 0 < row["drift_rate"] < 1
    for fig in report.figures:
        assert (out / fig).stat().st_size > 5000
    loaded = Report.from_json(out)
    assert [c.statement for c in loaded.claims] == [c.statement for c in report.claims]


def test_same_seed_same_report(smoke, tmp_path):
    report, _ = smoke
    again = reproduce("smoke", seed=0, out_dir=tmp_path)
    assert json.dumps([c.to_dict() for c in again.claims]) == json.dumps(
        [c.to_dict() for c in report.claims]
    )
    assert again.tables["drift_auroc"] == report.tables["drift_auroc"]


def test_seed_job_runs_with_one_thread_whatever_the_workers(monkeypatch):
    import torch

    import drift_probe.reproduce as dr
    from paper_common.device import pinned_threads

    seen = []
    monkeypatch.setattr(dr, "_run_seed", lambda cfg, s, arch: seen.append(torch.get_num_threads()))
    with pinned_threads(2, torch=True):
        dr._seed_job(({**SCALES["smoke"], "workers": 1}, 0, "llama"))
        assert torch.get_num_threads() == 2
    assert seen == [1]


def test_a_constant_score_makes_its_correlation_not_measured():
    from drift_probe.reproduce import _correlation_claim

    names = ["correctness_probe", "token_entropy", "semantic_entropy"]
    # semantic entropy constant on one model (r undefined): nanmax used to drop it silently
    rs = np.array([[0.05, -0.1, np.nan], [0.02, 0.12, 0.04]])
    claim = _correlation_claim(names, rs)
    assert not claim.point_check
    assert claim.value == pytest.approx(0.12)
    assert "not measured for semantic_entropy on 1 of 2 models" in claim.note
    assert _correlation_claim(names, np.nan_to_num(rs)).point_check
    none = _correlation_claim(names, np.full((2, 3), np.nan))
    assert none.value is None
    assert none.note.startswith("not measured")


def test_profile_claim_needs_every_model():
    from drift_probe.reproduce import _profile_claim

    assert _profile_claim(np.array([0.9, 0.95]), 3).point_check
    # a model with < 5 stale items (NaN) was dropped by nanmin: 0.9 "supported" on one model of 2
    claim = _profile_claim(np.array([0.9, np.nan]), 3)
    assert claim.value is None
    assert not claim.point_check
    assert claim.note.startswith("not measured: 1 of 2 models")
    assert _profile_claim(np.array([np.nan, np.nan]), 0).value is None


def test_profile_figure_without_any_profile():
    from drift_probe.reproduce import _profile_figure

    runs = [{"profiles": {"stale": None, "confabulation": None}}] * 2
    _profile_figure(runs)  # was StopIteration after the claims, and the report was lost
    some = [{"profiles": {"stale": None, "confabulation": np.ones(3)}}, *runs]
    assert len(_profile_figure(some).axes[0].lines) == 2  # the mean and the one model
