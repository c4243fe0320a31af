import math

import numpy as np
import pytest
import torch

from diffusion_classes.mixture import GaussianMixture
from diffusion_classes.random_features import RandomFeatures, class_spectrum, dsm_quadratic
from diffusion_classes.theory import (
    equivalent_coefficients,
    equivalent_covariance,
    predict_timescales,
    same_class_probability,
    two_class_speciation_time,
)


def _two(d=8, r=4.0, w=0.5):
    m = torch.zeros(2, d, dtype=torch.float64)
    m[0, 0], m[1, 0] = -1.0, 1.0
    return GaussianMixture.isotropic(m, [1.0, r], [1 - w, w])


def test_linear_activation_has_known_equivalence_coefficients():
    rf = RandomFeatures.gaussian(6, 20, seed=0, activation=lambda h: h)
    co = equivalent_coefficients(rf, _two(6), t=0.3)
    assert np.allclose(co.g, 1.0)
    assert np.allclose(co.b, 1.0)
    assert np.allclose(co.nu2, 0.0, atol=1e-10)
    assert np.allclose(co.s2, 0.0, atol=1e-10)
    m = math.exp(-0.3) * _two(6).means.numpy() @ rf.W.numpy().T / math.sqrt(6)
    assert np.allclose(co.kappa, m)


def test_tanh_coefficients_match_monte_carlo():
    rf = RandomFeatures.gaussian(4, 3, seed=2)
    mix = _two(4, r=2.0)
    t = 0.2
    co = equivalent_coefficients(rf, mix, t)
    gen = torch.Generator().manual_seed(0)
    x0 = mix.sample_class(1, 200_000, seed=3)
    z = torch.randn(x0.shape, generator=gen, dtype=torch.float64)
    phi = rf.features(math.exp(-t) * x0 + math.sqrt(1 - math.exp(-2 * t)) * z).numpy()
    assert np.allclose(phi.mean(0), co.kappa[1], atol=5e-3)
    # variance = linear data part + nu^2 + linear noise part + s^2
    w = rf.W.numpy()
    lin_x = (co.g[1] * math.exp(-t)) ** 2 * 2.0 * (w**2).sum(1) / 4
    lin_z = co.b[1] ** 2 * (1 - math.exp(-2 * t)) * (w**2).sum(1) / 4
    assert np.allclose(phi.var(0), lin_x + co.nu2[1] + lin_z + co.s2[1], rtol=0.02)


def test_class_spectrum_matches_numpy_eigh():
    rf = RandomFeatures.gaussian(d=5, p=24, seed=1)
    x, y = _two(5).sample(60, seed=0)
    cs = class_spectrum(rf, x, y, t=0.4, n_noise=3, seed=7)
    q = dsm_quadratic(rf, x, t=0.4, n_noise=3, seed=7)
    lam, vec = np.linalg.eigh(q.U.numpy())
    assert np.allclose(cs.eigenvalues.numpy(), lam, atol=1e-10)
    # eigenvectors agree up to sign
    assert np.allclose(np.abs((cs.eigenvectors.numpy() * vec).sum(0)), 1.0, atol=1e-6)


def test_equivalent_spectrum_tracks_the_empirical_one():
    rf = RandomFeatures.gaussian(d=16, p=128, seed=0)
    mix = _two(16)
    x, y = mix.sample(200, seed=1)
    emp = np.sort(torch.linalg.eigvalsh(dsm_quadratic(rf, x, 0.1, 32).U).numpy())[::-1]
    ge = np.sort(torch.linalg.eigvalsh(equivalent_covariance(rf, mix, x, y, 0.1)).numpy())[::-1]
    # the bulk made of the top d + n modes, matched eigenvalue by eigenvalue
    k = 16
    assert np.allclose(emp[:k], ge[:k], rtol=0.25)
    assert abs(emp.sum() / ge.sum() - 1) < 0.05  # traces


def test_one_class_prediction_matches_bonnaire_scaling():
    rf = RandomFeatures.gaussian(8, 256, seed=0)
    g = GaussianMixture.isotropic(torch.zeros(1, 8, dtype=torch.float64), [1.0], [1.0])
    pr = [predict_timescales(rf, g, [n], 0.1) for n in (16, 64, 256)]
    assert pr[0].tau_gen[0] == pytest.approx(pr[2].tau_gen[0])  # no n dependence
    assert pr[2].tau_mem[0] / pr[0].tau_mem[0] == pytest.approx(16.0)  # linear in n
    assert 400 < pr[0].tau_gen[0] < 900  # measured 550-700 at this setting (test_core)


def test_prediction_orders_classes_by_variance_and_weight():
    rf = RandomFeatures.gaussian(16, 256, seed=0)
    bal = predict_timescales(rf, _two(16, r=4.0), [64, 64], 0.1)
    assert bal.tau_gen[1] < bal.tau_gen[0]
    assert bal.tau_mem[1] < bal.tau_mem[0]
    rare = predict_timescales(rf, _two(16, r=4.0, w=0.05), [122, 6], 0.1)
    assert rare.tau_gen[1] > rare.tau_gen[0]  # the weight multiplies the class's bulk


def test_same_class_probability_limits_and_two_class_symmetry():
    mix = _two(8, r=1.0, w=0.2)
    mix = GaussianMixture.isotropic(mix.means * 3, [1.0, 1.0], [0.8, 0.2])
    p = same_class_probability(mix, [0.01, 6.0], n=4000)
    assert p[0] == pytest.approx([1.0, 1.0], abs=0.01)  # at t -> 0 the class is settled
    assert p[1] == pytest.approx([0.8, 0.2], abs=0.01)  # at large t: chance level w_c
    # two classes: the chance-normalised progress is the same for both (an identity)
    mid = same_class_probability(mix, [1.0], n=20000)[0]
    assert (mid[0] - 0.8) / 0.2 == pytest.approx((mid[1] - 0.2) / 0.8, abs=0.02)


def test_two_class_speciation_time_balanced_and_minority():
    t_bal = [two_class_speciation_time(D2, 1.0, 0.5) for D2 in (50.0, 500.0)]
    assert t_bal[1] - t_bal[0] == pytest.approx(0.5 * math.log(10), abs=0.02)  # (1/2) log law
    assert two_class_speciation_time(50.0, 1.0, 0.02) < t_bal[0]  # minority: later (smaller t)
    with pytest.raises(ValueError, match="weight"):
        two_class_speciation_time(10.0, 1.0, 1.0)


def test_theory_bad_input():
    rf = RandomFeatures.gaussian(4, 8)
    with pytest.raises(ValueError, match="d = 4"):
        equivalent_coefficients(rf, _two(5), 0.1)
    with pytest.raises(ValueError, match="counts"):
        predict_timescales(rf, _two(4), [3], 0.1)
