"""Facts as generation / verification items, and the text formats a model is trained and asked in.

A :class:`GVItem` is one fact as the measurement sees it: a question that ends where the answer
starts, the true answer (and aliases), same-type wrong values (the *controls*), optionally the value
the fact had before an update and a control question about another subject. Items come from a
:class:`paper_common.facts.World` (:func:`world_items`) or from factgap's synthetic dataset
(:func:`gv_gap.factgap.factgap_items`), or are written by hand for any model.

Formats for models that read log-probs (the tiny models here, any base LM):

* generation: ``"Q: Where does Brae Tholen live? A:"`` and the model continues ``" Zurin."``;
* verification, both polarities (the double-critic idea of factgap, in one line):
  ``"Q: Where does Brae Tholen live? A: Zurin. Is this answer correct? A:"`` → ``" True"`` / ``" False"``
  and ``"... Is this answer incorrect? A:"`` → ``" True"`` when the value is wrong;
* the likelihood verifier reads the declarative statement the facts were learned from
  (``"Brae Tholen lives in"`` + ``" Zurin"``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from paper_common.facts import RELATIONS, Fact, World, normalize_answer

__all__ = [
    "POLARITIES",
    "GVItem",
    "format_pairs",
    "statement_texts",
    "verification_prompt",
    "verification_target",
    "vocabulary_texts",
    "world_items",
]

#: the two ways a claim is put: "is this answer correct?" (True accepts) and "... incorrect?"
#: (True rejects)
POLARITIES: tuple[str, str] = ("correct", "incorrect")


@dataclass(frozen=True)
class GVItem:
    """One fact for :func:`gv_gap.evaluate_gv`.

    Args:
        key: an identifier of the fact (kept in results).
        question: the generation prompt; the answer follows it after a space.
        answer: the value that counts as true now.
        controls: same-type wrong values (at least one; the paper and our default use two).
        aliases: other names accepted for ``answer`` by generation grading.
        claim_prefix: declarative text the value completes, for the likelihood verifier
            (``"Brae Tholen lives in"``); empty means the question is used.
        old_answer: the value before an update (updating phase): its acceptance is measured too.
        control_question: the same relation asked of another, known subject; generating ``answer``
            there is a leak.
    """

    key: str
    question: str
    answer: str
    controls: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    claim_prefix: str = ""
    old_answer: str | None = None
    control_question: str = ""

    def __post_init__(self) -> None:
        if not self.question.strip() or not self.answer.strip():
            raise ValueError(f"item {self.key!r}: question and answer must be non-empty")
        if not self.controls:
            raise ValueError(
                f"item {self.key!r} has no controls: verification needs at least one wrong value "
                "of the answer's type to reject"
            )
        taken = {normalize_answer(self.answer)}
        for c in self.controls:
            if not c.strip():
                raise ValueError(f"item {self.key!r}: empty control value")
            if normalize_answer(c) in taken:
                raise ValueError(
                    f"item {self.key!r}: control {c!r} repeats the answer or another control"
                )
            taken.add(normalize_answer(c))
        if self.old_answer is not None:
            if normalize_answer(self.old_answer) == normalize_answer(self.answer):
                raise ValueError(
                    f"item {self.key!r}: the update {self.answer!r} equals the old value; an "
                    "update must change the answer"
                )
            if normalize_answer(self.old_answer) in taken:
                raise ValueError(f"item {self.key!r}: the old value is also a control")

    @property
    def values(self) -> tuple[str, ...]:
        """The values verification asks about: the answer, the controls, then the old value."""
        old = () if self.old_answer is None else (self.old_answer,)
        return (self.answer, *self.controls, *old)

    @property
    def likelihood_prefix(self) -> str:
        return self.claim_prefix or self.question


def verification_prompt(item: GVItem, value: str, polarity: str) -> str:
    """``"<question> <value>. Is this answer correct? A:"`` (or ``incorrect``)."""
    if polarity not in POLARITIES:
        raise ValueError(f"polarity must be one of {POLARITIES}; got {polarity!r}")
    return f"{item.question} {value}. Is this answer {polarity}? A:"


def verification_target(is_true: bool, polarity: str) -> str:
    """The right reply: ``" True"`` iff the claim's truth matches the polarity's question."""
    if polarity not in POLARITIES:
        raise ValueError(f"polarity must be one of {POLARITIES}; got {polarity!r}")
    return " True" if is_true == (polarity == "correct") else " False"


def format_pairs(items: Iterable[GVItem]) -> list[tuple[str, str]]:
    """Training pairs that teach the formats on *format* facts: the QA pair and a verification pair
    for the answer and each control in both polarities (loss on the reply only)."""
    pairs: list[tuple[str, str]] = []
    for it in items:
        pairs.append((it.question, f" {it.answer}."))
        for value in (it.answer, *it.controls):
            for pol in POLARITIES:
                pairs.append(
                    (
                        verification_prompt(it, value, pol),
                        verification_target(value == it.answer, pol),
                    )
                )
    return pairs


def statement_texts(
    world: World, facts: Iterable[Fact], paraphrases: int | None = None
) -> list[str]:
    """Every paraphrase of each fact as a declarative sentence (the World's training and held-out
    templates: 6 per relation), the only form in which *target* facts are seen."""
    return [s.text for s in world.statements("all", facts=list(facts), paraphrases=paraphrases)]


def _question(fact: Fact) -> str:
    return f"Q: {RELATIONS[fact.relation].questions[0].format(s=fact.subject)} A:"


def _claim_prefix(fact: Fact) -> str:
    template = RELATIONS[fact.relation].statements[0]
    head, _, tail = template.partition("{v}")
    if tail.strip(" .") or not head:  # the value must end the sentence for a prefix to exist
        return ""
    return head.format(s=fact.subject).rstrip()


def world_items(
    world: World,
    facts: Sequence[Fact],
    n_controls: int = 2,
    seed: int = 0,
    old_facts: Sequence[Fact] | None = None,
    control_subjects: Sequence[Fact] | None = None,
) -> list[GVItem]:
    """Items for ``facts`` of ``world``: controls are ``n_controls`` other values of the same type,
    drawn with ``seed`` and never the subject, the answer or (for updates) the old value.

    ``old_facts`` (updating): the version of each fact before its update, aligned with ``facts``.
    ``control_subjects``: facts whose subjects (same relation, another subject whose value is not
    this answer) give the control questions; one is picked per item, seeded.
    """
    if n_controls < 1:
        raise ValueError(
            f"n_controls must be >= 1 (verification needs wrong values); got {n_controls}"
        )
    if old_facts is not None and len(old_facts) != len(facts):
        raise ValueError(f"old_facts ({len(old_facts)}) must align with facts ({len(facts)})")
    rng = np.random.default_rng([world.seed, seed, 7])
    by_relation: dict[str, list[Fact]] = {}
    for f in control_subjects or ():
        by_relation.setdefault(f.relation, []).append(f)
    items = []
    for i, f in enumerate(facts):
        old = None if old_facts is None else old_facts[i].value
        banned = {f.value, f.subject, old}
        pool = [v for v in world.entities[RELATIONS[f.relation].value] if v not in banned]
        if len(pool) < n_controls:
            raise ValueError(
                f"{f.relation} has {len(pool)} other values; cannot draw {n_controls} controls"
            )
        controls = tuple(str(v) for v in rng.choice(pool, size=n_controls, replace=False))
        others = [
            g
            for g in by_relation.get(f.relation, [])
            if g.subject != f.subject and g.value not in banned
        ]
        control_q = _question(others[int(rng.integers(len(others)))]) if others else ""
        items.append(
            GVItem(
                key=f"{f.subject}|{f.relation}",
                question=_question(f),
                answer=f.value,
                controls=controls,
                aliases=world.aliases(f.value),
                claim_prefix=_claim_prefix(f),
                old_answer=old,
                control_question=control_q,
            )
        )
    return items


def vocabulary_texts(*worlds: World) -> list[str]:
    """Texts covering every word the formats here can produce for ``worlds`` (for a tokenizer)."""
    texts = [f"Is this answer {p}? A: True False" for p in POLARITIES]
    for w in worlds:
        texts += w.vocabulary_texts()
    return texts
