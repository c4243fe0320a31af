"""State updates: the three forms agree, and the delta rule's projection semantics hold exactly."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from linearize.updates import diagonal_update, mixing_matrix, scalar_update

B, H, N, D, DV = 2, 3, 37, 6, 5


def _inputs(seed: int = 0):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, N, D, generator=g, dtype=torch.float64)
    k = F.normalize(torch.randn(B, H, N, D, generator=g, dtype=torch.float64), dim=-1)
    v = torch.randn(B, H, N, DV, generator=g, dtype=torch.float64)
    log_a = F.logsigmoid(torch.randn(B, H, N, generator=g, dtype=torch.float64) + 2)
    beta = torch.rand(B, H, N, generator=g, dtype=torch.float64)
    u = F.normalize(torch.randn(1, H, 1, D, generator=g, dtype=torch.float64), dim=-1)
    return q, k, v, log_a, beta, u


RULES = {
    "linear": lambda la, b, u: {},
    "gated": lambda la, b, u: {"log_a": la},
    "delta": lambda la, b, u: {"b": b, "c": b},
    "gated_delta": lambda la, b, u: {"log_a": la, "b": b, "c": b},
    "control": lambda la, b, u: {"b": b, "c": b, "e": u},
}


@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize("chunk", [1, 8, 64])
def test_recurrent_chunked_quadratic_agree(rule: str, chunk: int) -> None:
    q, k, v, la, b, u = _inputs()
    kw = RULES[rule](la, b, u)
    ref, s_ref = scalar_update(q, k, v, form="recurrent", **kw)
    for form in ("chunked", "quadratic"):
        out, s = scalar_update(q, k, v, form=form, chunk_size=chunk, **kw)
        torch.testing.assert_close(out, ref, atol=1e-8, rtol=0)
        torch.testing.assert_close(s, s_ref, atol=1e-8, rtol=0)


def test_chunked_continues_from_a_state() -> None:
    q, k, v, la, b, _ = _inputs(1)
    full, s_full = scalar_update(q, k, v, log_a=la, b=b, c=b, form="recurrent")
    first, s1 = scalar_update(
        q[:, :, :20],
        k[:, :, :20],
        v[:, :, :20],
        la[..., :20],
        b[..., :20],
        c=b[..., :20],
        chunk_size=7,
    )
    rest, s2 = scalar_update(
        q[:, :, 20:],
        k[:, :, 20:],
        v[:, :, 20:],
        la[..., 20:],
        b[..., 20:],
        c=b[..., 20:],
        chunk_size=7,
        state=s1,
    )
    torch.testing.assert_close(torch.cat([first, rest], 2), full, atol=1e-8, rtol=0)
    torch.testing.assert_close(s2, s_full, atol=1e-8, rtol=0)


@pytest.mark.parametrize("chunk", [1, 5, 64])
def test_diagonal_gating_forms_agree(chunk: int) -> None:
    q, k, v, *_ = _inputs(2)
    la = F.logsigmoid(torch.randn(B, H, N, D, dtype=torch.float64) + 2)
    ref, s_ref = diagonal_update(q, k, v, la, form="recurrent")
    for form in ("chunked", "quadratic"):
        out, s = diagonal_update(q, k, v, la, form=form, chunk_size=chunk)
        torch.testing.assert_close(out, ref, atol=1e-8, rtol=0)
        torch.testing.assert_close(s, s_ref, atol=1e-8, rtol=0)


def test_diagonal_with_equal_gates_is_the_scalar_gate() -> None:
    q, k, v, la, *_ = _inputs(3)
    out, _ = diagonal_update(q, k, v, la[..., None].expand(-1, -1, -1, D).contiguous())
    torch.testing.assert_close(out, scalar_update(q, k, v, log_a=la)[0], atol=1e-10, rtol=0)


@pytest.mark.parametrize("form", ["recurrent", "chunked", "quadratic"])
def test_delta_with_unit_beta_recalls_orthonormal_keys_exactly(form: str) -> None:
    # 6 orthonormal keys, then the same keys as queries: each returns its stored value exactly
    basis = torch.linalg.qr(torch.randn(D, D, dtype=torch.float64))[0].T  # rows orthonormal
    k = basis[None, None].clone()
    v = torch.randn(1, 1, D, DV, dtype=torch.float64)
    ones = torch.ones(1, 1, D, dtype=torch.float64)
    _, state = scalar_update(k, k, v, b=ones, c=ones, form=form, chunk_size=4)
    torch.testing.assert_close(
        (state @ basis.T).transpose(-2, -1)[0, 0], v[0, 0], atol=1e-10, rtol=0
    )


def test_delta_returns_the_newest_value_of_a_repeated_key() -> None:
    g = torch.Generator().manual_seed(4)
    keys = F.normalize(torch.randn(1, 1, 3, D, generator=g, dtype=torch.float64), dim=-1)
    k = keys[:, :, [0, 1, 2, 1]]  # key 1 written twice
    v = torch.randn(1, 1, 4, DV, generator=g, dtype=torch.float64)
    ones = torch.ones(1, 1, 4, dtype=torch.float64)
    _, s = scalar_update(k, k, v, b=ones, c=ones, chunk_size=2)
    torch.testing.assert_close(s[0, 0] @ keys[0, 0, 1], v[0, 0, 3], atol=1e-10, rtol=0)
    # a linear state returns the sum of both writes instead
    _, s_lin = scalar_update(k, k, v)
    assert not torch.allclose(s_lin[0, 0] @ keys[0, 0, 1], v[0, 0, 3], atol=1e-3)


def test_gated_mixing_matrix_is_decay_weighted_scores() -> None:
    q, k, _, la, *_ = _inputs(5)
    a = mixing_matrix(q, k, log_a=la)
    t, s = 9, 4
    expect = (q[..., t, :] * k[..., s, :]).sum(-1) * la[..., s + 1 : t + 1].sum(-1).exp()
    torch.testing.assert_close(a[..., t, s], expect, atol=1e-12, rtol=0)
    assert torch.all(a.triu(1) == 0)


def test_bad_input_is_named() -> None:
    q, k, v, *_ = _inputs()
    with pytest.raises(ValueError, match="chunk_size"):
        scalar_update(q, k, v, chunk_size=0)
    with pytest.raises(ValueError, match="form"):
        scalar_update(q, k, v, form="parallel")
    with pytest.raises(ValueError, match="head-dim mismatch"):
        scalar_update(q[..., :3], k, v)
    with pytest.raises(ValueError, match="empty state"):
        scalar_update(q, k, v, form="quadratic", state=torch.zeros(B, H, DV, D, dtype=q.dtype))
    with pytest.raises(ValueError, match="diagonal log gates"):
        diagonal_update(q, k, v, torch.zeros(B, H, N))
