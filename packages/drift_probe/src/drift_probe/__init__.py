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
    erasure_test,
    inlp,
    leace_projection,
    mean_difference_test,
    nullspace_test,
    score_correlations,
)
from drift_probe.mechanism import mlp_logit_attribution, profile_correlation
from drift_probe.models import SnapshotConfig, snapshots
from drift_probe.probe import LinearProbe, auroc, auroc_ci, fit_layer_probe, out_of_fold
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
    "erasure_test",
    "extract_features",
    "fit_layer_probe",
    "inlp",
    "leace_projection",
    "load_timelines",
    "mean_difference_test",
    "mlp_logit_attribution",
    "nullspace_test",
    "oracle_drift",
    "out_of_fold",
    "p_a_greater_b",
    "profile_correlation",
    "score_correlations",
    "semantic_entropy",
    "snapshots",
    "timeline_items",
    "training_corpus",
    "transitioned",
    "unseen_subjects",
]
