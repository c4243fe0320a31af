import math

import numpy as np
import pytest

from paper_common import Report
from paper_common.device import pinned_threads
from patch_distill import reproduce as rep
from patch_distill.reproduce import (
    RHO,
    SCALES,
    THEORY_TOL,
    _falls_claim,
    paired_interval,
    reproduce,
    rho_interval,
)


def test_smoke_reproduce_writes_a_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    assert len(report.claims) == 5
    for c in report.claims:  # measured, or explicitly not measured (never a silent NaN)
        assert c.verdict in ("supported", "refuted", "inconclusive")
        assert c.missing_parts() == []
        if c.value is None or math.isnan(c.value):
            assert not c.point_check
            assert c.note.startswith("not measured")
    assert [c.kind for c in report.claims] == ["paper"] * 4 + ["check"]
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
    lams = (0.0, 1.0, 2.0) * 3
    return [
        {"dataset": "synthetic_shapes", "vit": "quick", "method": method, "lambda": lam,
         "seed": i // 3, "r2_code": x}
        for i, (lam, x) in enumerate(zip(lams, values, strict=True))
    ]  # fmt: skip


def test_falls_claim_with_an_undefined_rho_is_not_measured():
    """Planted: r2_code constant over one group (Spearman undefined, NaN). Before, max() over the
    rhos returned NaN (unsupported) or the other group's rho (supported) by dictionary order."""
    cfg = SCALES["quick"]
    falls = _group_runs("dino", [0.9, 0.6, 0.3, 0.85, 0.55, 0.25, 0.95, 0.65, 0.35])
    flat = _group_runs("vicreg", [0.7] * 9)
    groups = [("synthetic_shapes", "quick", "dino"), ("synthetic_shapes", "quick", "vicreg")]
    mean = {(*g, lam): {"r2_code": 0.5} for g in groups for lam in cfg.lambdas}
    for order in (groups, groups[::-1]):
        claim = _falls_claim(falls + flat, mean, order, "r2_code", "R^2", cfg)
        assert claim.value is None
        assert claim.verdict == "inconclusive"
        assert claim.note.startswith("not measured: Spearman rho undefined")
        assert "vicreg/quick" in claim.note.split(";")[0]
        assert claim.missing_parts() == []
    claim = _falls_claim(falls, mean, groups[:1], "r2_code", "R^2", cfg)
    assert claim.value < -0.9  # falls within every seed
    assert claim.high < RHO
    assert claim.positive.passed
    # issue 43: the draft's null, the mean rho of 200 shuffles with a t-interval, sat at 0 within
    # a few hundredths whatever the data (refuted by construction). The claim's own rule on one
    # seeded shuffle of 9 runs reaches past -0.5: the rule is not shown to fail on a shuffle
    assert claim.negative.low < RHO < claim.negative.high
    assert claim.verdict == "inconclusive"
    assert not claim.defect


def test_rho_interval_planted():
    lam = np.repeat([0.0, 1.0, 2.0], 4)
    noise = np.random.default_rng(0).normal(0, 0.05, lam.size)
    fall, null, rise = (
        rho_interval(lam, -lam + noise),
        rho_interval(lam, noise),
        rho_interval(lam, lam + noise),
    )
    assert fall.high < RHO  # inside the target: supported
    assert null.low < RHO < null.high or null.low > RHO  # a null is never supported
    assert rise.low > RHO  # outside: refuted
    assert math.isnan(rho_interval(lam, np.ones_like(lam)).low)  # constant metric: undefined


def test_paired_interval_pairs_by_seed():
    runs = [{"dataset": "d", "vit": "v", "method": m, "lambda": 0.0, "seed": s, "linear": x}
            for m, xs in (("a", (0.5, 0.6, 0.7)), ("b", (0.4, 0.5, 0.6))) for s, x in enumerate(xs)]  # fmt: skip
    ci = paired_interval(runs, ("d", "v", "a", 0.0), ("d", "v", "b", 0.0), "linear")
    assert ci.low == pytest.approx(0.1)
    assert ci.high == pytest.approx(0.1)
    two = [r for r in runs if r["seed"] < 2]  # 2 seeds: one degree of freedom, no interval
    assert math.isnan(
        paired_interval(two, ("d", "v", "a", 0.0), ("d", "v", "b", 0.0), "linear").low
    )
    assert math.isnan(rep.self_null_interval(two, ("d", "v", "a", 0.0), "linear").low)


def test_theory_rule_cannot_fail_as_a_paper_claim():
    """Issue 43: the old theory claim ("fits match the closed form", max rel error < 0.05) also
    passes on a null population with nothing to average out, so as a paper claim it cannot fail:
    it is now a check of our optimiser, whose negative control (fits against the other view's
    closed form) is refuted."""
    null = rep._theory(400, 0, null=True)
    assert max(r["rel_error"] for r in null) < THEORY_TOL  # the old rule passes on the null
    theory = [rep._theory(400, s) for s in (0, 1)]
    claim = rep._theory_check(theory, null)
    assert claim.kind == "check"
    assert claim.negative.verdict == "refuted"
    assert claim.positive.passed
    assert claim.verdict == "supported"
    broken = [[{**r, "rel_error": 0.2} for r in rows] for rows in theory]  # a fit off by 20%
    assert rep._theory_check(broken, null).verdict == "refuted"


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


def _probe_runs(acc: dict[tuple[str, float], list[float]]) -> list[dict]:
    return [{"dataset": rep.SYNTHETIC, "vit": "v", "method": m, "lambda": lam, "seed": s, "linear": x}
            for (m, lam), xs in acc.items() for s, x in enumerate(xs)]  # fmt: skip


def test_probe_claim_cannot_pass_on_a_null_difference():
    """Planted: lambda = 1 and lambda = 0 score the same on every seed (no effect). The old rule
    ('>= 0') supported it, with the random-init ViT in the lambda > 0 place (the mirror image of
    the positive control) as its negative control: refuted whenever pretraining learned anything."""
    from types import SimpleNamespace

    cfg = SimpleNamespace(lambdas=(0.0, 1.0), seeds=(0, 1, 2))
    groups = [(rep.SYNTHETIC, "v", "mae")]
    flat = [0.6, 0.6, 0.6]
    runs = _probe_runs({("mae", 0.0): flat, ("mae", 1.0): flat, ("random", 0.0): [0.2, 0.25, 0.3]})
    claim = rep._probe_claim(runs, groups, cfg)
    assert claim.positive.passed
    assert claim.verdict == "refuted"
    assert "self-null" in claim.negative.description
    # a real gain over a lambda = 0 arm with no seed spread: the rule can pass
    runs = _probe_runs({("mae", 0.0): flat, ("mae", 1.0): [0.64, 0.65, 0.66],
                        ("random", 0.0): [0.2, 0.25, 0.3]})  # fmt: skip
    claim = rep._probe_claim(runs, groups, cfg)
    assert claim.negative.verdict == "refuted"
    assert claim.verdict == "supported"
    # seed spread in the lambda = 0 arm: the self-null straddles 0, nothing can be concluded
    runs = _probe_runs({("mae", 0.0): [0.5, 0.6, 0.7], ("mae", 1.0): [0.6, 0.7, 0.8],
                        ("random", 0.0): [0.2, 0.25, 0.3]})  # fmt: skip
    claim = rep._probe_claim(runs, groups, cfg)
    assert claim.negative.verdict == "inconclusive"
    assert claim.verdict == "inconclusive"
    assert not claim.defect


def test_shuffled_rho_is_the_claims_rule_on_one_shuffle():
    lam = np.tile([0.0, 1.0, 2.0], 10)
    y = 1 - 0.3 * lam + np.random.default_rng(1).normal(0, 0.05, lam.size)
    null = rep.shuffled_rho(lam, y, seed=0)
    assert null.high - null.low > 0.3  # a bootstrap interval over 30 runs, not a mean of shuffles
    assert null == rep.shuffled_rho(lam, y, seed=0)  # seeded
    assert null.estimate > -0.5  # the planted fall (rho -0.94) is gone
