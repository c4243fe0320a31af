"""Verifiable tasks with many valid solutions: Countdown, and multi-digit addition.

**Countdown**: given numbers and a target, write an arithmetic expression with ``+ - * /`` and
parentheses that uses every given number exactly once and evaluates to the target. Many
expressions are valid (``2 * 3 + 4``, ``4 + 3 * 2``, ``( 3 * 2 ) + 4`` ...), so the diversity of
*valid* solutions is measurable. Expressions are written with spaces between tokens, so a word-level
tokenizer gives one token per number, operator and parenthesis. Model output is parsed by a small
recursive-descent parser over exact fractions: never ``eval``.

A task is a list of :class:`Problem` with ``prompt``, ``check(completion) -> bool`` and a few
reference ``solutions`` (for the supervised warm-up).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

_TOKEN = re.compile(r"\s*([0-9]+|[-+*/()])")  # ASCII digits only
MAX_DIGITS = 12  # a longer number is no Countdown answer (and int() refuses > 4,300 digits)
OPS = ("+", "-", "*", "/")


class ParseError(ValueError):
    """The text is not a well-formed arithmetic expression."""


def tokenize(text: str) -> list[str]:
    """Numbers, operators and parentheses of ``text``; anything else raises :class:`ParseError`."""
    text = text.strip()
    tokens, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ParseError(f"unexpected character {text[pos]!r} at {pos}")
        tokens.append(m.group(1))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    if not tokens:
        raise ParseError("empty expression")
    return tokens


def evaluate(text: str, max_tokens: int = 64) -> tuple[Fraction, list[int]]:
    """Exact value of an expression and the numbers it uses, in order.

    Grammar: ``expr = term (("+"|"-") term)*``, ``term = atom (("*"|"/") atom)*``,
    ``atom = number | "(" expr ")"``; a number is ASCII digits, at most :data:`MAX_DIGITS` of them.
    No unary minus. Division by zero, a longer number or more than ``max_tokens`` tokens raise
    :class:`ParseError`.
    """
    tokens = tokenize(text)
    if len(tokens) > max_tokens:
        raise ParseError(f"expression longer than {max_tokens} tokens")
    long = next((t for t in tokens if len(t) > MAX_DIGITS), None)
    if long is not None:
        raise ParseError(f"a number with {len(long)} digits (at most {MAX_DIGITS})")
    pos = 0
    used: list[int] = []

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        if pos >= len(tokens):
            raise ParseError("unexpected end of expression")
        pos += 1
        return tokens[pos - 1]

    def atom() -> Fraction:
        tok = take()
        if tok == "(":
            value = expr()
            if take() != ")":
                raise ParseError("missing ')'")
            return value
        if tok.isdigit():
            used.append(int(tok))
            return Fraction(int(tok))
        raise ParseError(f"unexpected token {tok!r}")

    def term() -> Fraction:
        value = atom()
        while peek() in ("*", "/"):
            op, rhs = take(), atom()
            if op == "/" and rhs == 0:
                raise ParseError("division by zero")
            value = value * rhs if op == "*" else value / rhs
        return value

    def expr() -> Fraction:
        value = term()
        while peek() in ("+", "-"):
            op, rhs = take(), term()
            value = value + rhs if op == "+" else value - rhs
        return value

    value = expr()
    if pos != len(tokens):
        raise ParseError(f"unexpected token {tokens[pos]!r} after a complete expression")
    return value, used


def normalize(text: str) -> str:
    """One canonical spelling of an expression's tokens (whitespace and leading zeros removed)."""
    try:
        return " ".join((t.lstrip("0") or "0") if t.isdigit() else t for t in tokenize(text))
    except ParseError:
        return text.strip()


@dataclass(frozen=True)
class Problem:
    """A prompt, its checker's data and reference solutions."""

    prompt: str
    numbers: tuple[int, ...]
    target: int
    solutions: tuple[str, ...] = field(default=(), compare=False)
    kind: str = "countdown"

    def check(self, completion: str) -> bool:
        """Is ``completion`` (up to its first line) a valid solution? Malformed text is invalid
        (never an exception); a completion that is not a string raises ``TypeError``."""
        if not isinstance(completion, str):
            raise TypeError(f"completion must be a str; got {type(completion).__name__}")
        text = completion.strip().split("\n")[0]
        if self.kind == "addition":
            return text.replace(" ", "") == str(self.target)
        try:
            value, used = evaluate(text)
        except ParseError:
            return False
        return value == self.target and sorted(used) == sorted(self.numbers)


def _expressions(numbers: Sequence[int]) -> dict[str, Fraction]:
    """Every fully parenthesised expression over ``numbers`` (each used once, in any order)."""
    if len(numbers) == 1:
        return {str(numbers[0]): Fraction(numbers[0])}
    out: dict[str, Fraction] = {}
    n = len(numbers)
    idx = range(n)
    for k in range(1, n):
        for left in itertools.combinations(idx, k):
            right = [i for i in idx if i not in left]
            lhs = _expressions([numbers[i] for i in left])
            rhs = _expressions([numbers[i] for i in right])
            for (a, va), (b, vb) in itertools.product(lhs.items(), rhs.items()):
                wrap = lambda s: s if s.isdigit() else f"( {s} )"  # noqa: E731
                for op in OPS:
                    if op == "/" and vb == 0:
                        continue
                    v = {"+": va + vb, "-": va - vb, "*": va * vb, "/": va / vb if vb else None}[op]
                    out.setdefault(f"{wrap(a)} {op} {wrap(b)}", v)
    return out


def solutions(numbers: Sequence[int], target: int, limit: int | None = None) -> list[str]:
    """Valid expressions (fully parenthesised, top-level parentheses dropped) reaching ``target``."""
    found = sorted({e for e, v in _expressions(list(numbers)).items() if v == target})
    return found if limit is None else found[:limit]


def countdown(
    n: int,
    n_numbers: int = 3,
    max_number: int = 9,
    max_target: int = 30,
    seed: int = 0,
    min_solutions: int = 2,
) -> list[Problem]:
    """``n`` solvable Countdown problems with at least ``min_solutions`` distinct valid expressions.

    Numbers are drawn from ``1..max_number``; the target is the value of a random expression over
    them, a positive integer up to ``max_target``. Prompt: ``"nums 3 4 2 target 14 :"``.
    """
    if n < 1 or n_numbers < 2 or max_number < 2 or max_target < 1:
        raise ValueError(
            f"need n >= 1, n_numbers >= 2, max_number >= 2, max_target >= 1; "
            f"got {n}, {n_numbers}, {max_number}, {max_target}"
        )
    rng = np.random.default_rng(seed)
    out: list[Problem] = []
    seen: set[tuple[tuple[int, ...], int]] = set()
    for _ in range(200 * n):
        if len(out) == n:
            break
        nums = tuple(int(x) for x in rng.integers(1, max_number + 1, size=n_numbers))
        values = _expressions(list(nums))
        targets = sorted(
            {int(v) for v in values.values() if v.denominator == 1 and 0 < v <= max_target}
        )
        if not targets:
            continue
        target = int(rng.choice(targets))
        if (nums, target) in seen:
            continue
        sols = [e for e, v in values.items() if v == target]
        if len(sols) < min_solutions:
            continue
        seen.add((nums, target))
        prompt = f"nums {' '.join(map(str, nums))} target {target} :"
        out.append(Problem(prompt, nums, target, tuple(sorted(sols))))
    if len(out) < n:
        raise ValueError(f"could only make {len(out)} distinct problems; widen the ranges")
    return out


def addition(n: int, digits: int = 2, seed: int = 0) -> list[Problem]:
    """Multi-digit addition from ``paper_common.facts.arithmetic_tasks`` (one valid answer each)."""
    from paper_common.facts import arithmetic_tasks

    out = []
    for t in arithmetic_tasks(n, "add", digits=digits, seed=seed):
        a, b = (int(x.replace(" ", "")) for x in t.prompt[3:-5].split(" + "))
        out.append(Problem(t.prompt, (a, b), a + b, (t.answer,), kind="addition"))
    return out
