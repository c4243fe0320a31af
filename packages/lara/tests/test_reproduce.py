import math

import pytest

from lara.reproduce import CAUSAL_KERNELIZED, reproduce
from paper_common import Report


def test_smoke_reproduce_writes_a_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    assert len(report.claims) == 8
    assert all(c.value is not None and not math.isnan(float(c.value)) for c in report.claims)
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
