"""The projection analysis: softmax attention as key-dependent erase-and-write, read per head.

For a query ``q`` let ``o_t(q)`` be softmax attention of ``q`` over keys ``1..t``. Exactly,

    o_t(q) = o_{t-1}(q) + w_t(q) (v_t - o_{t-1}(q)),   w_t(q) = e^{q.k_t} / sum_{s<=t} e^{q.k_s},

so adding token ``t`` erases a share ``w_t(q)`` of what the query read and writes ``v_t`` in its
place. The share depends on the query through ``q.k_t``: the new token overwrites the read-out of
queries near ``k_t`` and leaves the others, as a delta update ``S (I - b k k^T) + b v k^T`` does
(its write seen by ``q`` is ``b k^T q``), and a scalar gate ``S <- a S + ...`` cannot (its erase is
the same ``1 - a`` for every query). The **key-dependence index** of a head is the coefficient of
variation of ``w_t(q_u)`` over the later queries ``u > t``, averaged over ``t``: 0 when the head
averages uniformly (``w_t = 1/t`` for every query, itself a gated running mean), large when the
erase is concentrated on few queries.

Error sources: :func:`attention_mass` gives each head's mean softmax mass on the first token (the
sink) and on the last 4 tokens, to set against its transfer error.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = [
    "attention_mass",
    "erase_write_weights",
    "key_dependence",
    "prefix_outputs",
]


def _logits(q: torch.Tensor, k: torch.Tensor, scale: float | None) -> torch.Tensor:
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"query dim {q.shape[-1]} != key dim {k.shape[-1]}")
    return (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5 if scale is None else scale)


def erase_write_weights(
    q: torch.Tensor, k: torch.Tensor, scale: float | None = None
) -> torch.Tensor:
    """``w[..., u, t] = w_t(q_u)``, the weight of token ``t`` among keys ``1..t`` for query ``u``
    (every pair, ``(..., n, n)``; the causal analysis uses ``u >= t``)."""
    lg = _logits(q, k, scale)
    return (lg - torch.logcumsumexp(lg, -1)).exp()


def prefix_outputs(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None
) -> torch.Tensor:
    """``o[..., u, t, :]``: softmax attention of query ``u`` over keys ``1..t`` (``(..., n, n, d)``)."""
    lg = _logits(q, k, scale)
    n = lg.shape[-1]
    tri = torch.ones(n, n, dtype=torch.bool, device=lg.device).tril()  # [t, s]: s <= t
    masked = lg[..., :, None, :].masked_fill(~tri, float("-inf"))  # (..., u, t, s)
    return torch.softmax(masked, -1) @ v[..., None, :, :]


def _left_align(
    q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Each row's real tokens moved to the front, in order (``mask (batch, n)``: real tokens), so
    that position 0 is the first real token and padding comes last, whatever side it was on."""
    if mask is None:
        return q, k, None
    real = mask.bool().to(q.device)
    order = torch.sort((~real).to(torch.int8), dim=-1, stable=True).indices
    idx = order[:, None, :, None]
    q = q.gather(2, idx.expand(-1, q.shape[1], -1, q.shape[-1]))
    k = k.gather(2, idx.expand(-1, k.shape[1], -1, k.shape[-1]))
    return q, k, real.gather(1, order)


def key_dependence(
    q: torch.Tensor,
    k: torch.Tensor,
    scale: float | None = None,
    mask: torch.Tensor | None = None,
) -> np.ndarray:
    """Per-head key-dependence index ``(heads,)`` from ``(batch, heads, n, d)`` queries and keys
    (``mask (batch, n)``: real tokens; padding is left out): the coefficient of variation of
    ``w_t(q_u)`` over ``u > t``, averaged over every ``t`` with at least two later queries and over
    the batch. Padding on either side."""
    q, k, mask = _left_align(q, k, mask)
    w = erase_write_weights(q.double(), k.double(), scale)  # (b, h, u, t)
    n = w.shape[-1]
    later = torch.ones(n, n, dtype=torch.bool, device=w.device).tril(-1)  # [u, t]: u > t
    valid = later[None, None].expand_as(w)
    if mask is not None:
        real = mask.bool().to(w.device)
        valid = valid & real[:, None, :, None] & real[:, None, None, :]
    cnt = valid.sum(-2)  # (b, h, t)
    wv = w * valid
    mean = wv.sum(-2) / cnt.clamp_min(1)
    var = ((w - mean[..., None, :]) ** 2 * valid).sum(-2) / (cnt - 1).clamp_min(1)
    cv = var.sqrt() / mean.clamp_min(1e-300)
    use = cnt >= 2
    return ((cv * use).sum((0, 2)) / use.sum((0, 2)).clamp_min(1)).cpu().numpy()


def attention_mass(
    q: torch.Tensor,
    k: torch.Tensor,
    scale: float | None = None,
    mask: torch.Tensor | None = None,
    recent: int = 4,
) -> tuple[np.ndarray, np.ndarray]:
    """Per head, the mean causal softmax mass on the first token and on the last ``recent`` tokens
    (the query's own included), over queries ``t >= recent`` (``(heads,)`` each). With ``mask``
    the first token is each row's first real token (padding on either side)."""
    q, k, mask = _left_align(q, k, mask)
    lg = _logits(q.double(), k.double(), scale)
    n = lg.shape[-1]
    causal = torch.ones(n, n, dtype=torch.bool, device=lg.device).tril()
    allowed = causal[None, None]
    if mask is not None:
        allowed = allowed & mask.bool().to(lg.device)[:, None, None, :]
    p = torch.softmax(lg.masked_fill(~allowed, float("-inf")), -1).nan_to_num(0.0)
    rows = torch.arange(n, device=lg.device) >= recent
    if mask is not None:
        rows = rows[None, None] & mask.bool().to(lg.device)[:, None, :]
    else:
        rows = rows[None, None].expand(p.shape[0], p.shape[1], n)
    band = causal & ~torch.ones(n, n, dtype=torch.bool, device=lg.device).tril(-recent)
    first = p[..., 0]
    last = (p * band).sum(-1)
    denom = rows.sum((0, 2)).clamp_min(1)
    return (
        ((first * rows).sum((0, 2)) / denom).cpu().numpy(),
        ((last * rows).sum((0, 2)) / denom).cpu().numpy(),
    )
