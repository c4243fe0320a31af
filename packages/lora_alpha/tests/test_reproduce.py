import math

import pytest

from lora_alpha.reproduce import _drift_claim, _geomean, _tuned, _win, reproduce
from lora_alpha.train import RunResult
from paper_common import Report


def test_smoke_reproduce_writes_a_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    assert len(report.claims) == 5
    for c in report.claims:  # measured, or explicitly not measured (never a silent NaN)
        if c.value is None or math.isnan(c.value):
            assert not c.point_check
            assert c.note.startswith("not measured")
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


def _rows(base: float, alpha_k: float, lr_k: float) -> list[dict]:
    """scaling_interaction rows of one task (k = 1 and 4) with the given drift ratios."""
    return [
        {"kind": "lr", "factor": 1, "drift_ratio_full_ft": base},
        {"kind": "alpha", "factor": 1, "drift_ratio_full_ft": base},
        {"kind": "lr", "factor": 4, "drift_ratio_full_ft": lr_k},
        {"kind": "alpha", "factor": 4, "drift_ratio_full_ft": alpha_k},
    ]


def test_drift_claim_with_a_zero_or_infinite_base_is_not_measured():
    for base in (0.0, math.inf, math.nan):  # 0: ZeroDivisionError before; inf: ratios of 0
        claim = _drift_claim({"a": _rows(base, 1.0, 2.0), "b": _rows(1.0, 1.0, 2.0)}, 4)
        assert claim.value is None
        assert not claim.point_check
        assert claim.note.startswith("not measured: a: base drift ratio")


def test_drift_claim_counts_a_diverged_run_as_censored_at_inf():
    # the lr x 4 run diverged (drift ratio +inf): the lr series rises without bound, as claimed
    claim = _drift_claim({"a": _rows(2.0, 2.0, math.inf), "b": _rows(1.0, 1.1, 3.0)}, 4)
    assert claim.value == pytest.approx(math.sqrt(1.1))
    assert claim.point_check
    # the alpha x 4 run diverged: not flat, refuted (not a NaN verdict)
    claim = _drift_claim({"a": _rows(2.0, math.inf, 4.0), "b": _rows(1.0, 1.0, 3.0)}, 4)
    assert claim.value == math.inf
    assert not claim.point_check


def test_geomean_limits_are_explicit():
    assert _geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert _geomean([2.0, math.inf]) == math.inf
    assert _geomean([0.0, 2.0]) == 0.0
    assert math.isnan(_geomean([0.0, math.inf]))
    assert math.isnan(_geomean([math.nan, 2.0]))


def _run(lr: float, score: float, loss: float, diverged: bool = False) -> RunResult:
    metrics = {"score": score, "loss": loss}
    return RunResult("standard", 4, lr, 16.0, 4.0, 0, metrics, [], diverged=diverged)


def test_tuned_run_never_is_a_diverged_one_and_ties_go_to_the_smallest_lr():
    # a regression run can score below 0 (worse than the start); a diverged run scores 0 by rule
    runs = [_run(1e-4, -0.2, 2.0), _run(1e-2, 0.0, math.inf, diverged=True)]
    assert _tuned(runs).lr == 1e-4
    assert _tuned(runs[::-1]).lr == 1e-4
    ties = [_run(1e-3, 0.5, 1.0), _run(1e-4, 0.5, 1.0), _run(1e-2, 0.5, 1.0)]
    assert _tuned(ties).lr == 1e-4
    assert _tuned(ties[::-1]).lr == 1e-4
    nan = _run(1e-4, math.nan, math.nan)  # NaN is the worst value, not an unordered one
    assert _tuned([nan, _run(1e-3, 0.1, 1.0)]).lr == 1e-3
    assert _tuned([_run(1e-3, 0.1, 1.0), nan]).lr == 1e-3
    a = {"score": 0.0, "loss": math.inf, "diverged": True}
    b = {"score": -0.5, "loss": 3.0, "diverged": False}
    assert not _win(a, b)
    assert _win(b, a)
    assert not _win(a, dict(a))
