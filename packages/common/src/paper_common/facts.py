"""A synthetic world of made-up entities and facts whose ground truth we control, deterministic from a seed.

Entities of four types (people, cities, companies, countries) carry made-up names: cities and
countries are one word (one token for a word-level tokenizer, so vocabulary ranks mean something),
people and companies several words (so answering is more than one step). Every fact has a version
history ``(subject, relation, value, valid_from, valid_to)`` over ``[start_year, end_year]``: relations
change at their own yearly rate (``born_in`` never, ``works_for`` often), and changes may be announced
a year ahead by noisy leading cues, some of them false, with the generator's own cue-to-change
probability exposed (:meth:`World.cue_precision`) so a probe's ceiling is known.

Renderers turn facts into training and evaluation text: declarative statements (several paraphrase
templates per relation, some held out), QA pairs, True/False verification items, multiple-choice
items, history statements and cues. The **format split** follows Allen-Zhu & Li ("Physics of Language
Models 3.1"): subjects are split into *format* subjects, whose facts appear as statements, QA pairs and
verification items, and *target* subjects, whose facts appear only as statements. A model learns the
question and True/False formats on format facts and is then asked them about target facts it has only
read about. ``split="train"`` selects format facts (what a model is trained to answer), ``"heldout"``
target facts, ``"all"`` both; statements of every fact are training text, so for
:meth:`World.statements` the split selects templates instead (``"heldout"``: held-out paraphrases).

Verifiable tasks for RL with verifiable rewards (:func:`arithmetic_tasks`, :meth:`World.multihop_tasks`)
come with an exact checker. Everything serialises to JSONL.
"""

from __future__ import annotations

import json
import os
import re
import string
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np

__all__ = [
    "RELATIONS",
    "Fact",
    "MCItem",
    "QAItem",
    "Relation",
    "Statement",
    "VerifiableTask",
    "VerificationItem",
    "World",
    "arithmetic_tasks",
    "is_correct",
    "normalize_answer",
    "read_jsonl",
    "write_jsonl",
]

EntityType = Literal["person", "city", "company", "country"]
Split = Literal["train", "heldout", "all"]


@dataclass(frozen=True)
class Relation:
    """A relation between a subject type and a value type, with its templates and yearly change rate.

    Templates use ``{s}`` (subject) and ``{v}`` (value); history templates also ``{until}``, cue
    templates ``{year}``. ``questions`` are rendered as ``"Q: <question> A:"``.
    """

    name: str
    subject: EntityType
    value: EntityType
    change_rate: float
    statements: tuple[str, ...]
    heldout_statements: tuple[str, ...]
    questions: tuple[str, ...]
    heldout_questions: tuple[str, ...]
    history: str = ""
    cue: str = ""


RELATIONS: dict[str, Relation] = {
    r.name: r
    for r in [
        Relation(
            "born_in",
            "person",
            "city",
            0.0,
            (
                "{s} was born in {v}.",
                "{s} is a native of {v}.",
                "The birthplace of {s} is {v}.",
                "{s} came into the world in {v}.",
            ),
            ("{v} is where {s} was born.", "The city of birth of {s} is {v}."),
            ("Where was {s} born?",),
            ("In which city was {s} born?",),
        ),
        Relation(
            "lives_in",
            "person",
            "city",
            0.06,
            (
                "{s} lives in {v}.",
                "{s} resides in {v}.",
                "The home of {s} is in {v}.",
                "{s} has made a home in {v}.",
            ),
            ("{v} is where {s} lives.", "These days {s} can be found living in {v}."),
            ("Where does {s} live?",),
            ("In which city does {s} reside?",),
            history="{s} lived in {v} until {until}.",
            cue="In {year}, {s} was said to be moving away from {v}.",
        ),
        Relation(
            "works_for",
            "person",
            "company",
            0.12,
            (
                "{s} works for {v}.",
                "{s} is employed by {v}.",
                "The employer of {s} is {v}.",
                "{s} has a job at {v}.",
            ),
            ("{v} employs {s}.", "On the payroll of {v} is {s}."),
            ("Who does {s} work for?",),
            ("Which company employs {s}?",),
            history="{s} worked for {v} until {until}.",
            cue="In {year}, {s} was said to be leaving {v}.",
        ),
        Relation(
            "ceo_of",
            "company",
            "person",
            0.10,
            (
                "The CEO of {s} is {v}.",
                "{v} is the chief executive of {s}.",
                "{s} is led by {v}.",
                "{v} runs {s} as its CEO.",
            ),
            ("At the head of {s} stands {v}.", "{s} has {v} as its chief executive."),
            ("Who is the CEO of {s}?",),
            ("Who leads {s}?",),
            history="{v} was the CEO of {s} until {until}.",
            cue="In {year}, the term of {v} as CEO of {s} was said to be ending.",
        ),
        Relation(
            "headquartered_in",
            "company",
            "city",
            0.03,
            (
                "{s} is headquartered in {v}.",
                "The headquarters of {s} are in {v}.",
                "{s} has its head office in {v}.",
                "{s} is based in {v}.",
            ),
            ("{v} hosts the head office of {s}.", "The main office of {s} sits in {v}."),
            ("Where is {s} headquartered?",),
            ("In which city is {s} based?",),
            history="{s} was headquartered in {v} until {until}.",
            cue="In {year}, {s} was said to be moving its headquarters out of {v}.",
        ),
        Relation(
            "capital_of",
            "country",
            "city",
            0.0,
            (
                "The capital of {s} is {v}.",
                "{v} is the capital of {s}.",
                "The capital city of {s} is {v}.",
                "{s} is governed from its capital {v}.",
            ),
            ("The seat of government of {s} is {v}.", "{s} has {v} as its capital."),
            ("What is the capital of {s}?",),
            ("Which city is the capital of {s}?",),
        ),
        Relation(
            "located_in",
            "city",
            "country",
            0.0,
            (
                "{s} is located in {v}.",
                "{s} is a city in {v}.",
                "{s} lies in {v}.",
                "The city of {s} is in {v}.",
            ),
            ("{v} contains the city of {s}.", "One finds {s} in {v}."),
            ("In which country is {s}?",),
            ("Which country is {s} located in?",),
        ),
    ]
}

_RELATIONS_OF: dict[str, tuple[str, ...]] = {
    t: tuple(r.name for r in RELATIONS.values() if r.subject == t)
    for t in ("person", "city", "company", "country")
}

_ONSETS = [
    "b",
    "c",
    "d",
    "f",
    "g",
    "h",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "z",
    "br",
    "dr",
    "gr",
    "kr",
    "tr",
    "st",
    "th",
    "sh",
]
_VOWELS = ["a", "e", "i", "o", "u", "ae", "ia", "io", "ou"]
_CODAS = [""] * 4 + ["n", "r", "l", "s", "th", "x", "m"]
_COMPANY_SUFFIXES = ("Labs", "Systems", "Group", "Works", "Industries", "Dynamics")


def _check_split(split: str) -> str:
    if split not in ("train", "heldout", "all"):
        raise ValueError(f"split must be 'train', 'heldout' or 'all'; got {split!r}")
    return split


def _check_relation(relation: str) -> Relation:
    if relation not in RELATIONS:
        raise ValueError(f"unknown relation {relation!r}; known: {', '.join(RELATIONS)}")
    return RELATIONS[relation]


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


class World:
    """A deterministic synthetic world.

    Args:
        seed: everything (names, facts, changes, cues, splits) follows from it.
        n_people, n_cities, n_companies, n_countries: entity counts.
        start_year, end_year: the period the version histories cover (inclusive).
        target_fraction: share of subjects in the *target* group (statements only).
        cue_recall: probability that a real change is announced by a cue the year before.
        false_cue_rate: probability of a cue in a year with no change following.
        change_rates: per-relation yearly change probabilities overriding the defaults.

    >>> w = World(seed=0, n_people=10)
    >>> item = w.qa_pairs("train")[0]
    >>> w.value_at(item.fact.subject, item.fact.relation, w.end_year) == item.answer
    True
    """

    def __init__(
        self,
        seed: int = 0,
        n_people: int = 80,
        n_cities: int = 24,
        n_companies: int = 20,
        n_countries: int = 8,
        start_year: int = 2000,
        end_year: int = 2024,
        target_fraction: float = 0.5,
        cue_recall: float = 0.6,
        false_cue_rate: float = 0.03,
        change_rates: dict[str, float] | None = None,
    ) -> None:
        for name, n, low in [
            ("n_people", n_people, 2),
            ("n_cities", n_cities, 4),
            ("n_companies", n_companies, 2),
            ("n_countries", n_countries, 2),
        ]:
            if not isinstance(n, int) or n < low:
                raise ValueError(f"{name} must be an int >= {low}; got {n!r}")
        if n_cities < n_countries:
            raise ValueError(f"n_cities ({n_cities}) must be >= n_countries ({n_countries})")
        if end_year < start_year:
            raise ValueError(f"end_year ({end_year}) must be >= start_year ({start_year})")
        if not 0.0 <= target_fraction <= 1.0:
            raise ValueError(f"target_fraction must be in [0, 1]; got {target_fraction}")
        for name, p in [("cue_recall", cue_recall), ("false_cue_rate", false_cue_rate)]:
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} must be in [0, 1]; got {p}")
        rates = {r.name: r.change_rate for r in RELATIONS.values()}
        for rel, rate in (change_rates or {}).items():
            _check_relation(rel)
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"change_rates[{rel!r}] must be in [0, 1]; got {rate}")
            rates[rel] = float(rate)
        self.config: dict[str, Any] = {
            "seed": seed,
            "n_people": n_people,
            "n_cities": n_cities,
            "n_companies": n_companies,
            "n_countries": n_countries,
            "start_year": start_year,
            "end_year": end_year,
            "target_fraction": target_fraction,
            "cue_recall": cue_recall,
            "false_cue_rate": false_cue_rate,
            "change_rates": rates,
        }
        self.seed = seed
        self.start_year, self.end_year = start_year, end_year
        self.change_rates = rates
        self.cue_recall, self.false_cue_rate = cue_recall, false_cue_rate
        rng = np.random.default_rng(seed)
        self._make_entities(rng, n_people, n_cities, n_companies, n_countries)
        self._make_histories(rng)
        self._make_cues(rng)
        subjects = [s for t in ("person", "company", "country", "city") for s in self.entities[t]]
        chosen = rng.random(len(subjects)) < target_fraction
        self.target_subjects = frozenset(s for s, c in zip(subjects, chosen, strict=True) if c)

    # ----------------------------------------------------------------- generation
    def _make_entities(
        self,
        rng: np.random.Generator,
        n_people: int,
        n_cities: int,
        n_companies: int,
        n_countries: int,
    ) -> None:
        used: set[str] = set()

        def word(min_syl: int = 2, max_syl: int = 3) -> str:
            while True:
                n = int(rng.integers(min_syl, max_syl + 1))
                parts = [str(rng.choice(_ONSETS)) + str(rng.choice(_VOWELS)) for _ in range(n)] + [
                    str(rng.choice(_CODAS))
                ]
                w = "".join(parts).capitalize()
                if w not in used and len(w) >= 4:
                    used.add(w)
                    return w

        self.entities: dict[str, list[str]] = {
            "country": [word() for _ in range(n_countries)],
            "city": [word() for _ in range(n_cities)],
            "person": [f"{word(2, 2)} {word()}" for _ in range(n_people)],
            "company": [
                f"{word()} {_COMPANY_SUFFIXES[int(rng.integers(len(_COMPANY_SUFFIXES)))]}"
                for _ in range(n_companies)
            ],
        }
        self.entity_type = {e: t for t, names in self.entities.items() for e in names}
        # every country gets at least one city; the rest are spread at random
        cities = self.entities["city"]
        countries = self.entities["country"]
        owner = np.concatenate(
            [
                np.arange(len(countries)),
                rng.integers(0, len(countries), len(cities) - len(countries)),
            ]
        )
        rng.shuffle(owner)
        self._country_of = {c: countries[int(i)] for c, i in zip(cities, owner, strict=True)}

    def _make_histories(self, rng: np.random.Generator) -> None:
        years = self.end_year - self.start_year + 1
        self.history: dict[tuple[str, str], list[Fact]] = {}
        for rel in RELATIONS.values():
            for subject in self.entities[rel.subject]:
                if rel.name == "located_in":
                    values = [self._country_of[subject]]
                    change_years: list[int] = []
                else:
                    pool = self._pool(rel, subject)
                    change = rng.random(years - 1) < self.change_rates[rel.name]
                    change_years = [self.start_year + 1 + int(i) for i in np.flatnonzero(change)]
                    values = [str(rng.choice(pool))]
                    for _ in change_years:
                        others = [v for v in pool if v != values[-1]]
                        values.append(str(rng.choice(others)) if others else values[-1])
                starts = [self.start_year, *change_years]
                ends: list[int | None] = [*change_years, None]
                self.history[(subject, rel.name)] = [
                    Fact(subject, rel.name, v, s, e)
                    for v, s, e in zip(values, starts, ends, strict=True)
                ]

    def _pool(self, rel: Relation, subject: str) -> list[str]:
        if rel.name == "capital_of":
            return [c for c in self.entities["city"] if self._country_of[c] == subject]
        return [v for v in self.entities[rel.value] if v != subject]

    def _make_cues(self, rng: np.random.Generator) -> None:
        """A cue in year y announces a change in y + 1: with prob cue_recall if one comes, else false_cue_rate."""
        self.cues: list[Statement] = []
        for (subject, relation), versions in self.history.items():
            rel = RELATIONS[relation]
            if not rel.cue:
                continue
            change_years = {f.valid_from for f in versions[1:]}
            for year in range(self.start_year, self.end_year):
                real = (year + 1) in change_years
                if rng.random() < (self.cue_recall if real else self.false_cue_rate):
                    current = self._version_at(subject, relation, year)
                    text = rel.cue.format(s=subject, v=current.value, year=year)
                    self.cues.append(Statement(text, current, "cue", 0, False, real))

    # ----------------------------------------------------------------- queries
    @cached_property
    def relations(self) -> tuple[str, ...]:
        return tuple(RELATIONS)

    def _version_at(self, subject: str, relation: str, t: int) -> Fact:
        for f in self.history[(subject, relation)]:
            if f.holds_at(t):
                return f
        raise AssertionError("histories cover every year")  # pragma: no cover

    def _check_time(self, t: int | None) -> int:
        if t is None:
            return self.end_year
        if not self.start_year <= t <= self.end_year:
            raise ValueError(f"t must be in [{self.start_year}, {self.end_year}]; got {t}")
        return int(t)

    def value_at(self, subject: str, relation: str, t: int | None = None) -> str:
        """The value of ``relation`` for ``subject`` in year ``t`` (default: the last year)."""
        rel = _check_relation(relation)
        if subject not in self.entity_type:
            raise ValueError(f"unknown subject {subject!r}")
        if self.entity_type[subject] != rel.subject:
            raise ValueError(
                f"{relation} applies to a {rel.subject}; {subject!r} is a {self.entity_type[subject]}"
            )
        return self._version_at(subject, relation, self._check_time(t)).value

    def facts(
        self,
        split: Split = "all",
        t: int | None = None,
        relations: Sequence[str] | None = None,
    ) -> list[Fact]:
        """The fact versions true at year ``t`` (default: last year); ``split`` by subject group."""
        _check_split(split)
        t = self._check_time(t)
        wanted = set(relations) if relations is not None else set(RELATIONS)
        for r in wanted:
            _check_relation(r)
        out = []
        for (subject, relation), _ in self.history.items():
            if relation not in wanted:
                continue
            target = subject in self.target_subjects
            if (split == "train" and target) or (split == "heldout" and not target):
                continue
            out.append(self._version_at(subject, relation, t))
        return out

    def changed_after(self, t: int, relations: Sequence[str] | None = None) -> list[Fact]:
        """The new fact versions that began after year ``t`` (changes a model cut off at ``t`` missed)."""
        self._check_time(t)
        wanted = set(relations) if relations is not None else set(RELATIONS)
        for r in wanted:
            _check_relation(r)
        return [
            f
            for (_, relation), versions in self.history.items()
            if relation in wanted
            for f in versions[1:]
            if f.valid_from > t
        ]

    def cue_precision(self, relation: str) -> float:
        """P(a change follows next year | a cue this year), from the generator's own parameters.

        The Bayes ceiling for any probe that reads only the cue: ``r p / (r p + (1 - r) q)`` with
        ``r`` the yearly change rate, ``p`` the cue recall and ``q`` the false-cue rate.
        """
        rel = _check_relation(relation)
        if not rel.cue:
            raise ValueError(f"{relation} never changes, so it has no cues")
        r, p, q = self.change_rates[relation], self.cue_recall, self.false_cue_rate
        denom = r * p + (1 - r) * q
        return float(r * p / denom) if denom > 0 else 0.0

    def aliases(self, value: str) -> tuple[str, ...]:
        """Other acceptable names: a person's surname, a company's name without its suffix."""
        kind = self.entity_type.get(value)
        if kind in ("person", "company"):
            first, last = value.split(" ", 1)
            return (last,) if kind == "person" else (first,)
        return ()

    # ----------------------------------------------------------------- renderers
    def statements(
        self,
        split: Split = "train",
        t: int | None = None,
        facts: Iterable[Fact] | None = None,
        paraphrases: int | None = None,
    ) -> list[Statement]:
        """Declarative statements of facts true at ``t`` (or of ``facts``), one per template.

        ``split`` selects templates: ``"train"`` the training paraphrases (every fact, both groups),
        ``"heldout"`` the held-out paraphrases, ``"all"`` both. ``paraphrases`` caps templates per fact.
        """
        _check_split(split)
        rows = self.facts("all", t) if facts is None else list(facts)
        out = []
        for f in rows:
            rel = _check_relation(f.relation)
            templates = []
            if split in ("train", "all"):
                templates += [(i, s, False) for i, s in enumerate(rel.statements)]
            if split in ("heldout", "all"):
                templates += [(i, s, True) for i, s in enumerate(rel.heldout_statements)]
            if paraphrases is not None:
                templates = templates[:paraphrases]
            for i, tpl, held in templates:
                out.append(Statement(tpl.format(s=f.subject, v=f.value), f, "statement", i, held))
        return out

    def history_statements(self, t: int | None = None) -> list[Statement]:
        """Past-tense statements of versions that ended by year ``t`` ("X worked for Y until 2019.")."""
        t = self._check_time(t)
        out = []
        for versions in self.history.values():
            for f in versions[:-1]:
                rel = RELATIONS[f.relation]
                if rel.history and f.valid_to is not None and f.valid_to <= t:
                    text = rel.history.format(s=f.subject, v=f.value, until=f.valid_to)
                    out.append(Statement(text, f, "history"))
        return out

    def cue_statements(self, t: int | None = None) -> list[Statement]:
        """Leading cues issued up to year ``t``; ``leads_to_change`` says whether a change followed."""
        t = self._check_time(t)
        return [c for c in self.cues if int(re.search(r"In (\d+),", c.text).group(1)) <= t]

    def qa_pairs(
        self,
        split: Split = "train",
        t: int | None = None,
        templates: Literal["train", "heldout", "all"] = "train",
        facts: Iterable[Fact] | None = None,
    ) -> list[QAItem]:
        """QA items about facts true at ``t``: ``split="train"`` format facts, ``"heldout"`` target facts.

        ``templates`` chooses the question phrasings (``"heldout"``: phrasings never trained on).
        """
        rows = self.facts(split, t) if facts is None else list(facts)
        _check_split(templates)
        out = []
        for f in rows:
            rel = _check_relation(f.relation)
            qs = []
            if templates in ("train", "all"):
                qs += [(i, q, False) for i, q in enumerate(rel.questions)]
            if templates in ("heldout", "all"):
                qs += [(i, q, True) for i, q in enumerate(rel.heldout_questions)]
            for i, q, held in qs:
                prompt = f"Q: {q.format(s=f.subject)} A:"
                out.append(QAItem(prompt, f.value, self.aliases(f.value), f, i, held))
        return out

    def verification_items(
        self,
        split: Split = "train",
        t: int | None = None,
        facts: Iterable[Fact] | None = None,
        seed: int = 0,
    ) -> list[VerificationItem]:
        """For each fact, one true claim and one false claim (a wrong value of the same type)."""
        rows = self.facts(split, t) if facts is None else list(facts)
        rng = np.random.default_rng([self.seed, seed, 1])
        out = []
        for f in rows:
            rel = _check_relation(f.relation)
            pool = [v for v in self._pool(rel, f.subject) if v != f.value]
            if not pool:
                pool = [v for v in self.entities[rel.value] if v != f.value and v != f.subject]
            wrong = str(rng.choice(pool))
            for value, label in ((f.value, True), (wrong, False)):
                claim = rel.statements[0].format(s=f.subject, v=value)
                out.append(VerificationItem(f"Claim: {claim} True or false? A:", label, value, f))
        return out

    def multiple_choice(
        self,
        split: Split = "train",
        t: int | None = None,
        n_options: int = 4,
        facts: Iterable[Fact] | None = None,
        seed: int = 0,
    ) -> list[MCItem]:
        """Multiple-choice items with ``n_options`` values of the right type, shuffled by ``seed``."""
        if not 2 <= n_options <= 8:
            raise ValueError(f"n_options must be in [2, 8]; got {n_options}")
        rows = self.facts(split, t) if facts is None else list(facts)
        rng = np.random.default_rng([self.seed, seed, 2])
        out = []
        for f in rows:
            rel = _check_relation(f.relation)
            pool = [v for v in self.entities[rel.value] if v not in (f.value, f.subject)]
            k = min(n_options - 1, len(pool))
            options = [f.value, *map(str, rng.choice(pool, size=k, replace=False))]
            order = rng.permutation(len(options))
            options = [options[i] for i in order]
            letters = " ".join(f"{'ABCDEFGH'[i]}) {o}" for i, o in enumerate(options))
            prompt = f"Q: {rel.questions[0].format(s=f.subject)} Options: {letters}. A:"
            out.append(MCItem(prompt, tuple(options), options.index(f.value), f))
        return out

    def multihop_tasks(self, n: int | None = None, seed: int = 0) -> list[VerifiableTask]:
        """Two-hop questions with exact answers: where was the CEO of a company born / where does
        the employer of a person have its headquarters (at the last year)."""
        t = self.end_year
        tasks = []
        for company in self.entities["company"]:
            ceo = self._version_at(company, "ceo_of", t).value
            city = self._version_at(ceo, "born_in", t).value
            tasks.append(
                VerifiableTask(
                    f"Q: Where was the CEO of {company} born? A:",
                    city,
                    "multihop",
                    tuple(self.entities["city"]),
                )
            )
        for person in self.entities["person"]:
            employer = self._version_at(person, "works_for", t).value
            city = self._version_at(employer, "headquartered_in", t).value
            tasks.append(
                VerifiableTask(
                    f"Q: Where is the employer of {person} headquartered? A:",
                    city,
                    "multihop",
                    tuple(self.entities["city"]),
                )
            )
        order = np.random.default_rng([self.seed, seed, 3]).permutation(len(tasks))
        tasks = [tasks[i] for i in order]
        return tasks if n is None else tasks[:n]

    def corpus(
        self,
        t: int | None = None,
        history: bool = True,
        cues: bool = True,
    ) -> tuple[list[str], list[tuple[str, str]]]:
        """Training data for a fact LM at year ``t``: ``(texts, (prompt, answer) pairs)``.

        Texts: training-template statements of every fact true at ``t`` (both groups), plus history
        statements and cues up to ``t``. Pairs: QA and verification items of the *format* facts only.
        """
        texts = [s.text for s in self.statements("train", t)]
        if history:
            texts += [s.text for s in self.history_statements(t)]
        if cues:
            texts += [s.text for s in self.cue_statements(t)]
        pairs = [(q.question, q.target) for q in self.qa_pairs("train", t)]
        pairs += [(v.prompt, v.target) for v in self.verification_items("train", t)]
        return texts, pairs

    def vocabulary_texts(self) -> list[str]:
        """Every text any renderer can produce for this world (to build a tokenizer that covers them)."""
        texts: list[str] = []
        for year in (self.start_year, self.end_year):
            texts += [s.text for s in self.statements("all", year)]
            texts += [q.question + q.target for q in self.qa_pairs("all", year, templates="all")]
            texts += [v.prompt + v.target for v in self.verification_items("all", year)]
            texts += [m.prompt + m.target for m in self.multiple_choice("all", year)]
        texts += [s.text for s in self.history_statements()]
        texts += [c.text for c in self.cues]
        texts += [task.prompt + " " + task.answer for task in self.multihop_tasks()]
        for versions in self.history.values():
            texts += [f.value for f in versions]
        texts += [str(y) for y in range(self.start_year, self.end_year + 2)]
        return texts

    def fingerprint(self) -> str:
        """A stable hash of the config and every fact version (the cache key of models trained on it)."""
        import hashlib

        h = hashlib.sha256(json.dumps(self.config, sort_keys=True).encode())
        for versions in self.history.values():
            for f in versions:
                h.update(repr(astuple_fact(f)).encode())
        h.update(",".join(sorted(self.target_subjects)).encode())
        return h.hexdigest()[:16]

    # ----------------------------------------------------------------- serialisation
    def to_jsonl(self, path: str | os.PathLike[str]) -> Path:
        """Write the config (first line) and every fact version (one per line) as JSONL."""
        rows: list[dict[str, Any]] = [{"config": self.config}]
        rows += [asdict(f) for versions in self.history.values() for f in versions]
        return write_jsonl(rows, path)

    @classmethod
    def from_jsonl(cls, path: str | os.PathLike[str]) -> World:
        """Rebuild a world from :meth:`to_jsonl`; raises ``ValueError`` if the facts do not match."""
        rows = read_jsonl(path)
        if not rows or "config" not in rows[0]:
            raise ValueError(f"{path} is not a World JSONL file (first line must hold the config)")
        world = cls(**rows[0]["config"])
        stored = [Fact(**r) for r in rows[1:]]
        mine = [f for versions in world.history.values() for f in versions]
        if stored != mine:
            raise ValueError(f"{path}: facts differ from those the stored config generates")
        return world

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={len(v)}" for k, v in self.entities.items())
        return f"World(seed={self.seed}, {sizes}, years={self.start_year}-{self.end_year})"


def astuple_fact(f: Fact) -> tuple:
    return (f.subject, f.relation, f.value, f.valid_from, f.valid_to)


def arithmetic_tasks(
    n: int,
    kind: Literal["add", "mod"] = "add",
    digits: int = 2,
    modulus: int = 7,
    seed: int = 0,
) -> list[VerifiableTask]:
    """Arithmetic prompts with exact answers, digits spaced so a word-level tokenizer sees each one.

    ``add``: ``"Q: 4 7 + 3 8 = A:"`` answer ``"8 5"``; ``mod``: ``"Q: 4 7 + 3 8 mod 7 = A:"``.
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
            prompt = f"Q: {spaced(x)} + {spaced(y)} mod {modulus} = A:"
            tasks.append(VerifiableTask(prompt, spaced((x + y) % modulus), "mod"))
    return tasks


# --------------------------------------------------------------------- JSONL
def _to_row(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    row = {f.name: getattr(item, f.name) for f in fields(item)}
    row = {k: (asdict(v) if isinstance(v, Fact) else v) for k, v in row.items()}
    row["type"] = type(item).__name__
    return row


def write_jsonl(items: Iterable[Any], path: str | os.PathLike[str]) -> Path:
    """Write dataclass items (QAItem, Fact, ...) or dicts, one JSON object per line, atomically."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with tmp.open("w") as f:
        for item in items:
            f.write(json.dumps(_to_row(item)) + "\n")
    os.replace(tmp, out)
    return out


_TYPES = {
    c.__name__: c for c in (Fact, Statement, QAItem, VerificationItem, MCItem, VerifiableTask)
}


def _from_row(row: dict[str, Any]) -> Any:
    kind = row.get("type")
    if kind not in _TYPES:
        return row
    cls = _TYPES[kind]
    data = {k: v for k, v in row.items() if k != "type"}
    if "fact" in data:
        data["fact"] = Fact(**data["fact"])
    for name in ("aliases", "options", "valid_answers"):
        if name in data:
            data[name] = tuple(data[name])
    return cls(**data)


def read_jsonl(path: str | os.PathLike[str]) -> list[Any]:
    """Read :func:`write_jsonl` output back: typed items become their dataclasses, the rest dicts."""
    with Path(path).open() as f:
        return [_from_row(json.loads(line)) for line in f if line.strip()]
