"""The linear-attention core shared by every kernelized method: quadratic, chunked and recurrent forms.

A kernelized method supplies query and key features ``phi(q) (batch, heads, n_q, m)`` and
``phi(k) (batch, heads, n_k, m)``; attention is then

    out_n = sum_m phi(q_n) . phi(k_m) v_m / sum_m phi(q_n) . phi(k_m)

over all keys (``causal=False``) or keys ``m <= n`` (``causal=True``). Exponential-family methods
(Performer, LARA, LARA++) pass *log* features (``log_space=True``): queries are stabilised per row
(a per-query constant cancels between numerator and denominator); keys by the largest key log
feature *among the keys that query may see* (every key when non-causal, keys ``m <= n`` when causal;
again a per-row constant that cancels), kept as a running maximum that rescales the prefix state,
like an online softmax. A later key never rescales an earlier output: all three forms give the same
numbers as the recurrent one. Nothing overflows in float32 and no per-key stabiliser biases the
estimate. (Limit: one scalar per row; a visible key whose features are ~88 nats above the others
still underflows those others in float32, as it would in the recurrent form.)

Three forms compute the same numbers:

* ``quadratic``: the ``n_q x n_k`` matrix, masked: the reference, O(N^2) memory;
* ``chunked``: O(N) memory; non-causal sums ``phi(k)^T v`` once; causal walks chunks of
  ``chunk_size`` queries, exact inside a chunk, a prefix state ``(S, z)`` across chunks;
* ``recurrent``: :class:`LinearState` updated one token at a time (decoding with constant memory).

For causal attention with fewer queries than keys (decoding with a cache), the queries are the
*last* ``n_q`` positions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

__all__ = ["LinearState", "linear_attention", "safe_denominator"]

#: stands in for -inf as the initial running maximum, so that exp(c_old - c_new) never sees inf - inf
NEG = -1e30


def safe_denominator(den: torch.Tensor, eps: float) -> torch.Tensor:
    """``den`` with entries of magnitude below ``eps`` replaced by ``eps`` (signed features, RFA)."""
    return torch.where(den.abs() < eps, torch.full_like(den, eps), den)


def _query_features(fq: torch.Tensor, log_space: bool) -> torch.Tensor:
    if not log_space:
        return fq
    top = fq.amax(-1, keepdim=True).clamp_min(NEG)
    return torch.exp(fq - top)


def _key_max(lk: torch.Tensor) -> torch.Tensor:
    """Per (batch, head) maximum of key log features: ``(batch, heads)``; masked keys are -inf."""
    return lk.amax(dim=(-2, -1)).clamp_min(NEG)


def _check(fq: torch.Tensor, fk: torch.Tensor, v: torch.Tensor, causal: bool) -> None:
    if fq.ndim != 4 or fk.ndim != 4 or v.ndim != 4:
        raise ValueError(
            "features and values must be (batch, heads, seq, dim); got shapes "
            f"{tuple(fq.shape)}, {tuple(fk.shape)}, {tuple(v.shape)}"
        )
    if fq.shape[-1] != fk.shape[-1]:
        raise ValueError(f"query and key feature sizes differ: {fq.shape[-1]} vs {fk.shape[-1]}")
    if fk.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"keys {tuple(fk.shape)} and values {tuple(v.shape)} disagree")
    if causal and fq.shape[-2] > fk.shape[-2]:
        raise ValueError(
            f"causal attention needs n_q <= n_k (queries are the last positions); "
            f"got {fq.shape[-2]} > {fk.shape[-2]}"
        )


def _mask_keys(fk: torch.Tensor, key_mask: torch.Tensor | None, log_space: bool) -> torch.Tensor:
    if key_mask is None:
        return fk
    if key_mask.shape != (fk.shape[0], fk.shape[-2]):
        raise ValueError(
            f"key_mask must be (batch, n_k) = {(fk.shape[0], fk.shape[-2])}; "
            f"got {tuple(key_mask.shape)}"
        )
    keep = key_mask.to(torch.bool)[:, None, :, None]
    if log_space:
        return fk.masked_fill(~keep, float("-inf"))
    return fk * keep


def linear_attention(
    fq: torch.Tensor,
    fk: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    *,
    log_space: bool = False,
    form: str = "chunked",
    chunk_size: int = 64,
    eps: float = 1e-6,
    key_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Kernelized attention from features. Returns ``(batch, heads, n_q, dim_v)``.

    Args:
        fq: query features (or log features) ``(batch, heads, n_q, m)``.
        fk: key features (or log features) ``(batch, heads, n_k, m)``.
        v: values ``(batch, heads, n_k, dim_v)``.
        causal: query ``n`` sees keys ``m <= n + n_k - n_q``.
        log_space: ``fq``/``fk`` are log features (positive-feature methods).
        form: ``"quadratic"`` (reference) or ``"chunked"``; the recurrent form is :class:`LinearState`.
        chunk_size: queries per chunk in the causal chunked form.
        eps: floor on the denominator's magnitude.
        key_mask: ``(batch, n_k)`` bool, False for padding keys (contribute nothing).
    """
    _check(fq, fk, v, causal)
    if form not in ("quadratic", "chunked"):
        raise ValueError(f"form must be 'quadratic' or 'chunked'; got {form!r}")
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int; got {chunk_size!r}")
    fk = _mask_keys(fk, key_mask, log_space)
    q = _query_features(fq, log_space)
    if form == "quadratic":
        return _quadratic(q, fk, v, causal, log_space, eps)
    if not causal:
        k = torch.exp(fk - _key_max(fk)[..., None, None]) if log_space else fk
        num = q @ (k.transpose(-2, -1) @ v)
        den = q @ k.sum(-2)[..., None]
        return num / safe_denominator(den, eps)
    return _causal_chunked(q, fk, v, log_space, chunk_size, eps)


def _quadratic(
    q: torch.Tensor, fk: torch.Tensor, v: torch.Tensor, causal: bool, log_space: bool, eps: float
) -> torch.Tensor:
    n_q, n_k = q.shape[-2], fk.shape[-2]
    allowed = None
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).tril(n_k - n_q)
    if not log_space:
        a = q @ fk.transpose(-2, -1)
        a = a * allowed if allowed is not None else a
        return (a @ v) / safe_denominator(a.sum(-1, keepdim=True), eps)
    # each key on its own scale, then every query row rescaled to the largest key *it may see*
    ck = _per_key_max(fk)  # (b, h, n_k)
    a = q @ torch.exp(fk - ck[..., None]).transpose(-2, -1)
    if causal:
        seen = torch.cummax(ck, dim=-1).values[..., n_k - n_q :]  # (b, h, n_q)
        shift = (ck[..., None, :] - seen[..., :, None]).masked_fill(~allowed, float("-inf"))
    else:
        shift = (ck - ck.amax(-1, keepdim=True))[..., None, :]
    a = a * torch.exp(shift)
    return (a @ v) / safe_denominator(a.sum(-1, keepdim=True), eps)


def _per_key_max(lk: torch.Tensor) -> torch.Tensor:
    """Largest log feature of each key ``(b, h, n)``; a masked key (all -inf) gets :data:`NEG`."""
    return lk.amax(-1).clamp_min(NEG)


def _causal_chunked(
    q: torch.Tensor, fk: torch.Tensor, v: torch.Tensor, log_space: bool, chunk: int, eps: float
) -> torch.Tensor:
    n_q, n_k = q.shape[-2], fk.shape[-2]
    state = LinearState.empty(q, v, log_space)
    offset = n_k - n_q
    if offset:  # keys before the first query (a cache): fold into the state at once
        state = state.absorb(fk[..., :offset, :], v[..., :offset, :])
    tril = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    outs = []
    for s in range(0, n_q, chunk):
        e = min(s + chunk, n_q)
        qc, kc, vc = (
            q[..., s:e, :],
            fk[..., offset + s : offset + e, :],
            v[..., offset + s : offset + e, :],
        )
        mask = tril[: e - s, : e - s]
        if state.c is None:
            a = (qc @ kc.transpose(-2, -1)) * mask
            num = qc @ state.S + a @ vc
            den = qc @ state.z[..., None] + a.sum(-1, keepdim=True)
        else:
            # row n of the chunk is stabilised by the largest key up to n: the prefix state's
            # running maximum and the chunk's own keys up to n, never a later key
            ck = _per_key_max(kc)  # (b, h, L)
            seen = torch.maximum(state.c[..., None], torch.cummax(ck, dim=-1).values)
            shift = (ck[..., None, :] - seen[..., :, None]).masked_fill(~mask, float("-inf"))
            a = (qc @ torch.exp(kc - ck[..., None]).transpose(-2, -1)) * torch.exp(shift)
            past = torch.exp(state.c[..., None] - seen)[..., None]  # (b, h, L, 1)
            num = (qc @ state.S) * past + a @ vc
            den = (qc @ state.z[..., None]) * past + a.sum(-1, keepdim=True)
        outs.append(num / safe_denominator(den, eps))
        state = state.absorb(kc, vc)
    return torch.cat(outs, dim=-2)


@dataclass
class LinearState:
    """Prefix state of causal linear attention: ``S = sum phi(k) v^T`` ``(batch, heads, m, dim_v)``,
    ``z = sum phi(k)`` ``(batch, heads, m)`` and, for log features, the running key maximum ``c``
    ``(batch, heads)`` that both are scaled by (``S`` holds ``sum exp(log phi(k) - c) v^T``).

    Its size does not depend on how many tokens it has absorbed: :meth:`nbytes`.
    """

    S: torch.Tensor
    z: torch.Tensor
    c: torch.Tensor | None
    position: int = 0
    #: per-sequence extras of the method (its random draws, running statistics), carried along
    aux: dict[str, torch.Tensor] = field(default_factory=dict)

    @classmethod
    def empty(cls, q: torch.Tensor, v: torch.Tensor, log_space: bool) -> LinearState:
        b, h, m, dv = q.shape[0], q.shape[1], q.shape[-1], v.shape[-1]
        kw = {"dtype": v.dtype, "device": v.device}
        c = torch.full((b, h), NEG, **kw) if log_space else None
        return cls(torch.zeros(b, h, m, dv, **kw), torch.zeros(b, h, m, **kw), c)

    @property
    def log_space(self) -> bool:
        return self.c is not None

    def rescale(self, lk: torch.Tensor) -> LinearState:
        """Raise the running maximum to cover the new keys' log features ``(b, h, n, m)``."""
        if self.c is None:
            return self
        c_new = torch.maximum(self.c, _key_max(lk))
        r = torch.exp(self.c - c_new)
        return LinearState(
            self.S * r[..., None, None], self.z * r[..., None], c_new, self.position, self.aux
        )

    def key_features(self, fk: torch.Tensor) -> torch.Tensor:
        return torch.exp(fk - self.c[..., None, None]) if self.c is not None else fk

    def add(self, k: torch.Tensor, v: torch.Tensor) -> LinearState:
        """Add keys whose features are already on this state's scale."""
        return LinearState(
            self.S + k.transpose(-2, -1) @ v,
            self.z + k.sum(-2),
            self.c,
            self.position + k.shape[-2],
            self.aux,
        )

    def absorb(self, fk: torch.Tensor, v: torch.Tensor) -> LinearState:
        """Rescale for, then add, keys ``(b, h, n, m)`` (log features if the state is log-space)."""
        state = self.rescale(fk)
        return state.add(state.key_features(fk), v)

    def read(self, fq: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
        """Attention output of queries ``(b, h, n, m)`` (log features if log-space) on the state."""
        q = _query_features(fq, self.log_space)
        return (q @ self.S) / safe_denominator(q @ self.z[..., None], eps)

    def nbytes(self) -> int:
        """Bytes held by the state (independent of the number of tokens absorbed)."""
        tensors = [self.S, self.z] + ([self.c] if self.c is not None else [])
        tensors += list(self.aux.values())
        return sum(t.numel() * t.element_size() for t in tensors)
