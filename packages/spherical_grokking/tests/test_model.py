import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from spherical_grokking import (
    VARIANTS,
    GrokTransformer,
    ModelConfig,
    NGPTTransformer,
    build_model,
    modular_task,
)

TASK = modular_task("+", 11)


def small(variant: str, **kw) -> ModelConfig:
    return ModelConfig.for_task(TASK, variant, d_model=16, n_heads=4, d_mlp=32, **kw)


def reference_forward(m: GrokTransformer, tokens: torch.Tensor) -> torch.Tensor:
    """The paper's model written plainly: every position through every layer, answer read last."""
    B, L = tokens.shape
    H, dh = m.config.n_heads, m.config.d_head
    h = m.norm1(m.embed(tokens) + m.pos(torch.arange(L)))
    v = m.W_V(h).view(B, L, H, dh).transpose(1, 2)
    if m.config.attention == "uniform":
        att = torch.full((B, H, L, L), 1.0 / L)
    else:
        q = m.W_Q(h).view(B, L, H, dh).transpose(1, 2)
        k = m.W_K(h).view(B, L, H, dh).transpose(1, 2)
        att = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
    h = m.norm2(h + m.W_O((att @ v).transpose(1, 2).reshape(B, L, -1)))
    h = m.norm3(h + m.mlp_out(F.relu(m.mlp_in(h))))
    return m.readout(h[:, -1])


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v != "ngpt"])
def test_answer_position_forward_equals_the_full_sequence_computation(variant):
    m = build_model(small(variant), seed=3)
    x = torch.from_numpy(TASK.inputs)
    torch.testing.assert_close(m(x), reference_forward(m, x), rtol=1e-5, atol=1e-5)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.floats(1e-3, 1e3), st.sampled_from(["sphere", "sphere+uniform"]))
def test_sphere_keeps_hidden_states_on_the_unit_sphere_and_logits_bounded(seed, scale, variant):
    m = build_model(small(variant), seed=seed)
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(scale)  # any weights, however large or small
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, TASK.vocab_size, (64, 3), generator=g)
    cache: dict[str, torch.Tensor] = {}
    logits = m(tokens, cache)
    for name in ("h1", "h2", "h3"):
        norms = cache[name].norm(dim=-1)
        torch.testing.assert_close(norms, torch.ones_like(norms), rtol=0, atol=1e-5)
    assert logits.abs().max() <= m.config.tau + 1e-5


def test_uniform_attention_is_the_mean_of_values_over_positions():
    m = build_model(small("layernorm+uniform"), seed=0)
    tokens = torch.from_numpy(TASK.inputs[:40])
    cache: dict[str, torch.Tensor] = {}
    m(tokens, cache)
    expected = m.W_O(m.W_V(cache["h1"]).mean(dim=1))  # values averaged over the 3 positions
    torch.testing.assert_close(cache["resid_pre2"] - cache["h1"][:, -1], expected)
    torch.testing.assert_close(cache["pattern"], torch.full((40, 4, 3), 1 / 3))
    assert not hasattr(m, "W_Q")
    assert not hasattr(m, "W_K")


def test_learned_attention_pattern_is_a_distribution_over_positions():
    m = build_model(small("layernorm"), seed=0)
    cache: dict[str, torch.Tensor] = {}
    m(torch.from_numpy(TASK.inputs[:10]), cache)
    torch.testing.assert_close(cache["pattern"].sum(-1), torch.ones(10, 4))


def test_cosine_head_is_tau_times_cosine_similarity():
    m = build_model(small("sphere", tau=7.0), seed=1)
    x = F.normalize(torch.randn(5, 16), dim=-1)
    cos = F.cosine_similarity(x[:, None, :], m.unembed.weight[None], dim=-1)
    torch.testing.assert_close(m.readout(x), 7.0 * cos)


def test_build_model_is_deterministic_and_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = build_model(small("sphere"), seed=5)
    after = torch.rand(1)
    assert torch.equal(before, after)
    b = build_model(small("sphere"), seed=5)
    c = build_model(small("sphere"), seed=6)
    for (name, pa), pb, _pc in zip(
        a.named_parameters(), b.parameters(), c.parameters(), strict=True
    ):
        assert torch.equal(pa, pb), name
    assert not torch.equal(a.embed.weight, c.embed.weight)


def test_variant_names_round_trip_and_the_sphere_uses_the_cosine_head():
    for name in VARIANTS:
        assert small(name).variant == name
    assert small("sphere").head == "cosine"
    assert small("layernorm", head="cosine").variant == "custom"


def test_ngpt_keeps_weights_and_states_on_the_sphere():
    m = build_model(small("ngpt"), seed=0)
    assert isinstance(m, NGPTTransformer)
    with torch.no_grad():
        m.W_Q.weight.mul_(3.0)
    m.project_weights()
    torch.testing.assert_close(m.W_Q.weight.norm(dim=1), torch.ones(16))
    torch.testing.assert_close(m.W_O.weight.norm(dim=0), torch.ones(16))
    torch.testing.assert_close(m.embed.weight.norm(dim=1), torch.ones(TASK.vocab_size))
    cache: dict[str, torch.Tensor] = {}
    m(torch.from_numpy(TASK.inputs[:20]), cache)
    for name in ("h1", "h2", "h3"):
        torch.testing.assert_close(cache[name].norm(dim=-1), torch.ones_like(cache[name][..., 0]))


def test_bad_configuration_is_refused():
    with pytest.raises(ValueError, match="variant must be one of"):
        ModelConfig.for_task(TASK, "sphere-ish")
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(12, 11, d_model=10, n_heads=4)
    with pytest.raises(ValueError, match="norm must be one of"):
        ModelConfig(12, 11, norm="batchnorm")
    with pytest.raises(ValueError, match="tau"):
        ModelConfig(12, 11, tau=0.0)
    with pytest.raises(ValueError, match="d_mlp"):
        ModelConfig(12, 11, d_mlp=0)
    with pytest.raises(TypeError, match="ModelConfig"):
        build_model({"d_model": 16})  # type: ignore[arg-type]
    m = build_model(small("layernorm"))
    with pytest.raises(ValueError, match="tokens must be"):
        m(torch.zeros(4, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="build_model"):
        GrokTransformer(small("ngpt"))
