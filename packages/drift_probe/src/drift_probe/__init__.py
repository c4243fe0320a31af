"""drift_probe: is temporal knowledge drift a residual-stream direction that confidence cannot see?

A reproduction of Elbadry et al., "The Geometry of Forgetting: Temporal Knowledge Drift as an
Independent Axis in LLM Representations" (arXiv 2605.09195) on fact LMs trained in-process:
drift labels and features on any Hugging Face causal LM (:mod:`drift_probe.data`,
:mod:`drift_probe.features`, :mod:`drift_probe.timelines`), grouped layer-selected linear probes
(:mod:`drift_probe.probe`), the confidence baselines (:mod:`drift_probe.baselines`), five
orthogonality tests (:mod:`drift_probe.geometry`), MLP logit attribution
(:mod:`drift_probe.mechanism`) and the cross-cutoff test (:mod:`drift_probe.crosscutoff`).
"""

from drift_probe.baselines import (
    CCS,
    SAPLMA,
    AliasEquivalence,
    CorrectnessProbe,
    NLIEquivalence,
    SemanticEntropy,
    TokenEntropy,
    cluster_answers,
    semantic_entropy,
)
from drift_probe.crosscutoff import p_a_greater_b, transitioned
from drift_probe.data import (
    VOLATILE,
    DriftItem,
    drift_items,
    drift_world,
    oracle_drift,
    training_corpus,
    unseen_subjects,
)
from drift_probe.features import Features, cells, extract_features
from drift_probe.geometry import (
    cosine_test,
    erased_auroc_after_inlp,
    erasure_test,
    inlp,
    leace_projection,
    mean_difference_test,
    nullspace_test,
    score_correlations,
)
from drift_probe.mechanism import mlp_logit_attribution, profile_correlation
from drift_probe.models import SnapshotConfig, snapshots
from drift_probe.probe import (
    LinearProbe,
    NullBand,
    auroc,
    auroc_ci,
    fit_layer_probe,
    grouped_splits,
    out_of_fold,
    permutation_band,
)
from drift_probe.timelines import RoleSpell, load_timelines, timeline_items

__all__ = [
    "CCS",
    "SAPLMA",
    "VOLATILE",
    "AliasEquivalence",
    "CorrectnessProbe",
    "DriftItem",
    "Features",
    "LinearProbe",
    "NLIEquivalence",
    "NullBand",
    "RoleSpell",
    "SemanticEntropy",
    "SnapshotConfig",
    "TokenEntropy",
    "auroc",
    "auroc_ci",
    "cells",
    "cluster_answers",
    "cosine_test",
    "drift_items",
    "drift_world",
    "erased_auroc_after_inlp",
    "erasure_test",
    "extract_features",
    "fit_layer_probe",
    "grouped_splits",
    "inlp",
    "leace_projection",
    "load_timelines",
    "mean_difference_test",
    "mlp_logit_attribution",
    "nullspace_test",
    "oracle_drift",
    "out_of_fold",
    "p_a_greater_b",
    "permutation_band",
    "profile_correlation",
    "score_correlations",
    "semantic_entropy",
    "snapshots",
    "timeline_items",
    "training_corpus",
    "transitioned",
    "unseen_subjects",
]


def __getattr__(name: str) -> object:
    """``analyse_snapshot`` / ``describe_model`` (every per-model measurement on any Hugging Face
    causal LM and tokenizer) from :mod:`drift_probe.reproduce`, imported on first use."""
    if name in ("analyse_snapshot", "describe_model"):
        from drift_probe import reproduce

        return getattr(reproduce, name)
    raise AttributeError(f"module 'drift_probe' has no attribute {name!r}")
