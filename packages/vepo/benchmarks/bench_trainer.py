"""What the entropy terms cost per RL step, as a ratio to GRPO in the same trainer.

Every method computes one extra no-grad forward pass per generation (the sequence log-probs
behind the logged entropy estimates and the trajectory-level terms); the token bonus is TRL's own
(token entropies computed inside its loss).

    uv run python packages/vepo/benchmarks/bench_trainer.py
"""

from __future__ import annotations

import copy

from paper_common import markdown_table
from vepo.rl import METHODS, train_rl, warmup
from vepo.tasks import countdown


def main(steps: int = 20) -> None:
    problems = countdown(80, seed=0)
    model, tok = warmup(problems[:60], steps=100, seed=0)
    rows = []
    base = None
    for name in METHODS:
        res = train_rl(copy.deepcopy(model), tok, problems[60:], name, steps=steps, seed=0)
        per_step = res.seconds / steps
        base = per_step if base is None else base
        rows.append({"method": name, "s / step": per_step, "x GRPO": per_step / base})
    print(markdown_table(rows))


if __name__ == "__main__":
    main()
