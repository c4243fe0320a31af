import math

import pytest

from paper_common import Report
from patch_distill.reproduce import reproduce


def test_smoke_reproduce_writes_a_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    assert len(report.claims) == 5
    assert all(c.value is not None and not math.isnan(float(c.value)) for c in report.claims)
    loaded = Report.from_json(tmp_path / "r")
    assert loaded.package == "patch_distill"
    for fig in ("tradeoff", "similarity", "correspondence"):
        assert (tmp_path / "r" / f"{fig}.png").exists()
    models = {r["model"] for r in report.tables["tradeoff"]}
    assert {"dino λ=0", "dino λ=1", "mae", "random"} <= models
    for r in report.tables["tradeoff"]:
        assert 0 <= r["linear"] <= 1
        assert r["r2_code"] <= 1
        assert 0 <= r["corr_mean"] <= 1
    assert {r["model"] for r in report.tables["theory"]} == {"gaussian", "discrete"}


def test_bad_scale():
    with pytest.raises(ValueError, match="scale"):
        reproduce("medium")
