import itertools
import math

import pytest
import torch

from diffusion_classes.mixture import GaussianMixture, delta, empirical_score
from diffusion_classes.random_features import RandomFeatures, dsm_quadratic
from diffusion_classes.sampling import copy_fraction, sample


def _mix():
    means = torch.tensor([[2.0, 0.0, 0.0], [-1.0, 1.0, 0.5]])
    return GaussianMixture(
        means, torch.tensor([[0.5, 1.0, 2.0], [1.5, 1.5, 1.5]]), torch.tensor([0.3, 0.7])
    )


@pytest.mark.parametrize("t", [0.0, 0.1, 1.0])
def test_exact_score_equals_autograd_of_log_density(t):
    g = _mix()
    x = torch.randn(20, 3, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(g.log_prob(x, t).sum(), x)
    assert torch.allclose(g.score(x.detach(), t), grad, atol=1e-10)


def test_empirical_score_is_the_score_of_the_noised_training_set():
    train = torch.randn(5, 3, dtype=torch.float64)
    t = 0.3
    # the noised empirical law is a mixture of n equal Gaussians with variance Delta_t
    g = GaussianMixture(
        math.exp(-t) * train, delta(t).repeat(5), torch.full((5,), 0.2, dtype=torch.float64)
    )
    x = torch.randn(7, 3, dtype=torch.float64)
    assert torch.allclose(empirical_score(x, t, train), g.score(x), atol=1e-10)


def test_noised_mixture_moments_match_the_forward_process():
    g = _mix()
    x0, _ = g.sample(200000, seed=1)
    t = 0.5
    xt = math.exp(-t) * x0 + delta(t).sqrt() * torch.randn(
        x0.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2)
    )
    n = g.noised(t)
    mean = (n.weights[:, None] * n.means).sum(0)
    assert torch.allclose(xt.mean(0), mean, atol=0.02)


def test_sde_and_ode_samplers_recover_a_gaussian_variance(one_thread):
    g = GaussianMixture(torch.zeros(1, 1), torch.tensor([2.5]), torch.tensor([1.0]))
    for method in ("sde", "ode"):
        xs = sample(g.score, 4000, 1, t_max=6.0, t_min=1e-3, steps=300, method=method, seed=0)
        assert xs.var().item() == pytest.approx(2.5, rel=0.08)


def test_copy_metric_on_constructed_points():
    train = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    samples = torch.tensor([[0.1, 0.0], [5.0, 0.0], [0.0, 9.0]])
    assert copy_fraction(samples, train).tolist() == [True, False, True]


def test_bad_mixture_input():
    with pytest.raises(ValueError, match="> 0"):
        GaussianMixture(torch.zeros(2, 3), torch.tensor([1.0, 0.0]), torch.tensor([0.5, 0.5]))
    with pytest.raises(ValueError, match="sum to 1"):
        GaussianMixture(torch.zeros(2, 3), torch.tensor([1.0, 1.0]), torch.tensor([0.5, 0.6]))
    with pytest.raises(ValueError, match="d mismatch"):
        GaussianMixture(torch.zeros(2, 3), torch.ones(2, 4), torch.tensor([0.5, 0.5]))
    with pytest.raises(ValueError, match=r"\(n, 3\)"):
        _mix().score(torch.zeros(4, 2))


def test_gradient_flow_closed_form_matches_gradient_descent():
    rf = RandomFeatures.gaussian(d=4, p=12, seed=0)
    train, _ = _mix_4d().sample(30, seed=0)
    q = dsm_quadratic(rf, train, t=0.5, n_noise=4)
    lam, vec = q.spectrum()
    assert torch.allclose(vec @ torch.diag(lam) @ vec.T, q.U, atol=1e-10)
    A = torch.zeros(4, 12, dtype=torch.float64)
    lr, steps = 5.0, 400
    for _ in range(steps):
        A = A - lr * q.grad(A)
    exact = q.flow(torch.zeros(4, 12, dtype=torch.float64), torch.tensor([lr * steps]))[0]
    assert torch.allclose(A, exact, atol=2e-3 * exact.abs().max())
    assert q.value(q.optimum()) <= q.value(A) + 1e-12


def _mix_4d():
    return GaussianMixture(
        torch.tensor([[1.0, 0, 0, 0], [-1.0, 0, 0, 0]]),
        torch.tensor([0.5, 2.0]),
        torch.tensor([0.5, 0.5]),
    )


def test_one_class_bonnaire_scaling_tau_mem_grows_with_n_tau_gen_does_not():
    import numpy as np

    from diffusion_classes.dynamics import class_curves

    g = GaussianMixture(torch.zeros(1, 8), torch.tensor([1.0]), torch.tensor([1.0]))
    rf = RandomFeatures.gaussian(d=8, p=256, seed=0)
    taus = np.logspace(0, 8, 80)
    gen, mem = [], []
    for n in (16, 32, 64, 128, 256):
        x, y = g.sample(n, seed=n)
        cc = class_curves(rf, g, x, y, t=0.1, taus=taus)
        assert not cc.tau_mem[0].censored
        assert not cc.tau_gen[0].censored
        gen.append(cc.tau_gen[0].time)
        mem.append(cc.tau_mem[0].time)
    assert all(b > a for a, b in itertools.pairwise(mem))  # tau_mem rises with n
    assert mem[-1] / mem[0] > 8  # roughly linearly: 16x the data
    assert max(gen) / min(gen) < 1.5  # tau_gen stays put


def test_class_spectrum_decomposes_the_eigenvalues():
    from diffusion_classes.random_features import class_spectrum

    rf = RandomFeatures.gaussian(d=4, p=16, seed=1)
    x, y = _mix_4d().sample(40, seed=0)
    cs = class_spectrum(rf, x, y, t=0.5, n_noise=4)
    q = dsm_quadratic(rf, x, t=0.5, n_noise=4)
    assert torch.allclose(cs.eigenvalues, torch.linalg.eigvalsh(q.U), atol=1e-10)  # same draws
    assert torch.allclose(cs.shares.sum(1), torch.ones(16, dtype=torch.float64))
    assert (cs.shares >= 0).all()


def test_cloning_speciation_time_matches_half_log_lambda(one_thread):
    from diffusion_classes.sampling import cloning_curve, speciation_time

    d = 8
    mu = torch.zeros(2, d)
    mu[0, 0], mu[1, 0] = 5.0, -5.0  # covariance top eigenvalue Lambda = 1 + 25
    g = GaussianMixture(mu, torch.tensor([1.0, 1.0]), torch.tensor([0.5, 0.5]))
    out = cloning_curve(
        g.score, lambda x: g.posterior(x).argmax(1), d, torch.linspace(0.5, 3.5, 13), n_traj=300
    )
    assert out["p_same"][0] < 0.65
    assert out["p_same"][-1] > 0.95
    ts = speciation_time(out["stops"], out["p_same"], baseline=0.5)
    assert not ts.censored
    assert not ts.early
    assert ts.time == pytest.approx(0.5 * math.log(26.0), rel=0.15)


def test_quadratic_loss_matches_autograd_and_adam_reaches_the_optimum(one_thread):
    rf = RandomFeatures.gaussian(d=4, p=10, seed=3)
    train, _ = _mix_4d().sample(25, seed=1)
    t, n_noise = 0.3, 5
    q = dsm_quadratic(rf, train, t, n_noise, seed=4)
    # the same noise draws as dsm_quadratic, loss written directly on the score model
    gen = torch.Generator().manual_seed(4)
    x = train.repeat(n_noise, 1)
    z = torch.randn(x.shape, generator=gen, dtype=torch.float64)
    xt = math.exp(-t) * x + delta(t).sqrt() * z
    A = (0.1 * torch.randn(4, 10, dtype=torch.float64)).requires_grad_()
    loss = ((delta(t).sqrt() * rf.score(A, xt) + z) ** 2).sum(1).mean() / 4
    (g,) = torch.autograd.grad(loss, A)
    # the closed form keeps the constant E|z|^2 = d at its expectation
    const = ((z**2).sum(1).mean().item() - 4) / 4
    assert loss.item() == pytest.approx(q.value(A.detach()) + const, rel=1e-10)
    assert torch.allclose(g, q.grad(A.detach()), atol=1e-10)
    A = torch.zeros(4, 10, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([A], lr=0.1)
    for _ in range(1500):
        opt.zero_grad()
        loss = ((delta(t).sqrt() * rf.score(A, xt) + z) ** 2).sum(1).mean() / 4
        loss.backward()
        opt.step()
    assert loss.item() == pytest.approx(q.value(q.optimum()) + const, abs=1e-4)


def test_crossing_never_reached_is_censored_at_the_grid_end_not_nan():
    import numpy as np

    from diffusion_classes.dynamics import crossing

    taus = np.geomspace(10, 1e6, 6)
    never = crossing(taus, np.linspace(0, 0.5, 6), 1.0, above=True)
    assert never.censored
    assert not never.early
    assert never.time == 1e6
    assert (never.bounds.low, never.bounds.high) == (1e6, math.inf)
    first = crossing(taus, np.linspace(2, 3, 6), 1.0, above=True)  # already above at taus[0]
    assert first.early
    assert (first.bounds.low, first.bounds.high) == (0.0, 10.0)
    seen = crossing(taus, np.array([0.0, 0.5, 2.0, 3, 3, 3]), 1.0, above=True)
    assert not seen.censored
    assert not seen.early
    assert taus[1] < seen.time < taus[2]
    assert seen.bounds.exact


def test_crossing_skips_nan_points_and_censors_at_the_last_finite_one():
    import numpy as np

    from diffusion_classes.dynamics import crossing

    taus = np.array([1.0, 10.0, 100.0, 1000.0])
    # a NaN between two finite points: interpolated across it (log-midpoint of 1 and 100)
    cr = crossing(taus, np.array([0.0, np.nan, 2.0, 3.0]), 1.0, above=True)
    assert cr.time == pytest.approx(10.0)
    # diverged after step 10: censored at 10, the last point that was measured
    cr = crossing(taus, np.array([0.0, 0.5, np.nan, np.nan]), 1.0, above=True)
    assert cr.censored
    assert cr.time == 10.0
    assert math.isnan(crossing(taus, np.full(4, np.nan), 1.0, above=True).time)
    with pytest.raises(ValueError, match="one length"):
        crossing(taus, np.zeros(3), 1.0, above=True)


def test_generalisation_time_of_a_curve_that_never_drops_is_early_not_censored(monkeypatch):
    """An error already at its minimum at tau[0] reached it by then (it used to be NaN)."""
    import numpy as np

    from diffusion_classes import dynamics

    class Flat:
        def values(self, As):
            return torch.ones(As.shape[0], dtype=torch.float64)

    monkeypatch.setattr(dynamics, "score_error", lambda *a, **k: Flat())
    g = GaussianMixture(torch.zeros(1, 4), torch.tensor([1.0]), torch.tensor([1.0]))
    rf = RandomFeatures.gaussian(d=4, p=16, seed=0)
    x, y = g.sample(8, seed=0)
    taus = np.geomspace(10, 1e3, 5)
    cc = dynamics.class_curves(rf, g, x, y, t=0.1, taus=taus, n_noise=2)
    assert cc.tau_gen[0].early
    assert cc.tau_gen[0].time == 10.0


def test_speciation_time_flags_censored_early_and_skips_nan_stops():
    from diffusion_classes.sampling import speciation_time

    stops = torch.tensor([0.8, 0.4, 0.2, 0.1], dtype=torch.float64)  # any order
    # level (1 + 0.5) / 2 = 0.75; the class never occurred at stop 0.4 (NaN): left out, so the
    # crossing is interpolated between 0.2 (p = 1) and 0.8 (p = 0.5), not NaN
    ts = speciation_time(stops, torch.tensor([0.5, math.nan, 1.0, 1.0]), 0.5)
    assert ts.time == pytest.approx(0.5)
    assert not ts.censored
    assert not ts.early
    never = speciation_time(stops, torch.tensor([0.9, 0.9, 1.0, 1.0]), 0.5)  # still above at 0.8
    assert never.censored
    assert never.time == pytest.approx(0.8)
    already = speciation_time(stops, torch.tensor([0.5, 0.5, 0.6, 0.7]), 0.5)  # below at 0.1
    assert already.early
    assert already.time == pytest.approx(0.1)
    assert (already.bounds.low, already.bounds.high) == (0.0, pytest.approx(0.1))
    assert math.isnan(speciation_time(stops, torch.full((4,), math.nan), 0.5).time)
