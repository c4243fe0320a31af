"""Training and scoring throughput of the tiny fact LM on this machine, batched vs unbatched.

python packages/common/benchmarks/bench_lm.py   (or: make bench PKG=common)
"""

from __future__ import annotations

import torch

from paper_common import Timer, markdown_table, peak_memory
from paper_common.facts import World
from paper_common.lm import (
    build_tokenizer,
    greedy_answer,
    next_token_logprobs,
    tiny_causal_lm,
    train_causal_lm,
)


def main() -> None:
    world = World(seed=0)
    tok = build_tokenizer(world.vocabulary_texts())
    texts, pairs = world.corpus()
    model = tiny_causal_lm(tok, "llama", n_layers=2, d_model=128, n_heads=4)
    prompts = [q.question for q in world.qa_pairs("all")][:256]
    rows = []

    with peak_memory("rss") as mem:
        result = train_causal_lm(model, tok, texts, pairs, steps=60, batch_size=64, progress=False)
    rows.append(
        {
            "what": "train (batch 64)",
            "throughput": result.tokens_per_s,
            "unit": "tokens/s",
            "vs unbatched": None,
            "peak MiB": mem.peak_mib,
        }
    )

    timer = Timer(repeat=3, warmup=1)
    for name, fn, unit_n in [
        ("next_token_logprobs", next_token_logprobs, len(prompts)),
        (
            "greedy_answer (6 tokens)",
            lambda m, t, p, batch_size: greedy_answer(m, t, p, 6, batch_size),
            64,
        ),
    ]:
        batch = prompts[:unit_n]
        with peak_memory("rss") as mem:
            batched = timer(fn, model, tok, batch, batch_size=64)
        single = Timer(repeat=1, warmup=0)(fn, model, tok, batch, batch_size=1)
        rows.append(
            {
                "what": f"{name}, batch 64",
                "throughput": unit_n / batched.median_s,
                "unit": "prompts/s",
                "vs unbatched": single.median_s / batched.median_s,
                "peak MiB": mem.peak_mib,
            }
        )
        rows.append(
            {
                "what": f"{name}, batch 1",
                "throughput": unit_n / single.median_s,
                "unit": "prompts/s",
                "vs unbatched": 1.0,
                "peak MiB": None,
            }
        )
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, vocab {len(tok)}")
    print(markdown_table(rows))


if __name__ == "__main__":
    main()
