"""The paper's one-layer post-norm transformer and its variants, in one readable module.

::

    h  = N1(tok + pos)                 every position, (B, L, d)
    x  = N2(h[-1] + attention(h)[-1])  the answer position, (B, d)
    x  = N3(x + MLP(x))
    logits = head(x)                   (B, n_classes)

Bias-free Q/K/V/O and unembedding, a ReLU MLP with biases, learned positions, no causal mask.
Only the answer position is read out, and with one layer nothing else reaches it, so its MLP and
readout are the only per-example work: N1 and the Q/K/V projections are computed once per (token,
position) of the vocabulary and looked up. This is exact (``tests/test_model.py`` checks it against
the plain full-sequence computation) and about 3x faster per training step at d 64 on Z_59.

The variants differ along three axes (:data:`VARIANTS` names the combinations):

- ``norm``: ``"layernorm"`` (the baseline), ``"rmsnorm"``, ``"sphere"`` (plain L2 normalisation,
  no gain: the residual stream lives on the unit sphere), ``"none"``;
- ``attention``: ``"learned"`` softmax attention or ``"uniform"`` (scores fixed at zero, so every
  position averages the values with weight 1/L; values and output projection are still learned);
- ``head``: ``"linear"`` unembedding or ``"cosine"`` logits ``tau * <x, normalise(W_U row)>`` with a
  fixed ``tau``. The bounded sphere always uses the cosine head: with a linear head a spherical model
  falls into softmax collapse (the paper's v2 errata).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .tasks import Task

__all__ = [
    "ATTENTIONS",
    "HEADS",
    "NORMS",
    "VARIANTS",
    "GrokTransformer",
    "L2Norm",
    "ModelConfig",
    "build_model",
]

NORMS = ("layernorm", "rmsnorm", "sphere", "none", "ngpt")
ATTENTIONS = ("learned", "uniform")
HEADS = ("linear", "cosine")

VARIANTS: dict[str, dict[str, str]] = {
    "layernorm": {"norm": "layernorm", "attention": "learned", "head": "linear"},
    "rmsnorm": {"norm": "rmsnorm", "attention": "learned", "head": "linear"},
    "none": {"norm": "none", "attention": "learned", "head": "linear"},
    "sphere": {"norm": "sphere", "attention": "learned", "head": "cosine"},
    "layernorm+uniform": {"norm": "layernorm", "attention": "uniform", "head": "linear"},
    "sphere+uniform": {"norm": "sphere", "attention": "uniform", "head": "cosine"},
    "ngpt": {"norm": "ngpt", "attention": "learned", "head": "cosine"},
}
"""Named models: the LayerNorm/RMSNorm/no-norm baselines, the bounded sphere, uniform attention with
either, and nGPT (an optional extra, see :mod:`spherical_grokking.ngpt`)."""


def _positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"ModelConfig.{name} must be a positive integer; got {value!r}")


@dataclass(frozen=True)
class ModelConfig:
    """Shape and variant of the one-layer transformer (defaults: the paper's d 128, 4 heads, MLP 512).

    Attributes:
        vocab_size: input tokens (task elements plus ``=``).
        n_classes: output classes (task elements).
        d_model, n_heads, d_mlp: widths; ``d_model`` must be divisible by ``n_heads``.
        norm, attention, head: see the module docstring; ``norm="ngpt"`` builds nGPT.
        tau: the fixed logit scale of the cosine head (10 in the paper).
        seq_len: tokens per example (3: ``a b =``).
        eps: the sphere's normalisation floor, ``x / max(||x||, eps)`` (``F.normalize``'s default).
    """

    vocab_size: int
    n_classes: int
    d_model: int = 128
    n_heads: int = 4
    d_mlp: int = 512
    norm: str = "layernorm"
    attention: str = "learned"
    head: str = "linear"
    tau: float = 10.0
    seq_len: int = 3
    eps: float = 1e-12

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_classes", "d_model", "n_heads", "d_mlp", "seq_len"):
            _positive_int(name, getattr(self, name))
        if self.d_model % self.n_heads:
            raise ValueError(
                f"ModelConfig.d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        for name, allowed in (("norm", NORMS), ("attention", ATTENTIONS), ("head", HEADS)):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"ModelConfig.{name} must be one of {', '.join(allowed)}; got {getattr(self, name)!r}"
                )
        if not (math.isfinite(self.tau) and self.tau > 0):
            raise ValueError(f"ModelConfig.tau must be a positive number; got {self.tau!r}")
        if not self.eps > 0:
            raise ValueError(f"ModelConfig.eps must be > 0; got {self.eps!r}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def variant(self) -> str:
        """The name in :data:`VARIANTS` this configuration matches, else ``"custom"``."""
        axes = {"norm": self.norm, "attention": self.attention, "head": self.head}
        return next((name for name, v in VARIANTS.items() if v == axes), "custom")

    @classmethod
    def for_task(cls, task: Task, variant: str = "layernorm", **overrides: Any) -> ModelConfig:
        """The configuration of a named variant sized for ``task``; ``overrides`` replace any field."""
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(VARIANTS)}; got {variant!r}")
        config = cls(task.vocab_size, task.n_classes, **VARIANTS[variant])
        return replace(config, **overrides) if overrides else config


class L2Norm(nn.Module):
    """Project onto the unit sphere along the last axis: ``x / max(||x||_2, eps)``; no parameters."""

    def __init__(self, eps: float = 1e-12) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=-1, eps=self.eps)


def _norm(config: ModelConfig) -> nn.Module:
    d = config.d_model
    if config.norm == "layernorm":
        return nn.LayerNorm(d)
    if config.norm == "rmsnorm":
        return nn.RMSNorm(d, eps=1e-8)
    if config.norm == "sphere":
        return L2Norm(config.eps)
    return nn.Identity()


class GrokTransformer(nn.Module):
    """The one-layer transformer of the paper (any ``norm`` except ``"ngpt"``).

    ``forward(tokens)`` takes ``(batch, seq_len)`` int64 tokens and returns ``(batch, n_classes)``
    logits at the last (answer) position. Pass a dict as ``cache`` to receive the intermediate
    states: ``resid_pre1`` (B, L, d), ``h1`` (B, L, d), ``pattern`` (B, heads, L) attention weights
    of the answer position, ``resid_pre2``, ``h2``, ``resid_pre3``, ``h3`` (B, d), ``logits``.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if config.norm == "ngpt":
            raise ValueError("norm='ngpt' is a different model: use build_model(config)")
        self.config = config
        d, c = config.d_model, config
        self.embed = nn.Embedding(c.vocab_size, d)
        self.pos = nn.Embedding(c.seq_len, d)
        self.norm1, self.norm2, self.norm3 = _norm(c), _norm(c), _norm(c)
        if c.attention == "learned":
            self.W_Q = nn.Linear(d, d, bias=False)
            self.W_K = nn.Linear(d, d, bias=False)
        self.W_V = nn.Linear(d, d, bias=False)
        self.W_O = nn.Linear(d, d, bias=False)
        self.mlp_in = nn.Linear(d, c.d_mlp)
        self.mlp_out = nn.Linear(c.d_mlp, d)
        self.unembed = nn.Linear(d, c.n_classes, bias=False)

    def residual_table(self, length: int) -> torch.Tensor:
        """``N1(tok + pos)`` for every vocabulary token at every position: ``(vocab, length, d)``."""
        return self.norm1(self.embed.weight[:, None, :] + self.pos.weight[None, :length, :])

    def attention(
        self, tokens: torch.Tensor, table: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The answer position's attention output (B, d) and pattern (B, heads, L).

        Queries, keys and values see one token at one position, so they are projected once per row
        of the residual ``table`` and looked up per example (exact, and B/vocab times less work).
        """
        B, L = tokens.shape
        H, dh = self.config.n_heads, self.config.d_head
        pos = torch.arange(L, device=tokens.device)
        v = self.W_V(table)[tokens, pos].view(B, L, H, dh)
        if self.config.attention == "uniform":
            pattern = v.new_full((B, H, L), 1.0 / L)
            mixed = v.mean(dim=1)  # (B, H, dh): every position weighted 1/L
        else:
            k = self.W_K(table)[tokens, pos].view(B, L, H, dh)
            q = self.W_Q(table[:, L - 1])[tokens[:, -1]].view(B, 1, H, dh)
            weights = ((q * k).sum(-1) / math.sqrt(dh)).softmax(dim=1)  # (B, L, H)
            mixed = (weights.unsqueeze(-1) * v).sum(dim=1)
            pattern = weights.transpose(1, 2)
        return self.W_O(mixed.reshape(B, -1)), pattern

    def readout(self, x: torch.Tensor) -> torch.Tensor:
        """Logits from the final state ``x`` (B, d): linear, or ``tau`` times cosine similarities."""
        if self.config.head == "cosine":
            return self.config.tau * F.linear(x, F.normalize(self.unembed.weight, dim=1))
        return self.unembed(x)

    def forward(
        self, tokens: torch.Tensor, cache: dict[str, torch.Tensor] | None = None
    ) -> torch.Tensor:
        if tokens.ndim != 2 or not 1 <= tokens.shape[1] <= self.config.seq_len:
            raise ValueError(
                f"tokens must be (batch, seq_len <= {self.config.seq_len}); got {tuple(tokens.shape)}"
            )
        L = tokens.shape[1]
        table = self.residual_table(L)
        attn, pattern = self.attention(tokens, table)
        resid2 = table[tokens[:, -1], L - 1] + attn
        x = self.norm2(resid2)
        resid3 = x + self.mlp_out(F.relu(self.mlp_in(x)))
        out = self.norm3(resid3)
        logits = self.readout(out)
        if cache is not None:
            pos = torch.arange(L, device=tokens.device)
            cache.update(resid_pre1=self.embed(tokens) + self.pos.weight[:L], h1=table[tokens, pos],
                         pattern=pattern, resid_pre2=resid2, h2=x, resid_pre3=resid3, h3=out,
                         logits=logits)  # fmt: skip
        return logits


def build_model(config: ModelConfig, seed: int | None = 0) -> nn.Module:
    """The model for ``config`` with its initial weights drawn from ``seed`` (global RNG untouched).

    PyTorch's default initialisation, as in the paper's code: N(0, 1) embeddings, Kaiming-uniform
    linear layers. ``norm="ngpt"`` builds :class:`~spherical_grokking.ngpt.NGPTTransformer`.
    """
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a ModelConfig; got {type(config).__name__}")
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        if config.norm == "ngpt":
            from .ngpt import NGPTTransformer

            return NGPTTransformer(config)
        return GrokTransformer(config)
