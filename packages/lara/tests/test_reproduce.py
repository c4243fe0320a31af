import math

import pytest

from lara.reproduce import (
    CAUSAL_KERNELIZED,
    _quality_claims,
    _ratio,
    _sweep_environment,
    _win_fraction,
    reproduce,
)
from paper_common import Report


def test_smoke_reproduce_writes_a_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    assert len(report.claims) == 8
    for c in report.claims:  # measured, or explicitly not measured (never a silent NaN)
        if c.value is None or math.isnan(c.value):
            assert not c.point_check
            assert c.note.startswith("not measured")
    loaded = Report.from_json(tmp_path / "r")
    assert loaded.package == "lara"
    for fig in ("efficiency_forward", "decoding", "quality", "estimator"):
        assert (tmp_path / "r" / f"{fig}.png").exists()
    quality = {r["method"]: r for r in report.tables["quality"]}
    assert set(quality) == {"softmax (teacher)", *CAUSAL_KERNELIZED}
    assert all(0 <= r["qa_accuracy"] <= 1 for r in quality.values())
    decode = report.tables["decoding"]
    kv = [r["state_mib"] for r in decode if r["method"] == "softmax"]
    assert kv == sorted(kv)
    assert kv[-1] > kv[0]


def test_bad_scale():
    with pytest.raises(ValueError, match="scale"):
        reproduce("medium")


def _quality(teacher_acc: float, acc: float) -> list[dict]:
    frac = acc / teacher_acc if teacher_acc > 0 else math.nan
    rows = [{"method": "softmax (teacher)", "qa_accuracy": teacher_acc}]
    return rows + [
        {"method": m, "qa_accuracy": acc, "fraction_of_softmax": frac,
         "gap_points": 100 * (teacher_acc - acc)}
        for m in CAUSAL_KERNELIZED
    ]  # fmt: skip


def test_quality_claims_are_not_measured_when_the_teacher_answers_nothing():
    # planted: teacher and students at 0 accuracy. The gap (0 points) and the fraction (0/0) say
    # nothing about distillation: both claims carry no value, and say why
    gap, frac = _quality_claims(_quality(0.0, 0.0), 40)
    for claim in (gap, frac):
        assert claim.value is None
        assert not claim.point_check
        assert claim.note.startswith("not measured: the teacher answers none of the 40")
    gap, frac = _quality_claims(_quality(0.5, 0.5), 40)
    assert gap.value == 0.0
    assert not gap.point_check
    assert frac.value == 1.0
    assert frac.point_check


def test_win_fraction_leaves_out_unmeasured_pairs():
    rows = [
        {"method": "softmax", "seq_len": 64, "time_s": 1.0},
        {"method": "softmax", "seq_len": 128, "time_s": math.nan},  # skipped
        {"method": "lara", "seq_len": 64, "time_s": 2.0},
        {"method": "lara", "seq_len": 128, "time_s": 4.0},
    ]
    assert _win_fraction(rows, "softmax", "time_s") == (1.0, 1)
    nothing = [r for r in rows if r["seq_len"] == 128]
    share, n = _win_fraction(nothing, "softmax", "time_s")
    assert math.isnan(share)
    assert n == 0


def test_zero_times_give_no_ratio():
    assert _ratio(2.0, 1.0) == 2.0
    for num, den in ((1.0, 0.0), (0.0, 0.0), (1.0, math.nan), (math.inf, 1.0)):
        assert math.isnan(_ratio(num, den))


def test_sweep_note_names_the_cpu_even_with_a_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert _sweep_environment(2) == "CPU, 2 torch threads"
