"""The softmax erase-and-write identity and the per-head diagnostics, on known answers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from linearize.analysis import attention_mass, erase_write_weights, key_dependence, prefix_outputs


def test_softmax_is_an_erase_and_write_per_query() -> None:
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 11, 5, generator=g, dtype=torch.float64) for _ in range(3))
    o = prefix_outputs(q, k, v)  # (b, h, u, t, d)
    w = erase_write_weights(q, k)  # (b, h, u, t)
    step = o[..., :, 1:, :] - o[..., :, :-1, :]
    rule = w[..., :, 1:, None] * (v[..., None, 1:, :] - o[..., :, :-1, :])
    torch.testing.assert_close(step, rule, atol=1e-12, rtol=0)
    torch.testing.assert_close(o[..., :, 0, :], v[..., None, 0, :].expand_as(o[..., :, 0, :]))
    # the causal diagonal is ordinary attention
    s = torch.softmax(
        (q @ k.transpose(-2, -1) / 5**0.5).masked_fill(
            ~torch.ones(11, 11, dtype=torch.bool).tril(), float("-inf")
        ),
        -1,
    )
    torch.testing.assert_close(torch.diagonal(o, dim1=-3, dim2=-2).transpose(-2, -1), s @ v)


def test_uniform_attention_has_zero_key_dependence_and_sharp_attention_a_high_one() -> None:
    n, d = 16, 4
    q = torch.zeros(1, 1, n, d)
    k = torch.randn(1, 1, n, d)
    assert key_dependence(q, k)[0] == pytest.approx(0.0, abs=1e-12)  # w_t = 1/t for every query
    # one-hot keys and queries: each query reads only its own key, a maximally key-tied erase
    eye = torch.eye(d).repeat(n // d, 1)[None, None] * 20
    assert key_dependence(eye, eye)[0] > 1.0


def test_key_dependence_ignores_padding() -> None:
    g = torch.Generator().manual_seed(1)
    q, k = (torch.randn(1, 2, 10, 4, generator=g) for _ in range(2))
    mask = torch.ones(1, 10, dtype=torch.bool)
    mask[:, 7:] = False
    np.testing.assert_allclose(
        key_dependence(q, k, mask=mask), key_dependence(q[:, :, :7], k[:, :, :7]), atol=1e-10
    )


def test_attention_mass_on_sink_and_recent_tokens() -> None:
    n = 12
    k = torch.zeros(1, 2, n, 2)
    k[:, 0, 0, 0] = 50.0  # head 0: everything on the first token
    q = torch.zeros(1, 2, n, 2)
    q[..., 0] = 1.0
    first, last = attention_mass(q, k, scale=1.0)
    assert first[0] == pytest.approx(1.0, abs=1e-6)
    # head 1 is uniform: mean over t >= 4 of 1/(t+1) on the first token, min(4, t+1)/(t+1) recent
    t = np.arange(4, n)
    assert first[1] == pytest.approx(np.mean(1 / (t + 1)))
    assert last[1] == pytest.approx(np.mean(4 / (t + 1)))


def test_the_analysis_reads_left_padded_rows_as_unpadded() -> None:
    """Before: the sink mass was read at position 0, a pad token under left padding, and the
    erase weights ran over the pad keys."""

    g = torch.Generator().manual_seed(3)
    b, h, n, d, p = 2, 2, 10, 4, 3
    q, k = (torch.randn(b, h, n, d, generator=g, dtype=torch.float64) for _ in range(2))
    pad = torch.randn(b, h, p, d, generator=g, dtype=torch.float64)
    mask = torch.ones(b, n + p, dtype=torch.bool)
    mask[:, :p] = False
    qp, kp = torch.cat([pad, q], 2), torch.cat([pad, k], 2)
    np.testing.assert_allclose(key_dependence(qp, kp, mask=mask), key_dependence(q, k), rtol=1e-10)
    for got, want in zip(attention_mass(qp, kp, mask=mask), attention_mass(q, k), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10)
