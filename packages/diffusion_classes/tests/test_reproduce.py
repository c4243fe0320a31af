import math

import pytest

from diffusion_classes.reproduce import reproduce
from paper_common import Report


def test_smoke_reproduce_writes_a_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    assert len(report.claims) == 7
    loaded = Report.from_json(tmp_path / "r")
    assert loaded.package == "diffusion_classes"
    for fig in ("class_curves", "spectrum", "tau_vs_structure", "cloning", "unet_digits"):
        assert (tmp_path / "r" / f"{fig}.png").exists()
    # the random-features times are measured numbers, the theory's are positive and finite
    for r in report.tables["variance"]:
        assert 0 < r["tau_gen_0"] < math.inf
        assert 0 < r["pred_gen_1"] < math.inf
    clone = report.tables["clone"]
    for r in clone:  # a speciation time lies on the stop grid [0.05, 4]; outside it, flagged
        assert 0.05 <= r["exact_0"] <= 4.0
        assert not (r["exact_0_censored"] and r["exact_0_early"])
        assert not r["exact_0_censored"] or r["exact_0"] == pytest.approx(4.0)
        assert not r["exact_0_early"] or r["exact_0"] == pytest.approx(0.05)
    for r in report.tables["null"]:  # never NaN: censored at the grid end
        assert 0 < r["tau_mem_0"] <= 3e6
    for c in report.claims:  # an unmeasured claim is never supported
        assert not c.point_check or (c.value is not None and not math.isnan(c.value))
        assert c.verdict in ("supported", "refuted", "inconclusive")
        assert c.missing_parts() == [], c.statement
        assert c.verdict == "inconclusive"  # one seed at smoke: no interval over seeds
    unet = report.tables["unet"][0]
    assert unet["dataset"] == "digits"
    assert unet["var_0"] > 0


def test_bad_scale():
    with pytest.raises(ValueError, match="scale"):
        reproduce("medium")
