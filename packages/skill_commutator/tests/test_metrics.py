"""Principal angles, novelty, spectral entropy, the Spearman table and the baseline predictors."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from skill_commutator.baselines import (  # noqa: E402
    cosine_predictor,
    jacobian_angle_predictor,
    norm_product_predictor,
)
from skill_commutator.metrics import (  # noqa: E402
    cohens_d_ci,
    entropy_gain,
    jacobian_alignment,
    novelty,
    principal_angles,
    spearman_table,
    spectral_entropy,
)


def test_principal_angles_of_known_planes():
    e = np.eye(4)
    a = e[:, :2]
    theta = 0.3
    b = np.stack([e[:, 0], np.cos(theta) * e[:, 1] + np.sin(theta) * e[:, 2]], axis=1)
    np.testing.assert_allclose(np.sort(principal_angles(a, b)), [0.0, theta], atol=1e-12)


def test_jacobian_alignment_diagonal_is_zero_for_identical_realizations():
    rng = np.random.default_rng(0)
    jac = rng.normal(size=(3, 2, 10, 2))
    al = jacobian_alignment(jac, jac @ rng.normal(size=(2, 2)))  # same column spaces
    for s in range(3):
        assert al["max"][s, s].max() < 1e-7
    assert al["mean"][0, 1].min() > 0.1


def test_novelty_and_entropy_gain():
    s0 = np.eye(5)[:, :2]
    assert novelty(s0, np.array([1.0, 2.0, 0, 0, 0])) == pytest.approx(0.0, abs=1e-12)
    assert novelty(s0, np.array([0, 0, 3.0, 0, 0])) == pytest.approx(np.pi / 2)
    assert novelty(s0, np.array([1.0, 0, 1.0, 0, 0])) == pytest.approx(np.pi / 4)
    # two equal singular values: log 2 nats; a third equal orthogonal one adds log 3 - log 2
    assert spectral_entropy(s0) == pytest.approx(np.log(2))
    assert entropy_gain(s0, np.array([0, 0, 1.0, 0, 0])) == pytest.approx(np.log(3) - np.log(2))
    assert entropy_gain(s0, np.zeros(5)) == pytest.approx(0.0, abs=1e-12)
    assert spectral_entropy(np.eye(3), power=2) == pytest.approx(np.log(3))
    with pytest.raises(ValueError, match="power"):
        spectral_entropy(s0, power=3)


def test_spearman_table_ranks_a_perfect_predictor_first():
    rng = np.random.default_rng(0)
    gap = rng.random((3, 15))
    preds = {"good": gap**2, "noise": rng.random((3, 15)), "flat": np.ones((3, 15))}
    rows = {r["predictor"]: r for r in spearman_table(preds, gap, "good", n_boot=200)}
    assert rows["good"]["rho"] == pytest.approx(1.0)
    assert rows["flat"]["rho"] == 0.0
    assert rows["noise"]["diff_low"] > 0
    with pytest.raises(ValueError, match="reference"):
        spearman_table(preds, gap, "missing")
    with pytest.raises(ValueError, match="shape"):
        spearman_table({"a": np.ones((2, 15))}, gap, "a")


def test_cohens_d_ci_sign():
    rng = np.random.default_rng(0)
    d, lo, hi = cohens_d_ci(rng.normal(0, 1, 200), rng.normal(1, 1, 200), n_boot=200)
    assert -1.3 < d < -0.7
    assert lo < d < hi < 0


def test_baseline_predictors_on_hand_made_skills():
    j = torch.zeros(1, 3, 1, dtype=torch.float64)
    j[0, 0, 0] = 1.0
    k = torch.zeros(1, 3, 1, dtype=torch.float64)
    k[0, 1, 0] = 2.0
    a = {"J": j, "v": torch.tensor([[3.0]], dtype=torch.float64)}
    b = {"J": k, "v": torch.tensor([[0.5]], dtype=torch.float64)}
    assert float(cosine_predictor(a, b)) == pytest.approx(1.0)  # orthogonal moves
    assert float(cosine_predictor(a, a)) == pytest.approx(0.0)
    assert float(norm_product_predictor(a, b)) == pytest.approx(3.0)
    assert float(jacobian_angle_predictor(a, b)) == pytest.approx(np.pi / 2)
