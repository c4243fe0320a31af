"""The unified distillation protocol: swap the attention of a trained softmax transformer for a
kernelized method, distil with the same budget for every method, and measure what quality survives.

Works on any Hugging Face model whose attention goes through ``transformers``' ``AttentionInterface``
(Llama, Qwen2, Mistral, GPT-2 families). :func:`kernelize` attaches one method module per layer
(``attn.lara_kernel``, so its parameters are saved with the model) and routes attention through it;
grouped-query heads are repeated, padding keys are masked out of the kernel sums.

Protocol (:func:`distill`), as in LoLCATs-style linearisation:

1. **attention transfer**: per layer, the MSE between the method's output and the softmax output on
   the teacher's own queries, keys and values (data-dependent parameters are first fitted by
   ``calibrate``); trains only the method's parameters (methods without any skip it);
2. **end-to-end KL** on next-token distributions, ``KL(teacher || student)``, training every attention
   parameter (q/k/v/o projections and the method's parameters); MLPs and embeddings stay frozen.

Same steps, learning rate, batch size and data for every method. Quality: :func:`greedy_match`
(teacher-forced greedy exact match, equal to greedy decoding producing the answer) and
:func:`perplexity`; :func:`attention_error` measures the direct approximation error of attention
outputs and matrices on real activations.
"""

from __future__ import annotations

import copy
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from lara.attention import Attention, make_attention
from paper_common.attention import (
    attention_modules,
    capture_attention,
    swap_attention,
    swapped_modules,
)

__all__ = [
    "DistillConfig",
    "DistillResult",
    "attention_error",
    "attention_modules",
    "capture_attention",
    "distill",
    "greedy_match",
    "kernelize",
    "perplexity",
]

log = logging.getLogger(__name__)
KERNEL_ATTR = "lara_kernel"


def kernelize(
    model: PreTrainedModel, method: str | type[Attention], **method_kwargs: Any
) -> PreTrainedModel:
    """Replace the attention of every layer of ``model`` (in place) by ``method``; returns ``model``.

    ``method`` is a registered name (``"performer"``, ``"lara++"``, ...) or an :class:`Attention`
    subclass; one module per layer, built for the model's head size and number of query heads,
    attached as ``attn.lara_kernel`` on the model's device and dtype.
    """
    config = model.config
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_head", None)

    def build(_: int, attn: nn.Module) -> Attention:
        head_dim = getattr(attn, "head_dim", None) or config.hidden_size // heads
        if isinstance(method, str):
            return make_attention(method, head_dim, heads, **method_kwargs)
        return method(head_dim, heads, **method_kwargs)

    return swap_attention(model, build, attr=KERNEL_ATTR)


# ============================================================================ data
def _batch(
    tok: PreTrainedTokenizerBase, texts: Sequence[str], max_length: int, device: torch.device
) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``/``attention_mask`` with eos appended."""
    eos = [tok.eos_token_id] if tok.eos_token_id is not None else []
    seqs = [ids[: max_length - len(eos)] + eos for ids in tok(list(texts))["input_ids"]]
    width = max(len(s) for s in seqs)
    pad = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device)}


@dataclass(frozen=True)
class DistillConfig:
    """The shared budget of the protocol. Steps are optimizer steps on ``batch_size`` texts."""

    transfer_steps: int = 100
    finetune_steps: int = 200
    lr: float = 1e-3
    batch_size: int = 32
    max_length: int = 64
    seed: int = 0
    progress: bool | None = None

    def __post_init__(self) -> None:
        for name in ("transfer_steps", "finetune_steps"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"{name} must be an int >= 0; got {getattr(self, name)!r}")
        for name in ("batch_size", "max_length"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive int; got {getattr(self, name)!r}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0; got {self.lr}")


@dataclass
class DistillResult:
    """The distilled ``student``, per-step losses of both stages and wall-clock seconds."""

    student: PreTrainedModel
    method: str
    transfer_losses: list[float] = field(default_factory=list)
    kl_losses: list[float] = field(default_factory=list)
    seconds: float = 0.0


def _kernels(model: nn.Module) -> list[Attention]:
    return swapped_modules(model)  # type: ignore[return-value]


def distill(
    teacher: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    method: str | type[Attention],
    texts: Sequence[str],
    config: DistillConfig = DistillConfig(),
    **method_kwargs: Any,
) -> DistillResult:
    """Copy ``teacher``, kernelize it with ``method`` and distil it on ``texts`` (the protocol above).

    The teacher is left untouched (eval mode, softmax attention).
    """
    texts = list(texts)
    if not texts:
        raise ValueError("distill needs training texts")
    device = next(teacher.parameters()).device
    teacher.eval()
    student = kernelize(copy.deepcopy(teacher), method, **method_kwargs)
    name = method if isinstance(method, str) else method.name
    gen = np.random.default_rng(config.seed)
    torch.manual_seed(config.seed)

    def sample() -> dict[str, torch.Tensor]:
        idx = gen.integers(0, len(texts), config.batch_size)
        return _batch(tok, [texts[i] for i in idx], config.max_length, device)

    from tqdm.auto import tqdm

    show = sys.stderr.isatty() if config.progress is None else config.progress
    start = time.perf_counter()
    result = DistillResult(student, name)
    kernels = _kernels(student)
    with torch.no_grad(), capture_attention(teacher) as rec:
        teacher(**sample())
    for kern, r in zip(kernels, rec, strict=True):
        kern.calibrate(r["q"], r["k"], causal=True, key_mask=r["key_mask"])

    # stage 1: attention transfer (the method's own parameters only)
    params = [p for kern in kernels for p in kern.parameters()]
    if params and config.transfer_steps:
        opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
        for kern in kernels:
            kern.train()
        for _ in tqdm(
            range(config.transfer_steps), desc=f"{name} transfer", disable=not show, leave=False
        ):
            batch = sample()
            with torch.no_grad(), capture_attention(teacher) as rec:
                teacher(**batch)
            valid = batch["attention_mask"].bool()[:, None, :, None]
            loss = torch.stack(
                [
                    (
                        (
                            kern(
                                r["q"],
                                r["k"],
                                r["v"],
                                True,
                                key_mask=r["key_mask"],
                                scale=r["scale"],
                            )
                            - r["out"]
                        )
                        ** 2
                        * valid
                    ).sum()
                    / (valid.sum() * r["out"].shape[1] * r["out"].shape[-1])
                    for kern, r in zip(kernels, rec, strict=True)
                ]
            ).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            result.transfer_losses.append(float(loss.detach()))

    # stage 2: end-to-end KL, every attention parameter
    if config.finetune_steps:
        attn_params = {id(p): p for m in attention_modules(student) for p in m.parameters()}
        for p in student.parameters():
            p.requires_grad_(id(p) in attn_params)
        opt = torch.optim.AdamW(list(attn_params.values()), lr=config.lr, weight_decay=0.0)
        student.train()
        for _ in tqdm(
            range(config.finetune_steps), desc=f"{name} KL", disable=not show, leave=False
        ):
            batch = sample()
            with torch.no_grad():
                t_logp = F.log_softmax(teacher(**batch).logits.float(), -1)
            s_logp = F.log_softmax(student(**batch).logits.float(), -1)
            kl = (t_logp.exp() * (t_logp - s_logp)).sum(-1)
            mask = batch["attention_mask"].float()
            loss = (kl * mask).sum() / mask.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(list(attn_params.values()), 1.0)
            opt.step()
            result.kl_losses.append(float(loss.detach()))
        for p in student.parameters():
            p.requires_grad_(True)
    student.eval()
    result.seconds = time.perf_counter() - start
    return result


# ============================================================================ quality
@torch.no_grad()
def greedy_match(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    answers: Sequence[str],
    batch_size: int = 64,
) -> np.ndarray:
    """Bool per item: every answer token is the argmax given the prompt and the previous answer
    tokens (exactly when greedy decoding produces the answer). Answers are used as given (``" Paris"``)."""
    if len(prompts) != len(answers):
        raise ValueError(f"{len(prompts)} prompts but {len(answers)} answers")
    if not prompts:
        raise ValueError("greedy_match needs at least one prompt")
    device = next(model.parameters()).device
    p_ids = tok(list(prompts))["input_ids"]
    a_ids = tok(list(answers), add_special_tokens=False)["input_ids"]
    if any(len(a) == 0 for a in a_ids):
        raise ValueError("an answer encodes to zero tokens")
    out = np.zeros(len(prompts), dtype=bool)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    was_training = model.training
    model.eval()
    for s in range(0, len(prompts), batch_size):
        seqs = [
            p + a for p, a in zip(p_ids[s : s + batch_size], a_ids[s : s + batch_size], strict=True)
        ]
        width = max(len(x) for x in seqs)
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, x in enumerate(seqs):
            ids[i, : len(x)] = torch.tensor(x)
            mask[i, : len(x)] = 1
        pred = (
            model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.argmax(-1).cpu()
        )
        for i, (p, a) in enumerate(
            zip(p_ids[s : s + batch_size], a_ids[s : s + batch_size], strict=True)
        ):
            got = pred[i, len(p) - 1 : len(p) - 1 + len(a)]
            out[s + i] = bool((got == torch.tensor(a)).all())
    model.train(was_training)
    return out


@torch.no_grad()
def perplexity(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    texts: Sequence[str],
    batch_size: int = 64,
    max_length: int = 64,
) -> float:
    """``exp`` of the mean next-token negative log-likelihood over every token of ``texts`` (+ eos)."""
    if not texts:
        raise ValueError("perplexity needs at least one text")
    device = next(model.parameters()).device
    total, count = 0.0, 0
    was_training = model.training
    model.eval()
    for s in range(0, len(texts), batch_size):
        batch = _batch(tok, texts[s : s + batch_size], max_length, device)
        logp = F.log_softmax(model(**batch).logits.float(), -1)[:, :-1]
        target = batch["input_ids"][:, 1:]
        nll = -logp.gather(-1, target[..., None])[..., 0]
        mask = batch["attention_mask"][:, 1:].float()
        total += float((nll * mask).sum())
        count += int(mask.sum())
    model.train(was_training)
    return float(np.exp(total / count))


@torch.no_grad()
def attention_error(
    kernels: Sequence[Attention] | PreTrainedModel,
    teacher: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    texts: Sequence[str],
    max_length: int = 64,
) -> dict[str, float]:
    """Direct approximation error on the teacher's real activations, averaged over layers:
    ``output_rel_error`` (``|out - softmax| / |softmax|`` over real query positions) and
    ``matrix_tv`` (mean total-variation distance between the method's attention rows and softmax's,
    the method run on one-hot values so its output *is* its attention matrix)."""
    if isinstance(kernels, PreTrainedModel):
        kernels = _kernels(kernels)
    device = next(teacher.parameters()).device
    batch = _batch(tok, list(texts), max_length, device)
    with capture_attention(teacher) as rec:
        teacher(**batch)
    if len(rec) != len(kernels):
        raise ValueError(f"{len(kernels)} kernels for a teacher with {len(rec)} attention layers")
    valid = batch["attention_mask"].bool()
    out_err, tv = [], []
    for kern, r in zip(kernels, rec, strict=True):
        was_training = kern.training
        kern.eval()
        q, k, v, km, sc = r["q"], r["k"], r["v"], r["key_mask"], r["scale"]
        pred = kern(q, k, v, True, key_mask=km, scale=sc)
        sel = valid[:, None, :, None].expand_as(pred)
        out_err.append(float((pred - r["out"])[sel].norm() / r["out"][sel].norm()))
        n = k.shape[2]
        eye = torch.eye(n, dtype=q.dtype, device=q.device).expand(q.shape[0], q.shape[1], n, n)
        a_kern = kern(q, k, eye, True, key_mask=km, scale=sc)
        s = (q @ k.transpose(-2, -1)) * (sc if sc is not None else q.shape[-1] ** -0.5)
        allowed = (
            torch.ones(n, n, dtype=torch.bool, device=q.device).tril()[None, None]
            & valid[:, None, None, :]
        )
        a_soft = torch.softmax(s.masked_fill(~allowed, float("-inf")), -1)
        rows = 0.5 * (a_kern - a_soft).abs().sum(-1)  # (b, h, n)
        tv.append(float(rows[valid[:, None, :].expand_as(rows)].mean()))
        kern.train(was_training)
    return {"output_rel_error": float(np.mean(out_err)), "matrix_tv": float(np.mean(tv))}
