"""Quality of a (linearized) model on the recall tasks and on facts.

:func:`task_scores` reads, teacher-forced, the model's argmax and log-probability at every token
of every graded word of a :class:`~linearize.tasks.TaskSet` (located by the tokenizer's character
offsets, so any fast tokenizer and either padding side work): accuracy (MQAR and copy: the share of
graded words right; passkey: the share of items with every digit right) and the perplexity per
graded word.
:func:`fact_accuracy` is the multiple-choice stand-in for MMLU on a ``fact_lm``: an item is right
when the true value ranks first among its candidates by sequence log-probability
(:func:`paper_common.lm.answer_rank`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from linearize.convert import lm_logits
from linearize.tasks import TaskSet
from paper_common.lm import answer_rank

__all__ = ["TaskScores", "fact_accuracy", "graded_token_positions", "task_scores"]


@dataclass(frozen=True)
class TaskScores:
    accuracy: float
    perplexity: float
    per_item: np.ndarray


def graded_token_positions(
    text: str,
    words: Sequence[str],
    graded: Sequence[int],
    offsets: Any,
    attention_mask: Any,
) -> list[list[int]]:
    """The token positions of each graded word of ``text = " ".join(words)`` in one encoded row
    (``offsets (n, 2)``: the tokenizer's character offsets, ``attention_mask (n,)``; padding on
    either side): the real tokens whose characters overlap the word. Works for any fast tokenizer,
    word-level or subword (a word split into several tokens gets them all)."""
    if text != " ".join(words):
        raise ValueError("text must be the words joined by single spaces")
    offs = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    real = np.asarray(attention_mask, dtype=bool).reshape(-1)
    if len(real) != len(offs):
        raise ValueError(f"offsets ({len(offs)}) and attention_mask ({len(real)}) disagree")
    starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]])
    spans = np.stack([starts, starts + np.array([len(w) for w in words])], 1)
    tokens = real & (offs[:, 1] > offs[:, 0])  # real, non-special tokens
    out = []
    for g in graded:
        lo, hi = spans[int(g)]
        pos = np.flatnonzero(tokens & (offs[:, 0] < hi) & (offs[:, 1] > lo))
        if len(pos) == 0:
            raise ValueError(f"graded word {int(g)} ({words[int(g)]!r}) has no token")
        if offs[pos, 0].min() < lo - 1 or offs[pos, 1].max() > hi:
            raise ValueError(
                f"graded word {int(g)} ({words[int(g)]!r}) shares a token with its neighbour: "
                "it cannot be graded on its own with this tokenizer"
            )
        if pos[0] == 0 or not real[pos[0] - 1]:
            raise ValueError(
                f"graded word {int(g)} ({words[int(g)]!r}) starts the text: nothing predicts it"
            )
        out.append(pos.tolist())
    return out


@torch.no_grad()
def task_scores(
    model: PreTrainedModel, tok: PreTrainedTokenizerBase, tasks: TaskSet, batch_size: int = 32
) -> TaskScores:
    """Accuracy and graded-word perplexity of ``model`` on ``tasks`` (see module docstring).

    Any fast tokenizer, padding on either side: each graded word is located by the tokenizer's
    character offsets (:func:`graded_token_positions`); it is right when every one of its tokens
    is the model's argmax, teacher-forced, and its log-probability is the sum over its tokens
    (the perplexity is per graded word)."""
    if len(tasks) == 0:
        raise ValueError("task_scores needs at least one item")
    if not getattr(tok, "is_fast", False):
        raise ValueError(
            "task_scores needs a fast tokenizer (character offsets locate the graded words); "
            f"got {type(tok).__name__}"
        )
    device = next(model.parameters()).device
    per_item, nll, count = [], 0.0, 0
    was_training = model.training
    model.eval()
    for s in range(0, len(tasks), batch_size):
        texts = tasks.texts[s : s + batch_size]
        enc = tok(texts, return_tensors="pt", padding=True, return_offsets_mapping=True)
        ids = enc["input_ids"].to(device)
        mask = enc["attention_mask"]
        logp = F.log_softmax(
            lm_logits(model, ids, mask.to(device), use_cache=False).float(),
            -1,
        )
        for i, (words, graded) in enumerate(
            zip(tasks.words[s : s + batch_size], tasks.graded[s : s + batch_size], strict=True)
        ):
            where = graded_token_positions(
                texts[i], words, graded, enc["offset_mapping"][i], mask[i]
            )
            right = []
            for pos in where:
                p = torch.as_tensor(pos, device=device)
                lp = logp[i, p - 1]  # token p is predicted at p - 1
                target = ids[i, p]
                # a non-finite distribution answers nothing (argmax would pick NaN's index)
                ok = (lp.argmax(-1) == target) & torch.isfinite(lp).all(-1)
                right.append(bool(ok.all()))
                nll -= float(lp.gather(-1, target[:, None]).sum())
            per_item.append(float(all(right)) if tasks.task == "passkey" else float(np.mean(right)))
            count += len(where)
    model.train(was_training)
    items = np.asarray(per_item)
    return TaskScores(float(items.mean()), float(np.exp(nll / count)), items)


def fact_accuracy(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: list[str],
    answers: list[str],
    candidates: list[list[str]],
) -> float:
    """Share of items whose answer ranks first among its ``candidates`` by sequence log-probability.

    An item whose answer or any candidate has a non-finite log-probability is wrong: a NaN compares
    as not higher than anything, so ``answer_rank`` would rank a NaN answer first (a model with NaN
    weights would score every fact right)."""
    ranks = answer_rank(model, tok, prompts, answers, candidates)
    cands = ranks.candidate_logprobs or [np.zeros(0)] * len(prompts)
    finite = np.isfinite(np.asarray(ranks.answer_logprob, dtype=float))
    finite &= np.array([bool(np.isfinite(c).all()) for c in cands], dtype=bool)
    return float(np.mean((np.asarray(ranks.sequence_rank) == 1) & finite))
