"""Features and labels of drift items on any Hugging Face causal LM.

Per item: the residual stream at the last prompt token at every layer (``residual_stream``), the
model's greedy answer, whether it matches the value at query time (correct) or at the cutoff
(stale), and the entropy of its first answer token. :func:`cells` sorts items into the paper's four
cells: stable-correct, drifted-stale, drifted-current and confabulation (never shown).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from drift_probe.data import DriftItem
from paper_common.facts import normalize_answer
from paper_common.lm import greedy_answer, next_token_logprobs, residual_stream

__all__ = ["CELLS", "Features", "cells", "extract_features", "matches"]

CELLS: tuple[str, ...] = (
    "stable-correct",
    "drifted-stale",
    "drifted-current",
    "confabulation",
    "other",
)


def matches(answer: str, value: str, aliases: Sequence[str] = ()) -> bool:
    """Normalised exact match of ``answer`` with ``value`` or one of its ``aliases``."""
    return normalize_answer(answer) in {normalize_answer(v) for v in (value, *aliases)}


@dataclass
class Features:
    """What one model does on a list of items (row ``i`` is item ``i``).

    ``hidden``: ``(n, n_layers + 1, d_model)`` residual stream at the last prompt token (index 0:
    embeddings); ``answers``: greedy answers; ``correct``: answer = value at query time; ``stale``:
    answer = value at the cutoff; ``entropy``: entropy (nats) of the first answer token;
    ``top_token``: the id of the most likely first answer token.
    """

    hidden: np.ndarray
    answers: list[str]
    correct: np.ndarray
    stale: np.ndarray
    entropy: np.ndarray
    top_token: np.ndarray

    def __len__(self) -> int:
        return len(self.answers)


def _check_items(items: Sequence[DriftItem]) -> list[DriftItem]:
    items = list(items)
    if not items:
        raise ValueError("items must not be empty")
    if not all(isinstance(i, DriftItem) for i in items):
        raise TypeError("items must be DriftItem objects (see drift_probe.data.drift_items)")
    return items


def extract_features(
    model: torch.nn.Module,
    tok: object,
    items: Sequence[DriftItem],
    batch_size: int = 64,
    max_new_tokens: int = 8,
) -> Features:
    """Residual stream, greedy answer, correctness, staleness and first-token entropy of each item."""
    items = _check_items(items)
    prompts = [i.prompt for i in items]
    hidden = residual_stream(model, tok, prompts, batch_size=batch_size).numpy()
    logp = next_token_logprobs(model, tok, prompts, batch_size=batch_size)
    entropy = -(logp.exp() * logp).sum(-1).numpy()
    answers = greedy_answer(
        model, tok, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size
    )
    correct = np.array(
        [matches(a, i.value_query, i.aliases_query) for a, i in zip(answers, items, strict=True)]
    )
    stale = np.array(
        [matches(a, i.value_cutoff, i.aliases_cutoff) for a, i in zip(answers, items, strict=True)]
    )
    return Features(hidden, answers, correct, stale, entropy, logp.argmax(-1).numpy())


def cells(items: Sequence[DriftItem], features: Features) -> np.ndarray:
    """The cell of each item (see :data:`CELLS`); ``other``: a seen fact answered wrongly otherwise."""
    items = _check_items(items)
    if len(items) != len(features):
        raise ValueError(f"{len(items)} items but features of {len(features)}")
    drift = np.array([i.drift for i in items])
    shown = np.array([i.shown for i in items])
    out = np.full(len(items), "other", dtype=object)
    out[shown & ~drift & features.correct] = "stable-correct"
    out[shown & drift & features.stale] = "drifted-stale"
    out[shown & drift & features.correct] = "drifted-current"
    out[~shown] = "confabulation"
    return out
