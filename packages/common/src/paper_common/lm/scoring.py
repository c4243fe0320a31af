"""Batched scoring of any causal LM: next-token log-probs, ranks, sequence log-probs, greedy answers, sampling."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from paper_common.lm.anatomy import (
    _batches,
    _check_pair,
    _check_prompts,
    _device,
    _eval,
    _prompt_ids,
    right_padded,
)
from paper_common.lm.train import pad_id

log = logging.getLogger("paper_common.lm")


# ============================================================================ scoring
def next_token_logprobs(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    batch_size: int = 64,
) -> torch.Tensor:
    """Log-probabilities of the next token after each prompt: ``(n_prompts, vocab)``, float32, on CPU."""
    prompts = _check_prompts(prompts)
    device, pad = _device(model), pad_id(tok)
    seqs = _prompt_ids(tok, prompts)
    out = []
    with _eval(model):
        for sl in _batches(len(seqs), batch_size):
            ids, mask, lengths = right_padded(seqs[sl], pad, device)
            logits = model(input_ids=ids, attention_mask=mask).logits
            last = logits[torch.arange(len(lengths), device=device), lengths - 1]
            out.append(torch.log_softmax(last.float(), dim=-1).cpu())
    return torch.cat(out)


def token_rank(logprobs: torch.Tensor | np.ndarray, token_ids: Any) -> torch.Tensor | np.ndarray:
    """Rank of ``token_ids[i]`` in row ``i`` of ``logprobs`` (``(n, vocab)``): 1 = the top token.

    Ties count in the token's favour (rank = 1 + number of strictly higher tokens). A NaN score
    ranks below everything: a token whose own score is NaN gets the last rank, and a NaN elsewhere
    in the row counts as higher (a diverged model never ranks an answer first). Returns the same
    array type as ``logprobs``.
    """
    is_numpy = isinstance(logprobs, np.ndarray)
    lp = torch.as_tensor(logprobs)
    ids = torch.as_tensor(np.asarray(token_ids) if not torch.is_tensor(token_ids) else token_ids)
    if lp.ndim != 2:
        raise ValueError(f"logprobs must be (n, vocab); got shape {tuple(lp.shape)}")
    ids = ids.reshape(-1).long().to(lp.device)
    if ids.numel() != lp.shape[0]:
        raise ValueError(f"need one token id per row: {lp.shape[0]} rows, {ids.numel()} ids")
    if ids.numel() and (ids.min() < 0 or ids.max() >= lp.shape[1]):
        raise ValueError(f"token ids must be in [0, {lp.shape[1]})")
    target = lp.gather(1, ids[:, None])
    higher = (lp > target) | lp.isnan() | target.isnan()
    higher.scatter_(1, ids[:, None], False)  # the token itself
    ranks = 1 + higher.sum(1)
    return ranks.numpy() if is_numpy else ranks


def sequence_logprob(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    continuations: Sequence[str],
    batch_size: int = 64,
    reduction: Literal["sum", "mean", "none"] = "sum",
) -> torch.Tensor | list[torch.Tensor]:
    """Log-probability of each continuation given its prompt, summed (or averaged) over its tokens.

    ``reduction="none"`` returns a list of per-token log-prob tensors. Continuations are used as
    given (include the leading space a BPE tokenizer needs, e.g. ``" Paris"``).
    """
    prompts = _check_prompts(prompts)
    continuations = _check_prompts(continuations, "continuations")
    _check_pair(prompts, continuations, "prompts", "continuations")
    if reduction not in ("sum", "mean", "none"):
        raise ValueError(f"reduction must be 'sum', 'mean' or 'none'; got {reduction!r}")
    device, pad = _device(model), pad_id(tok)
    p_ids = _prompt_ids(tok, prompts)
    c_ids = tok(continuations, add_special_tokens=False)["input_ids"]
    if any(len(c) == 0 for c in c_ids):
        raise ValueError("a continuation encodes to zero tokens")
    seqs = [p + c for p, c in zip(p_ids, c_ids, strict=True)]
    per_token: list[torch.Tensor] = []
    with _eval(model):
        for sl in _batches(len(seqs), batch_size):
            ids, mask, _ = right_padded(seqs[sl], pad, device)
            logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), -1)
            tok_lp = logp[:, :-1].gather(-1, ids[:, 1:, None])[..., 0].cpu()
            for j, (p, c) in enumerate(zip(p_ids[sl], c_ids[sl], strict=True)):
                per_token.append(tok_lp[j, len(p) - 1 : len(p) - 1 + len(c)])
    if reduction == "none":
        return per_token
    stat = torch.stack([t.sum() if reduction == "sum" else t.mean() for t in per_token])
    return stat


@dataclass
class AnswerRanks:
    """Ranks of each true answer: of its first token in the vocabulary (1 = top) and, when
    candidates were given, of its whole-sequence log-prob among them (1 = most likely)."""

    first_token_rank: np.ndarray
    first_token_id: np.ndarray
    answer_logprob: np.ndarray
    sequence_rank: np.ndarray | None = None
    candidate_logprobs: list[np.ndarray] | None = field(default=None, repr=False)


def _with_space(text: str) -> str:
    return text if text[:1].isspace() else " " + text


def answer_rank(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    answers: Sequence[str],
    candidates: Sequence[str] | Sequence[Sequence[str]] | None = None,
    prefix_space: bool = True,
    batch_size: int = 64,
) -> AnswerRanks:
    """Where each (possibly multi-token) answer ranks after its prompt.

    ``candidates``: one list shared by all prompts or one list per prompt; the answer is added if
    missing. With ``prefix_space`` a leading space is added to answers and candidates that lack
    one (answers follow ``"A:"``).
    """
    prompts = _check_prompts(prompts)
    answers = _check_prompts(answers, "answers")
    _check_pair(prompts, answers, "prompts", "answers")
    fix = _with_space if prefix_space else (lambda s: s)
    answers = [fix(a) for a in answers]
    first = [ids[0] for ids in tok(answers, add_special_tokens=False)["input_ids"]]
    lp = next_token_logprobs(model, tok, prompts, batch_size)
    ranks = token_rank(lp, torch.tensor(first))
    ans_lp = sequence_logprob(model, tok, prompts, answers, batch_size)
    result = AnswerRanks(ranks.numpy(), np.asarray(first), ans_lp.numpy())
    if candidates is None:
        return result
    cands = list(candidates)
    if cands and isinstance(cands[0], str):
        per_prompt = [list(cands)] * len(prompts)
    else:
        per_prompt = [list(c) for c in cands]
        _check_pair(prompts, per_prompt, "prompts", "candidates")
    flat_p, flat_c, owner = [], [], []
    for i, (prompt, answer, cs) in enumerate(zip(prompts, answers, per_prompt, strict=True)):
        cs = [fix(c) for c in cs]
        for c in dict.fromkeys([answer, *cs]):
            if c == answer:
                continue
            flat_p.append(prompt)
            flat_c.append(c)
            owner.append(i)
    owner_arr = np.asarray(owner, dtype=int)
    cand_lp = (
        sequence_logprob(model, tok, flat_p, flat_c, batch_size).numpy() if flat_p else np.zeros(0)
    )
    own = result.answer_logprob[owner_arr]
    beats = (cand_lp > own) | np.isnan(cand_lp) | np.isnan(own)  # NaN never ranks the answer up
    higher = np.bincount(owner_arr, weights=beats, minlength=len(prompts))
    result.sequence_rank = 1 + higher.astype(int)
    result.candidate_logprobs = [cand_lp[owner_arr == i] for i in range(len(prompts))]
    return result


def _generate(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: list[str],
    **kwargs: Any,
) -> tuple[Any, int]:
    """``model.generate`` on left-padded prompts; returns the output and the prompt width."""
    device, pad = _device(model), pad_id(tok)
    seqs = _prompt_ids(tok, prompts)
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, width - len(s) :] = torch.tensor(s)
        mask[i, width - len(s) :] = 1
    with _eval(model):
        out = model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            pad_token_id=pad,
            eos_token_id=tok.eos_token_id,
            **kwargs,
        )
    return out, width


def _cut_at_eos(ids: torch.Tensor, eos: int | None) -> torch.Tensor:
    if eos is None:
        return ids
    hits = (ids == eos).nonzero()
    return ids[: int(hits[0]) + 1] if len(hits) else ids


def greedy_answer(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    max_new_tokens: int = 8,
    batch_size: int = 64,
) -> list[str]:
    """Greedy continuation of each prompt, decoded without special tokens and stripped (continuation only).

    Generation stops at the eos token or after ``max_new_tokens``.
    """
    prompts = _check_prompts(prompts)
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1; got {max_new_tokens}")
    texts = []
    for sl in _batches(len(prompts), batch_size):
        out, width = _generate(
            model, tok, prompts[sl], max_new_tokens=max_new_tokens, do_sample=False
        )
        for row in out[:, width:].cpu():
            texts.append(
                tok.decode(_cut_at_eos(row, tok.eos_token_id), skip_special_tokens=True).strip()
            )
    return texts


@dataclass
class SampleOutput:
    """``n`` samples per prompt: ``texts[i][j]``, their new ``token_ids[i][j]`` (up to and including
    eos) and the per-token ``logprobs[i][j]`` under the sampling distribution (after temperature)."""

    texts: list[list[str]]
    token_ids: list[list[torch.Tensor]]
    logprobs: list[list[torch.Tensor]]


def sample(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    n: int = 4,
    temperature: float = 1.0,
    max_new_tokens: int = 16,
    seed: int = 0,
    batch_size: int = 64,
) -> SampleOutput:
    """Sample ``n`` continuations per prompt (pure sampling: no top-k/top-p), seeded.

    Seeding uses a forked torch RNG, so the global random state is left as it was.
    """
    prompts = _check_prompts(prompts)
    if n < 1 or max_new_tokens < 1:
        raise ValueError(f"n and max_new_tokens must be >= 1; got {n}, {max_new_tokens}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 (use greedy_answer for 0); got {temperature}")
    texts: list[list[str]] = []
    token_ids: list[list[torch.Tensor]] = []
    logprobs: list[list[torch.Tensor]] = []
    device = _device(model)
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        for sl in _batches(len(prompts), max(1, batch_size // n)):
            out, width = _generate(
                model,
                tok,
                prompts[sl],
                max_new_tokens=max_new_tokens,
                do_sample=True,
                temperature=temperature,
                top_k=0,
                top_p=1.0,
                num_return_sequences=n,
                output_scores=True,
                return_dict_in_generate=True,
            )
            scores = model.compute_transition_scores(
                out.sequences, out.scores, normalize_logits=True
            )
            new = out.sequences[:, width:].cpu()
            scores = scores.cpu()
            for i in range(new.shape[0] // n):
                row_t, row_ids, row_lp = [], [], []
                for j in range(n):
                    k = i * n + j
                    ids = _cut_at_eos(new[k], tok.eos_token_id)
                    row_ids.append(ids)
                    row_lp.append(scores[k, : len(ids)].float())
                    row_t.append(tok.decode(ids, skip_special_tokens=True).strip())
                texts.append(row_t)
                token_ids.append(row_ids)
                logprobs.append(row_lp)
    return SampleOutput(texts, token_ids, logprobs)
