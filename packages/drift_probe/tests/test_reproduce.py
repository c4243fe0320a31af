"""The smoke-scale experiment end to end: claims, tables, figures, determinism."""

import json

import pytest

pytest.importorskip("torch")

from drift_probe.reproduce import SCALES, reproduce
from paper_common import Report


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("drift_smoke")
    return reproduce("smoke", seed=0, out_dir=out), out


def test_smoke_report(smoke):
    report, out = smoke
    assert len(report.claims) == 10
    assert any("Cross-cutoff" in c.statement for c in report.claims)
    for name in (
        "drift_auroc",
        "models",
        "orthogonality",
        "mean_directions",
        "cross_cutoff",
        "timing",
    ):
        assert report.tables[name], name
    cfg = SCALES["smoke"]
    assert len(report.tables["models"]) == len(cfg["seeds"]) * len(cfg["cutoffs"])
    methods = {r["method"]: r for r in report.tables["drift_auroc"]}
    assert 0.0 <= methods["drift_probe"]["mean_auroc"] <= 1.0
    assert methods["oracle"]["mean_auroc"] > 0.6  # the generator's own likelihood is informative
    for row in report.tables["models"]:
        assert row["n_confabulation"] > 0
        assert 0 < row["drift_rate"] < 1
    for fig in report.figures:
        assert (out / fig).stat().st_size > 5000
    loaded = Report.from_json(out)
    assert [c.statement for c in loaded.claims] == [c.statement for c in report.claims]


def test_same_seed_same_report(smoke, tmp_path):
    report, _ = smoke
    again = reproduce("smoke", seed=0, out_dir=tmp_path)
    assert json.dumps([c.to_dict() for c in again.claims]) == json.dumps(
        [c.to_dict() for c in report.claims]
    )
    assert again.tables["drift_auroc"] == report.tables["drift_auroc"]
