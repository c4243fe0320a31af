"""The smoke-scale experiment end to end: claims, tables, figures."""

import json
import math

import numpy as np
import pytest

pytest.importorskip("torch")

from paper_common import Report
from skill_commutator.reproduce import SCALES, _synthetic, reproduce

EPS = float(np.finfo(np.float64).eps)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("sc_smoke")
    with pytest.MonkeyPatch.context() as mp:  # the task LM is cached here, not in the user's cache
        mp.setenv("PAPER_CACHE_DIR", str(tmp_path_factory.mktemp("sc_cache")))
        return reproduce("smoke", seed=0, out_dir=out), out


def test_synthetic_null_and_ranking_hold_to_rounding():
    """The estimator on commuting fields is 0 to rounding relative to a real bracket's size, and
    ranks the Heisenberg sweep by eps (|C1| / eps constant to first order in h)."""
    syn = _synthetic(SCALES["smoke"]["synthetic"])
    sweep = np.asarray(syn["sweep"])
    assert syn["null"] <= 1e3 * EPS * sweep.max()  # measured 0.0
    ratio = sweep / np.asarray(SCALES["smoke"]["synthetic"]["eps"])
    assert np.ptp(ratio) / ratio.mean() < 0.2  # measured spread 0.005
    # common random numbers: measured 1.5e-3 paired vs 1.5e-1 unpaired (100x; theory 1/h = 20x)
    assert syn["noise_paired"] < syn["noise_unpaired"]


def test_smoke_report(smoke):
    report, out = smoke
    assert len(report.claims) == 8
    for c in report.claims:  # a claim with no measured value is never supported
        assert not c.point_check or (c.value is not None and not math.isnan(c.value))
    # ActAdd's commutator is two constant additions in either order: rounding relative to the
    # composed change in every (pair, context) that moved (measured exactly 0 at smoke)
    for row in report.tables["pairs"]:
        assert math.isnan(row["actadd_rel"]) or row["actadd_rel"] <= 1e3 * EPS
        assert row["actadd_rel_undefined"] >= 0
    n_pairs = 15 * len(SCALES["smoke"]["seeds"]) * 2
    assert len(report.tables["pairs"]) == n_pairs
    for row in report.tables["pairs"]:
        assert row["C"] > 0
        assert row["o_gap"] >= 0
        assert row["h0"] > 0
        assert 0 <= row["novelty"] <= 1.5708
    synth = {r["system"]: r for r in report.tables["synthetic"]}
    assert synth["heisenberg eps=1"]["state_err"] < 1e-10
    assert {r["predictor"] for r in report.tables["spearman"]} == {
        "commutator",
        "exact bracket",
        "cosine",
        "norm_product",
        "jacobian_angle",
        "actadd",
    }
    for fig in report.figures:
        assert (out / fig).stat().st_size > 1000
    again = Report.from_json(out / "report.json")
    assert [c.value for c in again.claims] == pytest.approx([c.value for c in report.claims])
    assert json.loads((out / "report.json").read_text())["scale"] == "smoke"


def test_unknown_scale_raises():
    with pytest.raises(ValueError, match="scale"):
        reproduce("huge")
