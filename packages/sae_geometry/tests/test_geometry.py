"""Intrinsic dimension, curvature, normal ratio and PR on sets with known answers."""

import numpy as np
import pytest

from sae_geometry import (
    curvature,
    flat_torus,
    participation_ratio,
    reference_dimensions,
    round_sphere,
    summarize,
    two_nn,
)
from sae_geometry.geometry import normal_ratio


@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_two_nn_on_cubes(d):
    x = (
        np.random.default_rng(d).random((4000, d))
        @ np.linalg.qr(np.random.default_rng(0).standard_normal((20, 20)))[0][:d]
    )
    assert two_nn(x) == pytest.approx(d, rel=0.1)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_two_nn_on_spheres_and_against_scikit_dimension(d):
    x = round_sphere(3000, d, radius=2.0, ambient=16, seed=d)
    ours = two_nn(x)
    ref = reference_dimensions(x)
    assert ours == pytest.approx(d, rel=0.1)
    assert ours == pytest.approx(ref["skdim_twonn"], rel=0.05)  # same estimator, other fit
    assert two_nn(x, method="linear") == pytest.approx(ref["skdim_twonn"], rel=0.02)


def test_two_nn_discarding_keeps_the_estimate_unbiased():
    # the truncated MLE is corrected: without it, dropping 10% of ratios reads d / 0.744
    x = flat_torus(4000, 2, seed=0)
    assert two_nn(x, discard=0.1) == pytest.approx(2, rel=0.08)
    assert two_nn(x, discard=0.0) == pytest.approx(2, rel=0.08)
    assert two_nn(x, discard=0.3) == pytest.approx(2, rel=0.08)


@pytest.mark.parametrize(("d", "radius"), [(1, 1.0), (2, 2.0), (3, 0.5)])
def test_curvature_is_one_over_radius_on_spheres(d, radius):
    x = round_sphere(5000, d, radius=radius, ambient=12, seed=10 + d)
    assert curvature(x, d, n_anchors=200) == pytest.approx(1 / radius, rel=0.15)


def test_curvature_of_a_flat_torus_and_a_plane():
    assert curvature(flat_torus(5000, 1, radius=0.5, seed=1), 1, n_anchors=200) == pytest.approx(
        2.0, rel=0.05
    )
    plane = np.random.default_rng(0).random((3000, 2)) @ np.eye(2, 6)
    assert curvature(plane, 2, n_anchors=100) < 1e-6
    assert normal_ratio(plane, 2, n_anchors=100) < 1e-10


def test_participation_ratio_of_isotropic_gaussian_is_its_dimension():
    x = np.random.default_rng(0).standard_normal((50_000, 8)) @ np.eye(8, 20)
    assert participation_ratio(x) == pytest.approx(8, rel=0.02)


def test_summarize_is_scale_free_and_deterministic():
    x = round_sphere(3000, 2, radius=1.0, ambient=10, noise=0.001, seed=0)
    a = summarize(x, n_anchors=100, seed=1)
    b = summarize(7.0 * x, n_anchors=100, seed=1)
    assert a.as_dict() == pytest.approx(b.as_dict(), rel=1e-6)
    assert summarize(x, n_anchors=100, seed=1) == a


def test_duplicates_do_not_collapse_the_dimension():
    x = round_sphere(2000, 2, seed=3)
    noisy_copies = np.concatenate([x, x + 1e-9])
    assert two_nn(noisy_copies) == pytest.approx(two_nn(x), rel=0.02)


def test_bad_input_raises():
    with pytest.raises(ValueError, match="non-finite"):
        two_nn(np.array([[0.0, 1.0], [np.nan, 0.0], [1.0, 1.0]]))
    with pytest.raises(ValueError, match="must be"):
        two_nn(np.zeros(5))
    with pytest.raises(ValueError, match="too small"):
        curvature(round_sphere(500, 3, seed=0), 3, k=8)
    with pytest.raises(ValueError, match="discard"):
        two_nn(round_sphere(100, 1, seed=0), discard=1.0)
    with pytest.raises(ValueError, match="1 distinct rows"):
        two_nn(np.ones((50, 4)))  # one point repeated: no neighbour distances to read
