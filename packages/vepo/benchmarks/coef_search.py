"""The coefficient search behind :data:`vepo.rl.COEF` (recorded in seeds/vepo.md).

Rule (ours, fixed before running): on a problem set and warm-up model the reproduction does not use
(seed 1; ``reproduce`` uses seed 0), run each trajectory-level term (VEPO, its normalised variant,
the blind sequence bonus, Differential Smoothing) at each coefficient of ``GRID`` with the quick
scale's budget, once, next to GRPO. A run *collapsed* when its pass@1 on the RL problems is below
half GRPO's or its sequence entropy above twice GRPO's. The chosen coefficient is the largest at
which no term collapsed; all four terms share it.

    OMP_NUM_THREADS=1 .venv/bin/python packages/vepo/benchmarks/coef_search.py
"""

from __future__ import annotations

import copy
import json
import sys
from typing import Any

from paper_common import map_jobs, markdown_table
from paper_common.device import pinned_threads
from vepo.metrics import evaluate_policy
from vepo.rl import METHODS, train_rl, warmup
from vepo.tasks import countdown

GRID = (0.005, 0.02, 0.05, 0.1)
TERMS = ("VEPO", "VEPO (normalised H)", "GRPO + sequence entropy", "Differential Smoothing")
SEED = 1


def _job(args: tuple[Any, ...]) -> dict[str, Any]:
    model, tok, rl_set, name, coef = args
    fields = dict(METHODS[name])
    if coef is not None:
        fields["vepo_coef"] = coef
    with pinned_threads(1, torch=True):
        res = train_rl(copy.deepcopy(model), tok, rl_set, fields, steps=40, prompts_per_step=4,
                       num_generations=8, seed=SEED)  # fmt: skip
        ev = evaluate_policy(res.model, tok, rl_set, n=16, ks=(1, 16), seed=1000 + SEED)
    return {"method": name, "coef": coef, **{k: ev[k] for k in
            ("pass@1", "pass@16", "distinct_valid", "sequence_entropy", "invalid_entropy_share")}}  # fmt: skip


def main(workers: int = 2) -> dict[str, Any]:
    problems = countdown(300 + 48, seed=SEED)
    model, tok = warmup(problems[:300], steps=600, seed=SEED)
    rl_set = problems[300:]
    jobs = [(model, tok, rl_set, "GRPO", None)]
    jobs += [(model, tok, rl_set, t, c) for c in GRID for t in TERMS]
    rows = map_jobs(_job, jobs, workers, start_method="spawn")
    grpo = rows[0]
    for r in rows[1:]:
        r["collapsed"] = bool(r["pass@1"] < 0.5 * grpo["pass@1"]
                              or r["sequence_entropy"] > 2 * grpo["sequence_entropy"])  # fmt: skip
    stable = [c for c in GRID if not any(r["collapsed"] for r in rows[1:] if r["coef"] == c)]
    chosen = max(stable) if stable else None
    print(markdown_table(rows))
    print(f"stable: {stable}; chosen: {chosen}")
    return {"rows": rows, "stable": stable, "chosen": chosen}


if __name__ == "__main__":
    out = main()
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(out, f, indent=1)
