"""MLP direct logit attribution: what each block's MLP writes towards the answer token.

At the last prompt token, block ``l``'s MLP adds ``m_l`` to the residual stream. Its direct logit
attribution to token ``a`` is ``W_U[a] . N(m_l)``, where ``N`` is the final norm linearised at the
final residual ``h_L`` (``gamma * m / rms(h_L)`` for RMSNorm; ``gamma * (m - mean m) / std(h_L)``
for LayerNorm): the share of the answer's logit that comes straight from that MLP. The MLP outputs
come from the hook shared with ``rce`` (:func:`paper_common.lm.capture_mlp`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from scipy.stats import pearsonr
from torch import nn

from paper_common.lm import capture_mlp, final_norm, num_layers, pad_id, right_padded

__all__ = ["mlp_logit_attribution", "profile_correlation"]


def _norm_parts(norm: nn.Module) -> tuple[torch.Tensor, bool, float]:
    weight = getattr(norm, "weight", None)
    if weight is None:
        raise ValueError(f"cannot linearise the final norm {type(norm).__name__}: it has no weight")
    centred = isinstance(norm, nn.LayerNorm)
    eps = float(getattr(norm, "eps", getattr(norm, "variance_epsilon", 1e-6)))
    return weight.detach().float(), centred, eps


@torch.no_grad()
def mlp_logit_attribution(
    model: nn.Module,
    tok: object,
    prompts: Sequence[str],
    token_ids: Sequence[int] | np.ndarray | None = None,
    batch_size: int = 64,
) -> np.ndarray:
    """``(n_prompts, n_blocks)`` direct logit attribution of every block's MLP to ``token_ids[i]``
    (default: the model's own top next token) at the last prompt token."""
    prompts = list(prompts)
    if not prompts:
        raise ValueError("prompts must not be empty")
    if token_ids is not None and len(token_ids) != len(prompts):
        raise ValueError(f"{len(token_ids)} token ids for {len(prompts)} prompts")
    blocks = list(range(num_layers(model)))
    norm = final_norm(model)
    gamma, centred, eps = _norm_parts(norm)
    unembed = model.get_output_embeddings().weight.detach().float()
    device = next(model.parameters()).device
    seqs = tok(prompts)["input_ids"]
    out = []
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(prompts), batch_size):
            ids, mask, lengths = right_padded(seqs[start : start + batch_size], pad_id(tok), device)
            rows = torch.arange(len(lengths), device=device)
            with capture_mlp(model, blocks) as rec, _norm_input(norm) as pre_norm:
                logits = model(input_ids=ids, attention_mask=mask).logits
            pre = pre_norm[0][rows, lengths - 1].float()  # the residual before the final norm
            if token_ids is None:
                target = logits[rows, lengths - 1].argmax(-1)
            else:
                target = torch.as_tensor(np.asarray(token_ids)[start : start + batch_size]).to(
                    device
                )
            if centred:
                scale = (pre - pre.mean(-1, keepdim=True)).pow(2).mean(-1, keepdim=True)
            else:
                scale = pre.pow(2).mean(-1, keepdim=True)
            scale = torch.rsqrt(scale + eps)  # (b, 1)
            w = unembed[target] * gamma  # (b, d)
            cols = []
            for b in blocks:
                m = rec[b].outputs[rows, lengths - 1].float()
                if centred:
                    m = m - m.mean(-1, keepdim=True)
                cols.append(((m * scale) * w).sum(-1))
            out.append(torch.stack(cols, 1).cpu())
    finally:
        model.train(was_training)
    return torch.cat(out).numpy()


@contextlib.contextmanager
def _norm_input(norm: nn.Module) -> Iterator[list[torch.Tensor]]:
    """Record the input of the final norm (the pre-norm residual) on the forward inside."""
    store: list[torch.Tensor] = []

    def hook(_module: nn.Module, args: tuple) -> None:
        store[:] = [args[0].detach()]

    handle = norm.register_forward_pre_hook(hook)
    try:
        yield store
    finally:
        handle.remove()


def profile_correlation(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Pearson ``(r, p)`` between two mean attribution profiles (one value per block)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape or a.ndim != 1 or len(a) < 3:
        raise ValueError(
            f"profiles must be 1-D, equal length and >= 3 blocks; got {a.shape}, {b.shape}"
        )
    res = pearsonr(a, b)
    return float(res.statistic), float(res.pvalue)
