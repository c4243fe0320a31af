"""State updates of linear attention, each in three forms that compute the same outputs.

The scalar family covers linear, gated, delta, gated-delta and the erase control in one recurrence
over a state ``S`` of shape ``(d_v, d_k)`` per head::

    S_t = a_t S_{t-1} (I - b_t e_t e_t^T) + c_t v_t k_t^T,        o_t = S_t q_t

- linear: ``a = 1, b = 0, c = 1``; gated: ``b = 0``; delta: ``a = 1, e = k, b = c = beta``;
  gated delta: ``e = k, b = c = beta``; control: ``e = u`` a key-independent direction.
- ``a`` is given as ``log_a`` (``<= 0``); ``b``, ``c`` in ``[0, 1]``; ``e`` unit vectors (``k`` too for
  the delta rules: with ``b = 1`` the erase ``I - k k^T`` is the rank-1 orthogonal projector).

The diagonal family (GLA-style) gates each key dimension: ``S_t = S_{t-1} diag(a_t) + c_t v_t k_t^T``.

Forms: ``recurrent`` (a loop over tokens, as in decoding), ``chunked`` (chunks of ``chunk_size``:
within a chunk everything is parallel and the delta rules use the WY/UT form with a triangular
solve; across chunks only the state is carried, so memory is linear in the sequence length) and
``quadratic`` (the ``(n, n)`` mixing matrix ``A`` with ``O = A V``, the reference; also what the
analysis reads). All take ``(batch, heads, n, d)`` tensors and agree to float64 round-off.
"""

from __future__ import annotations

import torch

__all__ = ["FORMS", "diagonal_update", "mixing_matrix", "scalar_update"]

FORMS = ("recurrent", "chunked", "quadratic")


def _check(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    form: str,
    chunk_size: int,
) -> None:
    if form not in FORMS:
        raise ValueError(f"form must be one of {', '.join(FORMS)}; got {form!r}")
    if not isinstance(chunk_size, int) or chunk_size <= 0:
        raise ValueError(f"chunk_size must be a positive int; got {chunk_size!r}")
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError("q, k, v must be (batch, heads, n, d)")
    if q.shape[:3] != k.shape[:3] or k.shape[:3] != v.shape[:3]:
        raise ValueError(f"q, k, v disagree on (batch, heads, n): {q.shape}, {k.shape}, {v.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"query dim {q.shape[-1]} != key dim {k.shape[-1]} (head-dim mismatch)")


def _defaults(
    k: torch.Tensor,
    log_a: torch.Tensor | None,
    b: torch.Tensor | None,
    e: torch.Tensor | None,
    c: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor]:
    zeros = k.new_zeros(k.shape[:3])
    log_a = zeros if log_a is None else log_a
    c = zeros + 1 if c is None else c
    e = k if e is None else e.expand_as(k)
    return log_a, b, e, c


# ============================================================================ scalar family
def scalar_update(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    log_a: torch.Tensor | None = None,
    b: torch.Tensor | None = None,
    e: torch.Tensor | None = None,
    c: torch.Tensor | None = None,
    form: str = "chunked",
    chunk_size: int = 64,
    state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Outputs ``(batch, heads, n, d_v)`` and the final state ``(batch, heads, d_v, d_k)`` of the
    scalar-gated family (module docstring). ``log_a``, ``b``, ``c``: ``(batch, heads, n)`` (None: gate
    1, no erase, write 1); ``e``: erase directions broadcastable to ``k`` (None: ``k``); ``state``:
    the initial state (None: zero)."""
    _check(q, k, v, form, chunk_size)
    log_a, b, e, c = _defaults(k, log_a, b, e, c)
    bsz, h, n, dk = k.shape
    dv = v.shape[-1]
    s0 = q.new_zeros(bsz, h, dv, dk) if state is None else state
    if form == "recurrent":
        return _scalar_recurrent(q, k, v, log_a, b, e, c, s0)
    if form == "quadratic":
        if state is not None:
            raise ValueError("the quadratic form starts from an empty state; use 'chunked'")
        out = mixing_matrix(q, k, log_a, b, e, c) @ v
        return out, _scalar_chunked(q, k, v, log_a, b, e, c, s0, n)[1]
    return _scalar_chunked(q, k, v, log_a, b, e, c, s0, chunk_size)


def _scalar_recurrent(q, k, v, log_a, b, e, c, s):  # type: ignore[no-untyped-def]
    outs = []
    a = log_a.exp()
    for t in range(q.shape[2]):
        if b is not None:
            se = (s @ e[:, :, t, :, None])[..., 0]  # (b, h, dv)
            s = s - b[:, :, t, None, None] * se[..., None] * e[:, :, t, None, :]
        s = a[:, :, t, None, None] * s + c[:, :, t, None, None] * (
            v[:, :, t, :, None] * k[:, :, t, None, :]
        )
        outs.append((s @ q[:, :, t, :, None])[..., 0])
    return torch.stack(outs, 2), s


def _decay(log_a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Within-block cumulative log gates ``L`` (..., C) and ``D[t, s] = exp(L_t - L_s)`` for
    ``s <= t`` (0 above the diagonal)."""
    cum = log_a.cumsum(-1)
    n = cum.shape[-1]
    tri = torch.ones(n, n, dtype=torch.bool, device=cum.device).tril()
    diff = (cum[..., :, None] - cum[..., None, :]).masked_fill(~tri, float("-inf"))
    return cum, diff.exp()


def _wy(
    k: torch.Tensor,
    e: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    d: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``T = (I + M)^{-1}`` (as the solve) and ``N`` of the erase recursion on blocks of length C:
    ``M[s, j] = b_s D[s, j] <e_s, e_j>``, ``N[s, j] = b_s D[s, j] c_j <e_s, k_j>`` for ``j < s``.
    Returns ``(I + M)`` and ``N``."""
    strict = torch.ones(d.shape[-1], d.shape[-1], dtype=torch.bool, device=d.device).tril(-1)
    bd = b[..., :, None] * d * strict
    m = bd * (e @ e.transpose(-2, -1))
    nn_ = bd * (e @ k.transpose(-2, -1)) * c[..., None, :]
    eye = torch.eye(d.shape[-1], dtype=d.dtype, device=d.device)
    return eye + m, nn_


def mixing_matrix(
    q: torch.Tensor,
    k: torch.Tensor,
    log_a: torch.Tensor | None = None,
    b: torch.Tensor | None = None,
    e: torch.Tensor | None = None,
    c: torch.Tensor | None = None,
) -> torch.Tensor:
    """``(batch, heads, n, n)`` lower-triangular ``A`` with ``O = A V`` for a zero initial state:
    ``A = (D * Q K^T) diag(c) - (D * Q E^T) (I + M)^{-1} N`` (the quadratic form)."""
    log_a, b, e, c = _defaults(k, log_a, b, e, c)
    _, d = _decay(log_a)
    a_mat = d * (q @ k.transpose(-2, -1)) * c[..., None, :]
    if b is not None:
        i_m, n_mat = _wy(k, e, b, c, d)
        t_n = torch.linalg.solve_triangular(i_m, n_mat, upper=False, unitriangular=True)
        a_mat = a_mat - (d * (q @ e.transpose(-2, -1))) @ t_n
    return a_mat


def _blocks(x: torch.Tensor, size: int) -> torch.Tensor:
    """``(b, h, n, ...)`` -> ``(b, h, n_blocks, size, ...)``, zero-padded at the end."""
    n = x.shape[2]
    pad = (-n) % size
    if pad:
        shape = list(x.shape)
        shape[2] = pad
        x = torch.cat([x, x.new_zeros(shape)], 2)
    return x.reshape(x.shape[0], x.shape[1], -1, size, *x.shape[3:])


def _scalar_chunked(q, k, v, log_a, b, e, c, s, size):  # type: ignore[no-untyped-def]
    n = q.shape[2]
    size = min(size, n)
    qb, kb, vb, eb = (_blocks(x, size) for x in (q, k, v, e))
    # padded steps: gate 1, write 0, erase 0 (they leave the state alone)
    lab, cb = _blocks(log_a, size), _blocks(c, size)
    cum, d = _decay(lab)  # (b, h, N, C), (b, h, N, C, C)
    gamma = cum.exp()
    a_k = d * (qb @ kb.transpose(-2, -1)) * cb[..., None, :]  # (b, h, N, C, C)
    if b is not None:
        bb = _blocks(b, size)
        i_m, n_mat = _wy(kb, eb, bb, cb, d)
        # R = -W S^T - U with W = T diag(b gamma) E, U = T N V (all blocks at once)
        w = torch.linalg.solve_triangular(
            i_m, (bb * gamma)[..., None] * eb, upper=False, unitriangular=True
        )
        u = torch.linalg.solve_triangular(i_m, n_mat @ vb, upper=False, unitriangular=True)
        a_e = d * (qb @ eb.transpose(-2, -1))
    tail = (cum[..., -1:] - cum).exp()  # gamma_C / gamma_s
    outs = []
    for i in range(qb.shape[2]):
        st = s.transpose(-2, -1)  # (b, h, dk, dv)
        o = gamma[:, :, i, :, None] * (qb[:, :, i] @ st) + a_k[:, :, i] @ vb[:, :, i]
        s_new = (
            gamma[:, :, i, -1, None, None] * s
            + (vb[:, :, i] * (cb[:, :, i] * tail[:, :, i])[..., None]).transpose(-2, -1)
            @ kb[:, :, i]
        )
        if b is not None:
            r = -(w[:, :, i] @ st) - u[:, :, i]  # (b, h, C, dv)
            o = o + a_e[:, :, i] @ r
            s_new = s_new + (r * tail[:, :, i, :, None]).transpose(-2, -1) @ eb[:, :, i]
        outs.append(o)
        s = s_new
    out = torch.cat(outs, 2)[:, :, :n]
    return out, s


# ============================================================================ diagonal family
def diagonal_update(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    log_a: torch.Tensor,
    c: torch.Tensor | None = None,
    form: str = "chunked",
    chunk_size: int = 64,
    state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GLA-style ``S_t = S_{t-1} diag(a_t) + c_t v_t k_t^T``, ``o_t = S_t q_t``; ``log_a``:
    ``(batch, heads, n, d_k)``. Returns outputs and the final state as :func:`scalar_update`."""
    _check(q, k, v, form, chunk_size)
    if log_a.shape != k.shape:
        raise ValueError(f"diagonal log gates must match k's shape {tuple(k.shape)}")
    c = k.new_ones(k.shape[:3]) if c is None else c
    bsz, h, n, dk = k.shape
    s = q.new_zeros(bsz, h, v.shape[-1], dk) if state is None else state
    if form == "recurrent":
        outs = []
        a = log_a.exp()
        for t in range(n):
            s = s * a[:, :, t, None, :] + c[:, :, t, None, None] * (
                v[:, :, t, :, None] * k[:, :, t, None, :]
            )
            outs.append((s @ q[:, :, t, :, None])[..., 0])
        return torch.stack(outs, 2), s
    size = n if form == "quadratic" else min(chunk_size, n)
    qb, kb, vb, lab = (_blocks(x, size) for x in (q, k, v, log_a))
    cb = _blocks(c, size)
    cum = lab.cumsum(-2)  # (b, h, N, C, dk)
    tri = torch.ones(size, size, dtype=torch.bool, device=q.device).tril()
    diff = (cum[..., :, None, :] - cum[..., None, :, :]).masked_fill(~tri[..., None], float("-inf"))
    a_mat = torch.einsum("bhntd,bhnsd,bhntsd->bhnts", qb, kb, diff.exp()) * cb[..., None, :]
    q_in = qb * cum.exp()
    k_out = kb * (cum[..., -1:, :] - cum).exp() * cb[..., None]
    outs = []
    for i in range(qb.shape[2]):
        outs.append(q_in[:, :, i] @ s.transpose(-2, -1) + a_mat[:, :, i] @ vb[:, :, i])
        s = s * cum[:, :, i, -1, None, :].exp() + vb[:, :, i].transpose(-2, -1) @ k_out[:, :, i]
    return torch.cat(outs, 2)[:, :, :n], s
