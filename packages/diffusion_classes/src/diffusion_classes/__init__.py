"""Class-dependent generalisation, memorisation and speciation times in diffusion models.

Gaussian mixtures with exact and empirical-optimal scores under the OU forward process, the
random-features score model with its exact gradient flow and class-attributable spectrum, per-class
times, a class-wise Gaussian-equivalence theory of those times, samplers with cloning-based
speciation, and a diffusers U-Net on imbalanced digits with the same per-class metrics.
"""

from .data import (
    ImageSet,
    geometric_counts,
    imbalanced_split,
    load_digits_images,
    load_fashion_mnist,
)
from .dynamics import ClassCurves, Crossing, ScoreError, class_curves, crossing, score_error
from .mixture import GaussianMixture, delta, empirical_score, forward_noise
from .random_features import (
    ClassSpectrum,
    QuadraticLoss,
    RandomFeatures,
    class_spectrum,
    dsm_quadratic,
)
from .sampling import (
    cloning_curve,
    copy_fraction,
    integrate_backward,
    sample,
    speciation_time,
    time_grid,
)
from .theory import (
    EquivalentCoefficients,
    TimescalePrediction,
    equivalent_coefficients,
    equivalent_covariance,
    predict_timescales,
    same_class_probability,
    two_class_speciation_time,
)
from .unet import (
    UNetRun,
    class_copy_fractions,
    class_losses,
    make_unet,
    train_unet,
    unet_score,
)

__all__ = [
    "ClassCurves",
    "ClassSpectrum",
    "Crossing",
    "EquivalentCoefficients",
    "GaussianMixture",
    "ImageSet",
    "QuadraticLoss",
    "RandomFeatures",
    "ScoreError",
    "TimescalePrediction",
    "UNetRun",
    "class_copy_fractions",
    "class_curves",
    "class_losses",
    "class_spectrum",
    "cloning_curve",
    "copy_fraction",
    "crossing",
    "delta",
    "dsm_quadratic",
    "empirical_score",
    "equivalent_coefficients",
    "equivalent_covariance",
    "forward_noise",
    "geometric_counts",
    "imbalanced_split",
    "integrate_backward",
    "load_digits_images",
    "load_fashion_mnist",
    "make_unet",
    "predict_timescales",
    "same_class_probability",
    "sample",
    "score_error",
    "speciation_time",
    "time_grid",
    "train_unet",
    "two_class_speciation_time",
    "unet_score",
]
