"""Bounded spherical residual streams and uniform attention against the memorisation phase of grokking.

Tasks generated exactly in code (a op b over Z_p, composition in S_n), the paper's one-layer
transformer with LayerNorm / RMSNorm / bounded-sphere / uniform-attention / nGPT variants, full-batch
AdamW training with a tidy log, grokking-delay metrics with censoring, Fourier diagnostics for Z_p
and coset probes for S_n, and the weight-decay / data / Grokfast baselines.
"""

from .baselines import METHOD_ARMS, Arm, GrokfastEMA, baseline_arms
from .cosets import coset_labels, coset_probe
from .experiment import ArmRun, run_arm
from .fourier import (
    CyclicStructure,
    FourierReport,
    cyclic_structure,
    embedding_spectrum,
    fourier_analysis,
    fraction_explained,
    key_frequencies,
    restricted_excluded_loss,
)
from .metrics import (
    Crossing,
    GrokMetrics,
    area_between_curves,
    delay_bounds,
    first_crossing,
    grokking_metrics,
    memorisation_point,
)
from .model import VARIANTS, GrokTransformer, L2Norm, ModelConfig, build_model
from .ngpt import NGPTTransformer
from .tasks import (
    Split,
    Task,
    discrete_log,
    is_prime,
    make_task,
    modular_inverse,
    modular_task,
    permutation_sign,
    permutation_task,
    permutations,
    primitive_root,
    split,
)
from .train import HISTORY_KEYS, TrainConfig, TrainResult, evaluate, train

__all__ = [
    "HISTORY_KEYS",
    "METHOD_ARMS",
    "VARIANTS",
    "Arm",
    "ArmRun",
    "Crossing",
    "CyclicStructure",
    "FourierReport",
    "GrokMetrics",
    "GrokTransformer",
    "GrokfastEMA",
    "L2Norm",
    "ModelConfig",
    "NGPTTransformer",
    "Split",
    "Task",
    "TrainConfig",
    "TrainResult",
    "area_between_curves",
    "baseline_arms",
    "build_model",
    "coset_labels",
    "coset_probe",
    "cyclic_structure",
    "delay_bounds",
    "discrete_log",
    "embedding_spectrum",
    "evaluate",
    "first_crossing",
    "fourier_analysis",
    "fraction_explained",
    "grokking_metrics",
    "is_prime",
    "key_frequencies",
    "make_task",
    "memorisation_point",
    "modular_inverse",
    "modular_task",
    "permutation_sign",
    "permutation_task",
    "permutations",
    "primitive_root",
    "restricted_excluded_loss",
    "run_arm",
    "split",
    "train",
]
