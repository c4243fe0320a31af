"""Zeros, NaN and empty sets in the claims' measurements: planted cases."""

import math

import numpy as np
import pytest

from sae_geometry.geometry import curvature, summarize, two_nn
from sae_geometry.reproduce import _estimator_errors, _wall_ratio, convergence_move


def test_convergence_near_the_exponents_lower_bound_is_absolute():
    """alpha ~ 1e-9 at 1x steps and 3e-9 at 2x: both 0 for a width law; the ratio read a 200%
    move (and a NaN alpha passed `if c1`)."""
    assert convergence_move(1e-9, 3e-9) == pytest.approx(2e-8)
    assert convergence_move(0.0, 0.0) == 0.0  # was inf: "not converged" for equal exponents
    assert convergence_move(1.0, 1.05) == pytest.approx(0.05)  # relative above the floor
    assert convergence_move(0.05, 0.07) == pytest.approx(0.2)  # 0.02 absolute: not converged
    assert math.isnan(convergence_move(math.nan, 1.0))
    assert math.isnan(convergence_move(1.0, math.nan))


class _Fit:
    def __init__(self, exps):
        self.exponents_by_k = exps


def test_wall_ratio_without_a_pair_is_not_measured():
    fits = {"a": {"gao": _Fit({2.0: 1.0})}}  # d = 3: k = 2 < d + 1, no pair
    med, note, _ = _wall_ratio(fits, {"a": 3})  # raised on ratios.min() of an empty array
    assert math.isnan(med)
    assert "no (layer, k) pair" in note
    fits = {"a": {"gao": _Fit({4.0: 4.0, 8.0: math.nan})}}  # d = 1: 4/d = 4
    med, note, _ = _wall_ratio(fits, {"a": 1})
    assert med == 0.0
    assert "1 non-finite exponent(s) left out" in note


def _row(twonn, d=2, seed=0, kappa=1.0):
    return {"manifold": "sphere", "d": d, "seed": seed, "twonn": twonn, "kappa": kappa,
            "kappa_true": 1.0}  # fmt: skip


def test_estimator_errors_do_not_depend_on_where_a_nan_sits():
    ok, bad = _row(2.1), _row(math.nan)
    assert math.isnan(_estimator_errors([bad, ok])[0])
    assert math.isnan(_estimator_errors([ok, bad])[0])  # the builtin max returned 0.05 here
    assert _estimator_errors([ok, _row(math.inf)])[0] == math.inf
    assert _estimator_errors([ok, _row(7.0, seed=-1)])[0] == pytest.approx(0.05)  # noisy row


def test_two_nn_on_equidistant_neighbours_is_inf_not_a_warning():
    x = np.arange(20.0)[:, None] * np.array([[1.0, 0.0]])  # a lattice: r2 / r1 = 1 everywhere
    with np.errstate(all="raise"):
        assert two_nn(x) == math.inf
    with pytest.raises(ValueError, match="pass d"):
        curvature(np.c_[x, np.zeros((20, 1))], k=8)


def test_summarize_clips_an_infinite_dimension():
    """A lattice (rescaled, so the ratios are 1 only up to rounding): the dimension is inf, not
    ~1e15, and the curvature fit uses the largest d it can (round(inf) raised OverflowError)."""
    x = np.stack(np.meshgrid(np.arange(12.0), np.arange(12.0)), -1).reshape(-1, 2)
    g = summarize(np.c_[x, np.zeros((len(x), 1))], k=16, n_anchors=20)
    assert g.intrinsic_dim == math.inf
    assert math.isfinite(g.curvature)
