import pytest

from paper_common import Report
from spherical_grokking.reproduce import SCALES, reproduce


def test_smoke_reproduce_writes_a_complete_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    assert len(report.claims) == 5
    assert Report.from_json(tmp_path / "r").package == "spherical_grokking"
    for fig in ("accuracy_curves", "grokking_times", "norms", "fourier_spectrum"):
        assert (tmp_path / "r" / f"{fig}.png").exists()
    cfg = SCALES["smoke"]
    runs = report.tables["runs"]
    arms = {(r["task"], r["arm"]) for r in runs}
    assert {("add_mod_13", a) for a in cfg.add_arms} <= arms
    assert ("perm_S3", "sphere") in arms
    for r in runs:
        # the head each arm used is recorded; the sphere always reads out through the cosine head
        assert r["head"] == ("cosine" if r["variant"].startswith("sphere") else "linear")
        budget = cfg.perm_steps if r["task"].startswith("perm") else cfg.steps
        if r["t_test95_censored"]:
            assert r["t_test95"] == budget  # censored at the budget, never zero
    assert {r["seed"] for r in runs} == {0, 1}
    assert {r["arm"] for r in report.tables["baselines"]} >= {"layernorm", "layernorm + grokfast"}
    assert {r["trained"] for r in report.tables["cosets"]} == {True, False}
    fourier = report.tables["fourier"]
    assert fourier
    assert all(0 <= r["fve_key"] <= 1 for r in fourier)


def test_bad_arguments():
    with pytest.raises(ValueError, match="scale"):
        reproduce("medium")
    with pytest.raises(ValueError, match="seed"):
        reproduce("smoke", seed=-1)
