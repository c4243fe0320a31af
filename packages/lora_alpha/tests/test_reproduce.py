import math

import pytest

from lora_alpha.reproduce import reproduce
from paper_common import Report


def test_smoke_reproduce_writes_a_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    assert len(report.claims) == 5
    assert all(c.value is not None and not math.isnan(float(c.value)) for c in report.claims)
    loaded = Report.from_json(tmp_path / "r")
    assert loaded.package == "lora_alpha"
    for fig in (
        "optimal_alpha",
        "alpha_lr_surface",
        "alpha_vs_lr",
        "lora_alpha_vs_tuned",
        "diagnostics",
    ):
        assert (tmp_path / "r" / f"{fig}.png").exists()
    tasks = {r["task"] for r in report.tables["alpha_vs_lr"]}
    assert tasks == {"regression", "knowledge_injection", "classification"}
    compare = report.tables["lora_alpha_vs_tuned"]
    assert {r["method"].split(" ")[0] for r in compare} >= {"standard", "rsLoRA", "LoRA-alpha"}
    assert all(0 <= r["score"] <= 1 for r in compare if r["task"] != "regression")


def test_bad_scale():
    with pytest.raises(ValueError, match="scale"):
        reproduce("medium")
