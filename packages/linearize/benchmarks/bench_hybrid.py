"""Time of one linearized attention layer against exact softmax attention, as ratios, over the
sequence length (``make bench PKG=linearize``).

Prefill: the parallel form of the hybrids (chunked state + banded or routed exact cache; the routed
pool is filled by a loop over the tokens with O(budget) work each, so O(n * budget)) against causal
softmax attention twice: ``F.scaled_dot_product_attention(is_causal=True)`` (what the teacher's
capture runs, and the fair reference) and an eager form that builds the ``(n, n)`` logits.
Decoding: one :meth:`LinearizedAttention.step` after ``n`` tokens against one softmax step over a
KV cache of ``n`` tokens. Times are the median of ``--repeat`` runs after a warm-up, with the
spread (min-max) in brackets. Memory is not measured (the process RSS is too coarse to be
reliable at these sizes); the table gives instead the elements each keeps between decoding tokens
(the hybrid's :class:`DecodeState` against the ``2 n d`` per head of a KV cache), an exact count.

The softmax rows should grow ~4x in prefill time per doubling of ``n`` (eager) and 2x in decoding;
the hybrids' ~2x (prefill) and 1x (decoding)."""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from linearize.student import LinearizeConfig, LinearizedAttention
from paper_common import markdown_table

B, H, D = 1, 4, 32
ARMS = {
    # our proposal's shape at a realistic budget: delta rule, short conv, sinks + window (FIFO)
    "gated_deltanet+sinks+conv (B=64, fifo)": LinearizeConfig(
        update="gated_delta", feature_map="learned", conv=True, budget=64, sinks=4, window=60
    ),
    # routed pool: a loop over the tokens with O(budget) work each
    "gated_deltanet+routing (B=64, score)": LinearizeConfig(
        update="gated_delta", feature_map="learned", budget=64, sinks=4, window=28
    ),
    "lolcats (window 64)": LinearizeConfig(
        update="linear", feature_map="hedgehog", budget=64, window=64
    ),
}


def _eager(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    n = q.shape[2]
    lg = (q @ k.transpose(-2, -1)) * D**-0.5
    lg = lg.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(lg, -1) @ v


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _timed(fn, repeat: int) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """Median, min and max seconds of ``repeat`` calls after one warm-up."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), max(times)


def main(lengths: list[int], repeat: int) -> None:
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    rows = []
    for n in lengths:
        q, k, v = (torch.randn(B, H, n, D, generator=g) for _ in range(3))
        kv = 2 * H * n * D * B
        last = (q[:, :, -1:], k[:, :, -1:], v[:, :, -1:])
        with torch.no_grad():
            ref = _timed(lambda q=q, k=k, v=v: _sdpa(q, k, v), repeat)
            # softmax decoding: the last token over a KV cache of n
            dref = _timed(lambda q=q, k=k, v=v: _sdpa(q[:, :, -1:], k, v), 5 * repeat)
            rows.append(_row("softmax (SDPA, is_causal)", n, ref, ref, dref, dref, kv, kv))
            eager = _timed(lambda q=q, k=k, v=v: _eager(q, k, v), repeat)
            rows.append(_row("softmax (eager, (n, n) logits)", n, eager, ref, dref, dref, kv, kv))
            for name, cfg in ARMS.items():
                m = LinearizedAttention(cfg, D, H)
                t = _timed(lambda m=m, q=q, k=k, v=v: m(q, k, v), repeat)
                st = m.init_decode(B)
                for i in range(n - 1):  # the state after n - 1 tokens, by decoding
                    _, st = m.step(q[:, :, i : i + 1], k[:, :, i : i + 1], v[:, :, i : i + 1], st)
                dec = _timed(lambda m=m, st=st, last=last: m.step(*last, st), 5 * repeat)
                rows.append(_row(name, n, t, ref, dec, dref, st.numel(), kv))
    print(markdown_table(rows))


def _ms(t: tuple[float, float, float]) -> str:
    return f"{1e3 * t[0]:.2f} [{1e3 * t[1]:.2f}, {1e3 * t[2]:.2f}]"


def _row(name, n, t, t_ref, dec, d_ref, state, kv):  # type: ignore[no-untyped-def]
    return {
        "attention": name,
        "n": n,
        "prefill ms, median [min, max]": _ms(t),
        "prefill / SDPA (medians)": t[0] / t_ref[0],
        "decode step ms, median [min, max]": _ms(dec),
        "decode / SDPA (medians)": dec[0] / d_ref[0],
        "kept elements": state,
        "kept / softmax KV cache": state / kv,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per row (median)")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"--repeat must be >= 1; got {args.repeat}")
    main(args.lengths, args.repeat)
