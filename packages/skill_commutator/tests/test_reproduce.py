"""The smoke-scale experiment end to end: claims, tables, figures."""

import json

import pytest

pytest.importorskip("torch")

from paper_common import Report
from skill_commutator.reproduce import SCALES, reproduce


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("sc_smoke")
    return reproduce("smoke", seed=0, out_dir=out), out


def test_smoke_report(smoke):
    report, out = smoke
    assert len(report.claims) == 8
    # the synthetic null and ranking, and ActAdd's null, are mathematics: they hold at every scale
    assert report.claims[1].supported
    assert report.claims[2].supported
    assert report.claims[2].value < 1e-10
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
