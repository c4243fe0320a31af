"""The smoke-scale reproduce end to end: every claim measured, tables, figures, determinism."""

from __future__ import annotations

import json
import re

import pytest

from linearize.reproduce import (
    OURS,
    SCALES,
    _equal_budget_claim,
    _gap_claim,
    _pick_best,
    reproduce,
    variants,
)
from paper_common import Report


def _tables(report: Report) -> str:  # through JSON so that NaN == NaN
    return json.dumps({k: v for k, v in report.tables.items() if k != "timing"}, sort_keys=True)


def test_smoke_reproduce_end_to_end(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PAPER_CACHE_DIR", str(tmp_path / "cache"))
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "a")
    assert len(report.claims) == 6
    rows = {r["variant"]: r for r in report.tables["variants"]}
    grid = variants(SCALES["smoke"], 8)
    assert set(rows) == {"softmax (teacher)", *grid}
    assert rows["softmax (teacher)"]["mse"] == 0
    for name, (_, cfg) in grid.items():
        assert 0 <= rows[name]["mqar_4x"] <= 1
        assert (rows[name]["mqar_4x_zeroed"] is not None) == bool(
            cfg.budget and cfg.update != "none"
        )
    frozen = re.search(r"bit-identical after transfer in (\d+) of (\d+) runs", report.notes)
    assert frozen is not None
    assert frozen.group(1) == frozen.group(2) == str(len(grid))
    assert len(report.figures) == 4
    for fig in report.figures:
        assert (tmp_path / "a" / fig).stat().st_size > 1000
    # the teacher now comes from the cache: the same seed gives the same report
    again = reproduce("smoke", seed=0)
    assert _tables(again) == _tables(report)
    assert json.dumps([c.value for c in again.claims]) == json.dumps(
        [c.value for c in report.claims]
    )


def test_bad_scale_and_full_scale_need() -> None:
    with pytest.raises(ValueError, match="scale must be"):
        reproduce("huge")
    with pytest.raises(NotImplementedError, match="local paths"):
        reproduce("full")
    assert "Qwen/Qwen2.5-32B" in SCALES["full"]["real_models"]


def test_gap_claim_needs_a_gap_worth_several_items() -> None:
    # planted: the delta model is one item (of 16) short of the teacher; closing "half" of that is
    # half an item, so the share is noise: not measured, with the gains in points
    claim = _gap_claim(0.5, [0.4375], {OURS: 0.5}, 16)
    assert claim.value is None
    assert not claim.point_check
    assert claim.note.startswith("not measured: the gap to close is below its minimum")
    assert f"{OURS} +6.2" in claim.note
    # a wide spread over seeds raises the minimum too
    assert _gap_claim(0.9, [0.1, 0.7], {OURS: 0.8}, 96).value is None
    claim = _gap_claim(0.9, [0.5, 0.5], {OURS: 0.8}, 16)  # gap 0.4 >= 4/16
    assert claim.value == pytest.approx(0.75)
    assert claim.point_check


def test_best_variant_ties_go_to_the_lower_mse_not_the_grid_order() -> None:
    runs = [
        {"variant": "a", "mqar_4x": 0.50, "mse": 0.3},
        {"variant": "b", "mqar_4x": 0.505, "mse": 0.1},  # within 1/96 of the top: tied
        {"variant": "c", "mqar_4x": 0.40, "mse": 0.01},
        {"variant": "d", "mqar_4x": float("nan"), "mse": 0.0},  # not measured: never best
    ]
    for order in (["a", "b", "c", "d"], ["d", "c", "b", "a"]):
        best, tied = _pick_best(runs, order, 96)
        assert best == "b"
        assert sorted(tied) == ["a", "b"]
    assert _pick_best(runs, ["a", "b", "c"], 1000)[0] == "b"  # b is simply the top
    exact_tie = [runs[0], {**runs[1], "mqar_4x": 0.5}]
    assert _pick_best(exact_tie, ["a", "b"], 1000)[0] == "b"  # max() took "a", the first


def test_equal_budget_claim_with_both_caches_at_zero_is_not_measured() -> None:
    zero = {"mqar_4x": 0.0, "passkey_4x": 0.0}
    claim = _equal_budget_claim(zero, dict(zero))  # was supported: 0 is within 2 points of 0
    assert claim.value is None
    assert not claim.point_check
    assert claim.note.startswith("not measured: both caches score 0")
    claim = _equal_budget_claim(
        {"mqar_4x": 0.30, "passkey_4x": 0.5}, {"mqar_4x": 0.31, "passkey_4x": 0.5}
    )
    assert claim.value == pytest.approx(-1.0)
    assert claim.point_check
