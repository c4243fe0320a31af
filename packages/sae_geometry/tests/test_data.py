"""Synthetic layers and reference manifolds: shapes, scales, determinism, validation."""

import numpy as np
import pytest

from sae_geometry import (
    SyntheticLayer,
    cyclic_corpus,
    flat_torus,
    round_sphere,
    synthetic_layer,
    two_nn,
)


def test_synthetic_layer_is_unit_scale_and_seeded():
    spec = SyntheticLayer("sphere", d=2, harmonics=2, ambient=32, n_atoms=64)
    a, b = synthetic_layer(spec, 2000, seed=1), synthetic_layer(spec, 2000, seed=1)
    assert a.shape == (2000, 32)
    assert a.dtype == np.float32
    np.testing.assert_array_equal(a, b)
    assert np.mean(np.sum(a.astype(float) ** 2, 1)) == pytest.approx(1.0, abs=0.02)
    assert not np.array_equal(a, synthetic_layer(spec, 2000, seed=2))


def test_pure_manifold_layer_has_its_dimension():
    for d in (1, 2):
        spec = SyntheticLayer("torus", d=d, harmonics=1, manifold_share=1.0, noise=0.0)
        assert two_nn(synthetic_layer(spec, 4000)) == pytest.approx(d, rel=0.1)


def test_reference_manifolds_have_their_radius():
    s = round_sphere(500, 3, radius=2.0, ambient=10, seed=0)
    np.testing.assert_allclose(np.linalg.norm(s, axis=1), 2.0)
    t = flat_torus(500, 2, radius=0.5, ambient=10, seed=0)
    np.testing.assert_allclose(np.linalg.norm(t, axis=1), 0.5 * np.sqrt(2))


def test_cyclic_corpus_is_seeded_and_mixes_facts():
    a = cyclic_corpus(200, seed=3, facts=["Alice lives in Paris ."])
    assert a == cyclic_corpus(200, seed=3, facts=["Alice lives in Paris ."])
    assert "Alice lives in Paris ." in a
    assert any(t.startswith("days :") for t in a)


def test_bad_specs_raise():
    with pytest.raises(ValueError, match="family"):
        SyntheticLayer("klein")
    with pytest.raises(ValueError, match="n_active"):
        SyntheticLayer(n_atoms=3, n_active=4)
    with pytest.raises(ValueError, match="manifold_share"):
        SyntheticLayer(manifold_share=1.5)
    with pytest.raises(ValueError, match="n must be"):
        synthetic_layer(SyntheticLayer(), 1)
