"""Routing a Hugging Face model through a method, capture, the distillation protocol, quality metrics."""

from __future__ import annotations

import copy

import pytest
import torch

from lara.distill import (
    DistillConfig,
    attention_error,
    attention_modules,
    capture_attention,
    distill,
    greedy_match,
    kernelize,
    perplexity,
)
from paper_common.lm import (
    build_tokenizer,
    greedy_answer,
    load_lm,
    next_token_logprobs,
    tiny_causal_lm,
    train_causal_lm,
)

PAIRS = [(f"Q: colour of {a} ? A:", f" {b}") for a, b in zip("abcdefgh", "rgbrgbry", strict=True)]
TEXTS = [p + a for p, a in PAIRS]
MARGIN = 1e-3  # nats: far above float32 rounding of a logit, far below a learned preference


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    tok = build_tokenizer(TEXTS)
    model = tiny_causal_lm(tok, n_layers=2, d_model=32, n_heads=2, seed=0)
    train_causal_lm(model, tok, TEXTS, PAIRS, steps=400, lr=5e-3, batch_size=8, progress=False)
    path = tmp_path_factory.mktemp("teacher")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return load_lm(path)  # the real loading path


def test_softmax_kernel_reproduces_the_model_exactly(teacher) -> None:
    model, tok = teacher
    batch = tok(TEXTS[:3], return_tensors="pt", padding=True)
    with torch.no_grad():
        ref = model(**batch).logits
        routed = kernelize(copy.deepcopy(model), "softmax")
        out = routed(**batch).logits
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-4)
    assert all(hasattr(m, "lara_kernel") for m in attention_modules(routed))


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gpt2"])
def test_kernelize_runs_on_each_architecture(arch: str) -> None:
    tok = build_tokenizer(TEXTS)
    model = tiny_causal_lm(tok, arch=arch, n_layers=1, d_model=16, n_heads=2)
    batch = tok(TEXTS[:2], return_tensors="pt", padding=True)
    with torch.no_grad():
        ref = model(**batch).logits
        out = kernelize(model, "lara++", init="random").eval()(**batch).logits
    assert out.shape == ref.shape
    assert torch.isfinite(out).all()
    assert not torch.allclose(out, ref)


def test_capture_records_every_layer_and_the_softmax_output(teacher) -> None:
    model, tok = teacher
    batch = tok(TEXTS[:4], return_tensors="pt", padding=True)
    with torch.no_grad(), capture_attention(model) as rec:
        model(**batch)
    assert len(rec) == 2
    r = rec[0]
    exact = (
        torch.softmax(
            (r["q"] @ r["k"].transpose(-2, -1)) * r["scale"]
            + torch.full((r["q"].shape[2],) * 2, float("-inf")).triu(1),
            -1,
        )
        @ r["v"]
    )
    valid = batch["attention_mask"].bool()[:, None, :, None].expand_as(exact)
    torch.testing.assert_close(r["out"][valid], exact[valid], atol=1e-5, rtol=1e-4)
    assert model.config._attn_implementation == "sdpa"  # restored


def test_distill_lowers_the_kl_and_leaves_the_teacher_alone(teacher) -> None:
    model, tok = teacher
    before = [p.detach().clone() for p in model.parameters()]
    res = distill(
        model, tok, "lara", TEXTS, DistillConfig(transfer_steps=10, finetune_steps=40, batch_size=8)
    )
    assert len(res.transfer_losses) == 10
    assert len(res.kl_losses) == 40
    assert sum(res.kl_losses[-5:]) < sum(res.kl_losses[:5])
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert model.config._attn_implementation == "sdpa"
    # parameter-free methods skip attention transfer
    assert (
        distill(
            model, tok, "linear", TEXTS, DistillConfig(transfer_steps=5, finetune_steps=0)
        ).transfer_losses
        == []
    )


def test_greedy_match_agrees_with_greedy_decoding(teacher) -> None:
    """greedy_match reads right-padded logits, greedy_answer decodes left-padded prompts: the two
    agree wherever the top answer token leads the runner-up by more than rounding (a near-tie may
    flip between the two paddings or between CPUs), so only such items are compared."""
    model, tok = teacher
    prompts, answers = [p for p, _ in PAIRS], [a for _, a in PAIRS]
    match = greedy_match(model, tok, prompts, answers)
    decoded = greedy_answer(model, tok, prompts, max_new_tokens=1)
    top2 = next_token_logprobs(model, tok, prompts).topk(2, dim=-1).values
    clear = (top2[:, 0] - top2[:, 1] > MARGIN).numpy()
    # measured: all 8 items lead by 4.5-5.6 nats, far above MARGIN
    assert clear.sum() >= 6
    agree = [d == a.strip() for d, a in zip(decoded, answers, strict=True)]
    assert match[clear].tolist() == [a for a, c in zip(agree, clear, strict=True) if c]
    assert match.mean() > 0.5  # the teacher learned most pairs (measured: all 8)
    with pytest.raises(ValueError, match="answers"):
        greedy_match(model, tok, prompts, answers[:2])


def test_perplexity_and_attention_error(teacher) -> None:
    model, tok = teacher
    fresh = tiny_causal_lm(tok, n_layers=2, d_model=32, n_heads=2, seed=1)
    assert perplexity(model, tok, TEXTS) < perplexity(fresh, tok, TEXTS)
    routed = kernelize(copy.deepcopy(model), "softmax")
    exact = attention_error(routed, model, tok, TEXTS)
    assert exact["output_rel_error"] < 1e-5
    assert exact["matrix_tv"] < 1e-5
    approx = attention_error(kernelize(copy.deepcopy(model), "linear"), model, tok, TEXTS)
    assert 0.0 < approx["matrix_tv"] <= 1.0
    with pytest.raises(ValueError, match="at least one"):
        perplexity(model, tok, [])


def test_distill_config_validates() -> None:
    with pytest.raises(ValueError, match="lr"):
        DistillConfig(lr=0)
    with pytest.raises(ValueError, match="batch_size"):
        DistillConfig(batch_size=0)
    with pytest.raises(ValueError, match="transfer_steps"):
        DistillConfig(transfer_steps=-1)
