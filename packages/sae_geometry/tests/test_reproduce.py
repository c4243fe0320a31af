"""The smoke-scale experiment end to end, and its determinism."""

import json

import pytest

from sae_geometry.reproduce import SCALES, reproduce


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    import os

    os.environ.setdefault("PAPER_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    out = tmp_path_factory.mktemp("report")
    return reproduce("smoke", seed=0, out_dir=out), out


def test_smoke_writes_a_complete_report(smoke):
    report, out = smoke
    data = json.loads((out / "report.json").read_text())
    assert len(data["claims"]) == 10
    for name in (
        "estimators",
        "stage1",
        "showcase",
        "stage2_loo_r2",
        "transfer",
        "lm_aic",
        "convergence",
    ):
        assert data["tables"][name]
    for fig in report.figures:
        assert (out / fig).stat().st_size > 1000
    # the estimator claims are measurable at any scale and hold on clean manifolds
    assert report.claims[0].supported
    assert report.claims[1].supported
    stage1 = {r["layer"] for r in data["tables"]["stage1"]}
    assert {"lmA-L1", "lmB-L3", "torus-d1-K1", "sphere-d3-K1"} <= stage1


def test_full_scale_keeps_the_paper_setting():
    full = SCALES["full"]
    assert full["widths"] == [32, 64, 128, 256, 512]
    assert full["ks"] == [2, 4, 8, 16]
    assert full["sae"]["steps"] == 1500
    assert full["gemma_scope"]["release"] == "google/gemma-scope-2b-pt-res"


def test_bad_scale():
    with pytest.raises(ValueError, match="scale"):
        reproduce("huge")
