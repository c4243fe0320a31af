"""Relations between entity types: templates for statements, questions, history, cues and formats."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

EntityType = Literal["person", "city", "company", "country"]
Split = Literal["train", "heldout", "all"]


@dataclass(frozen=True)
class Relation:
    """A relation between a subject type and a value type, with its templates and yearly change rate.

    Templates use ``{s}`` (subject) and ``{v}`` (value); history templates also ``{until}``, cue
    templates ``{year}``, change questions ``{next}`` (the year a change would happen in).
    ``negation`` states that the subject does *not* have value ``{v}`` (True/False items of the
    negative polarity). ``questions`` are rendered as ``"Q: <question> A:"``.
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
    negation: str = ""
    change_question: str = ""


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

_NEGATIONS = {
    "born_in": "{s} was not born in {v}.",
    "lives_in": "{s} does not live in {v}.",
    "works_for": "{s} does not work for {v}.",
    "ceo_of": "The CEO of {s} is not {v}.",
    "headquartered_in": "{s} is not headquartered in {v}.",
    "capital_of": "The capital of {s} is not {v}.",
    "located_in": "{s} is not located in {v}.",
}
_CHANGE_QUESTIONS = {
    "lives_in": "Will {s} move away from {v} in {next}?",
    "works_for": "Will {s} leave {v} in {next}?",
    "ceo_of": "Will the term of {v} as CEO of {s} end in {next}?",
    "headquartered_in": "Will {s} move its headquarters out of {v} in {next}?",
}
RELATIONS = {
    name: replace(r, negation=_NEGATIONS[name], change_question=_CHANGE_QUESTIONS.get(name, ""))
    for name, r in RELATIONS.items()
}

_RELATIONS_OF: dict[str, tuple[str, ...]] = {
    t: tuple(r.name for r in RELATIONS.values() if r.subject == t)
    for t in ("person", "city", "company", "country")
}


def _check_split(split: str) -> str:
    if split not in ("train", "heldout", "all"):
        raise ValueError(f"split must be 'train', 'heldout' or 'all'; got {split!r}")
    return split


def _check_relation(relation: str) -> Relation:
    if relation not in RELATIONS:
        raise ValueError(f"unknown relation {relation!r}; known: {', '.join(RELATIONS)}")
    return RELATIONS[relation]
