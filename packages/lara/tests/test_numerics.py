"""Issue 44: stabilisers over the keys a query may see, one random draw per sequence, half precision,
no silent fallbacks, no accidental use of an uncalibrated proposal bank."""

from __future__ import annotations

import pytest
import torch

from lara import LinearState, linear_attention, make_attention

H, D = 2, 16
LOG_SPACE = ["performer", "lara", "lara++"]


def _qkv(n: int, seed: int = 0, dtype: torch.dtype = torch.float32):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, H, n, D, generator=g).to(dtype) for _ in range(3))


def _build(name: str, **kw):
    return make_attention(name, D, H, **kw).eval()


def _calibrated(name: str, q: torch.Tensor, k: torch.Tensor, **kw):
    attn = _build(name, **kw)
    attn.calibrate(q, k)
    return attn


@pytest.mark.parametrize("form", ["quadratic", "chunked"])
@pytest.mark.parametrize("chunk", [64, 8])
def test_a_large_future_log_feature_leaves_past_outputs_alone(form: str, chunk: int) -> None:
    """The reproduction of the issue on the core: log features of order 1, and one key at position
    30 whose log features are 200. A stabiliser taken over every key (or every key of the chunk)
    subtracts 200 from the past keys too, and exp underflows: the past outputs came out 0.0
    while the recurrent form (running maximum over the keys seen) gave norm ~3.6."""
    g = torch.Generator().manual_seed(0)
    fq = torch.randn(1, H, 40, 8, generator=g)
    fk = torch.randn(1, H, 40, 8, generator=g)
    v = torch.randn(1, H, 40, D, generator=g)
    fk[:, :, 30] = 200.0
    out = linear_attention(fq, fk, v, True, log_space=True, form=form, chunk_size=chunk)
    state, rec = LinearState.empty(fq, v, True), []
    for t in range(40):
        state = state.absorb(fk[:, :, t : t + 1], v[:, :, t : t + 1])
        rec.append(state.read(fq[:, :, t : t + 1]))
    rec = torch.cat(rec, dim=2)
    assert float(rec[:, :, :30].norm()) > 1.0
    torch.testing.assert_close(out, rec, atol=1e-5, rtol=1e-4)
    cut = linear_attention(
        fq[:, :, :30], fk[:, :, :30], v[:, :, :30], True, log_space=True, form=form
    )
    torch.testing.assert_close(out[:, :, :30], cut, atol=1e-5, rtol=1e-4)


def _planted(name: str, form: str):
    """The method with one random feature / proposal mean made 8x longer, and a key at position
    30 equal to it (in the scaled space): that key's log feature is |w|^2 / 2, hundreds of nats
    above every other key's."""
    kw = {} if name == "performer" else {"init": "random"}
    attn = _build(name, form=form, chunk_size=64, **kw)
    bank = attn.w if name == "performer" else attn.means
    q, k, v = _qkv(40)
    s = attn.scale(None) ** 0.5
    with torch.no_grad():
        bank[:, 0] *= 8.0
        k = k.clone()
        k[0, :, 30] = bank[:, 0] / s
    return attn, q, k, v


@pytest.mark.parametrize("name", LOG_SPACE)
@pytest.mark.parametrize("form", ["quadratic", "chunked"])
def test_a_large_future_key_leaves_past_outputs_alone(name: str, form: str) -> None:
    """A key aligned with a long random feature (or proposal mean), at position 30: the outputs
    before it must be the recurrent form's and the cut sequence's. A stabiliser taken over every
    key subtracts that key's log feature from the past keys too and underflows them."""
    attn, q, k, v = _planted(name, form)
    pos = torch.arange(40)
    with torch.no_grad():
        _, fk = attn.features(q, k, attn.scale(None), pos, pos, True, {})
        lead = fk[:, :, 30].amax(-1) - fk[:, :, :30].amax((-2, -1))
        assert float(lead.min()) > 150.0  # far past float32's exp range: the test has teeth
        full = attn(q, k, v, True)[:, :, :30]
        cut = attn(q[:, :, :30], k[:, :, :30], v[:, :, :30], True)
        rec, *_ = _planted(name, "recurrent")
        rec_out = rec(q, k, v, True)[:, :, :30]
    assert float(cut.norm()) > 1.0  # a real output, not a collapsed one
    torch.testing.assert_close(full, cut, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(rec_out, full, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ["lara", "lara++"])
def test_training_draws_one_sample_set_per_sequence_in_every_form(name: str) -> None:
    """In training mode every form draws its random features once per forward pass; the recurrent
    form drew them again at every token (a different estimator per position)."""
    q, k, v = _qkv(12, dtype=torch.float64)
    outs = {}
    for form in ("chunked", "recurrent"):
        attn = _calibrated(name, q, k, form=form).double().train()
        torch.manual_seed(7)
        with torch.no_grad():
            outs[form] = attn(q, k, v, True)
    torch.testing.assert_close(outs["recurrent"], outs["chunked"], atol=1e-8, rtol=1e-6)
    attn = _calibrated(name, q, k).double().train()
    torch.manual_seed(8)  # a different draw does give a different output: the check has teeth
    with torch.no_grad():
        assert not torch.allclose(attn(q, k, v, True), outs["chunked"])


@pytest.mark.parametrize("name", LOG_SPACE)
def test_half_precision_does_not_overflow(name: str) -> None:
    """fp16 sums of ~4096 positive features overflow (max 65504): the kernelized core accumulates
    in float32 and returns the input dtype."""
    q, k, v = _qkv(4096)
    ref = _calibrated(name, q, k)
    with torch.no_grad():
        exact = ref(q, k, v, True)
        half = ref.half()(q.half(), k.half(), v.half(), True)
    assert half.dtype == torch.float16
    assert bool(torch.isfinite(half).all())
    assert float((half.float() - exact).norm() / exact.norm()) < 1e-2


def test_nystrom_says_when_it_cannot_approximate() -> None:
    q, k, v = _qkv(40)
    with pytest.raises(ValueError, match="num_landmarks=64"):
        _build("nystrom", num_landmarks=64)(q, k, v, False)
    exact = _build("softmax", form="quadratic")(q, k, v, False)
    opted = _build("nystrom", num_landmarks=64, exact_when_short=True)(q, k, v, False)
    torch.testing.assert_close(opted, exact)
    with pytest.raises(ValueError, match="n_q == n_k"):
        _build("nystrom", num_landmarks=8)(q[:, :, :30], k, v, False)


@pytest.mark.parametrize("name", ["lara", "lara++"])
def test_an_uncalibrated_bank_cannot_be_used_by_accident(name: str) -> None:
    q, k, v = _qkv(20)
    with pytest.raises(ValueError, match="calibrate"):
        _build(name)(q, k, v, True)
    with pytest.raises(ValueError, match="calibrate"):
        _build(name, form="recurrent")(q, k, v, True)
    _build(name)(q, k, v, False)  # landmark proposals come from the sequence: nothing to fit
    _build(name, init="random")(q, k, v, True)  # said out loud
    attn = _calibrated(name, q, k)
    attn(q, k, v, True)
    fresh = _build(name)
    fresh.load_state_dict(attn.state_dict())  # a saved, calibrated bank stays usable
    fresh(q, k, v, True)


def _reference_lara_mis_opt(q, k, v, c: int, alpha_coeff: float = 1.0) -> torch.Tensor:
    """The reference code's non-causal LARA estimate (mis-opt, evaluation: w_c = mu_c), written out
    with explicit loops over proposals in the scaled space ``x' = x d^-1/4``."""
    s = q.shape[-1] ** -0.25
    qs, ks = q * s, k * s
    n = qs.shape[2]
    seg = torch.arange(n) * c // n  # segment of each position (equal lengths here)
    q_bar = torch.stack([qs[:, :, seg == j].mean(2) for j in range(c)], 2)
    mu = q_bar + torch.stack([ks[:, :, seg == j].mean(2) for j in range(c)], 2)
    w = mu

    def log_xi(x, w):  # (b, h, c, n)
        return torch.einsum("bhcd,bhnd->bhcn", w, x) - 0.5 * (x * x).sum(-1)[:, :, None, :]

    lq, lk, lmu = log_xi(qs, w), log_xi(ks, w), log_xi(mu, w)  # lmu[c, c'] = w_c . mu_c' - ...
    kv = torch.softmax(lk, -1) @ v  # (b, h, c, d)
    own = torch.diagonal(lmu, dim1=-2, dim2=-1)[..., None]  # (b, h, c, 1)
    bh = torch.exp(own - torch.logsumexp(lmu, -1, keepdim=True))
    t = torch.softmax(torch.einsum("bhcd,bhnd->bhcn", q_bar, qs), dim=-1)  # over queries
    alpha = bh + alpha_coeff * (t - t.mean(-2, keepdim=True))
    log_iw = torch.log(alpha.clamp(min=1e-8)) + lq + torch.logsumexp(lk, -1, keepdim=True) - own
    return torch.einsum("bhcn,bhcd->bhnd", torch.softmax(log_iw, dim=-2), kv)


def test_lara_is_the_reference_mis_opt_estimator() -> None:
    """Balance heuristic plus the centred query-softmax term, as the official code weights its
    proposals (our old LARA used alpha ~ exp(q . mu) alone)."""
    q, k, v = _qkv(32, dtype=torch.float64)
    ref = _reference_lara_mis_opt(q, k, v, c=8)
    lara = _build("lara", num_proposals=8, proposal_gen="seg-means").double()
    for form in ("quadratic", "chunked"):
        lara.form = form
        with torch.no_grad():
            torch.testing.assert_close(lara(q, k, v, False), ref, atol=1e-9, rtol=1e-7)


def test_lara_text_landmarks_go_through_learned_layernorm_linear() -> None:
    """``adaptive-1d`` (the reference's option for sequences): landmarks are segment means of
    LayerNorm(Linear(q')) and LayerNorm(Linear(k')), trained with the model."""
    q, k, v = _qkv(32, dtype=torch.float64)
    lara = _build("lara", num_proposals=8).double()
    assert lara.proposal_gen == "adaptive-1d"
    names = {n for n, _ in lara.named_parameters()}
    assert {"q_bar_gen.0.weight", "q_bar_gen.1.weight", "k_bar_gen.0.weight"} <= names
    with torch.no_grad():
        before = lara(q, k, v, False)
        plain = _build("lara", num_proposals=8, proposal_gen="seg-means").double()(q, k, v, False)
        assert float((before - plain).norm()) > 1e-3  # the LayerNorm changes the landmarks
        lara.q_bar_gen[0].weight.mul_(0.5)
        assert float((lara(q, k, v, False) - before).norm()) > 1e-6
    out = lara(q, k, v, False)
    out.sum().backward()
    assert lara.q_bar_gen[0].weight.grad is not None


def test_causal_mis_opt_lara_refuses_a_cache_in_the_chunked_form() -> None:
    q, k, v = _qkv(12)
    lara = _calibrated("lara", q, k)
    with pytest.raises(ValueError, match="form='recurrent'"):
        lara(q[:, :, -3:], k, v, True)


@pytest.mark.parametrize("name", ["performer", "rfa"])
def test_zero_features_is_an_error_not_the_default(name: str) -> None:
    """``num_features=0`` silently became the default count (``0 or default``)."""
    with pytest.raises(ValueError, match="num_features"):
        _build(name, num_features=0)


def test_kmeans_with_fewer_points_than_centres_says_so() -> None:
    from lara.randomized import kmeans_means

    with pytest.warns(UserWarning, match="3 points for 8 centres"):
        out = kmeans_means(torch.randn(1, 3, 4), 8)
    assert out.shape == (1, 8, 4)


def test_recurrent_mis_opt_skips_padding_queries_like_the_chunked_form() -> None:
    q, k, v = _qkv(10, dtype=torch.float64)
    mask = torch.ones(1, 10, dtype=torch.bool)
    mask[:, :3] = False  # leading padding
    outs = []
    for form in ("chunked", "recurrent"):
        attn = _calibrated("lara", q, k, form=form).double()
        with torch.no_grad():
            outs.append(attn(q, k, v, True, key_mask=mask)[:, :, 3:])
    torch.testing.assert_close(outs[1], outs[0], atol=1e-9, rtol=1e-7)


def test_training_lara_on_fewer_tokens_than_proposals() -> None:
    q, k, v = _qkv(5)
    lara = _build("lara", num_proposals=8).train()
    assert lara(q, k, v, False).shape == v.shape


@pytest.mark.parametrize("n", [1, 7, 256, 700])
def test_running_logsumexp_is_logcumsumexp(n: int) -> None:
    """The blockwise running normaliser of causal mis-opt LARA (logcumsumexp was 0.09 s alone at
    8192 tokens, more than LARA++'s whole forward) gives logcumsumexp's numbers: ordinary
    logits, leading padding (-inf), and a range that underflows a block's partial sums."""
    from lara.randomized import running_logsumexp

    g = torch.Generator().manual_seed(0)
    x = 3 * torch.randn(2, 3, n, 5, generator=g, dtype=torch.float64)
    cases = [x, x.clone(), x.clone()]
    cases[1][0, :, : n // 2] = -torch.inf
    cases[2][:, :, : min(n, 5)] -= 400.0  # 400 nats below what follows in their block
    for c in cases:
        torch.testing.assert_close(
            running_logsumexp(c, block=64), torch.logcumsumexp(c, dim=-2), atol=1e-10, rtol=1e-10
        )
    x32 = x.float()
    torch.testing.assert_close(running_logsumexp(x32), torch.logcumsumexp(x32, dim=-2))


def test_causal_mis_opt_lara_is_unchanged_by_the_blockwise_normaliser(monkeypatch) -> None:
    import lara.randomized as rnd

    q, k, v = _qkv(300, dtype=torch.float64)
    mask = torch.ones(1, 300, dtype=torch.bool)
    mask[:, :5] = False
    attn = _calibrated("lara", q, k).double()
    with torch.no_grad():
        fast = attn(q, k, v, True, key_mask=mask)
        monkeypatch.setattr(rnd, "running_logsumexp", lambda x: torch.logcumsumexp(x, dim=-2))
        exact = attn(q, k, v, True, key_mask=mask)
    torch.testing.assert_close(fast, exact, atol=1e-10, rtol=1e-8)


def _reference_lara_adaptive_1d(q, k, v, q_gen, k_gen, c: int) -> torch.Tensor:
    """The reference code's non-causal ``adaptive-1d`` LARA forward (mis-opt, evaluation), written
    out in its own unscaled space: landmarks are segment means of LayerNorm(Linear(q)) of the raw
    q and k, and every kernel term is ``prm(x, w) = w . (x d^-1/2) - d^-1/2 |x|^2 / 2``."""
    d = q.shape[-1]
    dn = d**-0.5
    n = q.shape[2]
    seg = torch.arange(n) * c // n
    q2, k2 = q_gen(q), k_gen(k)
    q_bar = torch.stack([q2[:, :, seg == j].mean(2) for j in range(c)], 2)
    k_bar = torch.stack([k2[:, :, seg == j].mean(2) for j in range(c)], 2)
    mu = w = q_bar + k_bar

    def prm(x, w):  # (b, h, c, n)
        dash = torch.einsum("bhcd,bhnd->bhcn", w, dn * x)
        return dash - dn * (x * x).sum(-1)[:, :, None, :] / 2

    lq, lk, lmu = prm(q, w), prm(k, w), prm(mu, w)
    kv = torch.softmax(lk, -1) @ v
    t = torch.softmax(torch.einsum("bhcd,bhnd->bhcn", dn * q_bar, q), dim=-1)
    own = torch.diagonal(lmu, dim1=-2, dim2=-1)[..., None]
    bh = torch.exp(own - torch.logsumexp(lmu, -1, keepdim=True))
    alpha = bh + (t - t.mean(-2, keepdim=True))
    log_iw = torch.log(alpha.clamp(min=1e-8)) + lq + torch.logsumexp(lk, -1, keepdim=True) - own
    return torch.einsum("bhcn,bhcd->bhnd", torch.softmax(log_iw, dim=-2), kv)


def test_adaptive_1d_lara_is_the_reference_forward() -> None:
    """With the same Linear and LayerNorm parameters, our ``adaptive-1d`` LARA is the reference
    forward; the landmarks were d^1/4 too long (LayerNorm outputs put in the scaled space as is)."""
    q, k, v = _qkv(32, dtype=torch.float64)
    q, k = 2 * q, 2 * k
    lara = _build("lara", num_proposals=8).double()
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():  # a trained-looking map, not the identity start
        for gen in (lara.q_bar_gen, lara.k_bar_gen):
            gen[0].weight.add_(0.3 * torch.randn(D, D, generator=g, dtype=torch.float64))
            gen[0].bias.copy_(0.5 * torch.randn(D, generator=g, dtype=torch.float64))
            gen[1].weight.copy_(1 + 0.2 * torch.randn(D, generator=g, dtype=torch.float64))
        ref = _reference_lara_adaptive_1d(q, k, v, lara.q_bar_gen, lara.k_bar_gen, 8)
        for form in ("quadratic", "chunked"):
            lara.form = form
            torch.testing.assert_close(lara(q, k, v, False), ref, atol=1e-9, rtol=1e-7)


@pytest.mark.parametrize("name", ["lara", "lara++", "rfa"])
def test_calibration_ignores_padding(name: str) -> None:
    """Left padding filled with large values: calibrating with the mask gives the fit of the real
    positions (RFA: exactly the unpadded fit; LARA/LARA++: banks near the data, not the padding)."""
    q, k, _ = _qkv(24)
    pad = 8
    qp = torch.cat([torch.full((1, H, pad, D), 50.0), q], dim=2)
    kp = torch.cat([torch.full((1, H, pad, D), 50.0), k], dim=2)
    mask = torch.ones(1, pad + 24, dtype=torch.bool)
    mask[:, :pad] = False
    attn = _build(name, num_proposals=4) if name != "rfa" else _build(name)
    attn.calibrate(qp, kp, key_mask=mask)
    if name == "rfa":
        clean = _build(name)
        clean.calibrate(q, k)
        torch.testing.assert_close(attn.log_sigma, clean.log_sigma)
        return
    banks = [attn.means] + ([attn.query_means] if name == "lara" else [])
    for bank in banks:
        assert (
            float(bank.detach().abs().max()) < 5.0
        )  # real q', k' are N(0, 1/2); padding sits at 25
    with pytest.raises(ValueError, match="key_mask"):
        attn.calibrate(qp, kp, key_mask=mask[:, 1:])
