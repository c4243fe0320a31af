"""The smoke-scale experiment end to end: report, claims, figures, determinism."""

import json

import numpy as np
import pytest

pytest.importorskip("torch")

from paper_common import Report
from rce.reproduce import SCALES, _seed_job, reproduce


@pytest.fixture(scope="module")
def smoke(tmp_path_factory, fact_model):  # fact_model: the same cached fact LM
    out = tmp_path_factory.mktemp("rce_smoke")
    return reproduce("smoke", seed=0, out_dir=out), out


def test_smoke_report_has_claims_tables_and_figures(smoke):
    report, out = smoke
    statements = [c.statement for c in report.claims]
    assert len(statements) == 7  # no HP defence at smoke, so no claim 3
    assert any("Rank leakage" in s for s in statements)
    assert any("down to chance" in s for s in statements)
    for name in ("summary", "asr", "tracing", "timing"):
        assert report.tables[name]
    cells = {row["cell"] for row in report.tables["summary"]}
    assert cells == {"before", "rome/none", "rome/rce", "memit/none", "memit/rce"}
    for row in report.tables["summary"]:
        assert 0.0 <= row["output_asr@10"] <= 1.0
        assert row["n"] == SCALES["smoke"]["n_edits"]
    # before any edit the true answer is the top-1 of every known fact
    before = next(r for r in report.tables["summary"] if r["cell"] == "before")
    assert before["median_true_rank"] == 1
    assert before["output_asr@10"] == 1.0
    assert "restored bit for bit after every edit in 1 of 1 seeds" in report.notes
    for fig in report.figures:
        assert (out / fig).stat().st_size > 5000
    loaded = Report.from_json(out)
    assert [c.statement for c in loaded.claims] == statements


def test_same_seed_same_report(smoke, tmp_path):
    report, _ = smoke
    again = reproduce("smoke", seed=0, out_dir=tmp_path)
    assert json.dumps([c.to_dict() for c in again.claims]) == json.dumps(
        [c.to_dict() for c in report.claims]
    )
    assert again.tables["summary"] == report.tables["summary"]


def test_the_ft_editor_runs_in_the_experiment(fact_model):
    cfg = {**SCALES["smoke"], "editors": ["ft"], "defences": ["none", "rce"]}
    cfg["ft"] = {"steps": 10, "lr": 1e-2, "norm_bound": 5e-2}
    run = _seed_job((cfg, 0))
    assert set(run["results"]) == {"ft/none", "ft/rce"}
    assert run["restored"]
    none = run["results"]["ft/none"]
    assert none["target_top1"].mean() > run["before"]["target_top1"].mean()
    assert np.median(none["true_rank"]) > 1  # the edit moved the true answer off the top
