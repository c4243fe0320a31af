import math

import numpy as np
import pytest
import torch

from lora_alpha.reproduce import reproduce
from lora_alpha.reproduce.claims import (
    abs_dev_interval,
    drift_flat_claim,
    drift_rise_claim,
    exponent_claim,
    fold_interval,
    heuristic_claim,
    permuted_ranks,
    score_gap_claim,
)
from lora_alpha.reproduce.run import planted_drift_fold, tuned, win
from lora_alpha.sweep import PowerLawFit, SweepResult, fit_optimal_alpha
from lora_alpha.train import RunResult
from paper_common import Report
from paper_common.stats import ConfidenceInterval


def test_smoke_reproduce_writes_a_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    assert len(report.claims) == 7
    for c in report.claims:  # measured, or explicitly not measured (never a silent NaN)
        assert c.verdict in ("supported", "refuted", "inconclusive")
        assert c.missing_parts() == []
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


def _irows(base, alpha_k, lr_k, scores=(0.1, 0.8, 0.5), k=4):
    """scaling_interaction rows of one task, one entry per seed: drift ratios of the base run,
    alpha x k and lr x k; scores (base, alpha x k, lr x k) the same at every seed unless a list."""
    rows = []
    for s, (b, a, l_) in enumerate(zip(base, alpha_k, lr_k, strict=True)):
        sc = [x[s] if isinstance(x, list) else x for x in scores]
        for kind, f, d, score in (("lr", 1, b, sc[0]), ("alpha", 1, b, sc[0]),
                                  ("alpha", k, a, sc[1]), ("lr", k, l_, sc[2])):  # fmt: skip
            rows.append({"kind": kind, "factor": f, "seed": s, "score": score,
                         "diverged": False, "drift_ratio_full_ft": d})  # fmt: skip
    return rows


BASE = [1.0, 1.02, 0.98]
PLANTED = {"a": [1.5, 1.45, 1.52], "b": [1.6, 1.5, 1.55]}


def test_drift_claims_split_the_lr_series_out_of_the_negative_control():
    """Issue 43 flagged the drift claim DEFECT: its negative control was the lr series, the claim's
    own second half, and it came out flat too. Now 2a (alpha flat) has a planted off-task
    component as its null and 2b (lr rises more than alpha) is a claim of its own: a flat lr
    series refutes 2b, with no DEFECT anywhere."""
    flat = [x * 1.05 for x in BASE]
    both_flat = {"a": _irows(BASE, flat, flat), "b": _irows(BASE, flat, flat)}
    a = drift_flat_claim(both_flat, PLANTED, 4)
    assert a.verdict == "supported"
    assert a.negative.verdict == "refuted"
    assert a.positive.passed
    b = drift_rise_claim(both_flat, PLANTED, 4)
    assert b.verdict == "refuted"
    assert not b.defect
    assert not a.defect
    rises = {t: _irows(BASE, flat, [3 * x for x in BASE]) for t in ("a", "b")}
    up = drift_rise_claim(rises, PLANTED, 4)
    assert up.verdict == "supported"
    assert up.negative.verdict == "refuted"  # the alpha arm against itself, seeds rotated


def test_drift_claims_with_an_undefined_ratio_are_not_measured():
    for base in (0.0, math.inf, math.nan):  # the base run's ratio: only 2a divides by it
        rows = {"a": _irows([base, 1.0, 1.0], BASE, BASE), "b": _irows(BASE, BASE, BASE)}
        claim = drift_flat_claim(rows, PLANTED, 4)
        assert claim.verdict == "inconclusive"
        assert claim.missing_parts() == []
    rows = {"a": _irows(BASE, [math.nan, 1.0, 1.0], BASE), "b": _irows(BASE, BASE, BASE)}
    for claim in (drift_flat_claim(rows, PLANTED, 4), drift_rise_claim(rows, PLANTED, 4)):
        assert claim.verdict == "inconclusive"  # a zero update (NaN ratio): not measured
        assert claim.value is None
        assert claim.missing_parts() == []
    # an lr run that diverged at every seed (drift +inf): the lr series rose without bound
    inf = {t: _irows(BASE, BASE, [math.inf] * 3) for t in ("a", "b")}
    assert drift_rise_claim(inf, PLANTED, 4).verdict == "supported"
    # an alpha run that diverged: not flat
    inf = {t: _irows(BASE, [math.inf] * 3, BASE) for t in ("a", "b")}
    assert drift_flat_claim(inf, PLANTED, 4).verdict == "refuted"


def test_score_gap_claim_needs_three_seeds_and_a_margin():
    good = {t: _irows(BASE, BASE, BASE, (0.1, [0.80, 0.802, 0.798], 0.5)) for t in ("a", "b")}
    claim = score_gap_claim(good, 4)
    assert claim.verdict == "supported"
    assert claim.negative.verdict == "refuted"  # self-null: no gap by construction
    tie = {t: _irows(BASE, BASE, BASE, (0.1, [0.5, 0.502, 0.498], 0.5)) for t in ("a", "b")}
    assert score_gap_claim(tie, 4).verdict == "refuted"
    two = {t: [r for r in _irows(BASE, BASE, BASE) if r["seed"] < 2] for t in ("a", "b")}
    claim = score_gap_claim(two, 4)
    assert claim.verdict == "inconclusive"
    assert claim.interval.startswith("missing")
    assert claim.missing_parts() == []


def test_fold_interval_planted():
    ci = fold_interval(ConfidenceInterval(1.1, 0.9, 1.3, 0.95))
    assert (ci.low, ci.high) == (1.0, pytest.approx(1 / 0.9 if 1 / 0.9 > 1.3 else 1.3))
    ci = fold_interval(ConfidenceInterval(0.5, 0.4, 0.6, 0.95))
    assert (ci.low, ci.high) == (pytest.approx(1 / 0.6), pytest.approx(2.5))


def test_planted_drift_raises_the_drift_ratio_and_keeps_the_signal():
    torch.manual_seed(0)
    ref = {"x": torch.randn(6, 5), "y": torch.randn(3, 4)}
    delta = {k: 0.8 * v + 0.3 * torch.randn_like(v) for k, v in ref.items()}
    fold = planted_drift_fold(delta, ref, seed=0)
    assert fold > 1.4
    assert planted_drift_fold(delta, ref, seed=0) == fold  # seeded


def _run(lr: float, score: float, loss: float, diverged: bool = False, val=True) -> RunResult:
    metrics = {"score": score, "loss": loss}
    return RunResult("standard", 4, lr, 16.0, 4.0, 0, metrics, [], diverged=diverged,
                     val_metrics=dict(metrics) if val else {})  # fmt: skip


def test_tuned_run_never_is_a_diverged_one_and_ties_go_to_the_smallest_lr():
    # a regression run can score below 0 (worse than the start); a diverged run scores 0 by rule
    runs = [_run(1e-4, -0.2, 2.0), _run(1e-2, 0.0, math.inf, diverged=True)]
    assert tuned(runs).lr == 1e-4
    assert tuned(runs[::-1]).lr == 1e-4
    ties = [_run(1e-3, 0.5, 1.0), _run(1e-4, 0.5, 1.0), _run(1e-2, 0.5, 1.0)]
    assert tuned(ties).lr == 1e-4
    assert tuned(ties[::-1]).lr == 1e-4
    nan = _run(1e-4, math.nan, math.nan)  # NaN is the worst value, not an unordered one
    assert tuned([nan, _run(1e-3, 0.1, 1.0)]).lr == 1e-3
    assert tuned([_run(1e-3, 0.1, 1.0), nan]).lr == 1e-3
    a = {"score": 0.0, "loss": math.inf, "diverged": True}
    b = {"score": -0.5, "loss": 3.0, "diverged": False}
    assert not win(a, b)
    assert win(b, a)
    assert not win(a, dict(a))


def _fit(b: float, low: float, high: float) -> PowerLawFit:
    return PowerLawFit(b, 100.0, (low, high), (90.0, 110.0), 0.99, 1000)


def test_exponent_claim_is_decided_on_the_fit_ci_not_the_point():
    """Issue 43: b = 0.493 with a 95% CI of [0.16, 0.51] passed the old point check |b - 0.5| <=
    0.15; on its interval it is inconclusive."""
    null = _fit(-0.5, -0.7, -0.3)  # the rank labels reversed
    old = exponent_claim(_fit(0.493, 0.162, 0.511), null, 1.0)
    assert old.point_check  # the old rule passed
    assert old.verdict == "inconclusive"
    assert old.negative.verdict == "refuted"
    assert exponent_claim(_fit(0.5, 0.45, 0.55), null, 1.0).verdict == "supported"
    assert exponent_claim(_fit(0.9, 0.8, 0.95), null, 1.0).verdict == "refuted"
    assert exponent_claim(_fit(0.5, 0.45, 0.55), null, 0.5).verdict == "inconclusive"  # no bracket
    nan = exponent_claim(_fit(math.nan, math.nan, math.nan), null, 1.0)
    assert nan.verdict == "inconclusive"
    assert nan.missing_parts() == []


def test_abs_dev_interval_planted():
    assert abs_dev_interval(0.45, 0.55, 0.5) == (0.0, pytest.approx(0.05))  # inside the target
    assert abs_dev_interval(0.162, 0.511, 0.5) == (0.0, pytest.approx(0.338))  # across it
    assert abs_dev_interval(0.8, 0.95, 0.5) == (pytest.approx(0.3), pytest.approx(0.45))  # outside
    assert abs_dev_interval(0.0, 0.2, 0.5) == (pytest.approx(0.3), pytest.approx(0.5))


def test_drift_positive_control_keeps_a_nan_base_whatever_the_task_order():
    """Builtin min() dropped a NaN base drift ratio when it came after a finite one."""
    for tasks in (("a", "b"), ("b", "a")):
        rows = {"a": _irows(BASE, BASE, BASE), "b": _irows(BASE, [math.nan, 1.0, 1.0], BASE)}
        for make in (drift_flat_claim, drift_rise_claim):
            claim = make({t: rows[t] for t in tasks}, PLANTED, 4)
            assert not claim.positive.passed
            assert claim.verdict == "inconclusive"


def test_exponent_claim_needs_three_seeds():
    claim = exponent_claim(_fit(0.5, 0.45, 0.55), _fit(0.0, -0.3, 0.3), 1.0, n_seeds=2)
    assert claim.verdict == "inconclusive"
    assert claim.interval.startswith("missing")
    assert claim.low is None


def _law_sweep(b: float, c: float, offsets: list[float]) -> SweepResult:
    """A planted sweep: loss = (log alpha - log(c r^b) - offset of the seed)^2, one lr."""
    alphas = 2.0 ** np.arange(2, 13)
    return SweepResult([
        {"r": r, "alpha": float(a), "lr": 1e-4, "seed": s, "score": 0.0,
         "loss": float((np.log(a) - np.log(c * r**b) - o) ** 2)}
        for r in (1, 4, 16, 64) for a in alphas for s, o in enumerate(offsets)
    ])  # fmt: skip


def test_exponent_null_is_no_mirror_image():
    """Planted: alpha* ~ r^-0.5, the law pointing the other way. Reversing the rank labels (the
    draft's null) turns it into r^+0.5: that null comes out supported, so it is no null. The
    seeded permutation null carries no rank trend and is refuted (with 6 seeds; with 3 its
    bootstrap over seeds can draw one permutation thrice and reach b = 0.5: then inconclusive)."""
    res = _law_sweep(-0.5, 256.0, [0.0, 0.1, -0.1, 0.05, -0.05, 0.02])
    fit = fit_optimal_alpha(res, "loss", n_boot=200, seed=0)
    ranks = res.values("r")
    swap = dict(zip(ranks, ranks[::-1], strict=True))
    reversed_ = SweepResult([{**row, "r": swap[row["r"]]} for row in res.rows])
    old = exponent_claim(fit, fit_optimal_alpha(reversed_, "loss", n_boot=200, seed=0), 1.0)
    assert old.verdict == "refuted"
    assert old.negative.verdict == "supported"  # the mirror image shows the reversed law ...
    assert not old.defect  # ... which is no defect of a rule its own interval refutes
    assert "no case where the claim must fail" in old.reason
    new = exponent_claim(fit, fit_optimal_alpha(permuted_ranks(res), "loss", n_boot=200), 1.0)
    assert new.verdict == "refuted"
    assert new.negative.verdict == "refuted"
    assert not new.defect
    assert permuted_ranks(res).rows == permuted_ranks(res).rows  # seeded


def test_heuristic_claim_null_is_data_not_construction():
    """The draft's negative control was the heuristic itself (ratio 1 against '> 1'): refuted
    whatever the data. Planted alpha* = 128 sqrt(r), 8x the heuristic at r = 1 and 64."""
    res = _law_sweep(0.5, 128.0, [0.0, 0.1, -0.1])
    ok = heuristic_claim(res, res.optimal_alpha("loss"), _fit(0.5, 0.4, 0.6), 1.0, "loss")
    assert ok.target == ">= 2"  # one step of the alpha grid (powers of 2)
    assert ok.negative.verdict == "refuted"
    assert ok.verdict == "supported"
    # seed noise of the optimum (x e^0.3): alpha* is 8x the heuristic on its whole interval, but
    # the self-null (seed s vs s + 1) reaches past one grid step: not shown above seed noise
    res = _law_sweep(0.5, 128.0, [0.0, 0.3, -0.3])
    noisy = heuristic_claim(res, res.optimal_alpha("loss"), _fit(0.5, 0.4, 0.6), 1.0, "loss")
    assert noisy.low > 2.0
    assert noisy.negative.verdict == "inconclusive"
    assert noisy.verdict == "inconclusive"


def test_tuned_baseline_picks_its_lr_on_validation_not_test():
    """Issue 44: the tuned baselines picked their learning rate by the test score they report.
    Planted: lr 1e-3 is best on test, lr 1e-2 on validation; the pick follows validation."""
    runs = [
        RunResult("standard", 4, 1e-3, 16.0, 4.0, 0, {"score": 0.9, "loss": 0.1}, [],
                  val_metrics={"score": 0.5, "loss": 0.5}),
        RunResult("standard", 4, 1e-2, 16.0, 4.0, 0, {"score": 0.6, "loss": 0.4}, [],
                  val_metrics={"score": 0.8, "loss": 0.2}),
    ]  # fmt: skip
    assert tuned(runs).lr == 1e-2
    assert tuned(runs[::-1]).lr == 1e-2
    with pytest.raises(ValueError, match="validation"):
        tuned(
            [_run(1e-3, 0.5, 1.0, val=False)]
        )  # no validation metrics: no silent fallback to test
