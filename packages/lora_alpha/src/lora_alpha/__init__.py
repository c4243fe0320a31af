"""LoRA-alpha: the LoRA scaling factor, not the learning rate, drives optimisation.

``alpha = c * sqrt(r)`` with a large ``c`` puts LoRA in its fast regime at the standard small
learning rates: the paper's recipe is ``c = 256`` (:data:`PAPER_C`, the default) with AdamW at lr
2e-5 (:data:`PAPER_LR`); ours, a variant, ``c = 128`` at lr 1e-4 (:data:`OURS_C`, :data:`OURS_LR`).
LoRA-alpha with coefficient ``c`` is rsLoRA with ``alpha = c`` (applied scale ``c / sqrt(r)``).
Built on peft: :func:`lora_alpha_config` returns a
``peft.LoraConfig``; :func:`get_lora_alpha_model` wraps any model peft supports. Signal-Drift
diagnostics (:mod:`lora_alpha.diagnostics`), sweeps and the power-law fit of the best alpha
(:mod:`lora_alpha.sweep`), CPU-sized tasks (:mod:`lora_alpha.tasks`) and the baselines
(standard, rsLoRA, alpha=2r, LoRA+: :mod:`lora_alpha.baselines`).
"""

from lora_alpha.baselines import RULES, Method, alpha_2r, lora_alpha, loraplus, rslora, standard
from lora_alpha.config import (
    DEFAULT_C,
    OURS_C,
    OURS_LR,
    PAPER_C,
    PAPER_LR,
    LoraAlphaConfig,
    alpha_from_law,
    check_scaling,
    get_lora_alpha_model,
    linear_module_names,
    lora_alpha_config,
)
from lora_alpha.diagnostics import (
    SignalDrift,
    SignalDriftCallback,
    delta_weights,
    full_finetune_delta,
    lora_layers,
    reference_gradient,
    signal_drift,
    spectral_summary,
    spectrum,
    top_hessian_eigenvalue,
)
from lora_alpha.sweep import (
    PowerLawFit,
    SweepResult,
    fit_optimal_alpha,
    fit_power_law,
    scaling_interaction,
    sweep,
)
from lora_alpha.tasks import (
    CausalLMTask,
    ClassificationTask,
    KnowledgeInjectionTask,
    OffTaskPush,
    RegressionTask,
    SequenceClassificationTask,
    Task,
)
from lora_alpha.train import RunResult, finetune

__all__ = [
    "DEFAULT_C",
    "OURS_C",
    "OURS_LR",
    "PAPER_C",
    "PAPER_LR",
    "RULES",
    "CausalLMTask",
    "ClassificationTask",
    "KnowledgeInjectionTask",
    "LoraAlphaConfig",
    "Method",
    "OffTaskPush",
    "PowerLawFit",
    "RegressionTask",
    "RunResult",
    "SequenceClassificationTask",
    "SignalDrift",
    "SignalDriftCallback",
    "SweepResult",
    "Task",
    "alpha_2r",
    "alpha_from_law",
    "check_scaling",
    "delta_weights",
    "finetune",
    "fit_optimal_alpha",
    "fit_power_law",
    "full_finetune_delta",
    "get_lora_alpha_model",
    "linear_module_names",
    "lora_alpha",
    "lora_alpha_config",
    "lora_layers",
    "loraplus",
    "reference_gradient",
    "rslora",
    "scaling_interaction",
    "signal_drift",
    "spectral_summary",
    "spectrum",
    "standard",
    "sweep",
    "top_hessian_eigenvalue",
]
