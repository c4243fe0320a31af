import math

import pytest

from paper_common import Report
from paper_common.device import pinned_threads
from patch_distill import reproduce as rep
from patch_distill.reproduce import SCALES, _falls_claim, reproduce


def test_smoke_reproduce_writes_a_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    assert len(report.claims) == 5
    for c in report.claims:  # measured, or explicitly not measured (never a silent NaN)
        if c.value is None or math.isnan(c.value):
            assert not c.point_check
            assert c.note.startswith("not measured")
    loaded = Report.from_json(tmp_path / "r")
    assert loaded.package == "patch_distill"
    for fig in ("tradeoff", "similarity", "correspondence"):
        assert (tmp_path / "r" / f"{fig}.png").exists()
    models = {r["model"] for r in report.tables["tradeoff"]}
    assert {"dino λ=0", "dino λ=1", "mae", "random"} <= models
    for r in report.tables["tradeoff"]:
        assert 0 <= r["linear"] <= 1
        assert r["r2_code"] <= 1
        assert 0 <= r["corr_mean"] <= 1
    assert {r["model"] for r in report.tables["theory"]} == {"gaussian", "discrete"}


def test_bad_scale():
    with pytest.raises(ValueError, match="scale"):
        reproduce("medium")


def _group_runs(method: str, values: list[float]) -> list[dict]:
    return [
        {"dataset": "synthetic_shapes", "vit": "quick", "method": method, "lambda": lam,
         "r2_code": x}
        for lam, x in zip((0.0, 1.0, 0.0, 1.0), values, strict=True)
    ]  # fmt: skip


def test_falls_claim_with_an_undefined_rho_is_not_measured():
    """Planted: r2_code constant over one group (Spearman undefined, NaN). Before, max() over the
    rhos returned NaN (unsupported) or the other group's rho (supported) by dictionary order."""
    cfg = SCALES["smoke"]
    falls = _group_runs("dino", [0.9, 0.5, 0.8, 0.4])  # rho = -0.89
    flat = _group_runs("vicreg", [0.7, 0.7, 0.7, 0.7])
    groups = [("synthetic_shapes", "quick", "dino"), ("synthetic_shapes", "quick", "vicreg")]
    mean = {(*g, lam): {"r2_code": 0.5} for g in groups for lam in cfg.lambdas}
    for order in (groups, groups[::-1]):
        claim = _falls_claim(falls + flat, mean, order, "r2_code", "R^2", cfg)
        assert claim.value is None
        assert not claim.point_check
        assert claim.note.startswith("not measured: Spearman rho undefined")
        assert "vicreg/quick" in claim.note.split(";")[0]
    claim = _falls_claim(falls, mean, groups[:1], "r2_code", "R^2", cfg)
    assert claim.value == pytest.approx(-2 / math.sqrt(5))
    assert claim.point_check


def test_job_pins_torch_and_blas_to_one_thread(monkeypatch):
    """A forked worker would keep whatever the parent had: the job pins torch and BLAS itself."""
    import torch
    from threadpoolctl import threadpool_info

    def threads(args):
        blas = {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}
        return torch.get_num_threads(), blas

    monkeypatch.setattr(rep, "_run_job", threads)
    with pinned_threads(2, torch=True):
        torch_threads, blas = rep._job(())
        assert torch.get_num_threads() == 2  # restored
    assert torch_threads == 1
    assert blas <= {1}
