"""The smoke-scale experiment end to end, and its determinism."""

import json
import math

import numpy as np
import pytest

from paper_common import Claim, Control
from paper_common.claims import VERDICTS
from sae_geometry.reproduce import (
    SCALES,
    _estimator_errors,
    _stage2_margin,
    layer_law_gaps,
    r2_interval,
    reproduce,
    seed_extreme,
)
from sae_geometry.scaling import fit_layer, fit_shared_exponent, fit_universal, predict_fvu


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    with pytest.MonkeyPatch.context() as mp:  # the tiny LMs are cached here, not the user's cache
        mp.setenv("PAPER_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
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
    # the estimator claims are the max errors of the estimators table (no training); each estimate
    # is finite and near its truth (measured: TwoNN within 5.5% of d, kappa R within 6.5% of 1;
    # the claims' thresholds are 10% and 20%, the loose bounds here 25% and 40%)
    est = data["tables"]["estimators"]
    twonn_err, kappa_err = _estimator_errors(est)
    assert report.claims[0].value <= twonn_err + 1e-12  # the largest seed-mean error
    assert report.claims[1].value <= kappa_err + 1e-12
    for r in est:
        assert math.isfinite(r["twonn"])
        if r["seed"] >= 0:
            assert abs(r["twonn"] / r["d"] - 1) < 0.25
    assert kappa_err < 0.40
    for c in report.claims:  # a claim with no measured value is never supported
        assert not c.point_check or (c.value is not None and not math.isnan(c.value))
        assert c.verdict in VERDICTS
        assert c.missing_parts() == []
        assert not c.defect, c.statement
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


def _grid(a: float, alpha: float, e: float) -> tuple[np.ndarray, ...]:
    n = np.repeat([16.0, 32, 64, 128, 256], 2)
    k = np.tile([4.0, 8], 5)
    return n, k, predict_fvu("power", np.array([a, alpha, -1.0, 0.5, e]), n, k)


def _noisy(grids, rng):
    return [(n, k, y * np.exp(rng.normal(0, 0.01, y.size))) for n, k, y in grids]


def test_old_universal_rule_wins_on_a_shared_exponent_and_the_new_rule_does_not():
    """Issue 43: layers with the same width exponent but different error levels. The former rule
    (AIC(universal) - AIC(per-layer) > 10) comes out supported on them (it cannot fail); the new
    rule (AIC(shared exponent, per-layer offsets) - AIC(per-layer) > 10) is refuted."""
    rng = np.random.default_rng(0)
    same = _noisy(
        [_grid(a, 0.4, e) for a, e in ((0.0, 0.02), (1.0, 0.05), (-0.5, 0.1), (0.5, 0.2))], rng
    )
    g = layer_law_gaps(same, np.random.default_rng(1))
    assert g["universal"] > 10  # the old rule: "per-layer laws" on a shared exponent
    assert g["shared"] < 10  # the new rule refutes it
    assert g["planted_shared"] < 10
    old = Claim.decide(
        "old",
        "gap",
        g["universal"],
        (g["universal"], g["universal"]),
        ">",
        10.0,
        positive=Control.positive("p", 1.0, ">", 0.0),
        negative=Control.negative("same exponent, other error levels", g["planted_universal"]),
        method="planted",
    )
    assert old.defect
    # exponents that do differ: the new rule supports per-layer laws
    diff = _noisy([_grid(0.5, a, 0.02) for a in (0.2, 0.6, 1.0, 1.4)], np.random.default_rng(2))
    assert layer_law_gaps(diff, np.random.default_rng(3))["shared"] > 10


def _grid_beta(alpha: float, beta: float) -> tuple[np.ndarray, ...]:
    n = np.repeat([16.0, 32, 64, 128, 256], 4)
    k = np.tile([2.0, 4, 8, 16], 5)
    return n, k, predict_fvu("power", np.array([0.5, alpha, -1.0, beta, 0.02]), n, k)


def test_shared_width_exponent_with_layer_specific_sparsity_exponent_is_refuted():
    """Review of issue 43: the null of "the width exponent differs across layers" shared beta too,
    so layers differing only in their sparsity exponent won the claim (AIC gap +101..+117). Planted
    shared alpha with per-layer beta must come out refuted; planted different alphas supported."""
    same = _noisy([_grid_beta(0.5, b) for b in (0.3, 0.8, 1.5)], np.random.default_rng(4))
    g = layer_law_gaps(same, np.random.default_rng(5))
    assert g["shared"] < 10
    assert g["planted_shared"] < 10
    diff = _noisy([_grid_beta(a, 0.8) for a in (0.2, 0.6, 1.2)], np.random.default_rng(6))
    assert layer_law_gaps(diff, np.random.default_rng(7))["shared"] > 10


def test_shared_exponent_fit_is_never_worse_than_the_universal_fit():
    grids = _noisy(
        [_grid_beta(a, b) for a, b in ((0.3, 0.4), (0.9, 1.2))], np.random.default_rng(8)
    )
    per = [fit_layer(*g, n_boot=0) for g in grids]
    _, rss, n_pts, n_params = fit_shared_exponent(grids, per)
    assert rss <= fit_universal(grids).rss + 1e-12
    assert (n_pts, n_params) == (40, 1 + 4 * 2)


def test_interval_helpers_planted():
    ci = seed_extreme({"a": [20.0, 21, 22], "b": [30.0, 31, 29]})
    assert 10 < ci.low < ci.high < 25  # the smaller group: wholly above 10 (inside)
    assert seed_extreme({"a": [1.0]}) is None
    straddle = seed_extreme({"a": [0.0, 20, 10]})
    assert straddle.low < 10 < straddle.high  # across
    y = np.linspace(0, 1, 20)
    lo, hi = r2_interval(y, y + 0.01)
    assert lo > 0.9
    lo, hi = r2_interval(y, y[::-1])
    assert hi < 0  # outside
    m, (mlo, _mhi) = _stage2_margin(y, y, np.full_like(y, y.mean()))
    assert m == pytest.approx(0.4)
    assert mlo > 0
