"""The composable objective: base joint-embedding loss + lambda * masked patch term (+ KoLeo).

Student and teacher share one architecture; the teacher is an exponential moving average of the
student (:func:`ema_update`). Every model exposes ``losses(globals_, locals_, masks, step)`` ->
named loss terms (the total under ``"loss"``), ``update_teacher(momentum)`` and ``backbone`` (the
encoder the diagnostics read: the EMA teacher when there is one).

The loss modules are lightly's where they match the definitions: ``DINOLoss`` (CLS
self-distillation with centring and sharpening), ``IBOTPatchLoss`` (each masked student patch token
predicts the teacher's centred, sharpened patch distribution on the unmasked view), ``KoLeoLoss``,
``NTXentLoss``, ``VICRegLoss``, ``BarlowTwinsLoss``.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from .config import PretrainConfig
from .models import build_vit


@torch.no_grad()
def ema_update(student: nn.Module, teacher: nn.Module, momentum: float) -> None:
    """``teacher <- momentum * teacher + (1 - momentum) * student``, parameter by parameter."""
    from lightly.models.utils import update_momentum

    if not 0.0 <= momentum <= 1.0:
        raise ValueError(f"momentum must be in [0, 1], got {momentum}")
    update_momentum(student, teacher, m=momentum)


def _frozen_copy(module: nn.Module) -> nn.Module:
    """A gradient-free twin. Modules with old-style ``weight_norm`` (lightly's DINO head) cannot
    be deep-copied, so the twin is rebuilt with the module's own constructor arguments."""
    try:
        twin = copy.deepcopy(module)
    except RuntimeError:
        twin = module._rebuild()  # type: ignore[operator]
        twin.load_state_dict(module.state_dict())
    for p in twin.parameters():
        p.requires_grad_(False)
    return twin


def _with_prefix(mask: torch.Tensor) -> torch.Tensor:
    """(B, H, W) patch mask -> (B, 1 + H*W) sequence mask (the CLS token is never masked)."""
    flat = mask.flatten(1)
    return torch.cat([torch.zeros_like(flat[:, :1]), flat], dim=1)


def masked_index(mask: torch.Tensor, k: int) -> torch.Tensor:
    """``(B, k)`` positions of the masked patches of each image, in row-major order, from a
    ``(B, H, W)`` (or ``(B, N)``) mask with exactly ``k`` True per image (what
    :func:`make_masks` draws). A fixed-shape gather instead of boolean indexing: no host sync on a
    GPU, and defined on ``meta``. A mask with another count raises (checked off ``meta``)."""
    flat = mask.flatten(1)
    if flat.device.type != "meta" and not bool((flat.sum(1) == k).all()):
        raise ValueError(f"every image's mask must have exactly {k} masked patches (make_masks)")
    return flat.to(torch.uint8).argsort(dim=1, descending=True, stable=True)[:, :k]


def _gather(tokens: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``tokens[b, idx[b]]``: ``(B, N, D)`` and ``(B, k)`` -> ``(B, k, D)``."""
    return tokens.gather(1, idx[..., None].expand(-1, -1, tokens.shape[-1]))


def ibot_patch_term(
    loss: nn.Module, teacher_logits: torch.Tensor, student_logits: torch.Tensor
) -> torch.Tensor:
    """The iBOT term of a step from the masked patches' logits ``(n_images, k, K)`` of every
    global view at once (views stacked along the images): cross-entropy of the student's
    ``log softmax(s / tau_s)`` to the teacher's ``softmax((t - c) / tau_t)``, mean over the ``k``
    masked patches of each image, then over images (lightly's / DINOv2's ``IBOTPatchLoss`` with
    the same number of masked patches per image). The centre ``c`` of ``loss`` (a lightly
    ``IBOTPatchLoss``) moves once, with the mean over all of them (DINOv2: one update per step)."""
    t = teacher_logits.flatten(0, 1)
    teacher = F.softmax((t - loss.center.value) / loss.teacher_temp, dim=-1)
    student = F.log_softmax(student_logits.flatten(0, 1) / loss.student_temp, dim=-1)
    term = -(teacher * student).sum(-1).mean()
    loss.center.update(t)
    return term


def _dino_head(d_in: int, hidden: int, bottleneck: int, d_out: int) -> nn.Module:
    import warnings

    from lightly.models.modules import DINOProjectionHead

    def make() -> nn.Module:
        with warnings.catch_warnings():  # lightly's head still uses the deprecated weight_norm
            warnings.simplefilter("ignore", FutureWarning)
            return DINOProjectionHead(d_in, hidden, bottleneck, d_out)

    head = make()
    head._rebuild = make  # type: ignore[assignment]
    return head


def _mlp(d_in: int, hidden: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Linear(hidden, d_out))


def masked_patch_loss(
    loss: nn.Module, teacher_logits: torch.Tensor, student_logits: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """iBOT term from full ``(B, N, K)`` patch logits: only the positions where ``mask`` (``(B, H,
    W)`` or ``(B, N)``) is True enter; ``loss`` is a lightly ``IBOTPatchLoss`` (centring and
    sharpening of the teacher, per-image mean over masked patches, mean over images)."""
    b, n = teacher_logits.shape[:2]
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(
            f"teacher and student logits differ in shape: {teacher_logits.shape} vs {student_logits.shape}"
        )
    if mask.dim() == 2:
        side = round(n**0.5)
        if side * side != n:
            raise ValueError("pass a (B, H, W) mask for a non-square patch grid")
        mask = mask.reshape(b, side, side)
    if mask.shape[0] != b or mask[0].numel() != n or mask.dtype != torch.bool:
        raise ValueError(
            f"mask must be boolean (B, H, W) with H*W = {n}, got {tuple(mask.shape)} {mask.dtype}"
        )
    flat = mask.flatten(1)
    return loss(teacher_logits[flat], student_logits[flat], mask)


class JointEmbedding(nn.Module):
    """DINO / contrastive / VICReg / Barlow Twins on the CLS token, plus the iBOT patch term."""

    def __init__(self, config: PretrainConfig) -> None:
        super().__init__()
        from lightly import loss as L

        self.config = config
        c, d = config, config.vit.embed_dim
        self.student = build_vit(c.vit)
        if c.objective == "dino":
            self.cls_head: nn.Module = _dino_head(d, c.head_hidden_dim, c.bottleneck_dim, c.out_dim)
            self.base_loss: nn.Module = L.DINOLoss(
                c.out_dim, warmup_teacher_temp=c.teacher_temp, teacher_temp=c.teacher_temp,
                student_temp=c.student_temp, center_momentum=c.center_momentum,
            )  # fmt: skip
        else:
            self.cls_head = _mlp(d, c.head_hidden_dim, c.out_dim)
            self.base_loss = {
                "contrastive": lambda: L.NTXentLoss(temperature=c.contrastive_temp),
                "vicreg": L.VICRegLoss,
                "barlow": L.BarlowTwinsLoss,
            }[c.objective]()
        self.patch_head = _dino_head(d, c.head_hidden_dim, c.bottleneck_dim, c.patch_out_dim)
        self.patch_loss = L.IBOTPatchLoss(
            c.patch_out_dim, teacher_temp=c.teacher_temp, student_temp=c.student_temp,
            center_momentum=c.center_momentum,
        )  # fmt: skip
        self.koleo = L.KoLeoLoss()
        self.teacher = _frozen_copy(self.student)
        self.teacher_cls_head = _frozen_copy(self.cls_head)
        self.teacher_patch_head = _frozen_copy(self.patch_head)

    @property
    def backbone(self) -> nn.Module:
        return self.teacher

    def update_teacher(self, momentum: float) -> None:
        ema_update(self.student, self.teacher, momentum)
        ema_update(self.cls_head, self.teacher_cls_head, momentum)
        ema_update(self.patch_head, self.teacher_patch_head, momentum)

    def losses(
        self,
        globals_: list[torch.Tensor],
        locals_: list[torch.Tensor],
        masks: list[torch.Tensor] | None,
    ) -> dict[str, torch.Tensor]:
        c = self.config
        use_patch = c.patch_weight > 0 and masks is not None
        # the student sees masked global views whenever masks are given: with the patch term, and
        # in the masked lambda = 0 control (PretrainConfig.mask_student)
        s_tokens = [
            self.student.encode(g, mask=None if m is None else _with_prefix(m))
            for g, m in zip(globals_, masks or [None] * len(globals_), strict=True)  # type: ignore[list-item]
        ]
        s_cls = [t[:, 0] for t in s_tokens]
        t_tokens: list[torch.Tensor] = []
        if c.objective == "dino" or use_patch:  # the teacher sees the unmasked global views
            with torch.no_grad():
                t_tokens = [self.teacher.encode(g) for g in globals_]
        out: dict[str, torch.Tensor] = {}
        if c.objective == "dino":
            with torch.no_grad():
                t_logits = [self.teacher_cls_head(t[:, 0]) for t in t_tokens]
            local_cls = [self.student.encode(x)[:, 0] for x in locals_]
            s_logits = [self.cls_head(x) for x in s_cls + local_cls]
            out["base"] = self.base_loss(t_logits, s_logits)
        else:
            z = [self.cls_head(x) for x in s_cls]
            out["base"] = self.base_loss(z[0], z[1])
        total = out["base"]
        if use_patch:  # both views in one term: the iBOT centre moves once per step
            idx = [masked_index(m, c.n_masked) for m in masks]  # type: ignore[union-attr]
            s_masked = torch.cat([_gather(s[:, 1:], i) for s, i in zip(s_tokens, idx, strict=True)])
            with torch.no_grad():
                t_masked = torch.cat(
                    [_gather(t[:, 1:], i) for t, i in zip(t_tokens, idx, strict=True)]
                )
                t_logits_p = self.teacher_patch_head(t_masked)
            out["patch"] = ibot_patch_term(self.patch_loss, t_logits_p, self.patch_head(s_masked))
            total = total + c.patch_weight * out["patch"]
        if c.koleo_weight > 0:
            out["koleo"] = torch.stack([self.koleo(x) for x in s_cls]).mean()
            total = total + c.koleo_weight * out["koleo"]
        out["loss"] = total
        return out


class MAE(nn.Module):
    """Masked autoencoder: the encoder sees the kept patches, a small decoder reconstructs the
    per-patch normalised pixels of the masked ones (He et al. 2021, ``norm_pix_loss``)."""

    def __init__(self, config: PretrainConfig) -> None:
        super().__init__()
        from lightly.models.modules import MaskedVisionTransformerDecoderTIMM

        self.config = config
        v = config.vit
        self.student = build_vit(v)
        self.embed = nn.Linear(v.embed_dim, config.decoder_dim)
        self.decoder = MaskedVisionTransformerDecoderTIMM(
            num_patches=v.n_patches, embed_dim=config.decoder_dim, depth=config.decoder_depth,
            num_heads=max(1, config.decoder_dim // 32),
        )  # fmt: skip
        self.predict = nn.Linear(config.decoder_dim, 3 * v.patch_size**2)

    @property
    def backbone(self) -> nn.Module:
        return self.student

    def update_teacher(self, momentum: float) -> None:  # no teacher
        return None

    def losses(
        self,
        globals_: list[torch.Tensor],
        locals_: list[torch.Tensor],
        masks: list[torch.Tensor] | None,
    ) -> dict[str, torch.Tensor]:
        from lightly.models import utils as U

        from .data import patchify

        if masks is None:
            raise ValueError("MAE needs masks")
        images, mask = globals_[0], masks[0]
        seq = _with_prefix(mask)
        k = self.config.n_masked
        idx_mask = masked_index(mask, k)  # (B, k) masked patches
        idx_keep = masked_index(~seq, seq.shape[1] - k)  # (B, 1 + N - k): CLS and kept patches
        tokens = self.student.encode(images, idx_keep=idx_keep)
        full = tokens.new_zeros(seq.shape[0], seq.shape[1], tokens.shape[-1])
        full = U.set_at_index(full, idx_keep, tokens)
        decoded = self.decoder(self.embed(full), mask=seq)
        pred = self.predict(_gather(decoded[:, 1:], idx_mask))
        target = _gather(patchify(images, self.config.vit.patch_size), idx_mask)
        target = (target - target.mean(-1, keepdim=True)) / (
            target.var(-1, keepdim=True) + 1e-6
        ).sqrt()
        loss = F.mse_loss(pred, target)
        return {"base": loss, "loss": loss}


class LatentPrediction(nn.Module):
    """Latent masked prediction (data2vec / I-JEPA style): the masked student's patch tokens,
    through an MLP predictor, regress the EMA teacher's layer-normalised patch tokens of the
    unmasked view at the masked positions (smooth L1). No CLS objective, no prototypes."""

    def __init__(self, config: PretrainConfig) -> None:
        super().__init__()
        self.config = config
        d = config.vit.embed_dim
        self.student = build_vit(config.vit)
        self.predictor = _mlp(d, config.head_hidden_dim, d)
        self.teacher = _frozen_copy(self.student)

    @property
    def backbone(self) -> nn.Module:
        return self.teacher

    def update_teacher(self, momentum: float) -> None:
        ema_update(self.student, self.teacher, momentum)

    def losses(
        self,
        globals_: list[torch.Tensor],
        locals_: list[torch.Tensor],
        masks: list[torch.Tensor] | None,
    ) -> dict[str, torch.Tensor]:
        if masks is None:
            raise ValueError("latent prediction needs masks")
        terms = []
        for g, m in zip(globals_, masks, strict=True):
            idx = masked_index(m, self.config.n_masked)
            s = _gather(self.student.encode(g, mask=_with_prefix(m))[:, 1:], idx)
            with torch.no_grad():
                t = _gather(self.teacher.encode(g)[:, 1:], idx)
                t = F.layer_norm(t, t.shape[-1:])
            terms.append(F.smooth_l1_loss(self.predictor(s), t))
        loss = torch.stack(terms).mean()
        return {"base": loss, "loss": loss}


def build_model(config: PretrainConfig) -> JointEmbedding | MAE | LatentPrediction:
    """The student/teacher module for ``config.objective``."""
    if config.objective == "mae":
        return MAE(config)
    if config.objective == "latent":
        return LatentPrediction(config)
    return JointEmbedding(config)
