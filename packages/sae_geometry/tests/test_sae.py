"""TopK and JumpReLU SAEs: the definitions, training on a planted dictionary, bad input."""

import numpy as np
import pytest
import torch

from sae_geometry import JumpReLUSAE, SAETrainConfig, TopKSAE, fvu, geometric_median, train_sae


def test_topk_codes_have_exactly_k_nonzeros_per_member():
    sae = TopKSAE(16, 64, [2, 5, 9], seed=0)
    with torch.no_grad():
        sae.b_enc.fill_(1.0)  # every pre-activation positive, so TopK keeps exactly k
    z = sae.encode(torch.randn(3, 50, 16))
    assert z.shape == (3, 50, 64)
    assert (z != 0).sum(-1).tolist() == [[2] * 50, [5] * 50, [9] * 50]


def test_init_is_tied_with_unit_decoder_rows():
    sae = TopKSAE(8, 32, 4, seed=1)
    torch.testing.assert_close(sae.W_enc, sae.W_dec.transpose(1, 2))
    torch.testing.assert_close(sae.W_dec.norm(dim=-1), torch.ones(1, 32))
    assert sae.b_enc.abs().sum() == 0


def test_training_keeps_decoder_rows_unit_and_is_deterministic(one_thread):
    x = torch.randn(400, 8, generator=torch.Generator().manual_seed(0))
    a, b = TopKSAE(8, 16, 3, seed=2), TopKSAE(8, 16, 3, seed=2)
    cfg = SAETrainConfig(steps=30, batch_size=64, dead_tokens=64)
    train_sae(a, x, cfg, seed=5)
    train_sae(b, x, cfg, seed=5)
    torch.testing.assert_close(a.W_dec.norm(dim=-1), torch.ones(1, 16))
    assert torch.equal(a.W_dec, b.W_dec)
    assert a.evaluate(x)[0] == pytest.approx(b.evaluate(x)[0])


def test_planted_sparse_dictionary_is_recovered(one_thread):
    g = torch.Generator().manual_seed(0)
    # 24 atoms in R^32 (linearly independent, so a linear encoder can read sizes exactly), k = 3
    d, n_atoms, k, n = 32, 24, 3, 6000
    atoms = torch.randn(n_atoms, d, generator=g)
    atoms /= atoms.norm(dim=1, keepdim=True)
    idx = torch.rand(n, n_atoms, generator=g).argsort(1)[:, :k]
    sizes = 0.5 + torch.rand(n, k, generator=g)
    x = torch.einsum("nk,nkd->nd", sizes, atoms[idx])
    sae = TopKSAE(d, 2 * n_atoms, k, seed=3)  # 2x overcomplete, as dictionary recovery is run
    train_sae(sae, x[:5000], SAETrainConfig(steps=800, batch_size=256, lr=5e-3, dead_tokens=2000))
    err, l0 = sae.evaluate(x[5000:])
    # measured on 1 thread: FVU 0.0015, L0 3, worst atom cosine 0.998
    assert err[0] < 0.01
    assert l0[0] <= k
    cos = (sae.W_dec[0] @ atoms.T).abs().max(0).values  # best decoder row for each planted atom
    assert cos.min() > 0.95


def test_geometric_median_resists_outliers():
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(400, 3, generator=g, dtype=torch.float64), torch.full((20, 3), 1e6)])
    med = geometric_median(x)
    assert float(med.norm()) < 0.3  # the bulk's centre; 5% outliers move the mean ~5e4 away
    assert float(x.mean(0).norm()) > 1e4
    batched = geometric_median(torch.stack([x, x + 5.0]))
    torch.testing.assert_close(batched, torch.stack([med, med + 5.0]), atol=1e-3, rtol=0)


def test_fvu_is_one_for_the_mean_and_zero_for_identity():
    x = torch.randn(100, 5)
    assert float(fvu(x, x)) == 0.0
    assert float(fvu(x, x.mean(0).expand_as(x))) == pytest.approx(1.0)


def test_jumprelu_matches_numpy_formula():
    rng = np.random.default_rng(0)
    p = {
        "W_enc": rng.standard_normal((6, 10)),
        "W_dec": rng.standard_normal((10, 6)),
        "b_enc": rng.standard_normal(10),
        "b_dec": rng.standard_normal(6),
        "threshold": np.abs(rng.standard_normal(10)),
    }
    x = rng.standard_normal((7, 6))
    pre = x @ p["W_enc"] + p["b_enc"]
    expected = (pre * (pre > p["threshold"])) @ p["W_dec"] + p["b_dec"]
    sae = JumpReLUSAE(**p)
    np.testing.assert_allclose(sae(torch.from_numpy(x)).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_bad_input_raises_clear_errors():
    with pytest.raises(ValueError, match="k must be an int in"):
        TopKSAE(8, 4, 5)
    with pytest.raises(ValueError, match="non-finite"):
        TopKSAE(4, 8, 2).encode(torch.tensor([[0.0, float("nan"), 0.0, 0.0]]))
    with pytest.raises(ValueError, match="x must be"):
        TopKSAE(4, 8, [2, 2]).encode(torch.zeros(3, 5, 4))
    with pytest.raises(ValueError, match="W_dec has shape"):
        JumpReLUSAE(np.zeros((4, 8)), np.zeros((4, 8)), np.zeros(8), np.zeros(4), np.zeros(8))
    with pytest.raises(ValueError, match="steps"):
        SAETrainConfig(steps=0)
