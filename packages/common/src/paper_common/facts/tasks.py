"""Arithmetic tasks with exact answers (for RL with verifiable rewards)."""

from __future__ import annotations

from typing import Literal

import numpy as np

from paper_common.facts.items import VerifiableTask


def arithmetic_tasks(
    n: int,
    kind: Literal["add", "mod"] = "add",
    digits: int = 2,
    modulus: int = 7,
    seed: int = 0,
) -> list[VerifiableTask]:
    """Arithmetic prompts with exact answers, digits spaced so a word-level tokenizer sees each one.

    ``add``: ``"Q: 4 7 + 3 8 = A:"`` answer ``"8 5"``; ``mod``: ``"Q: 4 7 + 3 8 mod 7 = A:"``
    (a modulus of several digits spaced too, ``mod 1 3``, so the fixed vocabulary covers it).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1; got {n}")
    if not 1 <= digits <= 9:
        raise ValueError(f"digits must be in [1, 9]; got {digits}")
    if kind not in ("add", "mod"):
        raise ValueError(f"kind must be 'add' or 'mod'; got {kind!r}")
    if kind == "mod" and modulus < 2:
        raise ValueError(f"modulus must be >= 2; got {modulus}")
    rng = np.random.default_rng(seed)
    lo, hi = 10 ** (digits - 1) if digits > 1 else 0, 10**digits
    a, b = rng.integers(lo, hi, size=n), rng.integers(lo, hi, size=n)

    def spaced(x: int) -> str:
        return " ".join(str(int(x)))

    tasks = []
    for x, y in zip(a, b, strict=True):
        if kind == "add":
            tasks.append(VerifiableTask(f"Q: {spaced(x)} + {spaced(y)} = A:", spaced(x + y), "add"))
        else:
            prompt = f"Q: {spaced(x)} + {spaced(y)} mod {spaced(modulus)} = A:"
            tasks.append(VerifiableTask(prompt, spaced((x + y) % modulus), "mod"))
    return tasks
