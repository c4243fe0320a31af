import pytest

from paper_common import Report
from phased_explore.reproduce import reproduce


def test_smoke_reproduce_writes_a_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    assert len(report.claims) == 4
    assert Report.from_json(tmp_path / "r").package == "phased_explore"
    for fig in ("frontier", "accuracy_vs_agents", "visitation"):
        assert (tmp_path / "r" / f"{fig}.png").exists()
    for c in report.claims:  # a verdict on an interval, with both controls
        assert c.missing_parts() == [], c.statement
        assert c.verdict in ("supported", "refuted", "inconclusive")
        assert c.interval
        assert c.positive is not None
        assert c.negative is not None
    fr = report.tables["frontier"]
    # fewer phases never need fewer agents, in simulation and in closed form
    assert [r["N_min_closed_form"] for r in fr] == sorted(
        (r["N_min_closed_form"] for r in fr), reverse=True
    )
    for r in fr:  # N_min lies in (the grid value before, the first that reached the rate]
        assert 1 <= r["N_min_low"] < r["N_min_high"]
        assert r["censored"] == (r["N_min_high"] == float("inf"))
    eq = {r["algorithm"]: r for r in report.tables["equal_trajectories"]}
    assert eq["RF-UCRL sequential (rho = T)"]["phases"] == eq["uniform (rho = 1)"]["trajectories"]


def test_bad_scale():
    with pytest.raises(ValueError, match="scale"):
        reproduce("medium")
