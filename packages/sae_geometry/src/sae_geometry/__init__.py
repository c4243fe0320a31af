"""sae_geometry: layerwise SAE scaling laws against the geometry of the activation manifold.

TopK SAEs (trainable, stacked) and JumpReLU SAEs (Gemma Scope, SAELens checkpoints); intrinsic
dimension, curvature, normal-residual ratio and participation ratio of a layer; Stage-1 per-layer
width-sparsity laws with bootstrap CIs and a floor rule; Stage-2 ridge regressions of the fitted
exponents on the geometry, with leave-one-layer-out and transfer scores. See ``reproduce`` for the
experiment and ``seeds/sae_geometry.md`` for the rules that are ours.
"""

from sae_geometry.data import (
    SyntheticLayer,
    cyclic_corpus,
    flat_torus,
    round_sphere,
    synthetic_layer,
)
from sae_geometry.geometry import (
    Geometry,
    curvature,
    deduplicate,
    local_pca,
    normal_ratio,
    participation_ratio,
    reference_dimensions,
    summarize,
    two_nn,
    unit_mean_square,
)
from sae_geometry.lms import LMConfig, cyclic_lm, layer_activations
from sae_geometry.load import (
    Checkpoint,
    evaluate_release,
    load_sae,
    parse_width,
    release_activations,
    save_sae,
    scan_release,
)
from sae_geometry.sae import (
    JumpReLUSAE,
    SAETrainConfig,
    TopKSAE,
    fvu,
    geometric_median,
    l0,
    train_sae,
)
from sae_geometry.scaling import (
    LayerFit,
    Stage2Result,
    aic,
    fit_layer,
    fit_release,
    fit_universal,
    loo_r2,
    predict_fvu,
    transfer,
    wall_exponent,
)
from sae_geometry.sweep import sweep, sweep_grid

__all__ = [
    "Checkpoint",
    "Geometry",
    "JumpReLUSAE",
    "LMConfig",
    "LayerFit",
    "SAETrainConfig",
    "Stage2Result",
    "SyntheticLayer",
    "TopKSAE",
    "aic",
    "curvature",
    "cyclic_corpus",
    "cyclic_lm",
    "deduplicate",
    "evaluate_release",
    "fit_layer",
    "fit_release",
    "fit_universal",
    "flat_torus",
    "fvu",
    "geometric_median",
    "l0",
    "layer_activations",
    "load_sae",
    "local_pca",
    "loo_r2",
    "normal_ratio",
    "parse_width",
    "participation_ratio",
    "predict_fvu",
    "reference_dimensions",
    "release_activations",
    "round_sphere",
    "save_sae",
    "scan_release",
    "summarize",
    "sweep",
    "sweep_grid",
    "synthetic_layer",
    "train_sae",
    "transfer",
    "two_nn",
    "unit_mean_square",
    "wall_exponent",
]
