"""QA items and answers whose two labels, factual correctness and reference faithfulness, are known.

Everything comes from a :class:`paper_common.facts.World`, the ground truth at query time:

- :func:`make_examples` builds the three synthetic datasets: ``onetoken`` (one-word city and
  country values, plus "Name a city in X." questions with several valid answers), ``names``
  (multi-word person and company values whose short forms are listed as aliases) and ``temporal``
  (facts that changed; for some items the reference was written before the last change).
- :func:`controlled_answers` writes answers of known type for those items (see :data:`ANSWER_TYPES`),
  each with its two labels by the rule of its type.
- :func:`parse_answer` reads a free-text answer back into World claims, and :func:`label_answer`
  labels it by the two criteria; :func:`label_answers` does it for generated answers, counting the
  ones it cannot parse instead of guessing.

**Correctness** (the target of the paper's human labels, reference-first as in Valjakka et al.):
the core answer matches the reference (or a name of the same entity) or is a vaguer true answer
(the reference city's country), and every extra claim is true at query time; a core answer that
names another entity than the reference is a hallucination even when it is true now (another valid
answer, a value newer than the reference); an abstention makes no claim and is correct, and an answer
whose claims are all about something else ("off_question") is correct iff they are true.
**Hallucinated** is its negation. **Faithfulness**: every claim is backed by the reference: the
answer gives the reference answer (or a listed alias) and every other claim restates the question
with that reference, or it abstains (no claim at all).
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from paper_common.facts import RELATIONS, World, normalize_answer

__all__ = [
    "ANSWER_TYPES",
    "CORRECT_UNSUPPORTED_TYPES",
    "DATASETS",
    "LPHB_REQUIRED",
    "TYPE_LABELS",
    "AliasBook",
    "ClaimParser",
    "LPHBData",
    "LabeledAnswer",
    "ParsedAnswer",
    "QAExample",
    "controlled_answers",
    "label_answer",
    "label_answers",
    "labeler_inputs",
    "load_labeled_answers",
    "load_lphb",
    "load_qa_dataset",
    "make_examples",
    "parse_answer",
    "save_labeled_answers",
]

ABSTAIN = "I do not know."
_ABSTAIN_FORMS = {"i do not know", "i dont know", "unknown", "i am not sure", "no idea"}
AKA_TEMPLATE = "{s} is also known as {v}."
INVERSE_QUESTIONS = {
    "located_in": "Name a city in {s}.",
    "works_for": "Name someone who works for {s}.",
    "born_in": "Name someone born in {s}.",
}
DATASETS = ("onetoken", "names", "temporal")
_DATASET_RELATIONS = {
    "onetoken": ("born_in", "lives_in", "capital_of", "located_in", "inverse:located_in"),
    "names": ("ceo_of", "works_for", "inverse:works_for", "inverse:born_in"),
    "temporal": ("lives_in", "works_for", "ceo_of", "headquartered_in"),
}

# (correct, faithful) of every answer type, by the rules in the module docstring: correctness is
# reference-first as in Valjakka et al.'s factual-correctness criterion (a core answer that
# conflicts with the reference is a hallucination even if true now, one that matches it is not);
# an abstention claims nothing the reference contradicts, so it is faithful and correct
TYPE_LABELS: dict[str, tuple[bool, bool]] = {
    "exact": (True, True),
    "unlisted_alias": (True, False),
    "verbose_correct": (True, False),
    "extra_false": (False, False),
    "wrong_value": (False, False),
    "under_specific": (True, False),
    "over_specific": (True, False),
    "other_valid": (False, False),
    "outdated_answer": (False, False),
    "outdated_reference": (False, False),
    "stale_exact": (True, True),
    "abstention": (True, True),
}
ANSWER_TYPES: tuple[str, ...] = tuple(TYPE_LABELS)
CORRECT_UNSUPPORTED_TYPES = tuple(t for t, (c, f) in TYPE_LABELS.items() if c and not f)
"""Correct answers the reference lacks: the types a strict-faithfulness labeler wrongly flags."""


@dataclass(frozen=True)
class QAExample:
    """A benchmark item: a question, its short reference answer and the aliases the benchmark lists.

    ``subject``/``relation`` point into the World (``relation`` ``"inverse:located_in"`` for
    "Name a city in X."); ``t_ref`` is the year the reference was written, ``t_query`` the year
    the question is asked (truth is judged then). Real data leave the World fields empty.
    """

    question: str
    reference: str
    aliases: tuple[str, ...] = ()
    dataset: str = ""
    subject: str = ""
    relation: str = ""
    t_ref: int | None = None
    t_query: int | None = None

    @property
    def references(self) -> tuple[str, ...]:
        return (self.reference, *self.aliases)

    @property
    def prompt(self) -> str:
        """The generator's prompt, in the World's QA format."""
        return f"Q: {self.question} A:"


@dataclass(frozen=True)
class LabeledAnswer:
    """An answer to a :class:`QAExample` with its labels.

    ``correct``/``faithful`` are the two criteria (``None`` where unknown: real data carry only the
    human correctness label), ``answer_type`` one of :data:`ANSWER_TYPES` for controlled answers or
    what the parser recognised for generated ones, ``source`` ``"controlled"`` or a generator name.
    """

    example: QAExample
    answer: str
    correct: bool | None
    faithful: bool | None
    answer_type: str = ""
    source: str = "controlled"

    @property
    def hallucinated(self) -> bool | None:
        return None if self.correct is None else not self.correct


class AliasBook:
    """One extra name per entity ("Brana Kolith is also known as Velmor."), never listed in references.

    These are the *unlisted aliases*: a correct answer the reference lacks. The World's own short
    forms (a person's surname, a company without its suffix) are the *listed* aliases.
    """

    def __init__(self, world: World) -> None:
        rng = np.random.default_rng([world.seed, 17])
        used = {w.lower() for name in world.entity_type for w in name.split()}
        onsets = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "qu", "w"]
        vowels = ["a", "e", "i", "o", "u", "ei", "au"]
        self.aka: dict[str, str] = {}
        for entity in sorted(world.entity_type):
            while True:
                syl = [str(rng.choice(onsets)) + str(rng.choice(vowels)) for _ in range(3)]
                name = ("".join(syl) + str(rng.choice(["", "n", "l", "x"]))).capitalize()
                if name.lower() not in used:
                    used.add(name.lower())
                    self.aka[entity] = name
                    break

    def statements(self) -> list[str]:
        """One "X is also known as Y." sentence per entity (training text for the fact LMs)."""
        return [AKA_TEMPLATE.format(s=e, v=a) for e, a in self.aka.items()]


def labeler_inputs(
    answers: Sequence[LabeledAnswer],
) -> tuple[list[str], list[tuple[str, ...]], list[str]]:
    """``(questions, references, answers)``: the three arguments every labeler takes."""
    return (
        [a.example.question for a in answers],
        [a.example.references for a in answers],
        [a.answer for a in answers],
    )


# --------------------------------------------------------------------- datasets
def _valid_answers(world: World, relation: str, obj: str, t: int | None) -> list[str]:
    """Every entity ``e`` with ``relation(e) == obj`` in year ``t``, in the World's order: the valid
    answers to the inverse question ("Name a city in X." for located_in)."""
    rel = RELATIONS[relation]
    return [e for e in world.entities[rel.subject] if world.value_at(e, relation, t) == obj]


def _question(relation: str, subject: str, template: int = 0) -> str:
    if relation.startswith("inverse:"):
        return INVERSE_QUESTIONS[relation.split(":", 1)[1]].format(s=subject)
    rel = RELATIONS[relation]
    qs = (*rel.questions, *rel.heldout_questions)
    return qs[template % len(qs)].format(s=subject)


def make_examples(
    world: World,
    dataset: str,
    n: int | None = None,
    split: str = "heldout",
    seed: int = 0,
    t_query: int | None = None,
    outdated_fraction: float = 0.5,
) -> list[QAExample]:
    """Items of one synthetic ``dataset`` (see :data:`DATASETS`) about ``split`` facts of ``world``.

    ``split`` is the World's subject split: ``"heldout"`` target subjects (evaluation),
    ``"train"`` format subjects (what generators and judges are tuned on). Each fact is asked with
    every question phrasing; ``n`` items are drawn without replacement (all if ``None``). In
    ``temporal`` a share ``outdated_fraction`` of items carries a reference written the year
    before the fact's last change.
    """
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {', '.join(DATASETS)}; got {dataset!r}")
    if split not in ("train", "heldout", "all"):
        raise ValueError(f"split must be 'train', 'heldout' or 'all'; got {split!r}")
    if not 0.0 <= outdated_fraction <= 1.0:
        raise ValueError(f"outdated_fraction must be in [0, 1]; got {outdated_fraction}")
    tq = world._check_time(t_query)
    rng = np.random.default_rng([world.seed, seed, DATASETS.index(dataset)])
    aliases = world.aliases if dataset == "names" else (lambda _v: ())

    def wanted(subject: str) -> bool:
        target = subject in world.target_subjects
        return split == "all" or (split == "heldout") == target

    items: list[QAExample] = []
    for relation in _DATASET_RELATIONS[dataset]:
        if relation.startswith("inverse:"):
            base = RELATIONS[relation.split(":", 1)[1]]
            for obj in world.entities[base.value]:
                valid = sorted(_valid_answers(world, base.name, obj, tq))
                if wanted(obj) and len(valid) >= 2:
                    ref = str(rng.choice(valid))
                    q = _question(relation, obj)
                    items.append(QAExample(q, ref, aliases(ref), dataset, obj, relation, tq, tq))
            continue
        rel = RELATIONS[relation]
        for subject in world.entities[rel.subject]:
            if not wanted(subject):
                continue
            history = world.history[(subject, relation)]
            changed = [f for f in history[1:] if f.valid_from <= tq]
            if dataset == "temporal" and not changed:
                continue
            for template in range(len(rel.questions) + len(rel.heldout_questions)):
                t_ref = tq
                if dataset == "temporal" and rng.random() < outdated_fraction:
                    t_ref = changed[-1].valid_from - 1
                ref = world.value_at(subject, relation, t_ref)
                q = _question(relation, subject, template)
                alias = aliases(ref)
                items.append(QAExample(q, ref, alias, dataset, subject, relation, t_ref, tq))
    order = rng.permutation(len(items))
    items = [items[i] for i in order]
    if n is not None:
        if n < 1:
            raise ValueError(f"n must be >= 1; got {n}")
        items = items[:n]
    return items


# --------------------------------------------------------------------- claim parser
# the relation a "A, B" detail asserts, by the types of A and B
_DETAIL_RELATION = {
    ("city", "country"): "located_in",
    ("company", "city"): "headquartered_in",
    ("person", "city"): "lives_in",
    ("person", "company"): "works_for",
}
# the extra claims a verbose answer may make about its value, by the value's type
_EXTRA_RELATIONS = {
    "city": ("located_in",),
    "person": ("born_in", "lives_in"),
    "company": ("headquartered_in",),
    "country": ("capital_of",),
}


@dataclass(frozen=True)
class ParsedAnswer:
    """What :class:`ClaimParser` read in an answer.

    ``main``: the World entity the answer gives for the question (``None`` if none); ``main_text``
    its surface form; ``claims``: every ``(subject, relation, value)`` sentence or inline detail
    (relation ``"aka"`` for "X is also known as Y."); ``detail``: the answer had an inline
    "A, B" detail; ``parsed`` False with a ``reason`` when some sentence is not understood.
    """

    main: str | None
    main_text: str
    abstained: bool
    claims: tuple[tuple[str, str, str], ...]
    detail: bool
    parsed: bool
    reason: str = ""


class ClaimParser:
    """Reads answers into World claims: entity names (with listed and unlisted aliases), statement
    sentences of any template, "also known as" sentences, "A, B" details and abstentions."""

    def __init__(self, world: World, book: AliasBook | None = None) -> None:
        self.world = world
        self.book = book or AliasBook(world)
        forms: dict[str, str] = {}
        for entity in world.entity_type:
            forms[normalize_answer(entity)] = entity
            for alias in world.aliases(entity):
                forms.setdefault(normalize_answer(alias), entity)
            forms.setdefault(normalize_answer(self.book.aka[entity]), entity)
        self.forms = forms
        self.templates: list[tuple[re.Pattern[str], str]] = []
        for rel in RELATIONS.values():
            for tpl in (*rel.statements, *rel.heldout_statements):
                self.templates.append((self._compile(tpl), rel.name))
        self.templates.append((self._compile(AKA_TEMPLATE), "aka"))

    @staticmethod
    def _compile(template: str) -> re.Pattern[str]:
        body = re.escape(template.rstrip("."))
        body = body.replace(re.escape("{s}"), r"(?P<s>.+?)").replace(
            re.escape("{v}"), r"(?P<v>.+?)"
        )
        return re.compile(f"^{body}$", re.IGNORECASE)

    def entity(self, text: str) -> str | None:
        """The World entity ``text`` names (full name, listed alias or unlisted alias), else None."""
        return self.forms.get(normalize_answer(text))

    def _claim(self, sentence: str) -> tuple[tuple[str, str, str], re.Match[str]] | None:
        """The claim a statement sentence makes, with the template match it was read from."""
        for pattern, relation in self.templates:
            m = pattern.match(sentence)
            if m is None:
                continue
            s, v = self.entity(m.group("s")), self.entity(m.group("v"))
            if s is None or v is None:
                continue
            if relation == "aka":
                return (s, "aka", m.group("v").strip()), m
            rel = RELATIONS[relation]
            types = self.world.entity_type
            if types[s] == rel.subject and types[v] == rel.value:
                return (s, relation, v), m
        return None

    def parse(self, answer: str, example: QAExample) -> ParsedAnswer:
        """Parse ``answer`` to ``example``'s question."""
        text = answer.strip()
        if not text:
            return ParsedAnswer(None, "", False, (), False, False, "empty answer")
        sentences = [s.strip().rstrip(".").strip() for s in re.split(r"\.\s+|\.$", text)]
        sentences = [s for s in sentences if s]
        main, main_text, abstained, detail = None, "", False, False
        claims: list[tuple[str, str, str]] = []
        types = self.world.entity_type
        for i, sentence in enumerate(sentences):
            if normalize_answer(sentence) in _ABSTAIN_FORMS:
                abstained = True
                continue
            entity = self.entity(sentence)
            if entity is None and sentence.count(",") == 1:
                head, tail = (p.strip() for p in sentence.split(","))
                a, b = self.entity(head), self.entity(tail)
                rel = _DETAIL_RELATION.get((types.get(a, ""), types.get(b, "")))
                if a is not None and b is not None and rel is not None:
                    claims.append((a, rel, b))
                    detail = True
                    entity, sentence = a, head
            if entity is not None:
                if i == 0:
                    main, main_text = entity, sentence
                    continue
                return ParsedAnswer(
                    None, "", abstained, (), detail, False, "a bare name after the first sentence"
                )
            read = self._claim(sentence)
            if read is None:
                return ParsedAnswer(
                    None, "", abstained, (), detail, False, f"sentence {i + 1} not understood"
                )
            claim, match = read
            claims.append(claim)
            if main is None and i == 0:
                answered = self._answers(claim, example)
                if answered is not None:
                    main = answered
                    # the answer's own words: the subject slot for an inverse question
                    inverse = example.relation.startswith("inverse:")
                    main_text = match.group("s" if inverse else "v").strip()
        return ParsedAnswer(main, main_text, abstained, tuple(claims), detail, True)

    def _answers(self, claim: tuple[str, str, str], example: QAExample) -> str | None:
        s, relation, v = claim
        if example.relation.startswith("inverse:"):
            base = example.relation.split(":", 1)[1]
            return s if relation == base and v == example.subject else None
        return v if relation == example.relation and s == example.subject else None


_PARSERS: dict[int, ClaimParser] = {}


def _parser(world: World, book: AliasBook | None) -> ClaimParser:
    if book is not None:
        return ClaimParser(world, book)
    if id(world) not in _PARSERS or _PARSERS[id(world)].world is not world:
        _PARSERS[id(world)] = ClaimParser(world)
    return _PARSERS[id(world)]


def parse_answer(
    world: World, answer: str, example: QAExample, book: AliasBook | None = None
) -> ParsedAnswer:
    """Parse one answer with a (cached) :class:`ClaimParser` of ``world``."""
    return _parser(world, book).parse(answer, example)


def _truth(world: World, example: QAExample) -> str:
    return world.value_at(example.subject, example.relation, example.t_query)


def _claim_true(world: World, book: AliasBook, claim: tuple[str, str, str], t: int | None) -> bool:
    s, relation, v = claim
    if relation == "aka":
        return normalize_answer(book.aka[s]) == normalize_answer(v)
    return world.value_at(s, relation, t) == v


def label_answer(
    world: World, example: QAExample, parsed: ParsedAnswer, book: AliasBook | None = None
) -> tuple[bool, bool, str]:
    """``(correct, faithful, answer_type)`` of a parsed answer; raises if it did not parse."""
    if not parsed.parsed:
        raise ValueError(f"cannot label an answer that did not parse ({parsed.reason})")
    book = book or _parser(world, None).book
    types, tq = world.entity_type, example.t_query
    claims_true = [_claim_true(world, book, c, tq) for c in parsed.claims]
    inverse = example.relation.startswith("inverse:")
    base = example.relation.split(":", 1)[1] if inverse else example.relation
    under = False
    if parsed.main is None:
        main_ok = True  # an abstention, or claims that do not answer: only they can be false
    elif inverse:
        main_ok = types[parsed.main] == RELATIONS[base].subject and (
            world.value_at(parsed.main, base, tq) == example.subject
        )
    else:
        truth = _truth(world, example)
        under = types[truth] == "city" and types[parsed.main] == "country"
        main_ok = parsed.main == truth or (
            under and world.value_at(truth, "located_in", tq) == parsed.main
        )
    refs = {normalize_answer(r) for r in example.references}
    ref_entity = _parser(world, None).entity(example.reference) if example.reference else None
    if parsed.main is None or ref_entity is None:
        core_ok = main_ok
    elif inverse:
        core_ok = parsed.main == ref_entity
    else:  # the reference itself, or its country (vaguer, not conflicting)
        core_ok = parsed.main == ref_entity or (
            types[ref_entity] == "city"
            and types[parsed.main] == "country"
            and world.value_at(ref_entity, "located_in", tq) == parsed.main
        )
    correct = bool(core_ok and all(claims_true))

    def restates(claim: tuple[str, str, str]) -> bool:
        if inverse:
            return claim == (ref_entity, base, example.subject)
        return claim == (example.subject, base, ref_entity)

    faithful = bool(
        (parsed.abstained and not parsed.claims)
        or (
            parsed.main is not None
            and not parsed.abstained
            and normalize_answer(parsed.main_text) in refs
            and all(restates(c) for c in parsed.claims)
        )
    )
    kind = _type_of(world, example, parsed, main_ok, claims_true, under, faithful, ref_entity)
    return correct, faithful, kind


def _type_of(
    world: World,
    example: QAExample,
    parsed: ParsedAnswer,
    main_ok: bool,
    claims_true: list[bool],
    under: bool,
    faithful: bool,
    ref_entity: str | None,
) -> str:
    """The answer type a parsed answer shows (the most telling one when several apply)."""
    if parsed.main is None:
        return "abstention" if parsed.abstained else "off_question"
    if faithful and parsed.main is not None:
        return "exact" if main_ok else "stale_exact"
    if not main_ok:
        if not example.relation.startswith("inverse:"):
            past = {f.value for f in world.history[(example.subject, example.relation)]}
            if parsed.main in past:
                return "outdated_answer"
        return "wrong_value"
    if not all(claims_true):
        return "extra_false"
    if under:
        return "under_specific"
    if parsed.main != ref_entity:
        return "other_valid" if example.relation.startswith("inverse:") else "outdated_reference"
    refs = {normalize_answer(r) for r in example.references}
    if normalize_answer(parsed.main_text) not in refs | {normalize_answer(parsed.main)}:
        return "unlisted_alias"
    return "over_specific" if parsed.detail else "verbose_correct"


def label_answers(
    world: World,
    examples: Sequence[QAExample],
    answers: Sequence[str],
    source: str,
    book: AliasBook | None = None,
) -> list[LabeledAnswer]:
    """Label generated answers with the claim parser. Answers that do not parse keep
    ``correct = faithful = None`` and ``answer_type = "unparsable"``: counted, never guessed."""
    if len(examples) != len(answers):
        raise ValueError(
            f"examples and answers must have the same length; got {len(examples)} and {len(answers)}"
        )
    parser = _parser(world, book)
    out = []
    for example, answer in zip(examples, answers, strict=True):
        parsed = parser.parse(answer, example)
        if not parsed.parsed:
            out.append(LabeledAnswer(example, answer, None, None, "unparsable", source))
            continue
        correct, faithful, kind = label_answer(world, example, parsed, parser.book)
        out.append(LabeledAnswer(example, answer, correct, faithful, kind, source))
    return out


# --------------------------------------------------------------------- controlled answers
def _statement(relation: str, s: str, v: str) -> str:
    return RELATIONS[relation].statements[0].format(s=s, v=v)


def controlled_answers(
    world: World,
    examples: Iterable[QAExample],
    types: Sequence[str] | None = None,
    seed: int = 0,
    book: AliasBook | None = None,
) -> list[LabeledAnswer]:
    """Answers of every applicable type (:data:`ANSWER_TYPES`) for each World example, labelled by
    the rule of their type (:data:`TYPE_LABELS`).

    Items whose reference is outdated get ``outdated_reference`` (the current value) and
    ``stale_exact`` (the reference itself), and an abstention; the others every other type that
    applies (``under_specific`` and ``over_specific`` need a city or company value,
    ``other_valid`` a question with several valid answers, ``outdated_answer`` a fact that changed).
    """
    wanted = list(ANSWER_TYPES) if types is None else list(types)
    for t in wanted:
        if t not in TYPE_LABELS:
            raise ValueError(f"unknown answer type {t!r}; known: {', '.join(ANSWER_TYPES)}")
    book = book or _parser(world, None).book
    rng = np.random.default_rng([world.seed, seed, 5])
    out: list[LabeledAnswer] = []
    for ex in examples:
        if not ex.subject:
            raise ValueError("controlled answers need World examples (from make_examples)")
        for kind, text in _answers_for(world, ex, book, rng):
            if kind in wanted:
                correct, faithful = TYPE_LABELS[kind]
                out.append(LabeledAnswer(ex, text, correct, faithful, kind, "controlled"))
    return out


def _other(rng: np.random.Generator, pool: Sequence[str], avoid: set[str]) -> str | None:
    choices = sorted(v for v in pool if v not in avoid)
    return str(rng.choice(choices)) if choices else None


def _answers_for(
    world: World, ex: QAExample, book: AliasBook, rng: np.random.Generator
) -> list[tuple[str, str]]:
    tq, types = ex.t_query, world.entity_type
    inverse = ex.relation.startswith("inverse:")
    if inverse:
        base = RELATIONS[ex.relation.split(":", 1)[1]]
        pool = world.entities[base.subject]
        valid = _valid_answers(world, base.name, ex.subject, tq)
        truth = ex.reference
        wrong = _other(rng, pool, set(valid))
    else:
        truth = _truth(world, ex)
        valid = [truth]
        past = {f.value for f in world.history[(ex.subject, ex.relation)]}
        wrong = _other(rng, world.entities[types[truth]], past | {ex.subject})
    out: list[tuple[str, str]] = [("abstention", ABSTAIN)]
    if ex.reference != truth and not inverse:
        return [*out, ("outdated_reference", truth), ("stale_exact", ex.reference)]
    out += [("exact", ex.reference), ("unlisted_alias", book.aka[truth])]
    kind = types[truth]
    # an extra claim about the answer that does not restate the question
    extras = [r for r in _EXTRA_RELATIONS[kind] if not inverse or r != ex.relation[8:]]
    if extras:
        extra_rel = extras[0]
        extra_true = world.value_at(truth, extra_rel, tq)
        out.append(("verbose_correct", f"{truth}. {_statement(extra_rel, truth, extra_true)}"))
        extra_pool = world.entities[RELATIONS[extra_rel].value]
        extra_wrong = _other(rng, extra_pool, {extra_true, truth})
        if extra_wrong is not None:
            out.append(("extra_false", f"{truth}. {_statement(extra_rel, truth, extra_wrong)}"))
    if wrong is not None:
        out.append(("wrong_value", wrong))
    if kind == "city" and not inverse:
        out.append(("under_specific", world.value_at(truth, "located_in", tq)))
    if kind in ("city", "company") and not inverse:
        detail_rel = "located_in" if kind == "city" else "headquartered_in"
        out.append(("over_specific", f"{truth}, {world.value_at(truth, detail_rel, tq)}"))
    if inverse:
        other = _other(rng, valid, {truth})
        if other is not None:
            out.append(("other_valid", other))
    else:
        old = [f.value for f in world.history[(ex.subject, ex.relation)] if f.value != truth]
        if old:
            out.append(("outdated_answer", old[-1]))
    return out


# --------------------------------------------------------------------- real data
_TRUE = {"1", "true", "yes", "hallucinated", "hallucination", "incorrect", "wrong"}
_FALSE = {"0", "false", "no", "correct", "not hallucinated", "ok", "faithful"}


def _hallucinated(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(
        f"{where}: label {value!r} is not a hallucination label (use 1/0, true/false, "
        "'hallucinated'/'correct')"
    )


def _references(row: dict[str, Any], where: str) -> tuple[str, ...]:
    refs = row.get("references", row.get("reference"))
    if refs is None:
        raise ValueError(f"{where}: needs a 'references' (or 'reference') field")
    if isinstance(refs, str):
        refs = [r.strip() for r in refs.split("|")] if "|" in refs else [refs]
    refs = tuple(str(r).strip() for r in refs if str(r).strip())
    if not refs:
        raise ValueError(f"{where}: the reference is empty")
    return refs


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        raise ValueError(f"{path} does not exist")
    if path.suffix == ".csv":
        with path.open(newline="") as f:
            return list(csv.DictReader(f))
    if path.suffix in (".jsonl", ".json"):
        text = path.read_text()
        if path.suffix == ".json":
            data = json.loads(text)
            return data if isinstance(data, list) else [data]
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    raise ValueError(f"{path}: use a .jsonl, .json or .csv file")


def load_labeled_answers(path: str | os.PathLike[str]) -> list[LabeledAnswer]:
    """Human-labelled answers from JSONL / CSV, one per row: ``question``, ``references`` (a list,
    or one string with ``|`` between references), ``answer``, ``label`` (hallucinated: 1/0,
    true/false, "hallucinated"/"correct"), and optional ``generator``, ``dataset``, ``error_type``
    (the paper's 900 pairs have this shape). ``correct`` is the label's negation; faithfulness is
    unknown (``None``)."""
    path = Path(path)
    out = []
    for i, row in enumerate(_rows(path), start=1):
        where = f"{path.name} row {i}"
        for key in ("question", "answer", "label"):
            if key not in row or row[key] is None:
                raise ValueError(f"{where}: missing field {key!r}")
        refs = _references(row, where)
        example = QAExample(str(row["question"]), refs[0], refs[1:], str(row.get("dataset") or ""))
        correct = not _hallucinated(row["label"], where)
        out.append(
            LabeledAnswer(
                example,
                str(row["answer"]),
                correct,
                None,
                str(row.get("error_type") or ""),
                str(row.get("generator") or "unknown"),
            )
        )
    if not out:
        raise ValueError(f"{path} holds no rows")
    return out


LPHB_REQUIRED = ("dataset", "model", "question", "ref_str", "answer_text", "annotator1_label")
"""Columns :func:`load_lphb` needs in the LPHB release master CSV (Valjakka et al., DOI
10.7910/DVN/PCHISZ, ``data/human_judge_release_master.csv``)."""
_LPHB_JUDGE = re.compile(r"^label_(?P<judge>.+)_(?P<prompt>p1|p2|p3|p1s|p2t)$")
_LPHB_SCORES = ("rougeL", "bertscore_f1", "meteor", "nli_entail_prob")


@dataclass
class LPHBData:
    """The LPHB pairs with a human label: ``answers`` (``correct`` = ``annotator1_label == 0``,
    ``source`` = generator, ``faithful`` unknown), ``n_dropped`` rows whose label is ``-1``,
    ``judge_labels[judge][prompt]`` the released judge labels (True = hallucination; rows where a
    judge refused, ``-1``, are ``False`` and flagged in ``judge_missing``), and the released
    baseline ``scores`` (ROUGE-L, BERTScore F1, METEOR, NLI entailment) where present."""

    answers: list[LabeledAnswer]
    n_dropped: int
    judge_labels: dict[str, dict[str, np.ndarray]]
    judge_missing: dict[str, dict[str, np.ndarray]]
    scores: dict[str, np.ndarray]


def load_lphb(path: str | os.PathLike[str]) -> LPHBData:
    """Read the LPHB release master CSV (one row per question x generator) through a column
    adapter: ``question``, ``ref_str`` (references with ``|`` between them), ``answer_text``,
    ``model`` (the generator), ``dataset`` and ``annotator1_label`` (1 hallucination, 0 correct,
    -1 missing: dropped and counted). Raises ``ValueError`` naming missing columns or bad labels."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{path} does not exist")
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        columns = list(reader.fieldnames or [])
        rows = list(reader)
    missing = [c for c in LPHB_REQUIRED if c not in columns]
    if missing:
        raise ValueError(f"{path.name}: missing LPHB column(s) {missing}; found {columns}")
    keep, answers, dropped = [], [], 0
    for i, row in enumerate(rows, start=2):
        raw = str(row["annotator1_label"]).strip()
        if raw not in ("0", "1", "-1", "0.0", "1.0", "-1.0"):
            raise ValueError(f"{path.name} line {i}: annotator1_label {raw!r} not in 1, 0, -1")
        label = int(float(raw))
        if label == -1:
            dropped += 1
            continue
        refs = _references({"references": row["ref_str"]}, f"{path.name} line {i}")
        example = QAExample(row["question"], refs[0], refs[1:], row["dataset"])
        answers.append(
            LabeledAnswer(example, row["answer_text"], label == 0, None, "", row["model"])
        )
        keep.append(row)
    if not answers:
        raise ValueError(f"{path} holds no rows with a human label (0 or 1)")
    judges: dict[str, dict[str, np.ndarray]] = {}
    refused: dict[str, dict[str, np.ndarray]] = {}
    for c in columns:
        m = _LPHB_JUDGE.match(c)
        if m:
            v = np.array([int(float(r[c])) if str(r[c]).strip() else -1 for r in keep])
            judges.setdefault(m["judge"], {})[m["prompt"]] = v == 1
            refused.setdefault(m["judge"], {})[m["prompt"]] = v == -1
    scores = {
        c: np.array([float(r[c]) if str(r[c]).strip() else np.nan for r in keep])
        for c in _LPHB_SCORES
        if c in columns
    }
    return LPHBData(answers, dropped, judges, refused, scores)


def save_labeled_answers(answers: Iterable[LabeledAnswer], path: str | os.PathLike[str]) -> Path:
    """Write answers as JSONL in :func:`load_labeled_answers`'s shape (plus the World fields)."""
    from paper_common.facts import write_jsonl

    rows = []
    for a in answers:
        row = asdict(a.example)
        row.update(
            references=list(a.example.references),
            answer=a.answer,
            label=a.hallucinated,
            faithful=a.faithful,
            error_type=a.answer_type,
            generator=a.source,
        )
        rows.append(row)
    return write_jsonl(rows, path)


def load_qa_dataset(
    path: str | os.PathLike[str], kind: str, n: int | None = None
) -> list[QAExample]:
    """Questions and references of a QA dataset from a local file.

    ``kind``: ``"triviaqa"`` (the rc/unfiltered JSON, ``{"Data": [{"Question", "Answer": {"Value",
    "Aliases"}}]}``), ``"nq_open"`` (JSONL of ``{"question", "answer": [...]}``) or ``"squad"``
    (``{"data": [{"paragraphs": [{"qas": [{"question", "answers": [{"text"}]}]}]}]}``).
    """
    path = Path(path)
    if kind not in ("triviaqa", "nq_open", "squad"):
        raise ValueError(f"kind must be 'triviaqa', 'nq_open' or 'squad'; got {kind!r}")
    if not path.exists():
        raise ValueError(f"{path} does not exist")
    items: list[QAExample] = []
    if kind == "triviaqa":
        for row in json.loads(path.read_text())["Data"]:
            ans = row["Answer"]
            aliases = tuple(dict.fromkeys(a for a in ans.get("Aliases", []) if a != ans["Value"]))
            items.append(QAExample(row["Question"], ans["Value"], aliases, "triviaqa"))
    elif kind == "nq_open":
        for row in _rows(path):
            answers = list(row["answer"])
            items.append(QAExample(row["question"], answers[0], tuple(answers[1:]), "nq_open"))
    else:
        for article in json.loads(path.read_text())["data"]:
            for para in article["paragraphs"]:
                for qa in para["qas"]:
                    texts = list(dict.fromkeys(a["text"] for a in qa.get("answers", [])))
                    if texts:
                        items.append(QAExample(qa["question"], texts[0], tuple(texts[1:]), "squad"))
    if not items:
        raise ValueError(f"{path} holds no {kind} questions with answers")
    return items if n is None else items[:n]
