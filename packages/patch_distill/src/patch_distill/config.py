"""Validated pretraining configuration: one dataclass for every objective, one trainer for all."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from .models import ViTConfig

Precision = Literal["float32", "bfloat16", "float16"]
PRECISIONS = ("float32", "bfloat16", "float16")
Objective = Literal["dino", "contrastive", "vicreg", "barlow", "mae", "latent"]
#: joint-embedding objectives that take the masked patch term (lambda) and KoLeo
JOINT_EMBEDDING = ("dino", "contrastive", "vicreg", "barlow")
#: masked-prediction baselines that are a whole objective on their own
MASKED_BASELINES = ("mae", "latent")


@dataclass(frozen=True)
class PretrainConfig:
    """Everything :func:`patch_distill.pretrain` needs.

    ``objective``: base joint-embedding loss on the CLS token (``dino`` self-distillation,
    ``contrastive`` = SimCLR InfoNCE, ``vicreg``, ``barlow``) or a masked-prediction baseline
    (``mae`` pixel reconstruction, ``latent`` = data2vec/I-JEPA-style prediction of the EMA
    teacher's patch tokens). ``patch_weight`` is lambda, the weight of the iBOT masked patch
    self-distillation term added to a joint-embedding objective (0 = the base objective alone,
    no masking). ``mask_student``: ``None`` masks the student's global views exactly when the
    patch term (or a masked baseline) needs it; ``True`` with ``patch_weight=0`` is the masked
    lambda = 0 control (the same masked student inputs, no patch loss), which separates the patch
    loss from masking. ``mask_ratio`` is the exact fraction of patches masked per student image
    (``block`` = DINOv2 rectangles topped up at random, ``random`` = uniform). ``precision``: the
    autocast dtype of the forward pass (``float32`` = off; weights and optimiser stay float32;
    ``float16`` adds a gradient scaler).
    """

    objective: Objective = "dino"
    patch_weight: float = 1.0
    koleo_weight: float = 0.0
    mask_student: bool | None = None
    mask_ratio: float = 0.3
    mask_mode: Literal["block", "random"] = "block"
    vit: ViTConfig = field(default_factory=ViTConfig)
    steps: int = 300
    batch_size: int = 64
    lr: float = 5e-4
    weight_decay: float = 0.04
    warmup_frac: float = 0.1
    momentum: tuple[float, float] = (0.99, 1.0)
    out_dim: int = 256
    patch_out_dim: int = 256
    head_hidden_dim: int = 256
    bottleneck_dim: int = 64
    teacher_temp: float = 0.04
    student_temp: float = 0.1
    center_momentum: float = 0.9
    contrastive_temp: float = 0.2
    n_local_crops: int = 2
    local_size: int = 16
    global_scale: tuple[float, float] = (0.5, 1.0)
    local_scale: tuple[float, float] = (0.1, 0.4)
    colour_jitter: float = 0.2
    decoder_dim: int = 64
    decoder_depth: int = 2
    precision: Precision = "float32"
    seed: int = 0

    def __post_init__(self) -> None:
        allowed = JOINT_EMBEDDING + MASKED_BASELINES
        if self.objective not in allowed:
            raise ValueError(f"unknown objective {self.objective!r}; use one of {allowed}")
        if self.patch_weight < 0:
            raise ValueError(f"patch_weight (lambda) must be >= 0, got {self.patch_weight}")
        if self.koleo_weight < 0:
            raise ValueError(f"koleo_weight must be >= 0, got {self.koleo_weight}")
        if self.objective in MASKED_BASELINES and (self.patch_weight or self.koleo_weight):
            raise ValueError(
                f"objective {self.objective!r} is a masked-prediction objective on its own; "
                "set patch_weight=0 and koleo_weight=0 (or use PretrainConfig.baseline)"
            )
        if self.mask_student is False and (
            self.patch_weight > 0 or self.objective in MASKED_BASELINES
        ):
            raise ValueError(
                "mask_student=False: the patch term (patch_weight > 0) and the masked baselines "
                "need masked student views; use None (automatic) or True"
            )
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if not 0.0 < self.mask_ratio < 1.0:
            raise ValueError(f"mask_ratio must be in (0, 1), got {self.mask_ratio}")
        if self.mask_mode not in ("block", "random"):
            raise ValueError(f"mask_mode must be 'block' or 'random', got {self.mask_mode!r}")
        if self.steps < 1 or self.batch_size < 2:
            raise ValueError("steps must be >= 1 and batch_size >= 2")
        if self.lr <= 0:
            raise ValueError("lr must be > 0")
        m0, m1 = self.momentum
        if not 0.0 <= m0 <= m1 <= 1.0:
            raise ValueError(f"momentum must satisfy 0 <= start <= end <= 1, got {self.momentum}")
        if self.local_size % self.vit.patch_size:
            raise ValueError(
                f"local_size {self.local_size} must be a multiple of the patch size {self.vit.patch_size}"
            )
        for name in ("global_scale", "local_scale"):
            lo, hi = getattr(self, name)
            if not 0.0 < lo <= hi <= 1.0:
                raise ValueError(f"{name} must satisfy 0 < low <= high <= 1, got {(lo, hi)}")

    @property
    def masks_student(self) -> bool:
        """Whether the student sees masked patches (the patch term or a masked baseline)."""
        if self.mask_student is not None:
            return self.mask_student
        return self.patch_weight > 0 or self.objective in MASKED_BASELINES

    @property
    def n_masked(self) -> int:
        """Patches masked per student image (exact: :func:`make_masks` draws this many)."""
        return max(1, round(self.mask_ratio * self.vit.n_patches))

    @property
    def label(self) -> str:
        if self.objective in MASKED_BASELINES:
            return self.objective
        masked = " masked" if self.masks_student and self.patch_weight == 0 else ""
        return f"{self.objective} λ={self.patch_weight:g}{masked}"

    @classmethod
    def baseline(cls, objective: Literal["mae", "latent"], **overrides: object) -> PretrainConfig:
        """A masked-prediction baseline with its usual mask ratio (MAE 0.75, latent 0.5)."""
        ratio = {"mae": 0.75, "latent": 0.5}[objective]
        kwargs: dict[str, object] = {
            "mask_ratio": ratio,
            "mask_mode": "random" if objective == "mae" else "block",
        }
        kwargs.update(overrides)
        return cls(objective=objective, patch_weight=0.0, **kwargs)  # type: ignore[arg-type]

    def with_(self, **changes: object) -> PretrainConfig:
        """A copy with ``changes`` applied (and validated)."""
        return replace(self, **changes)  # type: ignore[arg-type]
