"""VEPO: validity-aware entropy policy optimisation for RL with verifiable rewards.

Effective entropy (:mod:`vepo.entropy`) counts only the entropy of verified-correct trajectories;
:class:`VEPOTrainer` (a TRL ``GRPOTrainer``) adds its gradient to the GRPO advantage. Baselines run
through the same trainer (:data:`METHODS`); Countdown and addition tasks (:mod:`vepo.tasks`) with a
safe expression parser; pass@k and diversity metrics (:mod:`vepo.metrics`).
"""

from vepo.entropy import (
    differential_smoothing_weights,
    entropy_weights,
    estimate_entropies,
    exact_effective_entropy_gradient,
    exact_entropies,
)
from vepo.metrics import distinct_valid, evaluate_policy, pass_at_k
from vepo.rl import (
    COEF,
    COEFS,
    METHODS,
    RLResult,
    build_tokenizer_for,
    reward_function,
    train_rl,
    warmup,
)
from vepo.tasks import ParseError, Problem, addition, countdown, evaluate, solutions
from vepo.trainer import MODES, VEPOConfig, VEPOTrainer

__all__ = [
    "COEF",
    "COEFS",
    "METHODS",
    "MODES",
    "ParseError",
    "Problem",
    "RLResult",
    "VEPOConfig",
    "VEPOTrainer",
    "addition",
    "build_tokenizer_for",
    "countdown",
    "differential_smoothing_weights",
    "distinct_valid",
    "entropy_weights",
    "estimate_entropies",
    "evaluate",
    "evaluate_policy",
    "exact_effective_entropy_gradient",
    "exact_entropies",
    "pass_at_k",
    "reward_function",
    "solutions",
    "train_rl",
    "warmup",
]
