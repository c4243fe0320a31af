"""nGPT (Loshchilov et al. 2024, arXiv 2410.01131) adapted to the one-layer model: an optional extra.

Everything lives on the unit sphere: token and position embeddings, the rows/columns of every matrix
along the model dimension (re-projected after every optimiser step by :meth:`project_weights`,
which the trainer calls), and the hidden state, which moves by normalised interpolation
``x <- normalise(x + alpha * (normalise(block(x)) - x))`` with learned per-dimension step sizes
alpha (init 0.05). Queries and keys are normalised per head and scaled by a learned ``s_qk``, with
softmax scale ``sqrt(d_head)``; logits are cosine similarities scaled by a learned per-class
``s_z``. Every scale is stored as ``param * init / (1/sqrt(d))`` like the paper. Two adaptations:
the MLP is the paper's ReLU MLP (nGPT uses SwiGLU) with a learned per-unit scale ``s_u``, and the
positions are learned embeddings added before the first normalisation (nGPT uses RoPE). nGPT is
trained without weight decay.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .model import ModelConfig

__all__ = ["NGPTTransformer"]


class _Scale(nn.Module):
    """A learned vector stored at scale ``1/sqrt(d)`` and read at ``init`` (nGPT's scaling trick)."""

    def __init__(self, size: int | tuple[int, ...], init: float, d_model: int) -> None:
        super().__init__()
        self.base = 1.0 / math.sqrt(d_model)
        self.init = init
        self.param = nn.Parameter(
            torch.full(size if isinstance(size, tuple) else (size,), self.base)
        )

    def forward(self) -> torch.Tensor:
        return self.param * (self.init / self.base)


class NGPTTransformer(nn.Module):
    """One-layer nGPT; same interface as :class:`~spherical_grokking.model.GrokTransformer`."""

    def __init__(self, config: ModelConfig, alpha_init: float = 0.05) -> None:
        super().__init__()
        self.config = config
        c, d = config, config.d_model
        self.embed = nn.Embedding(c.vocab_size, d)
        self.pos = nn.Embedding(c.seq_len, d)
        if c.attention == "learned":
            self.W_Q = nn.Linear(d, d, bias=False)
            self.W_K = nn.Linear(d, d, bias=False)
            self.s_qk = _Scale((c.n_heads, c.d_head), 1.0, d)
        self.W_V = nn.Linear(d, d, bias=False)
        self.W_O = nn.Linear(d, d, bias=False)
        self.mlp_in = nn.Linear(d, c.d_mlp, bias=False)
        self.mlp_out = nn.Linear(c.d_mlp, d, bias=False)
        self.unembed = nn.Linear(d, c.n_classes, bias=False)
        self.alpha_attn = _Scale(d, alpha_init, d)
        self.alpha_mlp = _Scale(d, alpha_init, d)
        self.s_u = _Scale(c.d_mlp, 1.0, d)
        self.s_z = _Scale(c.n_classes, 1.0, d)
        self.project_weights()

    @torch.no_grad()
    def project_weights(self) -> None:
        """Put every embedding and every matrix's model-dimension vectors back on the unit sphere."""
        along_input = [self.embed, self.pos, self.W_V, self.mlp_in, self.unembed]  # rows read x
        if self.config.attention == "learned":
            along_input += [self.W_Q, self.W_K]
        for module in along_input:
            module.weight.copy_(F.normalize(module.weight, dim=1))
        for module in (self.W_O, self.mlp_out):  # columns write into the model dimension
            module.weight.copy_(F.normalize(module.weight, dim=0))

    def forward(
        self, tokens: torch.Tensor, cache: dict[str, torch.Tensor] | None = None
    ) -> torch.Tensor:
        B, L = tokens.shape
        H, dh = self.config.n_heads, self.config.d_head
        resid1 = self.embed(tokens) + self.pos.weight[:L]
        h = F.normalize(resid1, dim=-1)
        v = self.W_V(h).view(B, L, H, dh)
        if self.config.attention == "uniform":
            pattern = h.new_full((B, H, L), 1.0 / L)
            mixed = v.mean(dim=1)
        else:
            s_qk = self.s_qk()
            q = F.normalize(self.W_Q(h[:, -1]).view(B, 1, H, dh), dim=-1) * s_qk
            k = F.normalize(self.W_K(h).view(B, L, H, dh), dim=-1) * s_qk
            weights = ((q * k).sum(-1) * math.sqrt(dh)).softmax(dim=1)  # (B, L, H)
            mixed = (weights.unsqueeze(-1) * v).sum(dim=1)
            pattern = weights.transpose(1, 2)
        x = h[:, -1]
        attn = F.normalize(self.W_O(mixed.reshape(B, -1)), dim=-1)
        resid2 = x + self.alpha_attn() * (attn - x)
        x = F.normalize(resid2, dim=-1)
        mlp = F.normalize(self.mlp_out(F.relu(self.s_u() * self.mlp_in(x))), dim=-1)
        resid3 = x + self.alpha_mlp() * (mlp - x)
        out = F.normalize(resid3, dim=-1)
        logits = self.s_z() * self.unembed(out)
        if cache is not None:
            cache.update(resid_pre1=resid1, h1=h, pattern=pattern, resid_pre2=resid2, h2=x,
                         resid_pre3=resid3, h3=out, logits=logits)  # fmt: skip
        return logits
