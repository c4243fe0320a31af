"""Conversion of a frozen softmax model: swap in students, attention transfer, optional end-to-end KL.

Strict frozen regime: the backbone (embeddings, q/k/v/o projections, MLPs, norms) never trains; only
the students' own parameters (feature maps, gates, betas, convolutions, mixes) do. The teacher's
per-layer queries, keys, values and softmax outputs are recorded once by
:func:`paper_common.attention.capture_attention` (:func:`capture`); each layer's student is then
trained beside the teacher on those same inputs (:func:`transfer`, layerwise attention-output
MSE), so every variant sees the same tokens and the same number of steps. :func:`finetune_kl`
(optional) trains the students end to end on ``KL(teacher || student)`` over next-token
distributions; ``lora_rank > 0`` adds peft LoRA adapters on the attention projections, the ablation
that breaks the frozen regime.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from linearize.student import LinearizeConfig, LinearizedAttention
from paper_common.attention import capture_attention, swap_attention, swapped_modules

__all__ = [
    "STUDENT_ATTR",
    "Captured",
    "TransferConfig",
    "capture",
    "decode_logits",
    "finetune_kl",
    "layer_errors",
    "linearize",
    "lm_logits",
    "mask_positions",
    "recurrent",
    "students",
    "transfer",
    "transfer_diverged",
]

STUDENT_ATTR = "linear_attn"
log = logging.getLogger(__name__)


def linearize(
    model: PreTrainedModel, config: LinearizeConfig, copy_model: bool = True
) -> PreTrainedModel:
    """``model`` (a copy unless ``copy_model=False``) with every attention layer replaced by a
    :class:`LinearizedAttention` of ``config``; the backbone's parameters are frozen."""
    if not isinstance(config, LinearizeConfig):
        raise TypeError(f"config must be a LinearizeConfig; got {type(config).__name__}")
    student = copy.deepcopy(model) if copy_model else model
    cfg = student.config
    heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_head", None)
    for p in student.parameters():
        p.requires_grad_(False)

    def build(_: int, attn: nn.Module) -> LinearizedAttention:
        head_dim = getattr(attn, "head_dim", None) or cfg.hidden_size // heads
        return LinearizedAttention(config, head_dim, heads)

    swap_attention(student, build, attr=STUDENT_ATTR)
    return student.eval()


def students(model: nn.Module) -> list[LinearizedAttention]:
    """The student attention of every layer of a model returned by :func:`linearize`."""
    return swapped_modules(model)  # type: ignore[return-value]


@dataclass
class Captured:
    """Teacher activations per batch and layer: ``q, k, v, out`` ``(batch, heads, n, d)`` on CPU,
    ``mask`` ``(batch, n)`` of real tokens, ``scale``."""

    batches: list[list[dict[str, Any]]]
    masks: list[torch.Tensor]

    @property
    def n_layers(self) -> int:
        return len(self.batches[0])

    @property
    def tokens(self) -> int:
        return int(sum(int(m.sum()) for m in self.masks))


def mask_positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position of each token among its row's real tokens, ``(batch, n)``: 0 at the first real
    token whatever the padding side (pads get the nearest real position; they are masked).
    Hugging Face numbers positions ``0..n-1`` whatever the mask, so without these a left-padded
    row's real tokens would take RoPE positions shifted by the padding."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def lm_logits(
    model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, **kwargs: Any
) -> torch.Tensor:
    """``model``'s logits on a padded batch, with :func:`mask_positions` as ``position_ids`` (so
    left and right padding give the same logits at the real tokens)."""
    return model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=mask_positions(attention_mask),
        **kwargs,
    ).logits


def _encode(
    tok: PreTrainedTokenizerBase, texts: Sequence[str], device: torch.device
) -> dict[str, torch.Tensor]:
    enc = tok(list(texts), return_tensors="pt", padding=True)
    mask = enc["attention_mask"].to(device)
    return {
        "input_ids": enc["input_ids"].to(device),
        "attention_mask": mask,
        "position_ids": mask_positions(mask),
    }


@torch.no_grad()
def capture(
    teacher: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    texts: Sequence[str],
    batch_size: int = 16,
) -> Captured:
    """Record the teacher's attention inputs and outputs on ``texts``, padded on the tokenizer's
    side; each layer call keeps its ``key_mask`` (real tokens), which :func:`transfer` and
    :func:`layer_errors` pass to the students."""
    texts = list(texts)
    if not texts:
        raise ValueError("capture needs at least one text")
    device = next(teacher.parameters()).device
    batches, masks = [], []
    for s in range(0, len(texts), batch_size):
        enc = _encode(tok, texts[s : s + batch_size], device)
        with capture_attention(teacher) as rec:
            teacher(**enc)
        batches.append(
            [
                {key: (val.cpu() if torch.is_tensor(val) else val) for key, val in r.items()}
                for r in rec
            ]
        )
        masks.append(enc["attention_mask"].bool().cpu())
    return Captured(batches, masks)


@dataclass(frozen=True)
class TransferConfig:
    """Budget of attention transfer: ``steps`` Adam steps, each on one captured batch (cycled in a
    seeded order), learning rate ``lr``."""

    steps: int = 200
    lr: float = 3e-3
    seed: int = 0
    progress: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.steps, int) or self.steps < 0:
            raise ValueError(f"steps must be an int >= 0; got {self.steps!r}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0; got {self.lr}")


def _student_out(m: nn.Module, r: dict[str, Any], device: torch.device) -> torch.Tensor:
    """The student's output on one captured layer call, with the call's padding mask (the
    teacher's ``key_mask``: without it a left-padded row would attend to its padding)."""
    mask = r.get("key_mask")
    return m(
        r["q"].to(device),
        r["k"].to(device),
        r["v"].to(device),
        True,
        key_mask=None if mask is None else mask.to(device),
        scale=r["scale"],
    )


def _sq_errors(
    pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per head over real positions: ``sum |pred - out|^2`` and ``sum |out|^2``, ``(heads,)`` each."""
    w = mask[:, None, :, None]
    zero = pred.new_zeros(())
    # where, not a product: an output at a padding position may be anything, NaN included
    err = torch.where(w, (pred - target) ** 2, zero)
    return err.sum((0, 2, 3)), torch.where(w, target**2, zero).sum((0, 2, 3))


def _rel_mse(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Relative MSE per head over real positions: ``sum |pred - out|^2 / sum |out|^2``, ``(heads,)``."""
    err, ref = _sq_errors(pred, target, mask)
    return err / ref.clamp_min(1e-12)


def transfer(
    model: PreTrainedModel, captured: Captured, config: TransferConfig = TransferConfig()
) -> list[float]:
    """Train the students of ``model`` (returned by :func:`linearize`) to reproduce the teacher's
    attention outputs, layer by layer; returns the mean relative MSE per step. The backbone is not
    touched (its parameters are frozen and not given to the optimiser).

    A step whose loss or gradient is non-finite stops the transfer before the update (the students
    keep their last finite weights, a warning is logged) and is returned as a NaN loss: a run that
    diverged is flagged by ``not math.isfinite(losses[-1])``, never trained on NaN."""
    mods = students(model)
    if len(mods) != captured.n_layers:
        raise ValueError(f"{len(mods)} students for activations of {captured.n_layers} layers")
    params = [p for m in mods for p in m.parameters()]
    losses: list[float] = []
    if not params or config.steps == 0:
        return losses
    device = params[0].device
    torch.manual_seed(config.seed)
    order = np.random.default_rng(config.seed).permutation(
        np.resize(np.arange(len(captured.batches)), config.steps)
    )
    opt = torch.optim.Adam(params, lr=config.lr)
    from tqdm.auto import tqdm

    show = sys.stderr.isatty() if config.progress is None else config.progress
    for m in mods:
        m.train()
    for i in tqdm(order, desc="transfer", disable=not show, leave=False):
        mask = captured.masks[i].to(device)
        loss = torch.stack(
            [
                _rel_mse(
                    _student_out(m, r, device),
                    r["out"].to(device),
                    mask,
                ).mean()
                for m, r in zip(mods, captured.batches[i], strict=True)
            ]
        ).mean()
        opt.zero_grad(set_to_none=True)
        bad = None if torch.isfinite(loss) else "loss"
        if bad is None:
            loss.backward()
            if not torch.isfinite(torch.nn.utils.clip_grad_norm_(params, 1.0)):
                bad = "gradient"
        if bad is not None:
            log.warning(
                "transfer stopped at step %d of %d: non-finite %s",
                len(losses) + 1,
                config.steps,
                bad,
            )
            losses.append(math.nan)
            break
        opt.step()
        losses.append(float(loss.detach()))
    for m in mods:
        m.eval()
    return losses


def transfer_diverged(losses: Sequence[float]) -> bool:
    """Whether a :func:`transfer` stopped on a non-finite loss or gradient (its last loss is NaN)."""
    return bool(losses) and not math.isfinite(losses[-1])


@torch.no_grad()
def layer_errors(model: PreTrainedModel, captured: Captured) -> np.ndarray:
    """``(layers, heads)`` relative attention-output MSE of the students on captured activations
    (each layer fed the teacher's own inputs), pooled over every batch."""
    mods = students(model)
    device = next(model.parameters()).device
    err = np.zeros((len(mods), mods[0].n_heads))
    ref = np.zeros_like(err)
    for batch, mask in zip(captured.batches, captured.masks, strict=True):
        for li, (m, r) in enumerate(zip(mods, batch, strict=True)):
            out = r["out"].to(device)
            pred = _student_out(m, r, device)
            e, o = _sq_errors(pred, out, mask.to(device))
            err[li] += e.cpu().numpy()
            ref[li] += o.cpu().numpy()
    return err / np.maximum(ref, 1e-12)


def finetune_kl(
    student: PreTrainedModel,
    teacher: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    texts: Sequence[str],
    steps: int = 100,
    lr: float = 1e-3,
    batch_size: int = 16,
    seed: int = 0,
    lora_rank: int = 0,
) -> tuple[PreTrainedModel, list[float]]:
    """End-to-end ``KL(teacher || student)`` on next-token distributions over ``texts``, training the
    students only; ``lora_rank > 0`` also trains peft LoRA adapters on q/k/v/o (the ablation that
    leaves the frozen regime). Returns the (possibly peft-wrapped) student and the losses."""
    texts = list(texts)
    if not texts:
        raise ValueError("finetune_kl needs training texts")
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an int >= 0; got {steps!r}")
    if lora_rank:
        from peft import LoraConfig, get_peft_model

        names = {n.rsplit(".", 1)[-1] for n, _ in student.named_modules()}
        targets = [
            t for t in ("q_proj", "k_proj", "v_proj", "o_proj", "c_attn", "c_proj") if t in names
        ]
        student = get_peft_model(
            student, LoraConfig(r=lora_rank, lora_alpha=2 * lora_rank, target_modules=targets)
        )
    params = [p for m in students(student) for p in m.parameters()]
    if lora_rank:
        params += [p for n, p in student.named_parameters() if "lora_" in n]
    for p in params:
        p.requires_grad_(True)
    device = next(teacher.parameters()).device
    gen = np.random.default_rng(seed)
    opt = torch.optim.Adam(params, lr=lr)
    teacher.eval()
    losses = []
    student.train()
    for _ in range(steps):
        enc = _encode(tok, [texts[i] for i in gen.integers(0, len(texts), batch_size)], device)
        with torch.no_grad():
            t_logp = F.log_softmax(teacher(**enc).logits.float(), -1)
        s_logp = F.log_softmax(student(**enc, use_cache=False).logits.float(), -1)
        kl = (t_logp.exp() * (t_logp - s_logp)).sum(-1)
        mask = enc["attention_mask"].float()
        loss = (kl * mask).sum() / mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(float(loss.detach()))
    student.eval()
    return student, losses


@contextlib.contextmanager
def recurrent(model: nn.Module, batch: int) -> Iterator[None]:
    """Within this block every student of ``model`` decodes: each call takes one token and
    updates its :class:`~linearize.student.DecodeState` (the recurrent state, the exact cache of
    ``budget`` slots, the convolution's last inputs), a size fixed by the config whatever the
    number of tokens. Call the model with ``use_cache=False`` and explicit ``position_ids``
    (:func:`decode_logits` does)."""
    mods = students(model)
    param = next(model.parameters())
    for m in mods:
        m.decoding = m.init_decode(batch, param.device, param.dtype)
    try:
        yield
    finally:
        for m in mods:
            m.decoding = None


@torch.no_grad()
def decode_logits(model: PreTrainedModel, input_ids: torch.Tensor) -> torch.Tensor:
    """``(batch, n, vocab)`` logits of a linearized ``model`` on unpadded ``input_ids (batch,
    n)``, one token at a time in the recurrent form (no KV cache: memory constant in ``n``);
    equal to ``model(input_ids).logits`` to round-off."""
    if input_ids.ndim != 2 or input_ids.shape[1] < 1:
        raise ValueError(f"input_ids must be (batch, n >= 1); got {tuple(input_ids.shape)}")
    b, n = input_ids.shape
    out = []
    with recurrent(model, b):
        for t in range(n):
            pos = torch.full((b, 1), t, dtype=torch.long, device=input_ids.device)
            out.append(
                model(input_ids=input_ids[:, t : t + 1], position_ids=pos, use_cache=False).logits
            )
    return torch.cat(out, 1)
