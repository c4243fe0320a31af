"""Feature maps ``phi`` applied to queries and keys before a linear-attention state update.

- ``l2``: ``x / |x|`` (identity, unit length; the delta rules' default);
- ``elu1``: ``1 + elu(x)`` (Katharopoulos et al. 2020);
- ``hedgehog``: ``[softmax(x W + b), softmax(-(x W + b))]`` with a learned per-head ``W``
  initialised to the identity (Hedgehog, Zhang et al. 2024; LoLCATs' form), ``2 * feature_dim`` wide;
- ``liger``: ``softmax(x)`` over the head dimension, no parameters (Liger, Lan et al. 2025);
- ``learned``: ``x W + b``, a signed learned per-head map initialised to the identity (the delta
  rules normalise it to unit length afterwards, so keys can be orthogonal).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["FEATURE_MAPS", "FeatureMap"]

FEATURE_MAPS = ("l2", "elu1", "hedgehog", "liger", "learned")


class FeatureMap(nn.Module):
    """``phi: (batch, heads, n, head_dim) -> (batch, heads, n, out_dim)``."""

    def __init__(self, kind: str, head_dim: int, n_heads: int, feature_dim: int | None = None):
        super().__init__()
        if kind not in FEATURE_MAPS:
            raise ValueError(f"feature map must be one of {', '.join(FEATURE_MAPS)}; got {kind!r}")
        self.kind = kind
        self.out_dim = head_dim
        if kind == "hedgehog":
            f = feature_dim or head_dim
            eye = torch.eye(head_dim, f)
            self.weight = nn.Parameter(eye.expand(n_heads, head_dim, f).clone())
            self.bias = nn.Parameter(torch.zeros(n_heads, 1, f))
            self.out_dim = 2 * f
        if kind == "learned":
            f = feature_dim or head_dim
            self.weight = nn.Parameter(torch.eye(head_dim, f).expand(n_heads, head_dim, f).clone())
            self.bias = nn.Parameter(torch.zeros(n_heads, 1, f))
            self.out_dim = f

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "l2":
            return F.normalize(x, dim=-1)
        if self.kind == "elu1":
            return 1 + F.elu(x)
        if self.kind == "liger":
            return torch.softmax(x, -1)
        z = torch.einsum("bhnd,hdf->bhnf", x, self.weight) + self.bias
        if self.kind == "learned":
            return z
        return torch.cat([torch.softmax(z, -1), torch.softmax(-z, -1)], -1)
