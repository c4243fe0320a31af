"""A synthetic world of made-up entities and facts whose ground truth we control, deterministic from a seed.

Entities of four types (people, cities, companies, countries) carry made-up names drawn from fixed
pools (:func:`name_pools`), so every World shares one vocabulary and a model pretrained on one World
can be taught another's entities: cities, countries and company stems are one word (one token of a
word-level tokenizer, so vocabulary ranks mean something); a person is a first name and a surname, a
company a stem and a suffix (answering is more than one step). ``World(exclude=other)`` keeps two
Worlds' names disjoint. Every fact has a version history ``(subject, relation, value, valid_from,
valid_to)`` over ``[start_year, end_year]``: relations change at their own yearly rate (``born_in``
never, ``works_for`` often), and changes may be announced a year ahead by noisy leading cues, some of
them false, with the generator's own cue-to-change probability exposed (:meth:`World.cue_precision`)
so a probe's ceiling is known.

How strongly each fact is documented varies: ``World(exposure=alpha)`` draws per-fact document counts
from a heavy-tailed law (recorded in ``world.exposure``, so analyses can condition on frequency), and
``documentation_lag`` leaves recent changes documented partly under their old value
(:meth:`World.documentation`). :meth:`World.corpus` renders the documents as one sentence per template
or, ``style="biographies"``, as permuted multi-attribute biographies (knowledge augmentation).

Renderers turn facts into training and evaluation text: declarative statements (several paraphrase
templates per relation, some held out), QA pairs, True/False items in both polarities, multiple-choice
items, Yes/No judging of a proposed answer, aliases, change questions ("will X leave Y next year?"),
history statements and cues (:meth:`World.format_pairs`, :data:`FORMATS`). The **format split** follows
Allen-Zhu & Li ("Physics of Language Models 3.1"): subjects are split into *format* subjects, whose
facts appear as statements and in the question formats, and *target* subjects, whose facts appear only
as statements. A model learns the formats on format facts and is then asked them about target facts it
has only read about. ``split="train"`` selects format facts (what a model is trained to answer),
``"heldout"`` target facts, ``"all"`` both; statements of every fact are training text, so for
:meth:`World.statements` the split selects templates instead (``"heldout"``: held-out paraphrases).

Verifiable tasks for RL with verifiable rewards (:func:`arithmetic_tasks`, :meth:`World.multihop_tasks`)
come with an exact checker. Everything serialises to JSONL.

Modules: :mod:`~paper_common.facts.relations`, :mod:`~paper_common.facts.items`,
:mod:`~paper_common.facts.world`, :mod:`~paper_common.facts.tasks`, :mod:`~paper_common.facts.io`.
"""

from __future__ import annotations

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
    is_correct,
    normalize_answer,
)
from paper_common.facts.relations import RELATIONS, Relation
from paper_common.facts.tasks import arithmetic_tasks
from paper_common.facts.world import (
    COMPANY_SUFFIXES,
    FORMATS,
    YEARS,
    World,
    astuple_fact,
    fixed_vocabulary_texts,
    name_pools,
)

__all__ = [
    "COMPANY_SUFFIXES",
    "FORMATS",
    "RELATIONS",
    "YEARS",
    "ChangeQuestion",
    "Fact",
    "JudgeItem",
    "MCItem",
    "QAItem",
    "Relation",
    "Statement",
    "VerifiableTask",
    "VerificationItem",
    "World",
    "arithmetic_tasks",
    "astuple_fact",
    "fixed_vocabulary_texts",
    "is_correct",
    "name_pools",
    "normalize_answer",
    "read_jsonl",
    "write_jsonl",
]
