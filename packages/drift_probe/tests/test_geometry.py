"""The orthogonality tests on planted geometry with known answers."""

import numpy as np
import pytest

from drift_probe.geometry import (
    cosine_test,
    erasure_test,
    inlp,
    leace_projection,
    mean_difference_test,
    nullspace_test,
    score_correlations,
)
from drift_probe.probe import auroc, out_of_fold


def planted(n=1500, d=16, seed=0, angle=90.0):
    """Two binary concepts along unit directions ``angle`` degrees apart, plus isotropic noise."""
    rng = np.random.default_rng(seed)
    a = np.zeros(d)
    a[0] = 1.0
    b = np.zeros(d)
    b[0], b[1] = np.cos(np.radians(angle)), np.sin(np.radians(angle))
    ya, yb = rng.random(n) < 0.5, rng.random(n) < 0.5
    x = rng.normal(size=(n, d)) + 2.0 * np.outer(ya, a) + 2.0 * np.outer(yb, b)
    return x, ya.astype(int), yb.astype(int), np.arange(n)


def test_shuffled_label_null_has_sd_one_over_sqrt_d():
    rng = np.random.default_rng(0)
    d = 64
    x = rng.normal(size=(3000, d))
    y = (rng.random(3000) < 0.5).astype(int)
    res = cosine_test(x, y, {"other": 1 - y}, n_null=150, seed=1)
    rms = np.sqrt(np.mean(res["null"] ** 2))  # |cos| of signed cosines centred on 0
    assert rms == pytest.approx(1 / np.sqrt(d), rel=0.2)


def test_cosines_of_orthogonal_and_aligned_concepts():
    x, ya, yb, _ = planted(angle=90)
    orth = cosine_test(x, ya, {"b": yb}, n_null=20)
    assert orth["cos"]["b"] < 0.1
    x, ya, yb, _ = planted(angle=30)
    assert cosine_test(x, ya, {"b": yb}, n_null=20)["cos"]["b"] > 0.5


def test_nullspace_projection_is_harmless_for_orthogonal_concepts():
    x, ya, yb, g = planted(angle=90)
    res = nullspace_test(x, ya, yb, g)
    assert abs(res["delta_drift"]) < 0.01
    assert abs(res["delta_correct"]) < 0.01
    x, ya, yb, g = planted(angle=20)
    assert nullspace_test(x, ya, yb, g)["delta_drift"] < -0.05


def test_inlp_projector_is_an_orthogonal_projection_that_erases_the_concept():
    x, ya, yb, g = planted(d=12)
    p4 = inlp(x, ya, k=4).projection
    np.testing.assert_allclose(p4, p4.T, atol=1e-10)
    np.testing.assert_allclose(p4 @ p4, p4, atol=1e-10)
    assert np.linalg.matrix_rank(np.eye(12) - p4) == 4
    res = inlp(x, ya, k=2)
    assert res.accuracies[0] > 0.8  # the first classifier finds the concept ...
    assert res.accuracies[1] < 0.6  # ... and after its removal there is nothing left to find
    p = res.projection
    # out-of-fold AUROC of an erased concept sits at or just below chance
    assert abs(auroc(ya, out_of_fold(x @ p, ya, g)) - 0.5) < 0.1
    before = auroc(yb, out_of_fold(x, yb, g))
    assert auroc(yb, out_of_fold(x @ p, yb, g)) > before - 0.02  # the orthogonal concept is intact
    with pytest.raises(ValueError, match="k must be"):
        inlp(x, ya, k=12)


def test_erasure_test_and_leace():
    x, ya, yb, g = planted(d=12)
    res = erasure_test(x, ya, yb, g, k=2)
    assert res["erased"] > 0.8
    # erasers fitted on the training folds only: the held-out AUROC lands at chance
    assert abs(res["erased_after_inlp"] - 0.5) < 0.05
    assert abs(res["erased_after_leace"] - 0.5) < 0.05
    assert res["kept_after_inlp"] > res["kept"] - 0.02
    assert res["kept_after_leace"] > res["kept"] - 0.02
    from drift_probe.geometry import erased_auroc_after_inlp

    # the statistic alone (what the INLP permutation null reruns) is erasure_test's number
    assert erased_auroc_after_inlp(x, ya, g, k=2) == pytest.approx(res["erased_after_inlp"])
    x, ya, yb, g = planted(d=10)
    erased = leace_projection(x, ya)
    # LEACE leaves no linear correlation with the concept
    np.testing.assert_allclose((erased - erased.mean(0)).T @ (ya - ya.mean()), 0, atol=1e-6)


def test_mean_directions_dissociate():
    x, ya, yb, g = planted(angle=90)
    res = mean_difference_test(x, {"a": ya, "b": yb}, g)
    assert abs(res["cos"][("a", "b")]) < 0.1
    assert res["auroc"][("a", "a")] > 0.85
    assert res["auroc"][("b", "b")] > 0.85
    assert 0.45 < res["auroc"][("a", "b")] < 0.55
    # the out-of-fold projections behind the table are returned (for permutation nulls)
    assert res["scores"]["a"].shape == ya.shape
    assert res["auroc"][("a", "b")] == pytest.approx(auroc(yb, res["scores"]["a"]))


def test_score_correlations():
    rng = np.random.default_rng(0)
    s = rng.normal(size=500)
    res = score_correlations(s, {"same": 2 * s + 1, "indep": rng.normal(size=500)})
    assert res["same"][0] == pytest.approx(1.0)
    assert abs(res["indep"][0]) < 0.1
    with pytest.raises(ValueError, match="shape"):
        score_correlations(s, {"bad": s[:10]})
