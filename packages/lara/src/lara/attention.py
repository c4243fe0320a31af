"""One interface for every attention method: ``attn(q, k, v, causal) -> out`` on ``(batch, heads, seq, dim)``.

Each method is a :class:`torch.nn.Module` built for a head size and a number of heads (random
features and learned proposals are per head). ``form`` picks the computation: ``"quadratic"`` (the
reference, O(N^2) memory), ``"chunked"`` (O(N) memory; for softmax this is PyTorch's fused
``scaled_dot_product_attention``, the FlashAttention / memory-efficient kernel where available) or
``"recurrent"`` (one token at a time through :meth:`Attention.step`, constant state for kernelized
methods, a growing KV cache for softmax). Methods that cannot do a form say so with a clear error.

Scores use ``scale * q.k`` with ``scale = head_dim ** -0.5`` unless given, so a method is a drop-in
replacement for softmax attention with the same projections.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn

from lara.linear import LinearState, linear_attention

__all__ = [
    "METHODS",
    "Attention",
    "KernelizedAttention",
    "check_qkv",
    "log_positive_features",
    "make_attention",
    "orthogonal_gaussian",
    "register",
    "segment_means",
]

FORMS = ("quadratic", "chunked", "recurrent")
#: name -> class of every registered method (filled by :func:`register`)
METHODS: dict[str, type[Attention]] = {}


def register(cls: type[Attention]) -> type[Attention]:
    """Class decorator: make ``cls`` available to :func:`make_attention` under ``cls.name``."""
    METHODS[cls.name] = cls
    return cls


def make_attention(name: str, head_dim: int, num_heads: int = 1, **kwargs: Any) -> Attention:
    """Build a registered method by name (``"softmax"``, ``"performer"``, ``"lara"``, ...)."""
    import lara.baselines
    import lara.randomized  # noqa: F401

    if name not in METHODS:
        raise ValueError(f"unknown attention method {name!r}; choose one of {', '.join(METHODS)}")
    return METHODS[name](head_dim, num_heads, **kwargs)


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> None:
    """Shapes ``q (b, h, n_q, d)``, ``k (b, h, n_k, d)``, ``v (b, h, n_k, d_v)``, floating dtypes."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor; got {type(t).__name__}")
        if t.ndim != 4:
            raise ValueError(f"{name} must be (batch, heads, seq, dim); got shape {tuple(t.shape)}")
        if not t.is_floating_point():
            raise TypeError(f"{name} must be a floating tensor; got {t.dtype}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"q, k, v dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[:2] != k.shape[:2] or k.shape[:3] != v.shape[:3]:
        raise ValueError(
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} must share batch and heads, "
            "and k, v the sequence length"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k head sizes differ: {q.shape[-1]} vs {k.shape[-1]}")
    if causal and q.shape[2] > k.shape[2]:
        raise ValueError(f"causal attention needs n_q <= n_k; got {q.shape[2]} > {k.shape[2]}")


class Attention(nn.Module):
    """Base class. Subclasses set ``name``, the forms they support, and implement ``_attend``.

    Args:
        head_dim: size of a query/key head.
        num_heads: heads the per-head parameters (random features, proposals) are made for.
        form: ``"quadratic"``, ``"chunked"`` or ``"recurrent"``.
        chunk_size: queries per chunk for the causal chunked form.
        eps: floor on denominators.
    """

    name: ClassVar[str] = ""
    supports_causal: ClassVar[bool] = True
    supports_recurrent: ClassVar[bool] = True

    def __init__(
        self,
        head_dim: int,
        num_heads: int = 1,
        form: str = "chunked",
        chunk_size: int = 64,
        eps: float = 1e-6,
    ) -> None:
        super().__init__()
        for field, value in (
            ("head_dim", head_dim),
            ("num_heads", num_heads),
            ("chunk_size", chunk_size),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{field} must be a positive int; got {value!r}")
        if form not in FORMS:
            raise ValueError(f"form must be one of {', '.join(FORMS)}; got {form!r}")
        if form == "recurrent" and not self.supports_recurrent:
            raise ValueError(f"{self.name} has no recurrent form; use form='chunked'")
        if not eps > 0:
            raise ValueError(f"eps must be > 0; got {eps}")
        self.head_dim, self.num_heads = head_dim, num_heads
        self.form, self.chunk_size, self.eps = form, chunk_size, eps

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, num_heads={self.num_heads}, form={self.form!r}"

    def scale(self, scale: float | None) -> float:
        return self.head_dim**-0.5 if scale is None else float(scale)

    def _check_heads(self, q: torch.Tensor) -> None:
        if q.shape[-1] != self.head_dim:
            raise ValueError(
                f"{self.name} was built for head_dim={self.head_dim}; got {q.shape[-1]}"
            )
        if q.shape[1] != self.num_heads:
            raise ValueError(
                f"{self.name} was built for num_heads={self.num_heads}; got {q.shape[1]} heads"
            )

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        causal: bool = False,
        *,
        key_mask: torch.Tensor | None = None,
        scale: float | None = None,
    ) -> torch.Tensor:
        """Attention output ``(batch, heads, n_q, d_v)``.

        ``key_mask (batch, n_k)`` is False at padding keys. With ``causal`` and ``n_q < n_k`` the
        queries are the last ``n_q`` positions (decoding against a cache).
        """
        check_qkv(q, k, v, causal)
        self._check_heads(q)
        if causal and not self.supports_causal:
            raise ValueError(f"{self.name} has no causal form (it pools over the whole sequence)")
        if self.form == "recurrent":
            if not causal:
                raise ValueError("form='recurrent' computes causal attention; pass causal=True")
            return self._recurrent(q, k, v, key_mask, scale)
        return self._attend(q, k, v, causal, key_mask, self.scale(scale))

    def _attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        causal: bool,
        key_mask: torch.Tensor | None,
        scale: float,
    ) -> torch.Tensor:
        raise NotImplementedError

    def _recurrent(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        key_mask: torch.Tensor | None,
        scale: float | None,
    ) -> torch.Tensor:
        n_q, n_k = q.shape[2], k.shape[2]
        state = self.init_state(q.shape[0], v.shape[-1], dtype=q.dtype, device=q.device)
        outs = []
        for t in range(n_k):
            keep = None if key_mask is None else key_mask[:, t]
            out, state = self.step(
                state, q[:, :, t - (n_k - n_q)], k[:, :, t], v[:, :, t], keep, scale
            )
            if t >= n_k - n_q:
                outs.append(out)
        return torch.stack(outs, dim=2)

    # ---------------------------------------------------------------- decoding
    def init_state(
        self, batch: int, value_dim: int, dtype: torch.dtype = torch.float32, device: Any = None
    ) -> Any:
        """The empty decoding state (KV cache for softmax, :class:`LinearState` for kernelized)."""
        raise ValueError(f"{self.name} has no recurrent form")

    def step(
        self,
        state: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        key_mask: torch.Tensor | None = None,
        scale: float | None = None,
    ) -> tuple[torch.Tensor, Any]:
        """One decoding step: ``q, k (batch, heads, d)``, ``v (batch, heads, d_v)``; returns the output
        ``(batch, heads, d_v)`` of the new token (it sees itself and the past) and the new state."""
        raise ValueError(f"{self.name} has no recurrent form")

    def calibrate(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        causal: bool = True,
        key_mask: torch.Tensor | None = None,
    ) -> None:
        """Fit data-dependent parameters (proposal means) to real queries and keys; default: none.
        ``key_mask (batch, n)`` is False at padding positions, which take no part in the fit."""


#: dtypes whose range the kernel sums overflow (fp16: 65504); the kernelized core runs in float32
LOW_PRECISION = (torch.float16, torch.bfloat16)


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in LOW_PRECISION else dtype


class KernelizedAttention(Attention):
    """A method defined by feature maps; attention is :func:`lara.linear.linear_attention`.

    Subclasses implement :meth:`features` and set ``log_space`` (features given as logs). Random
    features that are redrawn in training come from :meth:`draw`, once per forward pass (and once
    per decoded sequence, kept in the recurrent state), never once per token. Half-precision
    inputs are computed in float32 (sums of positive features overflow fp16) and the output is
    returned in the input's dtype.
    """

    log_space: ClassVar[bool] = False

    def features(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        scale: float,
        q_pos: torch.Tensor,
        k_pos: torch.Tensor,
        causal: bool,
        draws: dict[str, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(phi(q) (b, h, n_q, m), phi(k) (b, h, n_k, m))``; ``q_pos``/``k_pos`` are token indices,
        ``draws`` what :meth:`draw` returned for this sequence (plus ``query_mask (b, n)``, False at
        padding queries, in self-attention with a ``key_mask``)."""
        raise NotImplementedError

    def draw(self, batch: int, dtype: torch.dtype, device: Any) -> dict[str, torch.Tensor]:
        """Random draws for one sequence (training-mode resampling); default: none."""
        return {}

    def advance(
        self,
        draws: dict[str, torch.Tensor],
        q: torch.Tensor,
        scale: float,
        keep: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """Per-sequence statistics after decoding query ``q (b, h, 1, d)`` (``keep (b,)`` False at
        padding); default: unchanged."""
        return draws

    def _attend(self, q, k, v, causal, key_mask, scale):  # type: ignore[no-untyped-def]
        dtype = q.dtype
        q, k, v = (t.to(_compute_dtype(dtype)) for t in (q, k, v))
        n_q, n_k = q.shape[2], k.shape[2]
        k_pos = torch.arange(n_k, device=q.device)
        draws = self.draw(q.shape[0], q.dtype, q.device)
        if key_mask is not None and n_q == n_k:  # self-attention: padding queries too
            draws = {**draws, "query_mask": key_mask.to(torch.bool)}
        fq, fk = self.features(q, k, scale, k_pos[n_k - n_q :], k_pos, causal, draws)
        form = "quadratic" if self.form == "quadratic" else "chunked"
        return linear_attention(
            fq,
            fk,
            v,
            causal,
            log_space=self.log_space,
            form=form,
            chunk_size=self.chunk_size,
            eps=self.eps,
            key_mask=key_mask,
        ).to(dtype)

    def init_state(self, batch, value_dim, dtype=torch.float32, device=None):  # type: ignore[no-untyped-def]
        m, dtype = self.num_features, _compute_dtype(dtype)
        probe_q = torch.zeros(batch, self.num_heads, 1, m, dtype=dtype, device=device)
        probe_v = torch.zeros(batch, self.num_heads, 1, value_dim, dtype=dtype, device=device)
        state = LinearState.empty(probe_q, probe_v, self.log_space)
        state.aux = self.draw(batch, dtype, device)
        return state

    def step(self, state, q, k, v, key_mask=None, scale=None):  # type: ignore[no-untyped-def]
        dtype = q.dtype
        q, k, v = (t.to(state.S.dtype)[:, :, None] for t in (q, k, v))
        pos = torch.tensor([state.position], device=q.device)
        sc = self.scale(scale)
        fq, fk = self.features(q, k, sc, pos, pos, True, state.aux)
        if key_mask is not None:
            keep = key_mask.to(torch.bool)[:, None, None, None]
            fk = fk.masked_fill(~keep, float("-inf")) if self.log_space else fk * keep
        aux = self.advance(state.aux, q, sc, key_mask)
        state = state.absorb(fk, v)
        state.aux = aux
        return state.read(fq, self.eps)[:, :, 0].to(dtype), state

    @property
    def num_features(self) -> int:
        """Feature dimension ``m`` (the size of the recurrent state per value dimension)."""
        raise NotImplementedError


def orthogonal_gaussian(
    num_heads: int, m: int, d: int, generator: torch.Generator, orthogonal: bool = True
) -> torch.Tensor:
    """``(num_heads, m, d)`` Gaussian rows; with ``orthogonal`` the rows of each ``d x d`` block are
    orthogonalised and rescaled to chi(d) norms (Performer's orthogonal random features: still
    marginally N(0, I), lower variance)."""
    g = torch.randn(num_heads, m, d, generator=generator, dtype=torch.float64)
    if not orthogonal:
        return g
    blocks = []
    for s in range(0, m, d):
        rows = min(d, m - s)
        qmat, r = torch.linalg.qr(
            torch.randn(num_heads, d, d, generator=generator, dtype=torch.float64)
        )
        qmat = (
            qmat * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))[:, None, :]
        )  # Haar-distributed
        blocks.append(qmat.transpose(-2, -1)[:, :rows])
    w = torch.cat(blocks, dim=1)
    return w * g.norm(dim=-1, keepdim=True)


def log_positive_features(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``log xi(x, w) = w.x - |x|^2 / 2`` for ``x (b, h, n, d)`` and ``w (h, m, d)`` or ``(b, h, m, d)``:
    ``E_{w ~ N(0, I)}[xi(x, w) xi(y, w)] = exp(x.y)``."""
    return x @ w.transpose(-2, -1) - 0.5 * (x * x).sum(-1, keepdim=True)


def segment_means(x: torch.Tensor, num_segments: int) -> torch.Tensor:
    """Means of ``num_segments`` contiguous segments of the sequence: ``(b, h, n, d) -> (b, h, c, d)``.

    Segments differ in length by at most one (the first ones shorter), as in the LARA and
    Nystromformer landmarks; with ``n <= num_segments`` every token is its own landmark.
    """
    n = x.shape[-2]
    if n <= num_segments:
        return x
    base, extra = divmod(n, num_segments)
    short = num_segments - extra  # segments of length `base`, then `extra` of length base + 1
    head = x[..., : short * base, :].unflatten(-2, (short, base)).mean(-2)
    if not extra:
        return head
    tail = x[..., short * base :, :].unflatten(-2, (extra, base + 1)).mean(-2)
    return torch.cat([head, tail], dim=-2)
