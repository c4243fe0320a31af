"""The smoke-scale reproduce end to end: every claim measured, tables, figures, determinism."""

from __future__ import annotations

import json
import re

import pytest

from linearize.reproduce import SCALES, reproduce, variants
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
