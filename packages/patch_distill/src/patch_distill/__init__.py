"""patch_distill: masked patch self-distillation as a trade-off between semantics and local detail.

Pretrain small ViTs with a composable objective (a joint-embedding loss on the CLS token + lambda
times the iBOT masked patch self-distillation term + optional KoLeo; MAE and latent-prediction
baselines), then read how much semantic abstraction and how much local evidence the patch tokens
keep with annotation-free diagnostics, and check the population argument (a masked target is
replaced by its conditional expectation given the visible context) against its closed form.
"""

from .augment import make_masks, multicrop, random_resized_crops
from .config import PretrainConfig
from .data import (
    ImageSet,
    SyntheticShapes,
    ViewPair,
    digits,
    image_folder,
    patchify,
    sample_photo_crops,
    torchvision_dataset,
    view_pair,
)
from .diagnostics import (
    Correspondence,
    correspondence_accuracy,
    correspondence_scores,
    dense_probe,
    evaluate,
    knn_accuracy,
    linear_probe_accuracy,
    local_evidence_r2,
    patch_similarity_map,
)
from .models import VIT_SCALES, ViTConfig, build_vit, encode_tokens
from .objectives import MAE, JointEmbedding, LatentPrediction, build_model, ema_update
from .theory import DiscretePopulation, GaussianPopulation, fit_discrete, fit_gaussian
from .train import PretrainResult, momentum_at, pretrain

__version__ = "0.1.0"

__all__ = [
    "MAE",
    "VIT_SCALES",
    "Correspondence",
    "DiscretePopulation",
    "GaussianPopulation",
    "ImageSet",
    "JointEmbedding",
    "LatentPrediction",
    "PretrainConfig",
    "PretrainResult",
    "SyntheticShapes",
    "ViTConfig",
    "ViewPair",
    "build_model",
    "build_vit",
    "correspondence_accuracy",
    "correspondence_scores",
    "dense_probe",
    "digits",
    "ema_update",
    "encode_tokens",
    "evaluate",
    "fit_discrete",
    "fit_gaussian",
    "image_folder",
    "knn_accuracy",
    "linear_probe_accuracy",
    "local_evidence_r2",
    "make_masks",
    "momentum_at",
    "multicrop",
    "patch_similarity_map",
    "patchify",
    "pretrain",
    "random_resized_crops",
    "sample_photo_crops",
    "torchvision_dataset",
    "view_pair",
]
