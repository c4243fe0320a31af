"""Time and peak memory of one linearized attention layer against exact softmax attention, as
ratios, over the sequence length (``make bench PKG=linearize``).

Prefill: the parallel form of the hybrids (chunked state + banded or routed exact cache) against
causal softmax attention that builds the ``(n, n)`` logits (eager attention, what the teacher's
capture computes). Decoding: one :meth:`LinearizedAttention.step` after ``n`` tokens against one
softmax step over a KV cache of ``n`` tokens, and the elements each keeps between tokens (the
hybrid's :class:`DecodeState` against the ``2 n d`` per head of a KV cache).

The softmax rows should grow ~4x in time and memory per doubling of ``n`` (prefill) and 2x
(decoding); the hybrids' ~2x (prefill) and 1x (decoding)."""

from __future__ import annotations

import argparse
import time

import torch

from linearize.student import LinearizeConfig, LinearizedAttention
from paper_common import markdown_table
from paper_common.device import peak_memory

B, H, D = 1, 4, 32
ARMS = {
    # our proposal's shape at a realistic budget: delta rule, short conv, sinks + window (FIFO)
    "gated_deltanet+sinks+conv (B=64, fifo)": LinearizeConfig(
        update="gated_delta", feature_map="learned", conv=True, budget=64, sinks=4, window=60
    ),
    # routed pool: one pass over the tokens with O(budget) work each
    "gated_deltanet+routing (B=64, score)": LinearizeConfig(
        update="gated_delta", feature_map="learned", budget=64, sinks=4, window=28
    ),
    "lolcats (window 64)": LinearizeConfig(
        update="linear", feature_map="hedgehog", budget=64, window=64
    ),
}


def _softmax(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    n = q.shape[2]
    lg = (q @ k.transpose(-2, -1)) * D**-0.5
    lg = lg.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(lg, -1) @ v


def _timed(fn, repeat: int = 1) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    fn()  # warm-up
    with peak_memory("rss") as mem:
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        t = (time.perf_counter() - start) / repeat
    return t, mem.peak_mib


def main(lengths: list[int]) -> None:
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    rows = []
    for n in lengths:
        q, k, v = (torch.randn(B, H, n, D, generator=g) for _ in range(3))
        with torch.no_grad():
            t_ref, m_ref = _timed(lambda q=q, k=k, v=v: _softmax(q, k, v))
            # softmax decoding: the last token over a KV cache of n
            t_dref, _ = _timed(lambda q=q, k=k, v=v: _softmax_step(q[:, :, -1:], k, v), repeat=20)
            rows.append(_row("softmax (exact)", n, t_ref, m_ref, t_ref, m_ref, t_dref, t_dref,
                             2 * H * n * D * B, 2 * H * n * D * B))  # fmt: skip
            for name, cfg in ARMS.items():
                m = LinearizedAttention(cfg, D, H)
                t, mib = _timed(lambda m=m, q=q, k=k, v=v: m(q, k, v))
                st = m.init_decode(B)
                for i in range(n - 1):  # the state after n - 1 tokens, by decoding
                    _, st = m.step(q[:, :, i : i + 1], k[:, :, i : i + 1], v[:, :, i : i + 1], st)
                last = (q[:, :, -1:], k[:, :, -1:], v[:, :, -1:])
                t_dec, _ = _timed(lambda m=m, st=st, last=last: m.step(*last, st), repeat=20)
                rows.append(_row(name, n, t, mib, t_ref, m_ref, t_dec, t_dref, st.numel(),
                                 2 * H * n * D * B))  # fmt: skip
    print(markdown_table(rows))


def _softmax_step(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.softmax((q @ k.transpose(-2, -1)) * D**-0.5, -1) @ v


def _row(name, n, t, mib, t_ref, m_ref, t_dec, t_dref, state, kv):  # type: ignore[no-untyped-def]
    return {
        "attention": name,
        "n": n,
        "prefill_ms": 1e3 * t,
        "prefill time / softmax": t / t_ref,
        "prefill peak_mib": mib,
        "prefill memory / softmax": mib / max(m_ref, 1e-9),
        "decode step_ms": 1e3 * t_dec,
        "decode time / softmax": t_dec / t_dref,
        "kept elements": state,
        "kept / softmax KV cache": state / kv,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    main(parser.parse_args().lengths)
