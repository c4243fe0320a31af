"""What one evaluation of the facts costs: the log-prob readout (batched) against the same readout
one prompt at a time, and against the paper's generative readout (reasoning sampled before a tag).

The runner evaluates every epoch, so the measurement must cost a fraction of an epoch's training.
Same model (a tiny Llama, d 64, 2 blocks), same 120 target facts. Printed as seconds, the ratio to
the batched readout and peak memory (``rss`` mode: torch's CPU allocator is invisible to
tracemalloc). Run: `make bench PKG=gv_gap`.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from gv_gap import evaluate_gv, world_items
from gv_gap.items import format_pairs, statement_texts, vocabulary_texts
from paper_common.device import peak_memory
from paper_common.facts import World
from paper_common.lm import build_tokenizer, tiny_causal_lm, train_causal_lm


def _reason(model, tok, prompts: list[str], n_tokens: int, batch_size: int = 64) -> None:
    """Sample exactly ``n_tokens`` per prompt (a reasoning-length answer; eos is not allowed to
    stop it early), as the paper's prompts make its models do for every generation and claim."""
    tok.padding_side = "left"
    try:
        for i in range(0, len(prompts), batch_size):
            enc = tok(prompts[i : i + batch_size], return_tensors="pt", padding=True)
            model.generate(
                **enc,
                do_sample=True,
                temperature=0.3,
                min_new_tokens=n_tokens,
                max_new_tokens=n_tokens,
                pad_token_id=tok.pad_token_id,
            )
    finally:
        tok.padding_side = "right"


def main() -> None:
    torch.manual_seed(0)
    world = World(seed=0, n_people=60, n_cities=16, n_companies=12, n_countries=6)
    tok = build_tokenizer(vocabulary_texts(world))
    targets, formats = world.facts("heldout"), world.facts("train")
    items = world_items(world, targets, seed=0)[:120]
    model = tiny_causal_lm(tok, "llama", n_layers=2, d_model=64, n_heads=4)
    texts = statement_texts(world, targets + formats)
    pairs = format_pairs(world_items(world, formats, seed=1))
    steps = int(np.ceil((len(texts) + len(pairs)) / 32))
    start = time.perf_counter()
    train_causal_lm(model, tok, texts, pairs, steps=steps, batch_size=32, progress=False)
    epoch_s = time.perf_counter() - start
    evaluate_gv(model, tok, items[:4])  # warm-up

    def timed(fn):
        start = time.perf_counter()
        with peak_memory("rss") as mem:
            fn()
        return time.perf_counter() - start, mem.peak_mib

    rows = [
        ("log-prob readout, batched (64)", timed(lambda: evaluate_gv(model, tok, items))),
        ("log-prob readout, one at a time",
         timed(lambda: evaluate_gv(model, tok, items, batch_size=1))),
        ("generative readout, 64 sampled tokens per prompt (7 prompts per fact)",
         timed(lambda: _reason(model, tok, [it.question for it in items] * 7, 64))),
    ]  # fmt: skip
    base = rows[0][1][0]
    print(f"{len(items)} facts; one training epoch ({steps} steps of 32) takes {epoch_s:.1f} s")
    print("| readout | seconds | ratio | peak MiB |")
    print("|---|---|---|---|")
    for name, (seconds, mib) in rows:
        print(f"| {name} | {seconds:.2f} | {seconds / base:.1f} | {mib:.0f} |")


if __name__ == "__main__":
    main()
