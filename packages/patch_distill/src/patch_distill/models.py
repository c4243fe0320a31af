"""Small ViTs (timm's ``VisionTransformer`` built from arguments, wrapped by lightly for masking).

:func:`build_vit` returns a ``lightly`` :class:`MaskedVisionTransformerTIMM`: the timm model plus a
learned mask token, so ``encode(images, mask=...)`` replaces masked patch tokens before the blocks
(iBOT / DINOv2 style) and ``encode(images, idx_keep=...)`` drops them (MAE style).
:func:`encode_tokens` turns any supported ViT into ``(cls, patches)`` with patches
``(batch, n_patches, dim)``: the input every diagnostic takes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ViTConfig:
    """A small ViT: ``img_size`` / ``patch_size`` patches, ``depth`` blocks of width ``embed_dim``."""

    img_size: int = 32
    patch_size: int = 4
    embed_dim: int = 96
    depth: int = 4
    num_heads: int = 3
    mlp_ratio: float = 4.0

    def __post_init__(self) -> None:
        if self.patch_size < 1 or self.img_size % self.patch_size:
            raise ValueError(
                f"patch size {self.patch_size} does not divide the image size {self.img_size}"
            )
        if self.embed_dim % self.num_heads:
            raise ValueError(
                f"embed_dim {self.embed_dim} is not divisible by num_heads {self.num_heads}"
            )
        if self.depth < 1:
            raise ValueError("depth must be >= 1")

    @property
    def grid(self) -> int:
        return self.img_size // self.patch_size

    @property
    def n_patches(self) -> int:
        return self.grid**2


#: the two model scales of the experiments
VIT_SCALES = {
    "tiny": ViTConfig(embed_dim=96, depth=4, num_heads=3),
    "small": ViTConfig(embed_dim=192, depth=6, num_heads=3),
}


def build_vit(config: ViTConfig = ViTConfig()) -> nn.Module:
    """A timm ``VisionTransformer`` (CLS token, dynamic image size) in lightly's masking wrapper."""
    from lightly.models.modules import MaskedVisionTransformerTIMM
    from timm.models.vision_transformer import VisionTransformer

    vit = VisionTransformer(
        img_size=config.img_size,
        patch_size=config.patch_size,
        in_chans=3,
        num_classes=0,
        embed_dim=config.embed_dim,
        depth=config.depth,
        num_heads=config.num_heads,
        mlp_ratio=config.mlp_ratio,
        global_pool="token",
        dynamic_img_size=True,
    )
    return MaskedVisionTransformerTIMM(vit=vit)


Encoder = nn.Module | Callable[[torch.Tensor], torch.Tensor]


def _tokens(model: Encoder, images: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
    from lightly.models.modules.masked_vision_transformer import MaskedVisionTransformer
    from timm.models.vision_transformer import VisionTransformer

    if isinstance(model, MaskedVisionTransformer):
        x = model.encode(images)
        k = model.vit.num_prefix_tokens  # type: ignore[union-attr]
    elif isinstance(model, VisionTransformer):
        x = model.forward_features(images)
        k = model.num_prefix_tokens
    else:
        x = model(images)
        if not isinstance(x, torch.Tensor) or x.dim() != 3:
            raise TypeError(
                "a custom encoder must return patch tokens (batch, n_patches, dim); got "
                f"{type(x).__name__} {getattr(x, 'shape', '')}"
            )
        return None, x
    return x[:, 0], x[:, k:]


@torch.no_grad()
def encode_tokens(
    model: Encoder, images: torch.Tensor, batch_size: int = 256
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cls, patches)`` of a ViT in eval mode, batched; ``cls`` falls back to mean-pooled patches.

    ``model`` may be a lightly masked ViT (what :func:`build_vit` returns), a timm
    ``VisionTransformer``, or any callable mapping images to ``(batch, n_patches, dim)``. Each
    batch is moved to the device of the model's parameters (a GPU-trained backbone reads CPU data
    sets); the tokens come back as float32 on the CPU, where the probes run.
    """
    if images.dim() != 4:
        raise ValueError(f"images must be (batch, channels, H, W), got {tuple(images.shape)}")
    was_training = getattr(model, "training", False)
    if isinstance(model, nn.Module):
        model.eval()
    device = _device_of(model, images.device)
    cls_parts, patch_parts = [], []
    for start in range(0, images.shape[0], batch_size):
        c, p = _tokens(model, images[start : start + batch_size].to(device))
        cls_parts.append((p.mean(1) if c is None else c).float().cpu())
        patch_parts.append(p.float().cpu())
    if isinstance(model, nn.Module):
        model.train(was_training)
    return torch.cat(cls_parts), torch.cat(patch_parts)


def _device_of(model: Encoder, default: torch.device) -> torch.device:
    """The device of the model's first parameter (``default`` for a parameter-free callable)."""
    if isinstance(model, nn.Module):
        for p in model.parameters():
            return p.device
    return default
