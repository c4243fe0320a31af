import math

import pytest

from paper_common import Report
from vepo.reproduce import reproduce
from vepo.rl import METHODS


def test_smoke_reproduce_writes_a_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    assert len(report.claims) == 4
    assert all(c.value is not None and not math.isnan(float(c.value)) for c in report.claims)
    assert Report.from_json(tmp_path / "r").package == "vepo"
    for fig in ("curves", "pass_at_k"):
        assert (tmp_path / "r" / f"{fig}.png").exists()
    runs = report.tables["runs"]
    assert {r["method"] for r in runs} == set(METHODS)
    assert all(0 <= r["pass@1"] <= 1 for r in runs)


def test_bad_scale():
    with pytest.raises(ValueError, match="scale"):
        reproduce("medium")
