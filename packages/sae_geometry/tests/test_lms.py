"""Tiny cyclic-text LMs: cached training, the from_pretrained path, activations, a release on them."""

import numpy as np
import pytest
import torch

from paper_common.lm import load_lm, save_lm
from sae_geometry import LMConfig, TopKSAE, cyclic_lm, evaluate_release, layer_activations

CFG = LMConfig(n_layers=2, d_model=32, n_heads=2, steps=30, n_texts=300)


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    import os

    os.environ.setdefault("PAPER_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    return cyclic_lm(CFG, seed=0, progress=False)


def test_cached_model_is_the_trained_one(lm):
    model, _tok, info = lm
    again, _, info2 = cyclic_lm(CFG, seed=0)
    assert info == info2
    for a, b in zip(model.parameters(), again.parameters(), strict=True):
        assert torch.equal(a, b)


def test_layer_activations_shapes_and_saved_model_path(lm, tmp_path):
    model, tok, _ = lm
    texts = CFG.corpus(200, seed=5)
    acts = layer_activations(model, tok, texts, n_tokens=500)
    assert sorted(acts) == [1, 2]
    assert acts[1].shape == (500, 32)
    save_lm(model, tok, tmp_path / "m")
    model2, tok2 = load_lm(tmp_path / "m")
    np.testing.assert_allclose(
        layer_activations(model2, tok2, texts, [2], 500)[2], acts[2], atol=1e-5
    )
    with pytest.raises(ValueError, match="need n_tokens"):
        layer_activations(model, tok, texts[:2], n_tokens=10_000)


def test_evaluate_release_on_a_written_release(lm, tmp_path):
    model, tok, _ = lm
    texts = CFG.corpus(200, seed=6)
    folder = tmp_path / "layer_0" / "width_64" / "average_l0_4"
    folder.mkdir(parents=True)
    sae = TopKSAE(32, 64, 4, seed=0)
    w = sae.W_dec[0].detach().numpy()
    threshold = np.full(64, 1e9, dtype=np.float32)  # nothing fires: the reconstruction is b_dec
    x = layer_activations(model, tok, texts, [1], 400)[1]
    np.savez(folder / "params.npz", W_enc=w.T, W_dec=w, b_enc=np.zeros(64, np.float32),
             b_dec=x.mean(0), threshold=threshold)  # fmt: skip
    rows = evaluate_release(model, tok, texts, tmp_path, n_tokens=400)
    assert rows == [
        {"layer": 0, "width": 64, "l0_nominal": 4, "l0": 0.0, "fvu": pytest.approx(1.0, abs=1e-4)}
    ]
