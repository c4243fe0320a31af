"""The experiment's size at each scale: ViTs, objectives, lambdas, baselines, data, steps, seeds."""

from __future__ import annotations

from dataclasses import dataclass, field

from patch_distill.config import Precision
from patch_distill.models import VIT_SCALES, ViTConfig

METRICS = ("knn", "linear", "linear_pooled", "r2_pixels", "r2_code", "corr_shift", "corr_zoom",
           "corr_flip", "corr_mean", "dense_acc", "dense_iou")  # fmt: skip


#: suffix of the masked lambda = 0 control arm of a base objective (``"dino-masked"``): the
#: student sees the same masked global views as with the patch term, without the patch loss
MASKED = "-masked"


def masked(objective: str) -> str:
    """The method name of ``objective``'s masked lambda = 0 control arm."""
    return objective + MASKED


@dataclass(frozen=True)
class Scale:
    """One scale of the reproduction.

    Attributes:
        vits: model scales (name -> ViT).
        objectives: base joint-embedding objectives of the lambda sweep.
        lambdas: patch-loss weights (0 = the base objective alone, student unmasked); every
            objective also runs the masked lambda = 0 control (:data:`MASKED`).
        baselines: ``mae``, ``latent``, ``random`` (random-init ViT).
        n_pretrain, n_probe, n_test: images for pretraining, probe training and testing.
        steps, batch_size, lr: optimisation; ``momentum`` the EMA teacher's (start, end).
        seeds: replicate seeds (offsets added to the run's seed).
        workers: worker processes for the runs.
        theory_steps: SGD steps of each population-model fit.
        n_classes: shape classes of SyntheticShapes.
        koleo: KoLeo weight per base objective.
        real_datasets: CIFAR-10 / STL-10, used when PATCH_DISTILL_DATA points at their files.
        device: where pretraining runs (None: ``paper_common.device.pick_device``, cuda > mps >
            cpu, ``PAPER_DEVICE`` overrides).
        precision: autocast dtype of the forward pass (``float32`` = off).
    """

    vits: dict[str, ViTConfig]
    objectives: tuple[str, ...]
    lambdas: tuple[float, ...]
    baselines: tuple[str, ...]
    n_pretrain: int
    n_probe: int
    n_test: int
    steps: int
    batch_size: int
    lr: float
    seeds: tuple[int, ...]
    workers: int
    theory_steps: int
    n_classes: int = 4
    momentum: tuple[float, float] = (0.96, 1.0)
    koleo: tuple[tuple[str, float], ...] = (("dino", 0.1),)  # KoLeo weight per base objective
    real_datasets: tuple[str, ...] = field(default_factory=tuple)
    device: str | None = None
    precision: Precision = "float32"


SYNTHETIC = "synthetic_shapes"
QUICK_VIT = ViTConfig(embed_dim=48, depth=3, num_heads=2)
SCALES = {
    "smoke": Scale({"quick": ViTConfig(embed_dim=32, depth=1, num_heads=2)}, ("dino",),
                   (0.0, 1.0), ("mae", "random"), 64, 64, 40, 2, 16, 1e-3, (0, 1), 1, 50),
    "quick": Scale({"quick": QUICK_VIT}, ("dino", "vicreg"), (0.0, 1.0, 2.0), ("mae", "random"),
                   2048, 300, 200, 100, 32, 1.5e-3, (0, 1, 2), 2, 400),
    # the whole grid at the two model scales; add CIFAR-10 / STL-10 from PATCH_DISTILL_DATA
    "full": Scale(dict(VIT_SCALES), ("dino", "contrastive", "vicreg", "barlow"), (0.0, 0.5, 1.0, 2.0),
                  ("mae", "latent", "random"), 50000, 5000, 2000, 20000, 256, 5e-4, (0, 1, 2), 1,
                  3000, 6, (0.99, 1.0), (("dino", 0.1),), ("cifar10", "stl10"), None, "bfloat16"),
}  # fmt: skip
