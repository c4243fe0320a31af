"""Rank leakage after knowledge editing, the one-query Output Attack, and Rank-guided Concealment
Editing (RCE).

- :mod:`rce.editing`: ROME, MEMIT and norm-bounded fine-tuning on any Hugging Face causal LM,
  ``edit(...)`` with a bit-exact ``restore()``, causal tracing, REVS.
- :mod:`rce.objectives`: the defences as edit objectives (Patil et al.'s, RCE's rank hinge).
- :mod:`rce.attacks`: Output, Head Projection, Probability Delta and Input Rephrasing attacks.
- :mod:`rce.requests`: edit requests from a ``paper_common.facts.World`` or CounterFact / zsRE files.
- :mod:`rce.metrics`: attack success at every budget, ranks, fidelity; Wilson intervals.
- :mod:`rce.reproduce`: the experiment (``python -m rce reproduce --scale quick``).
"""

from rce.attacks import (
    BUDGETS,
    attack_success,
    head_projection_attack,
    output_attack,
    probability_delta_attack,
    rephrase_attack,
)
from rce.editing import (
    EditHandle,
    FTConfig,
    MEMITConfig,
    ROMEConfig,
    edit,
    memit_solve,
    revs_demote,
    rome_updates,
    scaled_window,
    second_moment,
    subject_embedding_std,
    trace_layers,
)
from rce.metrics import among_successful, evaluate_requests, greedy_match, wilson
from rce.objectives import DEFENCES, Defence, rank_hinge
from rce.requests import (
    EditRequest,
    answer_id,
    load_counterfact,
    load_zsre,
    stats_corpus,
    utility_prompts,
    world_requests,
)

__all__ = [
    "BUDGETS",
    "DEFENCES",
    "Defence",
    "EditHandle",
    "EditRequest",
    "FTConfig",
    "MEMITConfig",
    "ROMEConfig",
    "among_successful",
    "answer_id",
    "attack_success",
    "edit",
    "evaluate_requests",
    "greedy_match",
    "head_projection_attack",
    "load_counterfact",
    "load_zsre",
    "memit_solve",
    "output_attack",
    "probability_delta_attack",
    "rank_hinge",
    "rephrase_attack",
    "revs_demote",
    "rome_updates",
    "scaled_window",
    "second_moment",
    "stats_corpus",
    "subject_embedding_std",
    "trace_layers",
    "utility_prompts",
    "wilson",
    "world_requests",
]
