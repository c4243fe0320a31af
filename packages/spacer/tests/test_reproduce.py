import pytest

from paper_common import Report
from spacer.reproduce import reproduce


def test_smoke_reproduce_writes_a_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    assert len(report.claims) == 5
    assert all(c.value is not None and c.value >= 0 for c in report.claims)  # ratios of errors
    for c in report.claims:  # each claim: a verdict on an interval over seeds, with both controls
        assert c.missing_parts() == [], c.statement
        assert c.verdict in ("supported", "refuted", "inconclusive")
        assert c.low is not None
        assert c.low <= c.high
        assert "3 seeds" in c.interval
        assert c.positive is not None
        assert c.positive.role == "positive"
        assert c.negative is not None
        assert c.negative.target == c.target
    assert {r["field"] for r in report.tables["configuration"]} >= {"n", "seeds", "budget"}
    loaded = Report.from_json(tmp_path / "r")
    assert loaded.package == "spacer"
    assert {"error_vs_memory.png", "error_vs_noise.png"} <= {
        p.name for p in (tmp_path / "r").iterdir()
    }
    table = next(iter(report.tables.values()))
    methods = {r["method"] for r in table}
    assert {
        "SpaceR",
        "Learned Count-Min",
        "Trivial (exact on predictions)",
        "SpaceSaving at B log B",
    } <= methods


def test_bad_scale_and_seed():
    with pytest.raises(ValueError, match="scale"):
        reproduce("medium")
    with pytest.raises(ValueError, match="seed"):
        reproduce("smoke", seed=-1)
