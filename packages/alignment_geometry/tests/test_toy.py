"""The 2-D system: closed form, numerical integration, the quartic coefficient, GD."""

import numpy as np
import pytest

from alignment_geometry.toy import Toy2D, loglog_slope


def test_closed_form_equals_numerical_integration():
    toy = Toy2D(c=1.0)  # an indefinite H as well
    t = np.linspace(0.01, 2.0, 15)
    assert np.allclose(toy.flow(t), toy.flow_numerical(t), rtol=1e-9, atol=1e-13)


def test_quartic_limit_is_lam_c2_a2_over_8():
    toy = Toy2D()
    assert toy.c4 == pytest.approx(50 * 0.25 / 8) == 1.5625
    t = 1e-5
    assert toy.alignment_loss(toy.flow(t))[0] / t**4 == pytest.approx(1.5625, rel=1e-4)
    ts = np.geomspace(1e-4, 1e-3, 10)
    slope, _ = loglog_slope(ts, toy.alignment_loss(toy.flow(ts)))
    assert slope == pytest.approx(4, abs=0.01)


def test_offset_gives_quadratic_onset_and_no_coupling_gives_nothing():
    ts = np.geomspace(1e-5, 1e-4, 10)
    toy = Toy2D(offset=0.1)
    slope, coef = loglog_slope(ts, toy.alignment_loss(toy.flow(ts)))
    assert slope == pytest.approx(2, abs=0.01)
    assert coef == pytest.approx(toy.c2, rel=1e-2)  # lam offset^2 / 2
    assert np.all(Toy2D(c=0.0).alignment_loss(Toy2D(c=0.0).flow(ts)) == 0)
    assert np.isnan(loglog_slope(ts, np.zeros_like(ts))[0])


def test_gradient_descent_follows_gradient_flow():
    toy = Toy2D()
    lr, steps = 1e-4, 500
    traj = toy.gradient_descent(lr, steps)
    flow = toy.flow(lr * np.arange(steps + 1))
    assert np.allclose(traj[-1], flow[-1], rtol=5e-3)  # O(1/steps) discretisation error
    s = np.arange(100, steps + 1, 50)
    slope, _ = loglog_slope(lr * s, toy.alignment_loss(traj[s]))
    assert slope == pytest.approx(4, abs=0.05)


def test_bad_input():
    with pytest.raises(ValueError, match="lam"):
        Toy2D(lam=0.0)
    with pytest.raises(ValueError, match="lr must be > 0"):
        Toy2D().gradient_descent(-1.0, 10)
    with pytest.raises(ValueError, match="steps"):
        Toy2D().gradient_descent(0.1, 0)
    with pytest.raises(ValueError, match=">= 0"):
        Toy2D().flow(-1.0)
    with pytest.raises(ValueError, match="same shape"):
        loglog_slope(np.ones(3), np.ones(2))
