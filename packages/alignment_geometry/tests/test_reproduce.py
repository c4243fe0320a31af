"""The smoke-scale experiment end to end: claims, tables, figures, determinism of the toy."""

import json

import pytest

pytest.importorskip("torch")

from alignment_geometry.reproduce import SCALES, _toy, reproduce
from paper_common import Report


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("ag_smoke")
    return reproduce("smoke", seed=0, out_dir=out), out


def test_smoke_report(smoke):
    report, out = smoke
    assert len(report.claims) == 10
    cfg = SCALES["smoke"]
    n_runs = len(cfg["seeds"]) * len(cfg["tasks"])
    assert len(report.tables["onset"]) == 2 * n_runs
    assert len(report.tables["fine_tuning"]) == n_runs
    methods = {r["method"] for r in report.tables["mitigations"]}
    assert {
        "gd",
        "project",
        "ewc",
        "fisher_penalty",
        "lora",
        "safe_lora",
        "sgd (control)",
        "adam (control)",
    } <= methods
    # the toy claims are exact mathematics: they hold at every scale
    assert all(c.supported for c in report.claims[:4])
    for row in report.tables["onset"]:
        if row["variant"] == "orth":
            assert row["r_proj"] < 1e-12
            assert 3.3 < row["slope"] < 4.7
        else:
            assert 1.8 < row["slope"] < 2.2
    for row in report.tables["fine_tuning"]:
        assert row["task_loss"] < row["task_loss_0"]  # fine-tuning learns the task
        assert row["final_u"] > 0
    for fig in report.figures:
        assert (out / fig).stat().st_size > 1000
    again = Report.from_json(out / "report.json")
    assert [c.value for c in again.claims] == pytest.approx(
        [c.value for c in report.claims], nan_ok=True
    )
    assert json.loads((out / "report.json").read_text())["scale"] == "smoke"


def test_toy_is_deterministic():
    a, b = _toy(SCALES["smoke"]), _toy(SCALES["smoke"])
    assert a["flow"]["slope"] == b["flow"]["slope"]
    assert json.dumps(a["sweep"]) == json.dumps(b["sweep"])  # NaN slopes (c = 0) compare as text


def test_full_config_names_the_papers_setting():
    real = SCALES["full"]["real_models"]
    assert len(real["models"]) == 8
    assert "tatsu-lab/alpaca" in real["benign_sets"]
    assert SCALES["full"]["steps"] == 400
    assert len(SCALES["full"]["tasks"]) == 10
    assert SCALES["quick"]["steps"] == 200
    assert len(SCALES["quick"]["tasks"]) == 6


def test_bad_scale():
    with pytest.raises(ValueError, match="scale"):
        reproduce("huge")
