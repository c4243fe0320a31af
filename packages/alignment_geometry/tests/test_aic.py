"""The AIC checker, the quartic coefficient by nested jvp, and the forecasts."""

import numpy as np
import pytest
import torch

from alignment_geometry.aic import (
    AICThresholds,
    alignment_risk_forecast,
    check_aic,
    onset_forecast,
    quartic_coefficient,
)
from alignment_geometry.fisher import CategoricalFisher, FlatParams, hvp, kl_from_reference
from alignment_geometry.toy import Toy2D


def _task(space, x):
    target = torch.tensor([1, 2, 3, 4, 0, 1])

    def loss(t):
        return torch.nn.functional.cross_entropy(space.call(t, x), target)

    return loss


def _orthogonal_setup(mlp):
    net, x = mlp
    space = FlatParams(net)
    th = space.vector()
    fn = lambda t: space.call(t, x[:2])  # noqa: E731  (Fisher on two inputs: rank 8 < 41 parameters)
    fisher = CategoricalFisher(fn, th)
    loss = _task(space, x)
    g = torch.func.grad(loss)(th)
    g = g - fisher.decompose().range_component(g)  # the orthogonalised gradient: F g = 0
    return space, fn, th, fisher, loss, g


def test_c4_by_nested_jvp_matches_a_finite_difference_fit(mlp):
    _, fn, th, fisher, loss, g = _orthogonal_setup(mlp)
    assert float(torch.linalg.norm(fisher.matvec(g))) < 1e-12
    hg = hvp(loss, th, g)
    c4 = quartic_coefficient(fn, th, g, hg)
    u = kl_from_reference(fn, th)
    ts = np.array([1e-3, 2e-3, 4e-3])
    vals = np.array([float(u(th - t * g + 0.5 * t**2 * hg)) for t in ts])
    fit = np.polyfit(ts, vals / ts**4, 1)  # u / t^4 = c4 + O(t): extrapolate to t = 0
    assert fit[1] == pytest.approx(c4, rel=1e-3)
    assert c4 > 0
    # and the second-order forecast reduces to c4 t^4 when F g = 0
    assert onset_forecast(fn, th, g, hg, 1e-3) == pytest.approx(c4 * 1e-12, rel=1e-6)


def test_c4_of_a_linear_model_is_the_quadratic_form():
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(12, 6, generator=gen, dtype=torch.float64)  # logits of 3 inputs x 4 classes

    def fn(t):
        return (w @ t).reshape(3, 4)

    th = torch.randn(6, generator=gen, dtype=torch.float64) * 0.1
    h = torch.randn(6, 6, generator=gen, dtype=torch.float64)
    h = h @ h.T
    g = torch.randn(6, generator=gen, dtype=torch.float64)
    f = CategoricalFisher(fn, th).dense()
    hg = h @ g
    assert quartic_coefficient(fn, th, g, hg) == pytest.approx(float(hg @ f @ hg) / 8, rel=1e-10)


def test_onset_forecast_is_quadratic_when_fg_is_not_zero(mlp):
    net, x = mlp
    space = FlatParams(net)
    th = space.vector()
    fn = lambda t: space.call(t, x)  # noqa: E731
    loss = _task(space, x)
    g = torch.func.grad(loss)(th)
    c2 = 0.5 * CategoricalFisher(fn, th).quadratic(g)
    assert c2 > 0
    t = 1e-6
    assert onset_forecast(fn, th, g, hvp(loss, th, g), t) == pytest.approx(c2 * t**2, rel=1e-4)


def test_check_aic_on_the_toy_and_thresholds():
    res = Toy2D().aic()
    assert res.holds
    assert res.r_proj == 0.0
    assert res.gamma_hat == pytest.approx(np.sqrt(50) * 0.5)  # sqrt(lam) |(H g)_2| = sqrt(50) c a
    assert res.sensitivity == float("inf")
    assert not Toy2D(offset=0.1).aic().holds
    assert not Toy2D(c=0.0).aic().holds
    # a loose r_proj threshold accepts the offset case
    assert Toy2D(offset=0.1).aic(AICThresholds(max_r_proj=0.2)).holds
    # a finite sensitivity ratio: mean of the top d over the (d+1)-th eigenvalue
    vals = np.array([10.0, 6.0, 0.5])
    vecs = np.eye(3)
    res = check_aic(vals, vecs, np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0]), d=2)
    assert res.sensitivity == pytest.approx(16.0)
    assert res.holds


def test_check_aic_rejects_bad_input():
    vecs = np.eye(3)
    with pytest.raises(ValueError, match="d must be"):
        check_aic(np.array([3.0, 2.0, 1.0]), vecs, np.ones(3), np.ones(3), d=4)
    with pytest.raises(ValueError, match="descending"):
        check_aic(np.array([1.0, 2.0, 3.0]), vecs, np.ones(3), np.ones(3), d=1)
    with pytest.raises(ValueError, match="gradient is zero"):
        check_aic(np.array([3.0, 2.0, 1.0]), vecs, np.zeros(3), np.ones(3), d=1)
    with pytest.raises(ValueError, match="max_r_proj"):
        AICThresholds(max_r_proj=1.5)


def test_alignment_risk_forecast():
    s = np.arange(0, 101)
    f = alignment_risk_forecast(s, lr=0.1, eps_hat=1.0, gamma_hat=2.0, lam_min=0.5)
    # drift = max(0.01 s^2 - 0.1 s, 0): zero up to s = 10, then 0.5 drift^2 / 2
    assert np.all(f[:10] == 0)
    assert f[10] == pytest.approx(0, abs=1e-20)
    assert f[100] == pytest.approx(0.5 * (0.01 * 100**2 - 0.1 * 100) ** 2 / 2)
    with pytest.raises(ValueError, match="learning rate"):
        alignment_risk_forecast(s, lr=0.0, eps_hat=1.0, gamma_hat=1.0, lam_min=1.0)
