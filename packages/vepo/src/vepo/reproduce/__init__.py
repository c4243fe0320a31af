"""Reproduce the paper's claims at CPU scale.

``python -m vepo reproduce --scale quick``:

1. Countdown problems (3 numbers, targets up to 30, at least 2 valid expressions each) in three
   disjoint sets: warm-up, RL, held-out. A tiny LM (2 layers, d=64) is warmed up on 2 solutions of
   each warm-up problem.
2. Every method of :data:`vepo.rl.METHODS` (GRPO, + token entropy, + sequence entropy,
   clip-higher, Differential Smoothing, VEPO and its normalised variant) runs RL on the RL problems
   from the same warm-up model, with the same sample budget, for several replicate seeds.
3. Evaluation on the RL problems (16 samples each): pass@1/8/16, distinct valid solutions,
   entropies and the invalid-entropy share; pass@16 on the held-out problems; training curves.

The experiment is split as every package's: :mod:`~vepo.reproduce.scales` (the sizes),
:mod:`~vepo.reproduce.run` (the measurements), :mod:`~vepo.reproduce.claims` (verdicts with their
controls) and :mod:`~vepo.reproduce.figures`.
"""

from __future__ import annotations

import math

import numpy as np

from paper_common import Report
from paper_common.experiment import experiment
from vepo.reproduce import figures
from vepo.reproduce.claims import decide_claims
from vepo.reproduce.run import measure
from vepo.reproduce.scales import SCALES, Scale
from vepo.rl import COEFS, METHODS, NULL_ARMS

__all__ = ["SCALES", "Scale", "reproduce"]

COLUMNS = ("distinct_valid", "effective_entropy", "sequence_entropy", "invalid_entropy_share",
           "token_entropy", "heldout pass@k")  # fmt: skip


@experiment("vepo", "VEPO: validity-aware entropy for RLVR", SCALES, torch=True)
def reproduce(cfg: Scale, report: Report, seed: int) -> None:
    """Run the experiment at ``scale`` and return (and, with ``out_dir``, write) the report."""
    res = measure(cfg, seed)
    cols = [f"pass@{x}" for x in res.ks] + list(COLUMNS)
    report.add_table(
        "runs", [{c: r[c] for c in ("method", "seed", *cols, "seconds")} for r in res.runs]
    )
    summary = [{"method": "warm-up (before RL)", **{c: res.base.get(c, math.nan) for c in cols}}]
    for m in [*METHODS, *NULL_ARMS]:
        rs = [r for r in res.runs if r["method"] == m]
        summary.append({"method": m, **{c: float(np.mean([r[c] for r in rs])) for c in cols}})
    report.add_table(f"summary (means over {len(res.seeds)} seeds)", summary)
    report.add_figure("curves", figures.curves(res.runs))
    report.add_figure("pass_at_k", figures.pass_at_k(summary, res.ks))
    for claim in decide_claims(res):
        report.add_claim(claim)
    report.notes = (
        f"Countdown; a 2-layer d=64 LM warmed up on 2 solutions of each of {cfg.n_warmup} problems; "
        f"RL on {cfg.n_rl} other problems (also the evaluation problems) for {cfg.rl_steps} "
        f"optimiser steps ({cfg.rl_steps // 2} generations of {cfg.prompts_per_step} prompts x "
        f"{cfg.num_generations} samples, 2 updates each) per method and seed; {cfg.eval_samples} "
        f"evaluation samples per problem; {cfg.n_heldout} problems held out. Each method's own "
        "coefficient, chosen by one rule on search seeds disjoint from these (seeds/vepo.md): "
        + ", ".join(f"{m} {c:g}" for m, c in COEFS.items())
        + "; clip-higher at epsilon_high 0.28. Null arm of the negative controls: VEPO with its "
        "term's sign flipped. The effective-entropy definition, its gradient weights and DS's "
        "coefficients are ours (seeds/vepo.md)."
    )
