"""Training loop for causal LMs: texts (loss on every token) and prompt/answer pairs (loss on the answer)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
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
    weights: Sequence[float] | None = None,
    mixture: tuple[float, float] | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    checkpoint_every: int = 200,
    checkpoint_key: str = "",
) -> TrainResult:
    """Train (or keep training) ``model`` on ``texts`` (loss on every token) and ``(prompt, answer)``
    ``pairs`` (loss on the answer tokens only), with AdamW and a warm-up then ``schedule``
    (``cosine`` decay, ``constant``, or ``linear`` decay to zero).

    Each step draws ``batch_size`` examples, seeded: uniformly from both by default; with
    ``weights`` (one per example, texts then pairs) in proportion to them; with ``mixture=(p_texts,
    p_pairs)`` a batch slot comes from the texts with probability ``p_texts`` and from the pairs
    otherwise (within each, by ``weights`` or uniformly).

    ``checkpoint``: a file the run saves itself to every ``checkpoint_every`` steps (model,
    optimizer, schedule, sampler state, losses) and resumes from when it exists, so a run of hours
    survives being stopped; ``checkpoint_key`` (e.g. a hash of the data and config) must match the
    file's or the run refuses to resume, and so must the examples' token ids, the sampling law and
    the optimiser settings (hashed into the file). The returned losses and tokens cover the whole run. An eos token ends every
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
    draw = _sampler(len(texts), len(pairs), weights, mixture)
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
    losses, tokens, done = [], 0, 0
    if checkpoint is not None:
        if not isinstance(checkpoint_every, int) or checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be a positive int; got {checkpoint_every!r}")
        checkpoint = Path(checkpoint)
        run_id = _run_id(
            seqs,
            starts,
            draw,
            batch_size=batch_size,
            lr=lr,
            seed=seed,
            warmup_fraction=warmup_fraction,
            weight_decay=weight_decay,
            schedule=schedule,
        )
        if checkpoint.exists():
            # onto the CPU: the sampler's generator state must stay a CPU tensor; the model and
            # the optimizer copy their tensors to the parameters' device themselves
            state = torch.load(checkpoint, map_location="cpu", weights_only=False)
            if (
                state["key"] != checkpoint_key
                or state["steps"] != steps
                or state.get("run", run_id) != run_id  # files of before the run id: key only
            ):
                raise ValueError(
                    f"{checkpoint} belongs to another run (key {state['key']!r}, {state['steps']} "
                    f"steps, run {state.get('run')}; this run: {checkpoint_key!r}, {steps}, "
                    f"{run_id}: other data or settings); delete it to start over"
                )
            model.load_state_dict(state["model"])
            optim.load_state_dict(state["optim"])
            sched.load_state_dict(state["sched"])
            gen.set_state(state["generator"])
            losses, tokens, done = state["losses"], state["tokens"], state["done"]
            log.info("resumed %s at step %d of %d", checkpoint, done, steps)
    model.train()
    start = time.perf_counter()
    show = sys.stderr.isatty() if progress is None else progress
    from tqdm.auto import tqdm

    with tqdm(range(done, steps), desc="train", disable=not show, leave=False) as bar:
        for _ in bar:
            if draw is None:
                idx = torch.randint(0, n, (batch_size,), generator=gen)
            else:
                idx = torch.multinomial(draw, batch_size, replacement=True, generator=gen)
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
            if checkpoint is not None and (
                len(losses) % checkpoint_every == 0 or len(losses) == steps
            ):
                _save_checkpoint(
                    checkpoint,
                    {
                        "key": checkpoint_key,
                        "run": run_id,
                        "steps": steps,
                        "done": len(losses),
                        "model": model.state_dict(),
                        "optim": optim.state_dict(),
                        "sched": sched.state_dict(),
                        "generator": gen.get_state(),
                        "losses": losses,
                        "tokens": tokens,
                    },
                )
    model.eval()
    return TrainResult(losses, tokens, time.perf_counter() - start)


def _sampler(
    n_texts: int,
    n_pairs: int,
    weights: Sequence[float] | None,
    mixture: tuple[float, float] | None,
) -> torch.Tensor | None:
    """Sampling probabilities over the examples (texts then pairs), or None for uniform draws."""
    if weights is None and mixture is None:
        return None
    n = n_texts + n_pairs
    if weights is None:
        w = torch.ones(n, dtype=torch.float64)
    else:
        w = torch.as_tensor(np.asarray(weights, dtype=np.float64))
        if w.shape != (n,):
            raise ValueError(
                f"weights must have one entry per example ({n_texts} texts + {n_pairs} pairs = {n}); "
                f"got shape {tuple(w.shape)}"
            )
        if not bool(torch.isfinite(w).all()) or bool((w < 0).any()) or float(w.sum()) <= 0:
            raise ValueError("weights must be finite, >= 0 and not all zero")
    if mixture is not None:
        if len(mixture) != 2 or any(not (m >= 0) for m in mixture) or sum(mixture) <= 0:
            raise ValueError(f"mixture must be (p_texts, p_pairs), both >= 0; got {mixture!r}")
        p_t, p_p = (float(m) / sum(mixture) for m in mixture)
        parts = []
        for share, block, name in ((p_t, w[:n_texts], "texts"), (p_p, w[n_texts:], "pairs")):
            if share > 0 and (block.numel() == 0 or float(block.sum()) <= 0):
                raise ValueError(f"mixture gives {name} probability {share:.2f} but there are none")
            parts.append(block / block.sum() * share if share > 0 else torch.zeros_like(block))
        w = torch.cat(parts)
    return (w / w.sum()).float()


def _run_id(
    seqs: list[list[int]], starts: list[int], draw: torch.Tensor | None, **settings: Any
) -> str:
    """A hash of what a run trains on (token ids, loss starts, sampling law) and how (the
    settings): a checkpoint of another run is refused even when no ``checkpoint_key`` is given."""
    h = hashlib.sha256(json.dumps([seqs, starts, settings], sort_keys=True).encode())
    if draw is not None:
        h.update(draw.numpy().tobytes())
    return h.hexdigest()[:16]


def _save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
