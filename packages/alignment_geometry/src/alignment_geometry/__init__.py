"""alignment_geometry: the Fisher geometry of alignment collapse under benign fine-tuning.

Curvature tools on any ``nn.Module`` (:mod:`~alignment_geometry.fisher`), the Alignment
Instability Condition and the quartic-onset coefficient (:mod:`~alignment_geometry.aic`,
:mod:`~alignment_geometry.geometry`), float64 fine-tuning with logging
(:mod:`~alignment_geometry.finetune`), mitigations and Safe LoRA
(:mod:`~alignment_geometry.mitigations`), predictor baselines, the closed-form 2-D system
(:mod:`~alignment_geometry.toy`) and a tiny aligned LM (:mod:`~alignment_geometry.system`).
"""

from alignment_geometry.aic import (
    AICResult,
    AICThresholds,
    alignment_risk_forecast,
    check_aic,
    onset_forecast,
    quadratic_coefficient,
    quartic_coefficient,
)
from alignment_geometry.baselines import (
    gradient_cosine,
    hidden_similarity,
    refusal_nll,
    update_norm,
)
from alignment_geometry.finetune import Trajectory, finetune, orthogonalised, task_gradient
from alignment_geometry.fisher import (
    CategoricalFisher,
    FisherDecomposition,
    FlatParams,
    HessianOperator,
    PromptBatch,
    SequenceBatch,
    empirical_fisher,
    hvp,
    kl_from_reference,
    response_logits,
    sequence_nll,
    top_eigenpairs,
)
from alignment_geometry.geometry import AlignedPoint, TaskGeometry
from alignment_geometry.mitigations import (
    EWC,
    FisherPenalty,
    Mitigation,
    PlainGD,
    SubspaceProjection,
    add_lora,
    safe_lora,
)
from alignment_geometry.reproduce import reproduce
from alignment_geometry.system import (
    LMSystem,
    SystemConfig,
    build_system,
    float64_exact,
    load_system,
    read_prompts,
)
from alignment_geometry.toy import Toy2D, loglog_slope

__all__ = [
    "EWC",
    "AICResult",
    "AICThresholds",
    "AlignedPoint",
    "CategoricalFisher",
    "FisherDecomposition",
    "FisherPenalty",
    "FlatParams",
    "HessianOperator",
    "LMSystem",
    "Mitigation",
    "PlainGD",
    "PromptBatch",
    "SequenceBatch",
    "SubspaceProjection",
    "SystemConfig",
    "TaskGeometry",
    "Toy2D",
    "Trajectory",
    "add_lora",
    "alignment_risk_forecast",
    "build_system",
    "check_aic",
    "empirical_fisher",
    "finetune",
    "float64_exact",
    "gradient_cosine",
    "hidden_similarity",
    "hvp",
    "kl_from_reference",
    "load_system",
    "loglog_slope",
    "onset_forecast",
    "orthogonalised",
    "quadratic_coefficient",
    "quartic_coefficient",
    "read_prompts",
    "refusal_nll",
    "reproduce",
    "response_logits",
    "safe_lora",
    "sequence_nll",
    "task_gradient",
    "top_eigenpairs",
    "update_norm",
]
