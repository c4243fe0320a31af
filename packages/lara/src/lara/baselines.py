"""The methods the paper compares against, behind :class:`lara.attention.Attention`.

* :class:`SoftmaxAttention`: exact softmax; ``chunked`` is ``scaled_dot_product_attention`` (fused,
  FlashAttention-style where the backend has it), ``quadratic`` the explicit matrix (what early
  kernelized-attention papers timed against), ``recurrent`` a KV cache.
* :class:`Performer`: FAVOR+, positive orthogonal random features (Choromanski et al., 2021).
* :class:`RFA`: random Fourier features on unit-normalised queries/keys with a learned temperature
  (Peng et al., 2021).
* :class:`CosFormer`: ReLU features with the cos re-weighting ``cos(pi/2 (i - j) / M)`` decomposed into
  cos/sin position features (Qin et al., 2022).
* :class:`EluLinear`: ``elu(x) + 1`` features (Katharopoulos et al., 2020).
* :class:`Nystromformer`: Nystrom approximation through segment-mean landmarks and an iterative
  pseudo-inverse (Xiong et al., 2021); non-causal only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lara.attention import (
    Attention,
    KernelizedAttention,
    _compute_dtype,
    log_positive_features,
    orthogonal_gaussian,
    register,
    segment_means,
)

__all__ = [
    "RFA",
    "CosFormer",
    "EluLinear",
    "KVCache",
    "Nystromformer",
    "Performer",
    "SoftmaxAttention",
    "iterative_pinv",
]


def _allowed(
    n_q: int, n_k: int, causal: bool, key_mask: torch.Tensor | None, device
) -> torch.Tensor | None:  # type: ignore[no-untyped-def]
    """Bool mask ``(b or 1, 1, n_q, n_k)``: True where a query may attend; None if everything is."""
    mask = None
    if causal:
        mask = torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(n_k - n_q)[None, None]
    if key_mask is not None:
        km = key_mask.to(torch.bool)[:, None, None, :]
        mask = km if mask is None else mask & km
    return mask


# ============================================================================ softmax
@dataclass
class KVCache:
    """Keys and values seen so far, ``(batch, heads, capacity, d)``, grown by doubling."""

    k: torch.Tensor
    v: torch.Tensor
    keep: torch.Tensor
    position: int = 0

    def append(self, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor | None) -> KVCache:
        cap = self.k.shape[2]
        if self.position == cap:
            grow = max(1, cap)
            self.k = torch.cat(
                [self.k, torch.zeros_like(self.k[:, :, :grow]).expand(-1, -1, grow, -1)], 2
            )
            self.v = torch.cat(
                [self.v, torch.zeros_like(self.v[:, :, :grow]).expand(-1, -1, grow, -1)], 2
            )
            self.keep = torch.cat(
                [self.keep, torch.zeros_like(self.keep[:, :grow]).expand(-1, grow)], 1
            )
        self.k[:, :, self.position] = k
        self.v[:, :, self.position] = v
        self.keep[:, self.position] = True if keep is None else keep.to(torch.bool)
        self.position += 1
        return self

    def nbytes(self) -> int:
        """Bytes of the filled part of the cache (grows linearly with the tokens seen)."""
        per = (
            self.k[:, :, :1].numel() * self.k.element_size()
            + self.v[:, :, :1].numel() * self.v.element_size()
        )
        return per * self.position


@register
class SoftmaxAttention(Attention):
    """Exact softmax attention: the teacher and the efficiency baseline."""

    name = "softmax"

    def _attend(self, q, k, v, causal, key_mask, scale):  # type: ignore[no-untyped-def]
        n_q, n_k = q.shape[2], k.shape[2]
        if self.form != "quadratic" and key_mask is None and (not causal or n_q == n_k):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
        mask = _allowed(n_q, n_k, causal, key_mask, q.device)
        if self.form == "quadratic":
            s = (q @ k.transpose(-2, -1)) * scale
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            return torch.softmax(s, dim=-1) @ v
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)

    def init_state(self, batch, value_dim, dtype=torch.float32, device=None):  # type: ignore[no-untyped-def]
        shape = (batch, self.num_heads, 16)
        kw = {"dtype": dtype, "device": device}
        return KVCache(
            torch.zeros(*shape, self.head_dim, **kw),
            torch.zeros(*shape, value_dim, **kw),
            torch.zeros(batch, 16, dtype=torch.bool, device=device),
        )

    def step(self, state, q, k, v, key_mask=None, scale=None):  # type: ignore[no-untyped-def]
        state = state.append(k, v, key_mask)
        n = state.position
        mask = state.keep[:, None, None, :n]
        out = F.scaled_dot_product_attention(
            q[:, :, None],
            state.k[:, :, :n],
            state.v[:, :, :n],
            attn_mask=mask,
            scale=self.scale(scale),
        )
        return out[:, :, 0], state


# ============================================================================ Performer
@register
class Performer(KernelizedAttention):
    """FAVOR+: ``phi(x) = exp(w.x' - |x'|^2 / 2)`` with ``x' = x sqrt(scale)``, orthogonal ``w``.

    Args:
        num_features: random features per head (default ``round(d log d)``, the paper's choice).
        orthogonal: orthogonal random features (lower variance than i.i.d.).
        seed: the features' seed; :meth:`redraw` draws new ones.
    """

    name = "performer"
    log_space = True

    def __init__(
        self,
        head_dim: int,
        num_heads: int = 1,
        num_features: int | None = None,
        orthogonal: bool = True,
        seed: int = 0,
        **kwargs,  # type: ignore[no-untyped-def]
    ) -> None:
        super().__init__(head_dim, num_heads, **kwargs)
        m = (
            max(1, round(head_dim * math.log(max(head_dim, 2))))
            if num_features is None
            else num_features
        )
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ValueError(f"num_features must be a positive int; got {num_features!r}")
        self.m, self.orthogonal = m, orthogonal
        self.register_buffer("w", torch.empty(num_heads, m, head_dim))
        self.redraw(seed)

    def redraw(self, seed: int) -> None:
        """Draw new random features (seeded)."""
        gen = torch.Generator().manual_seed(seed)
        w = orthogonal_gaussian(self.num_heads, self.m, self.head_dim, gen, self.orthogonal)
        self.w.copy_(w.to(self.w.dtype))

    @property
    def num_features(self) -> int:
        return self.m

    def features(self, q, k, scale, q_pos, k_pos, causal, draws=None):  # type: ignore[no-untyped-def]
        s, w = math.sqrt(scale), self.w.to(q.dtype)
        return log_positive_features(q * s, w), log_positive_features(k * s, w)


# ============================================================================ RFA
@register
class RFA(KernelizedAttention):
    """Random feature attention: ``phi(x) = [sin(w.x), cos(w.x)] / sqrt(m)``, ``x`` unit-normalised,
    ``w ~ N(0, I / sigma^2)``, which estimates ``exp(x.y / sigma^2)`` up to a constant.

    ``sigma`` is learned (per head); :meth:`calibrate` sets it so that ``1 / sigma^2`` matches the mean
    ``scale |q| |k|`` of real activations. Features can be negative: the denominator is floored.
    """

    name = "rfa"

    def __init__(
        self,
        head_dim: int,
        num_heads: int = 1,
        num_features: int | None = None,
        sigma: float = 1.0,
        seed: int = 0,
        **kwargs,  # type: ignore[no-untyped-def]
    ) -> None:
        super().__init__(head_dim, num_heads, **kwargs)
        m = head_dim if num_features is None else num_features
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ValueError(f"num_features must be a positive int; got {num_features!r}")
        if not sigma > 0:
            raise ValueError(f"sigma must be > 0; got {sigma}")
        self.m = m
        gen = torch.Generator().manual_seed(seed)
        self.register_buffer("w", torch.randn(num_heads, m, head_dim, generator=gen))
        self.log_sigma = nn.Parameter(torch.full((num_heads,), math.log(sigma)))

    @property
    def num_features(self) -> int:
        return 2 * self.m

    def features(self, q, k, scale, q_pos, k_pos, causal, draws=None):  # type: ignore[no-untyped-def]
        w = self.w.to(q.dtype) / torch.exp(self.log_sigma.to(q.dtype))[:, None, None]

        def phi(x: torch.Tensor) -> torch.Tensor:
            proj = F.normalize(x, dim=-1) @ w.transpose(-2, -1)
            return torch.cat([torch.sin(proj), torch.cos(proj)], -1) / math.sqrt(self.m)

        return phi(q), phi(k)

    @torch.no_grad()
    def calibrate(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        causal: bool = True,
        key_mask: torch.Tensor | None = None,
    ) -> None:
        w = _valid_weights(q, key_mask)  # (b, 1, n): padding positions weigh nothing
        qn = (q.norm(dim=-1) * w).sum((0, 2)) / w.sum((0, 2))
        kn = (k.norm(dim=-1) * w).sum((0, 2)) / w.sum((0, 2))
        inv_t = self.scale(None) * qn * kn
        self.log_sigma.copy_(-0.5 * torch.log(inv_t.clamp_min(1e-3)).to(self.log_sigma.dtype))


# ============================================================================ cosFormer
@register
class CosFormer(KernelizedAttention):
    """cosFormer: ``relu`` features re-weighted by ``cos(pi/2 (i - j) / M)``, decomposed as
    ``cos(a_i) cos(a_j) + sin(a_i) sin(a_j)`` with ``a_i = pi i / (2 M)``.

    ``M = max_len`` if given, else the sequence length (the recurrent form needs ``max_len``).
    """

    name = "cosformer"

    def __init__(
        self, head_dim: int, num_heads: int = 1, max_len: int | None = None, **kwargs
    ) -> None:  # type: ignore[no-untyped-def]
        super().__init__(head_dim, num_heads, **kwargs)
        if max_len is not None and (not isinstance(max_len, int) or max_len < 1):
            raise ValueError(f"max_len must be a positive int or None; got {max_len!r}")
        if self.form == "recurrent" and max_len is None:
            raise ValueError(
                "cosformer's recurrent form needs max_len (its re-weighting uses i / M)"
            )
        self.max_len = max_len

    @property
    def num_features(self) -> int:
        return 2 * self.head_dim

    def init_state(self, batch, value_dim, dtype=torch.float32, device=None):  # type: ignore[no-untyped-def]
        if self.max_len is None:
            raise ValueError("cosformer decoding needs max_len (its re-weighting uses i / M)")
        return super().init_state(batch, value_dim, dtype, device)

    def features(self, q, k, scale, q_pos, k_pos, causal, draws=None):  # type: ignore[no-untyped-def]
        length = self.max_len if self.max_len is not None else int(k_pos.max()) + 1
        if int(k_pos.max()) >= length:
            raise ValueError(f"position {int(k_pos.max())} is beyond cosformer's max_len={length}")

        def phi(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
            a = (math.pi / 2) * pos.to(x.dtype) / length
            r = F.relu(x)
            return torch.cat([r * torch.cos(a)[:, None], r * torch.sin(a)[:, None]], -1)

        return phi(q, q_pos), phi(k, k_pos)


# ============================================================================ elu + 1
@register
class EluLinear(KernelizedAttention):
    """Linear attention with ``phi(x) = elu(x) + 1`` (no scale: it is a different kernel)."""

    name = "linear"

    @property
    def num_features(self) -> int:
        return self.head_dim

    def features(self, q, k, scale, q_pos, k_pos, causal, draws=None):  # type: ignore[no-untyped-def]
        return F.elu(q) + 1, F.elu(k) + 1


# ============================================================================ Nystromformer
def iterative_pinv(a: torch.Tensor, iterations: int = 6) -> torch.Tensor:
    """Moore-Penrose pseudo-inverse of a batch of square matrices by the Newton-Schulz-type iteration
    Nystromformer uses (Razavi et al., 2014), started at ``a^T / (|a|_1 |a|_inf)``."""
    eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
    col = a.abs().sum(-2).amax(-1)
    row = a.abs().sum(-1).amax(-1)
    z = a.transpose(-2, -1) / (col * row)[..., None, None]
    for _ in range(iterations):
        az = a @ z
        z = 0.25 * z @ (13 * eye - az @ (15 * eye - az @ (7 * eye - az)))
    return z


@register
class Nystromformer(Attention):
    """Nystrom approximation ``softmax(Q K~^T) pinv(softmax(Q~ K~^T)) softmax(Q~ K^T) V`` with
    segment-mean landmarks ``Q~, K~``. ``pinv_iterations=None`` uses ``torch.linalg.pinv``.
    Non-causal self-attention only (``n_q == n_k``), no recurrent form.

    A sequence of at most ``num_landmarks`` tokens has no landmarks to pool: it raises, unless
    ``exact_when_short=True`` asks for exact softmax there (the official code's behaviour when the
    sequence equals the landmark count) - never a silent switch to a different method.
    """

    name = "nystrom"
    supports_causal = False
    supports_recurrent = False

    def __init__(
        self,
        head_dim: int,
        num_heads: int = 1,
        num_landmarks: int = 64,
        pinv_iterations: int | None = 6,
        exact_when_short: bool = False,
        **kwargs,  # type: ignore[no-untyped-def]
    ) -> None:
        super().__init__(head_dim, num_heads, **kwargs)
        if not isinstance(num_landmarks, int) or num_landmarks < 1:
            raise ValueError(f"num_landmarks must be a positive int; got {num_landmarks!r}")
        if pinv_iterations is not None and (
            not isinstance(pinv_iterations, int) or pinv_iterations < 1
        ):
            raise ValueError(
                f"pinv_iterations must be a positive int or None; got {pinv_iterations!r}"
            )
        self.num_landmarks, self.pinv_iterations = num_landmarks, pinv_iterations
        self.exact_when_short = exact_when_short

    def _attend(self, q, k, v, causal, key_mask, scale):  # type: ignore[no-untyped-def]
        if key_mask is not None and not bool(key_mask.all()):
            raise ValueError("nystrom does not support padding keys (key_mask)")
        if q.shape[2] != k.shape[2]:
            raise ValueError(
                f"nystrom approximates self-attention and needs n_q == n_k; got {q.shape[2]} "
                f"queries for {k.shape[2]} keys"
            )
        dtype = q.dtype
        q, k, v = (t.to(_compute_dtype(dtype)) for t in (q, k, v))
        if k.shape[2] <= self.num_landmarks:
            if not self.exact_when_short:
                raise ValueError(
                    f"nystrom with num_landmarks={self.num_landmarks} needs more than "
                    f"{self.num_landmarks} tokens; got {k.shape[2]}. Lower num_landmarks, or pass "
                    "exact_when_short=True for exact softmax on short sequences"
                )
            return (torch.softmax((q @ k.transpose(-2, -1)) * scale, -1) @ v).to(dtype)
        ql, kl = segment_means(q, self.num_landmarks), segment_means(k, self.num_landmarks)
        k1 = torch.softmax((q @ kl.transpose(-2, -1)) * scale, -1)
        k2 = torch.softmax((ql @ kl.transpose(-2, -1)) * scale, -1)
        k3 = torch.softmax((ql @ k.transpose(-2, -1)) * scale, -1)
        inv = (
            torch.linalg.pinv(k2)
            if self.pinv_iterations is None
            else iterative_pinv(k2, self.pinv_iterations)
        )
        return (k1 @ (inv @ (k3 @ v))).to(dtype)


def _valid_weights(q: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
    """``(batch, 1, n)`` float weights: 1 at real positions, 0 at padding (``key_mask`` False)."""
    b, _h, n, _d = q.shape
    if key_mask is None:
        return torch.ones(b, 1, n, dtype=q.dtype, device=q.device)
    if key_mask.shape != (b, n):
        raise ValueError(f"key_mask must be (batch, n) = {(b, n)}; got {tuple(key_mask.shape)}")
    if not bool(key_mask.any()):
        raise ValueError("key_mask marks every position as padding: nothing to calibrate on")
    return key_mask.to(torch.bool)[:, None, :].to(q.dtype)
