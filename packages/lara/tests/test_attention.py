"""Every method: forms agree, causality, padding, known answers, and errors on bad input."""

from __future__ import annotations

import math

import pytest
import torch

from lara import (
    LARA,
    METHODS,
    LARAPlusPlus,
    Performer,
    linear_attention,
    make_attention,
    segment_means,
)
from lara.attention import log_positive_features, orthogonal_gaussian
from lara.baselines import iterative_pinv

B, H, D = 2, 2, 8
CAUSAL = ["softmax", "performer", "rfa", "cosformer", "linear", "lara", "lara++"]
ALL = [*CAUSAL, "nystrom"]


def qkv(n: int = 23, seed: int = 0, scale: float = 1.0, n_q: int | None = None):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, n_q or n, D, generator=g, dtype=torch.float64) * scale
    k = torch.randn(B, H, n, D, generator=g, dtype=torch.float64) * scale
    v = torch.randn(B, H, n, D, generator=g, dtype=torch.float64)
    return q, k, v


def build(name: str, **kw):
    extra = {"max_len": 64} if name == "cosformer" else {}
    if name.startswith("lara"):  # the random bank on purpose: these tests check the forms
        extra["init"] = "random"
    if name == "nystrom":
        extra["num_landmarks"] = 4
    return make_attention(name, D, H, **{**extra, **kw}).double().eval()


def test_registry_has_every_method() -> None:
    make_attention("softmax", D)  # imports the registrations
    assert set(ALL) <= set(METHODS)
    with pytest.raises(ValueError, match="unknown attention method"):
        make_attention("flash", D)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("causal", [False, True])
def test_chunked_and_recurrent_match_quadratic(name: str, causal: bool) -> None:
    cls = METHODS[name]
    if causal and not cls.supports_causal:
        pytest.skip("non-causal method")
    q, k, v = qkv()
    ref = build(name, form="quadratic")(q, k, v, causal)
    out = build(name, form="chunked", chunk_size=5)(q, k, v, causal)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)
    if causal and cls.supports_recurrent:
        rec = build(name, form="recurrent")(q, k, v, causal)
        torch.testing.assert_close(rec, ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", CAUSAL)
def test_queries_against_a_cache(name: str) -> None:
    """n_q < n_k: the queries are the last positions; equals the tail of the full output."""
    q, k, v = qkv(19)
    kw = {"mis": "mis-bh"} if name == "lara" else {}  # mis-opt needs every query: tested below
    full = build(name, chunk_size=4, **kw)(q, k, v, True)
    tail = build(name, chunk_size=4, **kw)(q[:, :, -6:], k, v, True)
    torch.testing.assert_close(tail, full[:, :, -6:], atol=1e-7, rtol=0)


@pytest.mark.parametrize("name", CAUSAL)
@pytest.mark.parametrize("form", ["quadratic", "chunked"])
def test_causal_masking_leaks_nothing_from_the_future(name: str, form: str) -> None:
    q, k, v = qkv(20)
    attn = build(name, form=form, chunk_size=6)
    before = attn(q, k, v, True)
    q2, k2, v2 = q.clone(), k.clone(), v.clone()
    t = 13
    for x in (q2, k2, v2):
        x[:, :, t:] += 5 * torch.randn_like(x[:, :, t:])
    after = attn(q2, k2, v2, True)
    torch.testing.assert_close(after[:, :, :t], before[:, :, :t], atol=1e-10, rtol=1e-9)
    assert not torch.allclose(after[:, :, t:], before[:, :, t:])


@pytest.mark.parametrize("name", [m for m in CAUSAL if m != "cosformer"])
@pytest.mark.parametrize("causal", [False, True])
def test_padding_keys_are_ignored(name: str, causal: bool) -> None:
    """Keys masked out by key_mask change nothing (cosFormer's M depends on the length: excluded)."""
    q, k, v = qkv(12)
    attn = build(name, proposals="learned") if name.startswith("lara") else build(name)
    ref = attn(q[:, :, :9], k[:, :, :9], v[:, :, :9], causal)
    mask = torch.ones(B, 12, dtype=torch.bool)
    mask[:, 9:] = False
    out = attn(q, k, v, causal, key_mask=mask)[:, :, :9]
    torch.testing.assert_close(out, ref, atol=1e-9, rtol=0)


@pytest.mark.parametrize("name", [m for m in ALL if m not in ("softmax", "cosformer")])
def test_identical_keys_give_the_value_exactly(name: str) -> None:
    """If every key and value is the same, every normalised estimator returns that value
    (not cosFormer: a query whose ReLU features miss the key's gets a zero denominator)."""
    q, k, v = qkv(10)
    k = k[:, :, :1].expand_as(k).contiguous()
    v = v[:, :, :1].expand_as(v).contiguous()
    out = build(name)(q, k, v, False)
    torch.testing.assert_close(out, v, atol=1e-6, rtol=0)


def test_performer_kernel_estimate_is_unbiased() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(1, 1, 1, D, generator=g, dtype=torch.float64) * 0.4
    y = torch.randn(1, 1, 1, D, generator=g, dtype=torch.float64) * 0.4
    true = math.exp(float((x * y).sum()))
    for orthogonal in (False, True):
        est = []
        for seed in range(1500):
            w = orthogonal_gaussian(1, D, D, torch.Generator().manual_seed(seed), orthogonal)
            est.append((log_positive_features(x, w) + log_positive_features(y, w)).exp().mean())
        est = torch.stack(est)
        stderr = float(est.std()) / math.sqrt(len(est))
        assert abs(float(est.mean()) - true) < 4 * stderr, (orthogonal, float(est.mean()), true)


def test_performer_error_falls_with_features() -> None:
    q, k, v = qkv(64, scale=0.5)
    exact = build("softmax", form="quadratic")(q, k, v, False)

    def err(m: int) -> float:
        errs = []
        for seed in range(4):
            out = build("performer", num_features=m, seed=seed)(q, k, v, False)
            errs.append(float((out - exact).norm() / exact.norm()))
        return sum(errs) / len(errs)

    assert err(2048) < 0.5 * err(32)


def test_lara_importance_weights_normalise_and_give_the_output() -> None:
    q, k, v = qkv(30)
    lara = build("lara", num_proposals=8)
    iw, f = lara.importance_weights(q, k, v)
    assert iw.shape == (B, H, 30, 8)
    assert f.shape == (B, H, 8, D)
    torch.testing.assert_close(iw.sum(-1), torch.ones(B, H, 30, dtype=torch.float64))
    assert bool((iw >= 0).all())
    torch.testing.assert_close(iw @ f, lara(q, k, v, False), atol=1e-10, rtol=0)


def test_lara_plus_plus_with_one_standard_proposal_is_snis_with_those_samples() -> None:
    """C = 1, mu = 0, sigma = 1, no gate: weights are p~/N(0, I), i.e. positive random features."""
    q, k, v = qkv(17)
    lpp = LARAPlusPlus(
        D, H, num_proposals=1, samples_per_proposal=32, proposals="learned", init="random"
    ).double()
    lpp.eval()
    with torch.no_grad():
        lpp.means.zero_()
    perf = Performer(D, H, num_features=32).double()
    perf.w.copy_(lpp.noise[:, 0])
    for causal in (False, True):
        torch.testing.assert_close(lpp(q, k, v, causal), perf(q, k, v, causal), atol=1e-9, rtol=0)


def test_lara_plus_plus_error_falls_with_samples() -> None:
    q, k, v = qkv(48, scale=0.6)
    exact = build("softmax", form="quadratic")(q, k, v, True)

    def err(s: int) -> float:
        errs = []
        for seed in range(4):
            a = build("lara++", num_proposals=4, samples_per_proposal=s, seed=seed)
            a.calibrate(q, k)
            errs.append(float((a(q, k, v, True).detach() - exact).norm() / exact.norm()))
        return sum(errs) / len(errs)

    assert err(128) < 0.6 * err(2)


def test_lara_samples_in_training_and_not_in_eval() -> None:
    q, k, v = qkv(16)
    lara = LARA(D, H, num_proposals=4).double()
    lara.eval()
    torch.testing.assert_close(lara(q, k, v, False), lara(q, k, v, False))
    lara.train()
    torch.manual_seed(0)
    a = lara(q, k, v, False)
    torch.manual_seed(1)
    assert not torch.allclose(a, lara(q, k, v, False))


def test_calibrate_moves_the_bank_to_the_data() -> None:
    q, k, _ = qkv(40)
    q = q + 3.0
    lara = LARA(D, H, num_proposals=4, proposals="learned").double()
    before = lara.means.detach().clone()
    lara.calibrate(q, k)
    target = (q + k).mean((0, 2)) * D**-0.25  # scaled units
    assert (lara.means.mean(1) - target).norm() < (before.mean(1) - target).norm()


def test_segment_means_known_answer() -> None:
    x = torch.arange(7, dtype=torch.float64).reshape(1, 1, 7, 1)
    out = segment_means(x, 3)  # segments [0, 1], [2, 3], [4, 5, 6]
    assert out.flatten().tolist() == [0.5, 2.5, 5.0]
    assert segment_means(x, 10) is x


def test_iterative_pinv_matches_pinv_on_softmax_kernels() -> None:
    g = torch.Generator().manual_seed(0)
    a = torch.softmax(torch.randn(3, 8, 8, generator=g, dtype=torch.float64), -1)
    a = 0.5 * a + 0.5 * torch.eye(8, dtype=torch.float64)
    torch.testing.assert_close(iterative_pinv(a, 20), torch.linalg.pinv(a), atol=1e-8, rtol=0)


def test_nystrom_is_exact_below_its_landmarks_and_close_above() -> None:
    q, k, v = qkv(40, scale=0.3)
    exact = build("softmax", form="quadratic")(q, k, v, False)
    short = make_attention("nystrom", D, H, num_landmarks=64, exact_when_short=True).double()
    torch.testing.assert_close(short(q, k, v, False), exact)
    approx = build("nystrom", num_landmarks=8)(q, k, v, False)  # 6 Newton-Schulz steps
    assert float((approx - exact).norm() / exact.norm()) < 0.1


def test_linear_attention_core_validates() -> None:
    f = torch.ones(1, 1, 4, 3)
    with pytest.raises(ValueError, match="form"):
        linear_attention(f, f, f, form="fast")
    with pytest.raises(ValueError, match="chunk_size"):
        linear_attention(f, f, f, chunk_size=0)
    with pytest.raises(ValueError, match="feature sizes"):
        linear_attention(f, torch.ones(1, 1, 4, 2), f)
    with pytest.raises(ValueError, match="key_mask"):
        linear_attention(f, f, f, key_mask=torch.ones(1, 3, dtype=torch.bool))


def test_bad_inputs_get_clear_errors() -> None:
    attn = make_attention("performer", D, H)
    q = torch.randn(B, H, 5, D)
    with pytest.raises(ValueError, match=r"\(batch, heads, seq, dim\)"):
        attn(q[0], q[0], q[0])
    with pytest.raises(TypeError, match="floating"):
        attn(q.long(), q.long(), q.long())
    with pytest.raises(TypeError, match="dtypes differ"):
        attn(q, q.double(), q)
    with pytest.raises(ValueError, match="num_heads=2"):
        attn(torch.randn(B, 3, 5, D), torch.randn(B, 3, 5, D), torch.randn(B, 3, 5, D))
    with pytest.raises(ValueError, match="head_dim=8"):
        make_attention("performer", D, H)(*(torch.randn(B, H, 5, 4) for _ in range(3)))
    with pytest.raises(ValueError, match="n_q <= n_k"):
        attn(torch.randn(B, H, 6, D), q, q, True)
    with pytest.raises(ValueError, match="no causal form"):
        make_attention("nystrom", D, H)(q, q, q, True)
    with pytest.raises(ValueError, match="no recurrent form"):
        make_attention("nystrom", D, H, form="recurrent")
    with pytest.raises(ValueError, match="max_len"):
        make_attention("cosformer", D, H, form="recurrent")
    with pytest.raises(ValueError, match="pass causal=True"):
        make_attention("linear", D, H, form="recurrent")(q, q, q, False)
    with pytest.raises(ValueError, match="leak the future"):
        make_attention("lara", D, H, proposals="landmarks")(q, q, q, True)
    for kw, match in [
        ({"form": "flash"}, "form must be"),
        ({"num_proposals": 0}, "num_proposals"),
        ({"proposals": "kmeans"}, "proposals must be"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"eps": 0.0}, "eps"),
    ]:
        with pytest.raises(ValueError, match=match):
            make_attention("lara", D, H, **kw)
    with pytest.raises(ValueError, match="samples_per_proposal"):
        make_attention("lara++", D, H, samples_per_proposal=0)
