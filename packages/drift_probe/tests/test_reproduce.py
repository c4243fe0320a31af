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
    for c in report.claims:
        assert c.verdict in ("supported", "refuted", "inconclusive")
        assert c.missing_parts() == [], c.statement
    # every claim read off the drift probe rests on it beating the input-only controls
    on_probe = [c for c in report.claims if c.positive and "input-only" in c.positive.description]
    assert len(on_probe) == 7
    assert [c.kind for c in report.claims].count("check") == 1
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


def _runs(seeds, values):
    return [{"seed": s} for s in seeds], np.asarray(values, float)


def _probe(diff_boot, diff):
    from drift_probe.reproduce import _probe_control

    runs = [
        {"diff_boot": np.asarray(diff_boot), "aurocs": {"drift_probe": 0.7 + diff, "c": 0.7},
         "best_control": "c"}
    ]  # fmt: skip
    return _probe_control(runs)


def test_seed_interval_and_claim_on_planted_numbers():
    from drift_probe.reproduce import _seed_claim, _seed_interval
    from paper_common import Control

    groups, v = _runs([0, 0, 1, 1, 2, 2], [0.9, 0.92, 0.91, 0.93, 0.9, 0.94])
    value, ci = _seed_interval(groups, v)
    assert value == pytest.approx(v.mean())
    assert ci.low < ci.estimate < ci.high  # per-seed means 0.91, 0.92, 0.92
    assert _seed_interval(groups[:2], v[:2])[1] is None  # one seed: no interval
    assert _seed_interval(groups, np.r_[v[:5], np.nan]) == (None, None)
    good = _probe(np.linspace(0.05, 0.15, 200), 0.1)
    neg = Control.negative("n", 0.6, (0.55, 0.65))

    def verdict(values):
        return _seed_claim("s", "m", groups, values, ">=", 0.8, good, neg, "").verdict

    assert verdict(v) == "supported"
    assert verdict(v - 0.3) == "refuted"
    assert verdict([0.7, 0.7, 0.9, 0.9, 0.8, 0.8]) == "inconclusive"
    one = _seed_claim("s", "m", groups[:2], v[:2], ">=", 0.8, good, neg, "")
    assert one.verdict == "inconclusive"
    assert one.interval.startswith("missing")
    assert one.missing_parts() == []


def test_a_probe_that_cannot_beat_the_input_leaves_its_claims_inconclusive():
    """Issue 43: the probe did not beat an input-only control (AUROC difference [-0.028, 0.009]),
    yet its claims read "no"; now they are inconclusive with that number, and decided once the
    probe beats the input."""
    from drift_probe.reproduce import _seed_claim
    from paper_common import Control

    groups, v = _runs([0, 1, 2], [0.57, 0.6, 0.62])
    bad = _probe(np.linspace(-0.028, 0.009, 200), -0.01)
    assert not bad.passed
    neg = Control.negative("n", 0.6, (0.55, 0.65))
    claim = _seed_claim("s", "m", groups, v, ">=", 0.8, bad, neg, "")
    assert claim.point_check is False  # what the old two-valued claim reported
    assert claim.verdict == "inconclusive"
    assert "input-only" in claim.reason
    assert (
        _seed_claim("s", "m", groups, v, ">=", 0.8, _probe([0.05, 0.1], 0.08), neg, "").verdict
        == "refuted"
    )


def test_a_constant_score_makes_its_correlation_not_measured():
    from drift_probe.reproduce import _correlation_claim

    names = ["correctness_probe", "token_entropy", "semantic_entropy"]
    runs = [{"seed": 0}, {"seed": 1}]
    good = _probe([0.05, 0.1], 0.08)
    # semantic entropy constant on one model (r undefined): nanmax used to drop it silently
    rs = np.array([[0.05, -0.1, np.nan], [0.02, 0.12, 0.04]])
    claim = _correlation_claim(names, rs, runs, good)
    assert claim.verdict == "inconclusive"
    assert claim.value is None
    assert "not measured for semantic_entropy on 1 of 2 models" in claim.note
    assert "largest |r| over the other scores 0.120" in claim.note
    assert _correlation_claim(names, np.nan_to_num(rs), runs, good).point_check
    none = _correlation_claim(names, np.full((2, 3), np.nan), runs, good)
    assert none.value is None
    assert none.note.startswith("not measured")


def test_profile_claim_needs_every_model():
    from drift_probe.reproduce import _profile_claim

    runs = [{"seed": 0}, {"seed": 1}]
    assert _profile_claim(np.array([0.9, 0.95]), 3, runs).point_check
    # a model with < 5 stale items (NaN) was dropped by nanmin: 0.9 "supported" on one model of 2
    claim = _profile_claim(np.array([0.9, np.nan]), 3, runs)
    assert claim.value is None
    assert claim.verdict == "inconclusive"
    assert claim.note.startswith("not measured: 1 of 2 models")
    assert _profile_claim(np.array([np.nan, np.nan]), 0, runs).value is None


def test_separation_margin_needs_both_conditions():
    from drift_probe.reproduce import _separation

    own = np.array([[0.8, 0.9], [0.8, 0.9], [0.6, 0.9]])
    cross = np.array([[0.5, 0.55], [0.5, 0.7], [0.5, 0.5]])
    m = _separation(own, cross)
    assert m[0] > 0
    assert m[1] < 0
    assert m[2] < 0
    assert (_separation(cross, own) < 0).all()  # swapped arms fail


def test_profile_figure_without_any_profile():
    from drift_probe.reproduce import _profile_figure

    runs = [{"profiles": {"stale": None, "confabulation": None}}] * 2
    _profile_figure(runs)  # was StopIteration after the claims, and the report was lost
    some = [{"profiles": {"stale": None, "confabulation": np.ones(3)}}, *runs]
    assert len(_profile_figure(some).axes[0].lines) == 2  # the mean and the one model
