"""Student attention: exactness limits, interventions, causality, routing, and bad configs."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from linearize.student import UPDATES, LinearizeConfig, LinearizedAttention, zero_state

B, H, N, D = 2, 4, 24, 8


def _qkv(seed: int = 0):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, H, N, D, generator=g, dtype=torch.float64) for _ in range(3))


def _softmax(q, k, v):  # type: ignore[no-untyped-def]
    s = (q @ k.transpose(-2, -1)) * D**-0.5
    return (
        torch.softmax(s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf")), -1)
        @ v
    )


def _perturbed(cfg: LinearizeConfig, seed: int = 1) -> LinearizedAttention:
    m = LinearizedAttention(cfg, D, H).double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return m


@pytest.mark.parametrize("update", UPDATES)
@pytest.mark.parametrize("routing", ["recency", "score", "self_recall"])
def test_a_cache_as_long_as_the_sequence_is_the_teacher(update: str, routing: str) -> None:
    q, k, v = _qkv()
    cfg = LinearizeConfig(update=update, budget=N, sinks=2, window=3, routing=routing, conv=True)
    out = _perturbed(cfg)(q, k, v)  # trained-looking parameters: the state is empty anyway
    torch.testing.assert_close(out, _softmax(q, k, v), atol=1e-10, rtol=0)


@pytest.mark.parametrize("update", [u for u in UPDATES if u != "none"])
def test_identity_initialised_convolution_changes_nothing(update: str) -> None:
    q, k, v = _qkv(1)
    plain = LinearizedAttention(
        LinearizeConfig(update=update, budget=6, sinks=1, window=2), D, H
    ).double()
    conv = LinearizedAttention(
        LinearizeConfig(update=update, budget=6, sinks=1, window=2, conv=True), D, H
    ).double()
    conv.load_state_dict(plain.state_dict(), strict=False)
    torch.testing.assert_close(conv(q, k, v), plain(q, k, v), atol=1e-12, rtol=0)


@pytest.mark.parametrize("update", UPDATES)
@pytest.mark.parametrize("routing", ["recency", "score", "self_recall"])
def test_forms_agree_and_the_future_does_not_leak(update: str, routing: str) -> None:
    q, k, v = _qkv(2)
    base = {
        "update": update,
        "budget": 7,
        "sinks": 2,
        "window": 2,
        "routing": routing,
        "conv": True,
        "chunk_size": 5,
    }
    chunked = _perturbed(LinearizeConfig(**base))
    outs = []
    for form in ("recurrent", "quadratic"):
        m = LinearizedAttention(LinearizeConfig(**base, form=form), D, H).double()
        m.load_state_dict(chunked.state_dict())
        outs.append(m(q, k, v))
    ref = chunked(q, k, v)
    for o in outs:
        torch.testing.assert_close(o, ref, atol=1e-8, rtol=0)
    t = 15
    q2, k2, v2 = q.clone(), k.clone(), v.clone()
    q2[:, :, t:] += 1.0
    k2[:, :, t:] -= 1.0
    v2[:, :, t:] *= 3.0
    moved = chunked(q2, k2, v2)
    torch.testing.assert_close(moved[:, :, :t], ref[:, :, :t], atol=1e-12, rtol=0)
    assert (moved[:, :, t:] - ref[:, :, t:]).abs().max() > 1e-3


def test_pure_state_with_no_budget_matches_the_update_rule() -> None:
    from linearize.updates import scalar_update

    q, k, v = _qkv(3)
    m = LinearizedAttention(LinearizeConfig(update="delta"), D, H).double()
    fq, fk = (torch.nn.functional.normalize(x, dim=-1) for x in (q, k))
    beta = torch.sigmoid(m.beta_b.detach())[None, :, None].expand(B, H, N)
    expect, _ = scalar_update(fq, fk, v, b=beta, c=beta)
    torch.testing.assert_close(m(q, k, v), expect, atol=1e-12, rtol=0)


def test_routing_keeps_the_budget_and_writes_each_evicted_token_once() -> None:
    q, k, v = _qkv(4)
    steps = torch.arange(N)
    for routing in ("recency", "score", "self_recall"):
        cfg = LinearizeConfig(update="gated_delta", budget=8, sinks=2, window=3, routing=routing)
        m = LinearizedAttention(cfg, D, H).double()
        fk = torch.nn.functional.normalize(k, dim=-1)
        writer, cache = m.schedule(q, k, fk, v)
        assert cache.shape == (B, H, N, m.slots)  # O(n * budget), never (n, n)
        assert int((cache >= 0).sum(-1).max()) == 8  # never more than the budget
        assert torch.all((cache >= 0).sum(-1)[..., 8:] == 8)  # full once 8 tokens came
        assert torch.all(cache <= steps[:, None])  # causal
        for j in (0, 1):  # sinks are never evicted
            assert torch.all((cache[..., j:, :] == j).any(-1))
        written = writer[writer >= 0]
        assert written.numel() == B * H * (N - 8)
        for row in writer.reshape(-1, N):
            w = row[row >= 0]
            assert len(set(w.tolist())) == len(w)  # each token written once
        # the token written at step t left the cache at step t: there at t - 1, gone from t on
        for t in range(8, N):
            gone = writer[..., t]
            assert torch.all((cache[..., t - 1, :] == gone[..., None]).any(-1))
            assert not torch.any((cache[..., t:, :] == gone[..., None, None]).any(-1))


def test_eviction_ties_go_to_the_oldest_token() -> None:
    """Planted ties: with zero values the state reads every token back with error 0, so the
    self-recall criterion is equal for the whole pool. The victim is then the lowest index (the
    oldest token): routing reduces to first in, first out, the recency schedule, on this CPU and
    any other."""
    q, k, _ = _qkv(6)
    cfg = LinearizeConfig(update="delta", budget=8, sinks=2, window=3, routing="self_recall")
    m = LinearizedAttention(cfg, D, H).double()
    fk = torch.nn.functional.normalize(k, dim=-1)
    writer, cache = m.schedule(q, k, fk, torch.zeros_like(q))
    fifo_writer, fifo_cache = m._recency(B, H, N, q.device)
    assert torch.equal(writer, fifo_writer)
    as_sets = [[sorted(x for x in row if x >= 0) for row in c.reshape(-1, c.shape[-1]).tolist()]
               for c in (cache, fifo_cache)]  # fmt: skip
    assert as_sets[0] == as_sets[1]


CONFIGS = [
    {"update": u, "budget": bud, "sinks": s, "window": w, "routing": r, "conv": True}
    for u in UPDATES
    for (bud, s, w) in ((0, 0, 0), (7, 2, 2), (5, 0, 5))
    for r in ("recency", "score", "self_recall")
    if not (u == "none" and bud == 0) and not (bud == 0 and r != "recency")
] + [
    {"update": "diag_gated", "feature_map": "liger", "normalize": False, "gate_source": "key",
     "budget": 4, "window": 4, "state_covers": "all", "combine": "half"},
]  # fmt: skip


@pytest.mark.parametrize("kwargs", CONFIGS, ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_decoding_step_by_step_gives_the_parallel_outputs(kwargs: dict) -> None:
    """The recurrent form (``step``: one token at a time, a fixed-size state) equals the parallel
    form (chunked state, banded / routed exact cache) to float64 round-off."""
    q, k, v = _qkv(7)
    m = _perturbed(LinearizeConfig(**kwargs, chunk_size=5))
    torch.testing.assert_close(m.decode(q, k, v), m(q, k, v), atol=1e-10, rtol=0)


def test_the_decoding_state_does_not_grow_with_the_sequence() -> None:
    cfg = LinearizeConfig(update="gated_delta", conv=True, budget=7, sinks=2, window=2)
    m = _perturbed(cfg)
    q, k, v = _qkv(8)
    st = m.init_decode(B, dtype=torch.float64)
    sizes = []
    for t in range(N):
        _, st = m.step(q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], st)
        sizes.append(st.numel())
    assert len(set(sizes)) == 1
    assert st.t == N
    # state (dv x df) + per slot (k, v, fk, vs, score, tok, log_a, beta) + conv history: no n
    assert sizes[0] == m.init_decode(B).numel()
    with pytest.raises(ValueError, match="one token"):
        m.step(q[:, :, :2], k[:, :, :2], v[:, :, :2], st)
    with pytest.raises(ValueError, match="batch"):
        m.init_decode(0)


def test_zero_state_leaves_only_the_exact_cache() -> None:
    q, k, v = _qkv(5)
    cache_only = LinearizedAttention(
        LinearizeConfig(update="none", budget=6, sinks=2, window=4), D, H
    ).double()
    hybrid = _perturbed(
        LinearizeConfig(update="linear", feature_map="elu1", budget=6, sinks=2, window=4)
    )
    with zero_state():
        torch.testing.assert_close(hybrid(q, k, v), cache_only(q, k, v), atol=1e-12, rtol=0)
    assert (hybrid(q, k, v) - cache_only(q, k, v)).abs().max() > 1e-3


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"update": "mamba"}, "update must be one of"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"budget": -1}, "budget must be an int >= 0"),
        ({"budget": 2, "sinks": 3}, r"sinks \(3\) > budget \(2\)"),
        ({"budget": 4, "sinks": 2, "window": 3}, "exceed the budget"),
        ({"update": "none"}, "needs budget > 0"),
        ({"update": "delta", "normalize": True}, "cannot be normalised"),
        ({"update": "linear", "feature_map": "l2"}, "positive feature map"),
        ({"routing": "lru"}, "routing must be one of"),
    ],
)
def test_bad_configs_are_named(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LinearizeConfig(**kwargs)


def test_bad_inputs_are_named() -> None:
    q, k, v = _qkv()
    m = LinearizedAttention(LinearizeConfig(), D, H).double()
    with pytest.raises(ValueError, match="head-dim mismatch"):
        m(q[..., :4], k[..., :4], v)
    with pytest.raises(ValueError, match="use_cache=False"):
        m(q[:, :, -1:], k, v)
    with pytest.raises(ValueError, match="causal only"):
        m(q, k, v, causal=False)


def test_scale_state_placebo_and_bounds() -> None:
    """The state claim's placebo: the read-out scaled by 0.999 moves a hybrid's output by about
    0.1% of the state's share; zeroing is the factor 0; factors outside [0, 1] are refused."""
    from linearize.student import scale_state

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 12, 8, generator=g, dtype=torch.float64) for _ in range(3))
    m = LinearizedAttention(LinearizeConfig(update="delta", budget=4, sinks=1, window=1), 8, 2)
    m = m.double()
    ref = m(q, k, v)
    with scale_state(0.999):
        near = m(q, k, v)
    with zero_state():
        zeroed = m(q, k, v)
    with scale_state(0.0):
        torch.testing.assert_close(m(q, k, v), zeroed, atol=0, rtol=0)
    moved = (near - ref).abs().max()
    assert 0 < moved <= 2e-3 * (zeroed - ref).abs().max()
    with pytest.raises(ValueError, match="factor"):
        scale_state(1.5).__enter__()


def test_control_seed_draws_another_direction() -> None:
    cfg = LinearizeConfig(update="control")
    a = LinearizedAttention(cfg, 8, 2).direction
    b = LinearizedAttention(replace(cfg, control_seed=1), 8, 2).direction
    assert not torch.equal(a, b)
    with pytest.raises(ValueError, match="control_seed"):
        LinearizeConfig(update="control", control_seed=-1)


@pytest.mark.parametrize(
    "cfg",
    [
        LinearizeConfig(update="gated_delta", feature_map="learned", conv=True, budget=16, sinks=2,
                        window=14),
        LinearizeConfig(update="gated_delta", feature_map="learned", budget=16, sinks=2, window=6),
        LinearizeConfig(update="linear", feature_map="hedgehog", budget=16, sinks=2, window=6,
                        routing="self_recall"),
    ],
    ids=["fifo", "score_routed", "self_recall"],
)  # fmt: skip
def test_forward_flops_grow_linearly_with_length(cfg: LinearizeConfig) -> None:
    """Counted (not timed) forward FLOPs of a hybrid grow by less than 2.2x per doubling of the
    length: linear in n (a quadratic part would give ~4x)."""
    from torch.utils.flop_counter import FlopCounterMode

    m = LinearizedAttention(cfg, 16, 2)
    flops = []
    for n in (256, 512, 1024):
        g = torch.Generator().manual_seed(n)
        q, k, v = (torch.randn(1, 2, n, 16, generator=g) for _ in range(3))
        with FlopCounterMode(display=False) as fc, torch.no_grad():
            m(q, k, v)
        flops.append(fc.get_total_flops())
    assert flops[0] > 0
    assert flops[1] / flops[0] < 2.2
    assert flops[2] / flops[1] < 2.2
