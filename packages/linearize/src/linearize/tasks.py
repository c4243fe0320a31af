"""Recall tasks for the teachers, generated in code: multi-query associative recall (MQAR), copy and
passkey-in-filler, as word sequences with the positions that are graded.

Every word is one token of a :func:`paper_common.lm.build_tokenizer` word-level tokenizer built on
:func:`vocabulary` (the tokenizer puts ``<s>`` first, so word ``i`` is token ``i + 1``). A graded
position ``i`` means: the model, reading words ``0..i-1``, must predict word ``i``.

- **MQAR** (Arora et al. 2023, Zoology): ``pairs`` key-value pairs (keys distinct, drawn from
  ``n_keys``; values from ``n_values``), a separator, then every key again in a random order, each
  followed by its value (graded).
- **copy**: ``length`` random words, ``=``, the same words again (graded).
- **passkey**: filler sentences with ``the pass key is d d d .`` at a random depth, then
  ``what is the pass key ? d d d`` (the digits graded; an item is right when all are).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["TASKS", "TaskSet", "copy_task", "make_task", "mqar", "passkey", "vocabulary"]

TASKS = ("mqar", "copy", "passkey")
N_KEYS, N_VALUES = 64, 16
PASSKEY_MIN = 24  # 3-digit needle (7 words) + question (9 words) + some filler
FILLER = [
    "the grass is green .",
    "the sky is blue .",
    "the sun is warm .",
    "here we go again .",
    "rivers run to the sea .",
]


@dataclass
class TaskSet:
    """Word sequences and, per sequence, the word indices that are graded."""

    task: str
    words: list[list[str]]
    graded: list[np.ndarray]

    @property
    def texts(self) -> list[str]:
        return [" ".join(w) for w in self.words]

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """``(prompt, answer)`` split before the first graded word, for training with the loss on
        the answer part only (as MQAR is trained: the random context cannot be predicted)."""
        out = []
        for w, g in zip(self.words, self.graded, strict=True):
            cut = int(g[0]) - (1 if self.task == "mqar" else 0)  # MQAR: from the first query key
            out.append((" ".join(w[:cut]), " " + " ".join(w[cut:])))
        return out

    def __len__(self) -> int:
        return len(self.words)


def vocabulary() -> list[str]:
    """Texts covering every word the tasks use (for ``build_tokenizer``)."""
    keys = " ".join(f"k{i}" for i in range(N_KEYS))
    values = " ".join(f"v{i}" for i in range(N_VALUES))
    return [keys, values, " ".join(FILLER), "; = what is the pass key ? 0 1 2 3 4 5 6 7 8 9"]


def _check(n: int, size: int, name: str, low: int = 1) -> None:
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int; got {n!r}")
    if not isinstance(size, int) or size < low:
        raise ValueError(f"{name} must be an int >= {low}; got {size!r}")


def mqar(n: int, pairs: int, seed: int = 0, n_keys: int = N_KEYS) -> TaskSet:
    """``n`` MQAR sequences of ``4 * pairs + 1`` words."""
    _check(n, pairs, "pairs")
    if pairs > n_keys or n_keys > N_KEYS:
        raise ValueError(f"pairs ({pairs}) must be <= n_keys ({n_keys}) <= {N_KEYS}")
    rng = np.random.default_rng(seed)
    words, graded = [], []
    for _ in range(n):
        keys = rng.choice(n_keys, pairs, replace=False)
        vals = rng.integers(0, N_VALUES, pairs)
        context = [w for kk, vv in zip(keys, vals, strict=True) for w in (f"k{kk}", f"v{vv}")]
        order = rng.permutation(pairs)
        queries = [w for i in order for w in (f"k{keys[i]}", f"v{vals[i]}")]
        words.append([*context, ";", *queries])
        graded.append(2 * pairs + 2 + 2 * np.arange(pairs))
    return TaskSet("mqar", words, graded)


def copy_task(n: int, length: int, seed: int = 0) -> TaskSet:
    """``n`` sequences: ``length`` random words, ``=``, up to ``length // 2`` filler words (a random
    gap, so the copy cannot be done by a fixed position offset), ``=``, the same words again."""
    _check(n, length, "length")
    rng = np.random.default_rng(seed)
    filler = " ".join(FILLER).split()
    words, graded = [], []
    for _ in range(n):
        seq = [f"v{i}" for i in rng.integers(0, N_VALUES, length)]
        gap = int(rng.integers(0, length // 2 + 1))
        start = int(rng.integers(0, len(filler)))
        pad = [filler[(start + j) % len(filler)] for j in range(gap)]
        words.append([*seq, "=", *pad, "=", *seq])
        graded.append(length + gap + 2 + np.arange(length))
    return TaskSet("copy", words, graded)


def passkey(n: int, length: int, seed: int = 0, digits: int = 3) -> TaskSet:
    """``n`` sequences of about ``length`` words with a ``digits``-digit pass key at a random depth."""
    _check(n, length, "length", low=4 * digits + 12)
    rng = np.random.default_rng(seed)
    words, graded = [], []
    for _ in range(n):
        key = [str(d) for d in rng.integers(0, 10, digits)]
        needle = ["the", "pass", "key", "is", *key, "."]
        question = ["what", "is", "the", "pass", "key", "?", *key]
        filler: list[str] = []
        budget = length - len(needle) - len(question)
        while len(filler) < budget:
            filler += FILLER[rng.integers(len(FILLER))].split()
        filler = filler[:budget]
        depth = int(rng.integers(0, len(filler) + 1))
        seq = [*filler[:depth], *needle, *filler[depth:], *question]
        words.append(seq)
        graded.append(len(seq) - digits + np.arange(digits))
    return TaskSet("passkey", words, graded)


def make_task(task: str, n: int, length: int, seed: int = 0) -> TaskSet:
    """``task`` at about ``length`` words: MQAR with ``length // 4`` pairs, copy of
    ``2 * length // 5`` words, passkey with ``max(length, 24)`` words (3 digits)."""
    if task == "mqar":
        return mqar(n, max(1, length // 4), seed)
    if task == "copy":
        return copy_task(n, max(1, (2 * length) // 5), seed)
    if task == "passkey":
        return passkey(n, max(length, PASSKEY_MIN), seed)
    raise ValueError(f"task must be one of {', '.join(TASKS)}; got {task!r}")
