"""Quality of a (linearized) model on the recall tasks and on facts.

:func:`task_scores` reads, teacher-forced, the model's argmax and log-probability at every graded
word of a :class:`~linearize.tasks.TaskSet`: accuracy (MQAR and copy: the share of graded words
right; passkey: the share of items with every digit right) and the perplexity of the graded words.
:func:`fact_accuracy` is the multiple-choice stand-in for MMLU on a ``fact_lm``: an item is right
when the true value ranks first among its candidates by sequence log-probability
(:func:`paper_common.lm.answer_rank`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from linearize.tasks import TaskSet
from paper_common.lm import answer_rank

__all__ = ["TaskScores", "fact_accuracy", "task_scores"]


@dataclass(frozen=True)
class TaskScores:
    accuracy: float
    perplexity: float
    per_item: np.ndarray


@torch.no_grad()
def task_scores(
    model: PreTrainedModel, tok: PreTrainedTokenizerBase, tasks: TaskSet, batch_size: int = 32
) -> TaskScores:
    """Accuracy and graded-word perplexity of ``model`` on ``tasks`` (see module docstring)."""
    if len(tasks) == 0:
        raise ValueError("task_scores needs at least one item")
    device = next(model.parameters()).device
    per_item, nll, count = [], 0.0, 0
    was_training = model.training
    model.eval()
    for s in range(0, len(tasks), batch_size):
        enc = tok(tasks.texts[s : s + batch_size], return_tensors="pt", padding=True)
        ids = enc["input_ids"].to(device)
        logp = F.log_softmax(
            model(
                input_ids=ids, attention_mask=enc["attention_mask"].to(device), use_cache=False
            ).logits.float(),
            -1,
        )
        for i, graded in enumerate(tasks.graded[s : s + batch_size]):
            pos = torch.as_tensor(graded, device=device)  # word g = token g + 1, read at token g
            target = ids[i, pos + 1]
            if int(enc["attention_mask"][i].sum()) <= int(pos.max()) + 1:
                raise ValueError(
                    "a graded word fell outside the tokenized text: check the tokenizer"
                )
            # a non-finite distribution answers nothing (argmax would pick NaN's index)
            right = (logp[i, pos].argmax(-1) == target) & torch.isfinite(logp[i, pos]).all(-1)
            per_item.append(
                float(right.all()) if tasks.task == "passkey" else float(right.float().mean())
            )
            nll -= float(logp[i, pos, target].sum())
            count += len(graded)
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
