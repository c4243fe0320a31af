"""The World: entities from fixed name pools, version histories, exposure, renderers and corpora."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from functools import cache, cached_property
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np

from paper_common.facts.io import read_jsonl, write_jsonl
from paper_common.facts.items import (
    ChangeQuestion,
    Fact,
    JudgeItem,
    MCItem,
    QAItem,
    Statement,
    VerifiableTask,
    VerificationItem,
)
from paper_common.facts.relations import (
    RELATIONS,
    Relation,
    Split,
    _check_relation,
    _check_split,
)

COMPANY_SUFFIXES = ("Labs", "Systems", "Group", "Works", "Industries", "Dynamics")
#: Years any World may use (the fixed vocabulary holds each as one token).
YEARS = (1950, 2080)
#: Question formats :meth:`World.format_pairs` renders (``corpus(formats=...)`` trains on them).
FORMATS = ("qa", "tf", "tf_negated", "mc", "judge", "alias", "cue")
Format = Literal["qa", "tf", "tf_negated", "mc", "judge", "alias", "cue"]
Style = Literal["sentences", "biographies"]


@cache
def name_pools() -> dict[str, tuple[str, ...]]:
    """The fixed name pools every World draws from: ``country``, ``city``, ``company`` (stems),
    ``first_name``, ``surname`` (each name one word, so one token of the fixed vocabulary)."""
    raw = json.loads(resources.files("paper_common.facts").joinpath("names.json").read_text())
    return {k: tuple(v) for k, v in raw.items() if k != "comment"}


def _excluded_words(exclude: Any) -> list[str]:
    """The one-word names ``exclude`` blocks: a World's city, country, company-stem and surname
    words, or the words of any iterable of names and Worlds (``[base, other]``)."""
    if exclude is None:
        return []
    if isinstance(exclude, str):
        raise TypeError("exclude must be a World or an iterable of names, not one string")
    names: list[str] = []
    for item in [exclude] if isinstance(exclude, World) else exclude:
        if isinstance(item, World):
            names += [n for kind in item.entities.values() for n in kind]
        elif isinstance(item, str):
            names.append(item)
        else:
            raise TypeError(
                f"exclude must hold Worlds or names (strings); got {type(item).__name__} {item!r}"
            )
    words = set()
    for n in names:
        parts = n.split(" ")
        words.update(p for p in parts if p not in COMPANY_SUFFIXES)
    return sorted(words)


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
        exposure: tail index ``alpha`` of the heavy-tailed law of how often each fact is documented
            (``P(m >= k) = k^-alpha``, capped at ``max_exposure``), recorded per fact in
            :attr:`exposure`; ``None`` (default): every fact once.
        max_exposure: the cap of that law.
        documentation_lag: years a change takes to be documented fully: at cutoff ``t`` a version
            that began ``a < documentation_lag`` years before is mentioned ``(a + 1) / (lag + 1)`` as
            often as its exposure says and the version it replaced the rest (stale present-tense
            text); ``0`` (default): changes are documented at once.
        exclude: a World, names, or an iterable of Worlds and names whose one-word names this
            World must not use (so a model pretrained on one World meets only new entities in
            another; pass every World of a chain, ``exclude=[base, first]``).

    Names come from fixed pools (:func:`name_pools`), so every World shares one vocabulary:
    cities, countries and company stems are one word; a person is a first name and a surname, the
    surname unique within the World (it is the person's alias).

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
        exposure: float | None = None,
        max_exposure: int = 32,
        documentation_lag: int = 0,
        exclude: World | Iterable[World | str] | None = None,
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
        if start_year < YEARS[0] or end_year + 1 > YEARS[1]:
            raise ValueError(
                f"years must lie in [{YEARS[0]}, {YEARS[1] - 1}] (the fixed vocabulary's years); "
                f"got {start_year}-{end_year}"
            )
        if exposure is not None and (
            isinstance(exposure, bool) or not (isinstance(exposure, int | float) and exposure > 0)
        ):
            raise ValueError(f"exposure must be None or a tail index > 0; got {exposure!r}")
        if isinstance(max_exposure, bool) or not isinstance(max_exposure, int) or max_exposure < 1:
            raise ValueError(f"max_exposure must be an int >= 1; got {max_exposure!r}")
        if not isinstance(documentation_lag, int) or documentation_lag < 0:
            raise ValueError(f"documentation_lag must be an int >= 0; got {documentation_lag!r}")
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
            if rel == "located_in" and rate != 0.0:
                raise ValueError(
                    "change_rates['located_in'] must be 0: a city's country is fixed (capitals "
                    f"are drawn among a country's cities); got {rate}"
                )
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
            "exposure": None if exposure is None else float(exposure),
            "max_exposure": max_exposure,
            "documentation_lag": documentation_lag,
            "exclude": _excluded_words(exclude),
        }
        self.seed = seed
        self.start_year, self.end_year = start_year, end_year
        self.change_rates = rates
        self.cue_recall, self.false_cue_rate = cue_recall, false_cue_rate
        self.documentation_lag = documentation_lag
        rng = np.random.default_rng(seed)
        self._make_entities(
            rng, n_people, n_cities, n_companies, n_countries, set(self.config["exclude"])
        )
        self._make_histories(rng)
        self._make_cues(rng)
        subjects = [s for t in ("person", "company", "country", "city") for s in self.entities[t]]
        chosen = rng.random(len(subjects)) < target_fraction
        self.target_subjects = frozenset(s for s, c in zip(subjects, chosen, strict=True) if c)
        self.exposure = self._make_exposure(exposure, max_exposure)

    # ----------------------------------------------------------------- generation
    def _make_entities(
        self,
        rng: np.random.Generator,
        n_people: int,
        n_cities: int,
        n_companies: int,
        n_countries: int,
        exclude: set[str],
    ) -> None:
        pools = name_pools()

        def draw(kind: str, n: int) -> list[str]:
            free = [w for w in pools[kind] if w not in exclude]
            if n > len(free):
                raise ValueError(
                    f"asked for {n} {kind} names but the fixed pool has {len(free)} left "
                    f"({len(pools[kind])} in all, {len(pools[kind]) - len(free)} excluded)"
                )
            return [free[int(i)] for i in rng.choice(len(free), size=n, replace=False)]

        first = pools["first_name"]
        suffixes = rng.integers(len(COMPANY_SUFFIXES), size=n_companies)
        self.entities: dict[str, list[str]] = {
            "country": draw("country", n_countries),
            "city": draw("city", n_cities),
            "person": [
                f"{first[int(rng.integers(len(first)))]} {last}"
                for last in draw("surname", n_people)
            ],
            "company": [
                f"{stem} {COMPANY_SUFFIXES[int(k)]}"
                for stem, k in zip(draw("company", n_companies), suffixes, strict=True)
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
                    if len(pool) < 2:  # one possible value (a country with one city): no change
                        change_years = []
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

    def _make_exposure(self, alpha: float | None, cap: int) -> dict[tuple[str, str], int]:
        """Documents per fact from a discrete power law, on its own random stream (so the facts
        themselves do not depend on it)."""
        keys = list(self.history)
        if alpha is None:
            return dict.fromkeys(keys, 1)
        u = 1.0 - np.random.default_rng([self.seed, 7]).random(len(keys))  # in (0, 1]
        with np.errstate(over="ignore"):  # a tiny alpha overflows to inf: the cap
            m = np.minimum(cap, np.floor(u ** (-1.0 / alpha))).astype(int)
        return {k: int(v) for k, v in zip(keys, m, strict=True)}

    def documentation(self, t: int | None = None) -> dict[Fact, int]:
        """How many documents mention each fact version at cutoff ``t`` (default: last year).

        Every current version gets its :attr:`exposure`; with a ``documentation_lag`` a version
        that began ``a`` years before ``t`` (``a < lag``) gets ``n = max(1, round(m (a + 1) / (lag + 1)))``
        and the version it replaced keeps the rest, ``m - n``, as if still true (stale text), so
        the two add up to the fact's exposure. Ordered as :attr:`history`, a stale version right after its successor.
        """
        t = self._check_time(t)
        lag = self.documentation_lag
        out: dict[Fact, int] = {}
        for key, versions in self.history.items():
            m = self.exposure[key]
            i = next(j for j, f in enumerate(versions) if f.holds_at(t))
            age = t - versions[i].valid_from
            if lag == 0 or age >= lag or i == 0:
                out[versions[i]] = m
                continue
            out[versions[i]] = max(1, round(m * (age + 1) / (lag + 1)))
            stale = m - out[versions[i]]
            if stale > 0:
                out[versions[i - 1]] = stale
        return out

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
        negated: bool = False,
    ) -> list[VerificationItem]:
        """For each fact, one true claim and one false claim (a wrong value of the same type).

        ``negated=True``: the negative polarity ("X does not work for Y."): the claim with the
        right value is false and the one with a wrong value true."""
        rows = self.facts(split, t) if facts is None else list(facts)
        rng = np.random.default_rng([self.seed, seed, 6 if negated else 1])
        out = []
        for f in rows:
            rel = _check_relation(f.relation)
            wrong = self._wrong_value(rel, f, rng)
            for value, label in ((f.value, True), (wrong, False)):
                template = rel.negation if negated else rel.statements[0]
                claim = template.format(s=f.subject, v=value)
                prompt = f"Claim: {claim} True or false? A:"
                out.append(VerificationItem(prompt, label != negated, value, f))
        return out

    def _wrong_value(self, rel: Relation, f: Fact, rng: np.random.Generator) -> str:
        """A value of the right type that is not ``f``'s (from the relation's own pool if it can)."""
        pool = [v for v in self._pool(rel, f.subject) if v != f.value]
        if not pool:
            pool = [v for v in self.entities[rel.value] if v != f.value and v != f.subject]
        return str(rng.choice(pool))

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
        style: Style = "sentences",
        augmentation: int = 1,
        formats: Sequence[Format] = ("qa", "tf"),
        seed: int = 0,
    ) -> tuple[list[str], list[tuple[str, str]]]:
        """Training data for a fact LM at year ``t``: ``(texts, (prompt, answer) pairs)``.

        Texts document every fact as :meth:`documentation` says (both subject groups), plus history
        statements and cues up to ``t``. ``style="sentences"``: each mention is the fact's
        training-template statements, one text each; ``"biographies"`` (knowledge augmentation,
        Allen-Zhu & Li): a subject's mentions are grouped into documents, document ``b`` holding
        every fact of the subject mentioned more than ``b`` times, in a random order with a random
        training template per sentence, the full name in each. ``augmentation`` multiplies every
        mention count (each copy a fresh order and templates). Pairs: :meth:`format_pairs` of the
        *format* facts in ``formats``. With the defaults and a World of default exposure and lag
        this is the corpus of one statement per template per fact.
        """
        if style not in ("sentences", "biographies"):
            raise ValueError(f"style must be 'sentences' or 'biographies'; got {style!r}")
        if not isinstance(augmentation, int) or augmentation < 1:
            raise ValueError(f"augmentation must be an int >= 1; got {augmentation!r}")
        t = self._check_time(t)
        docs = self.documentation(t)
        texts: list[str] = []
        if style == "sentences":
            for f, count in docs.items():
                sentences = [s.text for s in self.statements("train", facts=[f])]
                texts += sentences * (count * augmentation)
        else:
            texts += self._biographies(docs, t, augmentation, seed)
        if history:
            # a change is written up in the past tense once it is fully documented
            lag = self.documentation_lag
            texts += [s.text for s in self.history_statements(t) if s.fact.valid_to + lag <= t]
        if cues:
            texts += [s.text for s in self.cue_statements(t)]
        return texts, self.format_pairs(formats, "train", t, seed=seed)

    def _biographies(
        self, docs: dict[Fact, int], t: int, augmentation: int, seed: int
    ) -> list[str]:
        rng = np.random.default_rng([self.seed, seed, 11])
        by_subject: dict[str, list[tuple[Fact, int]]] = {}
        stale: list[tuple[Fact, int]] = []
        for f, count in docs.items():
            (by_subject.setdefault(f.subject, []) if f.holds_at(t) else stale).append(
                (f, count * augmentation)
            )
        texts = []
        for rows in by_subject.values():
            for b in range(max(c for _, c in rows)):
                chosen = [f for f, c in rows if c > b]
                order = rng.permutation(len(chosen))
                sentences = []
                for i in order:
                    rel = RELATIONS[chosen[i].relation]
                    tpl = rel.statements[int(rng.integers(len(rel.statements)))]
                    sentences.append(tpl.format(s=chosen[i].subject, v=chosen[i].value))
                texts.append(" ".join(sentences))
        for f, count in stale:  # stale text stands alone, never beside the new value
            rel = RELATIONS[f.relation]
            for _ in range(count):
                tpl = rel.statements[int(rng.integers(len(rel.statements)))]
                texts.append(tpl.format(s=f.subject, v=f.value))
        return texts

    # ----------------------------------------------------------------- formats
    def format_pairs(
        self,
        formats: Sequence[Format] = ("qa", "tf"),
        split: Split = "train",
        t: int | None = None,
        seed: int = 0,
    ) -> list[tuple[str, str]]:
        """``(prompt, target)`` pairs of ``split``'s facts in each of ``formats`` (see :data:`FORMATS`):
        QA, True/False (``tf``; ``tf_negated`` the negative polarity), multiple choice, Yes/No
        judging of a proposed answer, aliases, and change questions (``cue``)."""
        if isinstance(formats, str):
            raise TypeError("formats must be a sequence of format names, not one string")
        unknown = [f for f in formats if f not in FORMATS]
        if unknown:
            raise ValueError(f"unknown formats {unknown}; known: {', '.join(FORMATS)}")
        render = {
            "qa": lambda: [(q.question, q.target) for q in self.qa_pairs(split, t)],
            "tf": lambda: [
                (v.prompt, v.target) for v in self.verification_items(split, t, seed=seed)
            ],
            "tf_negated": lambda: [
                (v.prompt, v.target)
                for v in self.verification_items(split, t, seed=seed, negated=True)
            ],
            "mc": lambda: [(m.prompt, m.target) for m in self.multiple_choice(split, t, seed=seed)],
            "judge": lambda: [(j.prompt, j.target) for j in self.judge_items(split, t, seed=seed)],
            "alias": lambda: self.alias_pairs(split),
            "cue": lambda: [
                (c.prompt, c.target) for c in self.change_questions(split, t, seed=seed)
            ],
        }
        return [pair for name in formats for pair in render[name]()]

    def judge_items(
        self,
        split: Split = "train",
        t: int | None = None,
        facts: Iterable[Fact] | None = None,
        seed: int = 0,
    ) -> list[JudgeItem]:
        """For each fact, its question with the right answer proposed (Yes) and a wrong one (No)."""
        rows = self.facts(split, t) if facts is None else list(facts)
        rng = np.random.default_rng([self.seed, seed, 4])
        out = []
        for f in rows:
            rel = _check_relation(f.relation)
            question = rel.questions[0].format(s=f.subject)
            for value, label in ((f.value, True), (self._wrong_value(rel, f, rng), False)):
                prompt = (
                    f"Q: {question} Proposed answer: {value}. Is the proposed answer correct? A:"
                )
                out.append(JudgeItem(prompt, label, value, f))
        return out

    def alias_pairs(self, split: Split = "train") -> list[tuple[str, str]]:
        """``("Q: What is the short name of <name>? A:", " <alias>")`` for people and companies of
        ``split`` (the alias :func:`is_correct` accepts as an answer)."""
        _check_split(split)
        out = []
        for kind in ("person", "company"):
            for name in self.entities[kind]:
                target = name in self.target_subjects
                if (split == "train" and target) or (split == "heldout" and not target):
                    continue
                (alias,) = self.aliases(name)
                out.append((f"Q: What is the short name of {name}? A:", " " + alias))
        return out

    def change_questions(
        self,
        split: Split = "train",
        t: int | None = None,
        seed: int = 0,
        uncued_per_cue: int = 1,
    ) -> list[ChangeQuestion]:
        """Will the fact change next year? For every year ``y < t`` with a cue about a
        ``split`` subject, the question at ``y`` (label: did a change start in ``y + 1``), plus
        ``uncued_per_cue`` years without a cue drawn at random for the same fact (balanced
        formats, not only No). A model trained on them on format subjects, and on cue statements of
        every subject, can learn to read cues; target subjects' questions test it."""
        _check_split(split)
        t = self._check_time(t)
        if not isinstance(uncued_per_cue, int) or uncued_per_cue < 0:
            raise ValueError(f"uncued_per_cue must be an int >= 0; got {uncued_per_cue!r}")
        rng = np.random.default_rng([self.seed, seed, 5])
        cued: dict[tuple[str, str], set[int]] = {}
        for c in self.cue_statements(t):
            year = int(re.search(r"In (\d+),", c.text).group(1))
            if year < t:
                cued.setdefault(c.fact.key, set()).add(year)
        out = []
        for key, versions in self.history.items():
            rel = RELATIONS[key[1]]
            target = key[0] in self.target_subjects
            if not rel.change_question or (split == "train" and target):
                continue
            if split == "heldout" and not target:
                continue
            starts = {f.valid_from for f in versions[1:]}
            years = sorted(cued.get(key, ()))
            free = [y for y in range(self.start_year, t) if y not in cued.get(key, ())]
            k = min(len(free), uncued_per_cue * max(1, len(years)))
            years += sorted(int(free[i]) for i in rng.choice(len(free), size=k, replace=False))
            for y in years:
                f = self._version_at(key[0], key[1], y)
                q = rel.change_question.format(s=f.subject, v=f.value, next=y + 1)
                out.append(
                    ChangeQuestion(f"Q: {q} A:", (y + 1) in starts, f, y, y in cued.get(key, ()))
                )
        return out

    def vocabulary_texts(self) -> list[str]:
        """Every text any renderer can produce for this world (to build a tokenizer that covers them)."""
        texts: list[str] = []
        for year in (self.start_year, self.end_year):
            texts += [s.text for s in self.statements("all", year)]
            texts += [q.question + q.target for q in self.qa_pairs("all", year, templates="all")]
            texts += [v.prompt + v.target for v in self.verification_items("all", year)]
            texts += [m.prompt + m.target for m in self.multiple_choice("all", year)]
            texts += [
                p + a for p, a in self.format_pairs(("tf_negated", "judge", "cue"), "all", year)
            ]
        texts += [" ".join(f"{letter})" for letter in "ABCDEFGH")]  # up to 8 options
        texts += [p + a for p, a in self.alias_pairs("all")]
        texts += [s.text for s in self.history_statements()]
        texts += [c.text for c in self.cues]
        texts += [task.prompt + " " + task.answer for task in self.multihop_tasks()]
        for versions in self.history.values():
            texts += [f.value for f in versions]
        texts += [str(y) for y in range(self.start_year, self.end_year + 2)]
        return texts

    def fingerprint(self) -> str:
        """A stable hash of the config and every fact version (the cache key of models trained on it)."""
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


def fixed_vocabulary_texts() -> list[str]:
    """Texts holding every word any World can render (templates, formats, every pooled name,
    every year of :data:`YEARS`, digits): a tokenizer built on them covers all Worlds."""
    from paper_common.facts.tasks import arithmetic_tasks

    pools = name_pools()
    world = World(seed=0, n_people=12, n_cities=8, n_companies=6, n_countries=4)
    texts = world.vocabulary_texts()
    texts += [" ".join(names) for names in pools.values()]
    texts += [" ".join(COMPANY_SUFFIXES), " ".join(str(y) for y in range(YEARS[0], YEARS[1] + 1))]
    texts += [" ".join(f"{letter})" for letter in "ABCDEFGH")]  # multiple choice, up to 8 options
    texts += ["0 1 2 3 4 5 6 7 8 9"]
    texts += [t.prompt + " " + t.answer for t in arithmetic_tasks(4, "mod")]
    return texts
