"""Drift items: one question per (model cutoff, fact), labelled by whether the fact changed after the cutoff.

A model trained on a world as it was in year ``t_c`` (its *cutoff*) is asked about the world at the
query time ``t_q`` (default the world's last year). The fact has **drifted** when its value at
``t_c`` differs from its value at ``t_q``: whatever the model learned is stale. Drift lies in the
model's future, so nothing in its training text states it; what a model can know are training-time
correlates: how volatile the relation is, whether the fact changed before, and leading cues ("In
2021, X was said to be leaving Y.") that a change follows with a known probability. :func:`oracle_drift`
is the Bayes probability of drift from exactly those, computed from the world generator's own
parameters: the ceiling any probe of the model can reach.

Subjects in ``unseen`` are left out of the training text entirely (:func:`training_corpus`): questions
about them are the *confabulation* cell (the model has never read the fact).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from paper_common.facts import RELATIONS, Fact, World

__all__ = [
    "DRIFT_RATES",
    "VOLATILE",
    "DriftItem",
    "drift_items",
    "drift_world",
    "oracle_drift",
    "training_corpus",
    "unseen_subjects",
]

# the relations whose values change (the World's stable ones, born_in / capital_of / located_in,
# can never drift) and the yearly change rates of the drift world: relation-specific, so volatility
# alone is informative, and high enough that a few years hold many changes
VOLATILE: tuple[str, ...] = ("lives_in", "works_for", "ceo_of", "headquartered_in")
DRIFT_RATES: dict[str, float] = {
    "lives_in": 0.12,
    "works_for": 0.25,
    "ceo_of": 0.18,
    "headquartered_in": 0.06,
}


def drift_world(
    seed: int = 0,
    n_people: int = 160,
    n_cities: int = 40,
    n_companies: int = 40,
    n_countries: int = 8,
    start_year: int = 2010,
    end_year: int = 2024,
    cue_recall: float = 0.8,
    false_cue_rate: float = 0.04,
    change_rates: dict[str, float] | None = None,
    documentation_lag: int = 0,
) -> World:
    """A :class:`~paper_common.facts.World` with relation-specific change rates and noisy leading cues.

    ``cue_recall``: the share of real changes announced the year before; ``false_cue_rate``: the
    chance of a cue in a year no change follows; ``documentation_lag``: years a change takes to be
    documented fully (stale text near the cutoff, the World's lagged documentation; 0: at once).
    Everything else is the World's.
    """
    return World(
        seed=seed,
        n_people=n_people,
        n_cities=n_cities,
        n_companies=n_companies,
        n_countries=n_countries,
        start_year=start_year,
        end_year=end_year,
        cue_recall=cue_recall,
        false_cue_rate=false_cue_rate,
        change_rates={**DRIFT_RATES, **(change_rates or {})},
        documentation_lag=documentation_lag,
    )


@dataclass(frozen=True)
class DriftItem:
    """One question about one fact, for a model with cutoff ``cutoff``, asked at ``query_time``.

    ``prompt`` is what the model sees; ``claim`` a statement template with ``{v}`` (for statement
    based detectors: SAPLMA, CCS). ``drift``: the value at the cutoff differs from the value at the
    query time. ``shown``: the fact was in the model's training text. ``cue``: a leading cue was
    issued in the cutoff year; ``changed_before``: the fact had changed by the cutoff; ``oracle``:
    the Bayes probability of drift given relation, cue and horizon (``nan`` where unknown).
    """

    subject: str
    relation: str
    prompt: str
    claim: str
    value_cutoff: str
    value_query: str
    aliases_cutoff: tuple[str, ...]
    aliases_query: tuple[str, ...]
    cutoff: float
    query_time: float
    shown: bool = True
    cue: bool = False
    changed_before: bool = False
    oracle: float = float("nan")

    @property
    def drift(self) -> bool:
        return self.value_cutoff != self.value_query

    def claim_with(self, value: str) -> str:
        return self.claim.format(v=value)


def unseen_subjects(world: World, fraction: float = 0.15, seed: int = 0) -> frozenset[str]:
    """A seeded ``fraction`` of the people and companies, to be left out of every training text."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"fraction must be in [0, 1); got {fraction}")
    rng = np.random.default_rng([world.seed, seed, 19])
    pool = [*world.entities["person"], *world.entities["company"]]
    pick = rng.random(len(pool)) < fraction
    return frozenset(s for s, p in zip(pool, pick, strict=True) if p)


def training_corpus(
    world: World,
    cutoff: int,
    unseen: Iterable[str] = (),
    relations: Sequence[str] | None = VOLATILE,
    change_questions: bool = False,
) -> tuple[list[str], list[tuple[str, str]]]:
    """``world.corpus(cutoff)`` (statements, history, cues; QA and True/False items of format facts)
    restricted to ``relations`` (``None``: all) and without any text whose subject is in ``unseen``.

    ``change_questions``: also train the World's "will it change next year?" questions of format
    facts up to the cutoff (:meth:`~paper_common.facts.World.change_questions`): the drift signal
    as a learned format (cues read as a forecast), off by default."""
    hidden = frozenset(unseen)
    wanted = frozenset(relations) if relations is not None else frozenset(RELATIONS)

    def keep(fact: Fact) -> bool:
        return fact.relation in wanted and fact.subject not in hidden

    texts = [
        s.text
        for s in (
            *world.statements("train", cutoff),
            *world.history_statements(cutoff),
            *world.cue_statements(cutoff),
        )
        if keep(s.fact)
    ]
    pairs = [(q.question, q.target) for q in world.qa_pairs("train", cutoff) if keep(q.fact)]
    pairs += [
        (v.prompt, v.target) for v in world.verification_items("train", cutoff) if keep(v.fact)
    ]
    if change_questions:
        pairs += [
            (q.prompt, q.target)
            for q in world.change_questions("train", cutoff)
            if keep(q.fact) and q.year < cutoff
        ]
    return texts, pairs


def oracle_drift(world: World, relation: str, cue: bool, horizon: int) -> float:
    """P(the value at ``cutoff + horizon`` differs from the value at ``cutoff``) given the relation
    and whether a cue was issued in the cutoff year, from the generator's parameters.

    The first year's change probability is the cue's posterior (``World.cue_precision`` with a cue,
    ``r (1 - p) / (r (1 - p) + (1 - r)(1 - q))`` without); later years change at the base rate ``r``.
    A value changing back to the old one is ignored (rare with many candidate values).
    """
    if horizon < 0:
        raise ValueError(f"horizon must be >= 0; got {horizon}")
    if horizon == 0 or RELATIONS[relation].cue == "":
        return 0.0
    r, p, q = world.change_rates[relation], world.cue_recall, world.false_cue_rate
    if cue:
        first = world.cue_precision(relation)
    else:
        denom = r * (1 - p) + (1 - r) * (1 - q)
        first = r * (1 - p) / denom if denom > 0 else 0.0
    return float(1.0 - (1.0 - first) * (1.0 - r) ** (horizon - 1))


def drift_items(
    world: World,
    cutoff: int,
    query_time: int | None = None,
    relations: Sequence[str] = VOLATILE,
    unseen: Iterable[str] = (),
    template: int = 0,
) -> list[DriftItem]:
    """One :class:`DriftItem` per (subject, relation) of ``relations``, for a model cut off at ``cutoff``.

    ``query_time`` defaults to the world's last year and must not precede ``cutoff``. Questions use
    the relation's training question ``template``; ``unseen`` marks the facts left out of training.
    """
    t_q = world.end_year if query_time is None else world._check_time(query_time)
    t_c = world._check_time(cutoff)
    if t_q < t_c:
        raise ValueError(f"query_time ({t_q}) must not precede cutoff ({t_c})")
    hidden = frozenset(unseen)
    # cues issued in the cutoff year announce a change in the year after it
    cue_now = {
        (c.fact.subject, c.fact.relation)
        for c in world.cue_statements(t_c)
        if c.text.startswith(f"In {t_c},")
    }
    items = []
    for relation in relations:
        rel = RELATIONS[relation]
        if not 0 <= template < len(rel.questions):
            raise ValueError(
                f"{relation} has {len(rel.questions)} question templates; got {template}"
            )
        for subject in world.entities[rel.subject]:
            history = world.history[(subject, relation)]
            v_c = world.value_at(subject, relation, t_c)
            v_q = world.value_at(subject, relation, t_q)
            cue = (subject, relation) in cue_now
            shown = subject not in hidden
            items.append(
                DriftItem(
                    subject=subject,
                    relation=relation,
                    prompt=f"Q: {rel.questions[template].format(s=subject)} A:",
                    claim=rel.statements[0].replace("{s}", subject),
                    value_cutoff=v_c,
                    value_query=v_q,
                    aliases_cutoff=world.aliases(v_c),
                    aliases_query=world.aliases(v_q),
                    cutoff=float(t_c),
                    query_time=float(t_q),
                    shown=shown,
                    cue=cue,
                    changed_before=any(f.valid_from <= t_c for f in history[1:]),
                    # an unseen subject's cue never reached the model
                    oracle=oracle_drift(world, relation, cue and shown, t_q - t_c),
                )
            )
    return items
