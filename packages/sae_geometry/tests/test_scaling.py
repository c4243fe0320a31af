"""Stage-1 fits recover planted laws; the floor rule; Stage-2 regressions; bad grids."""

import numpy as np
import pytest

from sae_geometry import (
    fit_layer,
    fit_release,
    fit_universal,
    loo_r2,
    predict_fvu,
    transfer,
    wall_exponent,
)

WIDE = np.array([16, 32, 64, 128, 256, 512, 1024, 2048])


def _grid(widths, ks=(2, 4, 8)):
    n, k = np.meshgrid(widths, ks, indexing="ij")
    return n.ravel().astype(float), k.ravel().astype(float)


def test_power_law_recovers_planted_exponents_and_floor():
    n, k = _grid(WIDE)
    truth = np.array([np.log(3.0), 0.7, np.log(0.4), 0.9, 0.02])
    rng = np.random.default_rng(0)
    y = predict_fvu("power", truth, n, k) * np.exp(0.01 * rng.standard_normal(len(n)))
    fit = fit_layer(n, k, y, form="power", n_boot=100)
    assert fit.width_exponent == pytest.approx(0.7, abs=0.05)
    assert fit.named()["beta"] == pytest.approx(0.9, abs=0.05)
    assert fit.floor == pytest.approx(0.02, rel=0.15)
    lo, hi = fit.ci["width_exponent"]
    assert lo <= fit.width_exponent <= hi
    assert hi - lo < 0.1
    assert fit.floor_identified


def test_gao_law_recovers_its_width_exponent_at_each_k():
    n, k = _grid(WIDE[:6], ks=(2, 4, 8, 16))
    truth = np.array([1.0, -0.3, -0.6, -0.1, -4.0, -0.2])
    y = predict_fvu("gao", truth, n, k)
    fit = fit_layer(n, k, y, form="gao", n_boot=0)
    for kk, alpha in fit.exponents_by_k.items():
        assert alpha == pytest.approx(0.6 + 0.1 * np.log(kk), abs=0.02)


def test_fit_release_fits_each_layer_in_measured_l0_and_skips_thin_grids():
    # a released grid: uneven widths per layer, measured L0 off the nominal values
    rng = np.random.default_rng(1)
    rows = []
    planted = {3: 0.5, 7: 0.9}
    for layer, widths in ((3, WIDE[2::2]), (7, WIDE[3::2]), (9, WIDE[4:6])):
        for w in widths:
            for k in (6.3, 19.0, 47.5):
                alpha = planted.get(layer, 0.7)
                y = predict_fvu("power", [np.log(2.0), alpha, np.log(0.3), 0.6, 0.0], w, k)
                rows.append({"layer": layer, "width": int(w), "l0": k, "fvu": float(y)
                             * np.exp(0.005 * rng.standard_normal())})  # fmt: skip
    rows.append({"layer": 11, "width": 64, "l0": 0.0, "fvu": 1.0})
    fits, skipped = fit_release(rows, n_boot=0)
    assert sorted(fits) == [3, 7]
    for layer, alpha in planted.items():
        assert fits[layer].width_exponent == pytest.approx(alpha, abs=0.05)
    assert "3 distinct widths" in skipped[9]
    assert "L0 or FVU of 0" in skipped[11]


def test_floor_rule_refuses_a_narrow_grid():
    n, k = _grid([64, 128, 256, 512])  # 0.9 decades
    y = predict_fvu("power", np.array([np.log(3.0), 0.7, np.log(0.4), 0.9, 0.05]), n, k)
    fit = fit_layer(n, k, y, n_boot=50)
    assert fit.width_decades < 1.5
    assert not fit.floor_identified


def test_no_floor_is_not_identified():
    n, k = _grid(WIDE)
    rng = np.random.default_rng(1)
    y = predict_fvu("power", np.array([np.log(3.0), 0.5, np.log(0.4), 0.9, 0.0]), n, k)
    y = y * np.exp(0.05 * rng.standard_normal(len(n)))
    fit = fit_layer(n, k, y, n_boot=100)
    assert not fit.floor_identified


def test_fits_are_deterministic():
    n, k = _grid(WIDE[:5])
    y = predict_fvu("power", np.array([0.5, 0.4, -1.0, 0.5, 0.01]), n, k)
    y = y * np.exp(0.03 * np.random.default_rng(2).standard_normal(len(n)))
    a, b = fit_layer(n, k, y, n_boot=30, seed=4), fit_layer(n, k, y, n_boot=30, seed=4)
    assert a.ci == b.ci
    np.testing.assert_array_equal(a.params, b.params)


def test_universal_law_loses_to_per_layer_laws_on_different_layers():
    n, k = _grid(WIDE[:6])
    grids, rss = [], 0.0
    for alpha in (0.3, 0.9):
        y = predict_fvu("power", np.array([0.0, alpha, -2.0, 0.5, 0.0]), n, k)
        y = y * np.exp(0.01 * np.random.default_rng(int(10 * alpha)).standard_normal(len(n)))
        grids.append((n, k, y))
        rss += fit_layer(n, k, y, n_boot=0).rss
    assert fit_universal(grids).rss > 10 * rss


def test_wall_exponent():
    assert wall_exponent(2, 3) == 2.0
    assert wall_exponent(4, 4) == 0.5
    assert wall_exponent(1, 8) == 4.0


def test_stage2_loo_recovers_a_linear_law_and_beats_the_intercept():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((20, 4))
    y = 1.0 + 0.8 * x[:, 0] - 0.5 * x[:, 2] + 0.05 * rng.standard_normal(20)
    res = loo_r2(x, y, alpha=0.1)
    assert res.r2 > 0.95
    assert loo_r2(np.zeros((20, 0)), y).r2 < 0  # the training-fold mean is worse than the mean
    t = transfer(x[:10], y[:10], x[10:], y[10:], alpha=0.1)
    assert t.r2 > 0.9
    assert t.spearman > 0.9


def test_bad_grids_raise():
    n, k = _grid([32, 64])
    with pytest.raises(ValueError, match="at least 3 distinct widths"):
        fit_layer(n, k, np.ones(len(n)))
    n, k = _grid([4, 32, 64], ks=(8,))
    with pytest.raises(ValueError, match="k must be <= its width"):
        fit_layer(n, k, np.ones(len(n)) * 0.5)
    n, k = _grid([16, 32, 64])
    y = np.full(len(n), 0.5)
    y[0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        fit_layer(n, k, y)
    with pytest.raises(ValueError, match="n_boot"):
        fit_layer(n, k, np.ones(len(n)) * 0.5, n_boot=-1)
    with pytest.raises(ValueError, match="form"):
        fit_layer(n, k, np.ones(len(n)) * 0.5, form="chinchilla")
    with pytest.raises(ValueError, match="at least 3 layers"):
        loo_r2(np.ones((2, 4)), [1.0, 2.0])
