"""Linearizing a frozen softmax transformer: state updates (linear, gated, diagonal-gated, delta,
gated delta, an erase control) in recurrent / chunked / quadratic form, the projection analysis,
interventions (sinks, short convolutions, a routed exact cache), the post-hoc baselines, and a
conversion harness for any Hugging Face Llama / Qwen2-family model."""

from linearize.analysis import attention_mass, erase_write_weights, key_dependence, prefix_outputs
from linearize.baselines import BASELINES
from linearize.convert import (
    Captured,
    TransferConfig,
    capture,
    decode_logits,
    finetune_kl,
    layer_errors,
    linearize,
    recurrent,
    students,
    transfer,
)
from linearize.evaluate import TaskScores, fact_accuracy, graded_token_positions, task_scores
from linearize.features import FEATURE_MAPS, FeatureMap
from linearize.student import (
    UPDATES,
    DecodeState,
    LinearizeConfig,
    LinearizedAttention,
    zero_state,
)
from linearize.tasks import TaskSet, copy_task, make_task, mqar, passkey
from linearize.teachers import TeacherSpec, recall_teacher
from linearize.updates import diagonal_update, mixing_matrix, scalar_update

__all__ = [
    "BASELINES",
    "FEATURE_MAPS",
    "UPDATES",
    "Captured",
    "DecodeState",
    "FeatureMap",
    "LinearizeConfig",
    "LinearizedAttention",
    "TaskScores",
    "TaskSet",
    "TeacherSpec",
    "TransferConfig",
    "attention_mass",
    "capture",
    "copy_task",
    "decode_logits",
    "diagonal_update",
    "erase_write_weights",
    "fact_accuracy",
    "finetune_kl",
    "graded_token_positions",
    "key_dependence",
    "layer_errors",
    "linearize",
    "make_task",
    "mixing_matrix",
    "mqar",
    "passkey",
    "prefix_outputs",
    "recall_teacher",
    "recurrent",
    "scalar_update",
    "students",
    "task_scores",
    "transfer",
    "zero_state",
]
