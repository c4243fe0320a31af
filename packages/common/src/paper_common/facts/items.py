"""The items a World renders: fact versions, statements, QA / True-False / multiple-choice items, tasks."""

from __future__ import annotations

import re
import string
from dataclasses import dataclass


@dataclass(frozen=True)
class Fact:
    """One version of a fact: ``value`` held for years ``valid_from <= t < valid_to`` (None: still)."""

    subject: str
    relation: str
    value: str
    valid_from: int
    valid_to: int | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.subject, self.relation)

    def holds_at(self, t: int) -> bool:
        return self.valid_from <= t and (self.valid_to is None or t < self.valid_to)


@dataclass(frozen=True)
class Statement:
    """A sentence stating a fact; ``kind`` is statement, history or cue; ``template`` its index."""

    text: str
    fact: Fact
    kind: str = "statement"
    template: int = 0
    heldout_template: bool = False
    leads_to_change: bool | None = None  # cues only: does a change really follow next year?


@dataclass(frozen=True)
class QAItem:
    """A question as the model sees it (``"Q: ... A:"``), its short reference answer and aliases.

    ``target`` is the continuation a model is trained on: ``" " + answer``.
    """

    question: str
    answer: str
    aliases: tuple[str, ...]
    fact: Fact
    template: int = 0
    heldout_template: bool = False

    @property
    def target(self) -> str:
        return " " + self.answer


@dataclass(frozen=True)
class VerificationItem:
    """``"Claim: <statement> True or false? A:"`` with the truth ``label`` (``target`` " True"/" False")."""

    prompt: str
    label: bool
    claimed_value: str
    fact: Fact

    @property
    def target(self) -> str:
        return " True" if self.label else " False"


@dataclass(frozen=True)
class MCItem:
    """A multiple-choice question; ``options[answer_index]`` is right; ``target`` is the letter."""

    prompt: str
    options: tuple[str, ...]
    answer_index: int
    fact: Fact

    @property
    def target(self) -> str:
        return " " + "ABCDEFGH"[self.answer_index]


@dataclass(frozen=True)
class VerifiableTask:
    """A prompt with an exactly checkable answer, for RL with verifiable rewards.

    ``kind`` is ``add``, ``mod`` or ``multihop``. :meth:`is_valid` says whether a completion has the
    right form (digits for arithmetic, a known name for multi-hop), :meth:`reward` whether it is right.
    """

    prompt: str
    answer: str
    kind: str
    valid_answers: tuple[str, ...] = ()

    def parse(self, completion: str) -> str | None:
        text = completion.strip().split("\n")[0].strip().rstrip(".")
        if self.kind in ("add", "mod"):
            digits = text.replace(" ", "")
            return digits if digits.isdigit() else None
        norm = normalize_answer(text)
        valid = {normalize_answer(v) for v in self.valid_answers}
        return norm if norm in valid else None

    def is_valid(self, completion: str) -> bool:
        return self.parse(completion) is not None

    def reward(self, completion: str) -> float:
        parsed = self.parse(completion)
        if parsed is None:
            return 0.0
        if self.kind in ("add", "mod"):
            return float(parsed == self.answer.replace(" ", ""))
        return float(parsed == normalize_answer(self.answer))


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and articles, squeeze spaces: the usual QA normalisation."""
    text = text.lower().translate(str.maketrans("", "", string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def is_correct(prediction: str, item: QAItem) -> bool:
    """Exact match of the normalised prediction with the answer or one of its aliases."""
    pred = normalize_answer(prediction)
    return pred in {normalize_answer(a) for a in (item.answer, *item.aliases)}


@dataclass(frozen=True)
class JudgeItem:
    """A question with a proposed answer, judged Yes/No (``target`` " Yes" / " No")."""

    prompt: str
    label: bool
    proposed: str
    fact: Fact

    @property
    def target(self) -> str:
        return " Yes" if self.label else " No"


@dataclass(frozen=True)
class ChangeQuestion:
    """Will ``fact`` (true in ``year``) change in ``year + 1``? ``label`` is the truth; ``cued`` says
    whether a leading cue was issued in ``year``. ``target`` is " Yes" / " No"."""

    prompt: str
    label: bool
    fact: Fact
    year: int
    cued: bool

    @property
    def target(self) -> str:
        return " Yes" if self.label else " No"
