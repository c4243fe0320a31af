"""Skills as context-dependent vector fields on frozen LMs, and their finite-difference commutator.

- :mod:`skill_commutator.commutator`: exact Lie brackets (``torch.func.jvp``), the ordered and loop
  commutators from black-box rollouts, Richardson extrapolation, RK4 / ``expm`` / noisy flows.
- :mod:`skill_commutator.synthetic`: linear, Heisenberg and commuting fields with known brackets, a
  random MLP readout.
- :mod:`skill_commutator.realize`: activation, soft-prefix and KV-prefix realizations on any Hugging
  Face causal LM: readout, objective, Jacobian, metric-preconditioned skill field, flow, control cost.
- :mod:`skill_commutator.compose`: both orders of every skill pair, batched; exact brackets; ActAdd.
- :mod:`skill_commutator.metrics` and :mod:`skill_commutator.baselines`: principal angles,
  reachability, Spearman tables; the gap predictors the commutator is compared with.
- :mod:`skill_commutator.task`: the synthetic agent language, its six skills and the frozen task LM.
"""

from skill_commutator.baselines import (
    PREDICTORS,
    cosine_predictor,
    jacobian_angle_predictor,
    norm_product_predictor,
    readout_move,
)
from skill_commutator.commutator import (
    commutator_sweep,
    expm_flow,
    lie_bracket,
    loglog_slope,
    loop_commutator,
    noisy_flow,
    ordered_commutator,
    richardson,
    rk4_flow,
)
from skill_commutator.compose import (
    PairResults,
    actadd_commutator,
    actadd_vectors,
    compose_pairs,
    deployment_strength,
    exact_brackets,
    temporal_gaps,
)
from skill_commutator.metrics import (
    cohens_d_ci,
    entropy_gain,
    jacobian_alignment,
    novelty,
    principal_angles,
    spearman_table,
    spectral_entropy,
)
from skill_commutator.realize import (
    ActivationRealization,
    KVPrefixRealization,
    PrefixRealization,
    Realization,
    caa_basis,
    kv_prefix_basis,
    prefix_basis,
)
from skill_commutator.synthetic import Commuting, Heisenberg, LinearSystem, MLPReadout
from skill_commutator.task import (
    AgentLanguage,
    Skill,
    TaskConfig,
    TaskSpec,
    agent_skills,
    agent_task,
    build_task_lm,
    load_task_spec,
)

__all__ = [
    "PREDICTORS",
    "ActivationRealization",
    "AgentLanguage",
    "Commuting",
    "Heisenberg",
    "KVPrefixRealization",
    "LinearSystem",
    "MLPReadout",
    "PairResults",
    "PrefixRealization",
    "Realization",
    "Skill",
    "TaskConfig",
    "TaskSpec",
    "actadd_commutator",
    "actadd_vectors",
    "agent_skills",
    "agent_task",
    "build_task_lm",
    "caa_basis",
    "cohens_d_ci",
    "commutator_sweep",
    "compose_pairs",
    "cosine_predictor",
    "deployment_strength",
    "entropy_gain",
    "exact_brackets",
    "expm_flow",
    "jacobian_alignment",
    "jacobian_angle_predictor",
    "kv_prefix_basis",
    "lie_bracket",
    "load_task_spec",
    "loglog_slope",
    "loop_commutator",
    "noisy_flow",
    "norm_product_predictor",
    "novelty",
    "ordered_commutator",
    "prefix_basis",
    "principal_angles",
    "readout_move",
    "richardson",
    "rk4_flow",
    "spearman_table",
    "spectral_entropy",
    "temporal_gaps",
]
