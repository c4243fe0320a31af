"""The attention swap/capture harness on real tiny Llama / Qwen2 (GQA) / GPT-2 models."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from paper_common.attention import (
    attention_modules,
    capture_attention,
    key_mask_from,
    repeat_kv,
    swap_attention,
    swapped_modules,
)
from paper_common.lm import build_tokenizer, tiny_causal_lm

TEXTS = ["the cat sat on the mat", "a dog ran", "the bird sang a song today"]


class Softmax(nn.Module):
    """Exact causal softmax attention through the swap interface (with a counter)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, q, k, v, causal, key_mask=None, scale=None):  # type: ignore[no-untyped-def]
        self.calls += 1
        s = q @ k.transpose(-2, -1) * (scale if scale is not None else q.shape[-1] ** -0.5)
        n = q.shape[2]
        allowed = torch.ones(n, n, dtype=torch.bool).tril()[None, None]
        if key_mask is not None:
            allowed = allowed & key_mask[:, None, None, :]
        return torch.softmax(s.masked_fill(~allowed, float("-inf")), -1) @ v


@pytest.mark.parametrize(("arch", "kv_heads"), [("llama", 2), ("qwen2", 1), ("gpt2", None)])
def test_swapping_in_exact_softmax_reproduces_the_model(arch: str, kv_heads: int | None) -> None:
    tok = build_tokenizer(TEXTS)
    model = tiny_causal_lm(tok, arch=arch, n_layers=2, d_model=32, n_heads=4, n_kv_heads=kv_heads)
    batch = tok(TEXTS, return_tensors="pt", padding=True)
    with torch.no_grad():
        ref = model(**batch).logits
        swapped = swap_attention(copy.deepcopy(model), [Softmax(), Softmax()], attr="student")
        out = swapped(**batch).logits
    valid = batch["attention_mask"].bool()
    torch.testing.assert_close(out[valid], ref[valid], atol=1e-5, rtol=1e-4)
    assert [m.calls for m in swapped_modules(swapped)] == [1, 1]
    assert all(hasattr(a, "student") for a in attention_modules(swapped))


def test_capture_records_repeated_kv_heads_and_restores_the_implementation() -> None:
    tok = build_tokenizer(TEXTS)
    model = tiny_causal_lm(tok, "llama", n_layers=3, d_model=32, n_heads=4, n_kv_heads=2)
    before = model.config._attn_implementation
    batch = tok(TEXTS[:1], return_tensors="pt")
    with torch.no_grad(), capture_attention(model) as rec:
        model(**batch)
    assert len(rec) == 3
    assert rec[0]["k"].shape == rec[0]["q"].shape  # 2 kv heads repeated to 4
    torch.testing.assert_close(
        rec[1]["out"], Softmax()(rec[1]["q"], rec[1]["k"], rec[1]["v"], True, scale=rec[1]["scale"])
    )
    assert model.config._attn_implementation == before


def test_key_mask_from_a_4d_mask() -> None:
    allowed = torch.ones(2, 1, 3, 3, dtype=torch.bool).tril()
    allowed[1, ..., 0] = False  # left padding in the second row
    assert key_mask_from(allowed, 3).tolist() == [[True, True, True], [False, True, True]]
    assert key_mask_from(torch.ones(1, 1, 2, 2, dtype=torch.bool), 2) is None
    additive = torch.zeros(1, 1, 2, 2)
    additive[..., 0] = torch.finfo(torch.float32).min
    assert key_mask_from(additive, 2).tolist() == [[False, True]]


def test_bad_input_is_named() -> None:
    tok = build_tokenizer(TEXTS)
    model = tiny_causal_lm(tok, n_layers=2, d_model=16, n_heads=2)
    with pytest.raises(ValueError, match="1 modules for a model with 2"):
        swap_attention(model, [Softmax()])
    with pytest.raises(ValueError, match="no swapped attention"):
        swapped_modules(model)
    q = torch.zeros(1, 3, 2, 4)
    with pytest.raises(ValueError, match="not a multiple"):
        repeat_kv(q, torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 4))
