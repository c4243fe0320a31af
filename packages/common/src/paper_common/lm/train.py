"""Training loop for causal LMs: texts (loss on every token) and prompt/answer pairs (loss on the answer)."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
import transformers
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from paper_common.lm.anatomy import _device, _encode

log = logging.getLogger("paper_common.lm")


# ============================================================================ training
@dataclass
class TrainResult:
    """Losses per step, tokens seen and wall-clock seconds of a :func:`train_causal_lm` run."""

    losses: list[float]
    tokens: int
    seconds: float

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")


def pad_id(tok: PreTrainedTokenizerBase) -> int:
    """The id to pad with: the tokenizer's pad token, else its eos token."""
    if tok.pad_token_id is not None:
        return int(tok.pad_token_id)
    if tok.eos_token_id is not None:
        return int(tok.eos_token_id)
    raise ValueError("the tokenizer has neither a pad nor an eos token; set tokenizer.pad_token")


def _encode_examples(
    tok: PreTrainedTokenizerBase,
    texts: Sequence[str],
    pairs: Sequence[tuple[str, str]],
    max_length: int,
) -> tuple[list[list[int]], list[int]]:
    """Token ids of each example (with eos) and the index where its loss starts (0: whole text)."""
    eos = [tok.eos_token_id] if tok.eos_token_id is not None else []
    seqs, starts = [], []
    for ids in _encode(tok, list(texts)) if texts else []:
        seqs.append((ids + eos)[:max_length])
        starts.append(1)
    if pairs:
        prompts = _encode(tok, [p for p, _ in pairs])
        answers = tok([a for _, a in pairs], add_special_tokens=False)["input_ids"]
        for p, a in zip(prompts, answers, strict=True):
            seqs.append((p + a + eos)[:max_length])
            starts.append(len(p))
    return seqs, starts


def train_causal_lm(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str] = (),
    pairs: Sequence[tuple[str, str]] = (),
    steps: int = 600,
    lr: float = 3e-3,
    batch_size: int = 32,
    seed: int = 0,
    warmup_fraction: float = 0.05,
    weight_decay: float = 0.01,
    max_length: int = 64,
    progress: bool | None = None,
    schedule: Literal["cosine", "constant", "linear"] = "cosine",
    callback: Callable[[int], Any] | None = None,
    callback_every: int = 0,
) -> TrainResult:
    """Train (or keep training) ``model`` on ``texts`` (loss on every token) and ``(prompt, answer)``
    ``pairs`` (loss on the answer tokens only), with AdamW and a warm-up then ``schedule``
    (``cosine`` decay, ``constant``, or ``linear`` decay to zero).

    Each step draws ``batch_size`` examples uniformly from both, seeded. An eos token ends every
    example. ``callback(step)`` is called, with the model in eval mode, after every
    ``callback_every``-th step (for evaluations during one run, e.g. once per epoch; the optimizer
    and schedule carry on across calls). Returns the per-step losses; the model is left in eval mode
    on its device.
    """
    if not texts and not pairs:
        raise ValueError("train_causal_lm needs texts or pairs")
    for name, value in [("steps", steps), ("batch_size", batch_size), ("max_length", max_length)]:
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int; got {value!r}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0; got {lr}")
    schedulers = {"cosine": "cosine", "constant": "constant_with_warmup", "linear": "linear"}
    if schedule not in schedulers:
        raise ValueError(f"schedule must be one of {', '.join(schedulers)}; got {schedule!r}")
    if callback is not None and (not isinstance(callback_every, int) or callback_every < 1):
        raise ValueError(
            f"callback_every must be a positive int with a callback; got {callback_every!r}"
        )
    device = _device(model)
    seqs, starts = _encode_examples(tokenizer, texts, pairs, max_length)
    n, width = len(seqs), max(len(s) for s in seqs)
    pad = pad_id(tokenizer)
    ids = torch.full((n, width), pad, dtype=torch.long)
    labels = torch.full((n, width), -100, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    for i, (s, start) in enumerate(zip(seqs, starts, strict=True)):
        ids[i, : len(s)] = torch.tensor(s)
        labels[i, start : len(s)] = torch.tensor(s[start:])
        mask[i, : len(s)] = 1
    lengths = mask.sum(1)
    gen = torch.Generator().manual_seed(seed)
    optim = torch.optim.AdamW(
        model.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.98)
    )
    sched = transformers.get_scheduler(
        schedulers[schedule], optim, max(1, int(warmup_fraction * steps)), steps
    )
    model.train()
    losses, tokens = [], 0
    start = time.perf_counter()
    show = sys.stderr.isatty() if progress is None else progress
    from tqdm.auto import tqdm

    with tqdm(range(steps), desc="train", disable=not show, leave=False) as bar:
        for _ in bar:
            idx = torch.randint(0, n, (batch_size,), generator=gen)
            w = int(lengths[idx].max())
            b_ids, b_mask, b_lab = (t[idx, :w].to(device) for t in (ids, mask, labels))
            out = model(input_ids=b_ids, attention_mask=b_mask, labels=b_lab)
            optim.zero_grad(set_to_none=True)
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optim.step()
            sched.step()
            losses.append(float(out.loss.detach()))
            tokens += int(b_mask.sum())
            bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
            if callback is not None and len(losses) % callback_every == 0:
                model.eval()
                callback(len(losses))
                model.train()
    model.eval()
    return TrainResult(losses, tokens, time.perf_counter() - start)
