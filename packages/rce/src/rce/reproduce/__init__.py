"""``reproduce``: rank leakage after ROME and MEMIT edits, the one-query Output Attack against the
head-projection, probability-delta and rephrasing attacks, and RCE, on tiny GPT-2 fact LMs.

Layout: :mod:`rce.reproduce.scales` (the scales, the defences by name), :mod:`rce.reproduce.run`
(:func:`measure_leakage` on any model, one seed's fact LM), :mod:`rce.reproduce.claims` (the
verdicts and their controls), :mod:`rce.reproduce.figures`.

Per seed: a :class:`paper_common.facts.World` (``born_in``: people to one-word cities) and a
``fact_lm`` trained on it; ``n_edits`` facts the model knows are edited to a random other city
(Error Injection's target), each ROME edit on its own (the weights are restored between edits),
MEMIT's as one batch; every (editor, defence) cell is attacked with every attack at
B in {1, 2, 5, 10, 20}. The fact token and layer come from causal tracing.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from paper_common import (
    Report,
    Stopwatch,
    check_scale,
    map_jobs,
    pin_threads,
    write_report,
)
from rce.attacks import BUDGETS
from rce.metrics import among_successful
from rce.reproduce.claims import EFFICACY_MIN, MIN_SUCCESSFUL, _claims
from rce.reproduce.figures import _figures, _frontier_figure
from rce.reproduce.run import (
    _frontier_rows,
    _pool,
    _rate,
    _seed_job,
    measure_leakage,
    model_name,
)
from rce.reproduce.scales import ATTACK_LABELS, DEFENCE_SPECS, SCALES, _cells

__all__ = [
    "ATTACK_LABELS",
    "DEFENCE_SPECS",
    "EFFICACY_MIN",
    "MIN_SUCCESSFUL",
    "SCALES",
    "measure_leakage",
    "model_name",
    "reproduce",
]


@pin_threads(torch=True)
def reproduce(
    scale: str = "quick", seed: int = 0, out_dir: str | os.PathLike[str] | None = None
) -> Report:
    """Run the experiment at ``scale`` (smoke / quick / full); write the report to ``out_dir``.

    ``seed`` offsets the fact-LM seeds (``seed + s`` for each of the scale's seeds).
    """
    scale = check_scale(scale)
    cfg = dict(SCALES[scale])
    watch = Stopwatch()
    jobs = [(cfg, seed + s) for s in cfg["seeds"]]
    runs = map_jobs(_seed_job, jobs, workers=min(cfg["workers"], len(jobs)))
    watch.lap("edits and attacks")
    report = Report(
        package="rce",
        title="Rank leakage after knowledge editing, the one-query Output Attack, and RCE",
        scale=scale,
        seed=seed,
    )
    cells = [f"{e}/{d}" for e, d in _cells(cfg)]
    pooled = {c: _pool(runs, c) for c in ["before", *cells]}
    n_values = runs[0]["n_values"]
    models = "; ".join(dict.fromkeys(r["model"] for r in runs))
    asr_rows, summary = [], []
    base = pooled["before"]
    for cell in ["before", *cells]:
        res = pooled[cell]
        for attack in ATTACK_LABELS:
            for b in BUDGETS:
                key = f"success/{attack}/{b}"
                if key not in res:
                    continue
                rate, lo, hi, n = _rate(res[key])
                asr_rows.append(
                    {
                        "cell": cell,
                        "attack": attack,
                        "B": b,
                        "asr": rate,
                        "ci_low": lo,
                        "ci_high": hi,
                        "n": n,
                    }
                )
        chance10 = float(np.mean(res["chance/10"])) if "chance/10" in res else float("nan")
        ok = among_successful(res)
        summary.append(
            {
                "cell": cell,
                "model": models,
                "edit_success": float(np.mean(res["edit_success"])),
                "n_successful": int(np.sum(res["edit_success"])),
                "output_asr@10_successful": float(np.mean(ok["success/output/10"]))
                if len(ok["true_rank"])
                else None,
                "median_true_rank_successful": float(np.median(ok["true_rank"]))
                if len(ok["true_rank"])
                else None,
                "target_top1": float(np.mean(res["target_top1"])),
                "paraphrase": float(np.nanmean(res["paraphrase"])),
                "neighbour_drop": float(
                    np.nanmean(base["neighbour_acc"]) - np.nanmean(res["neighbour_acc"])
                ),
                "utility_drop": float(
                    np.nanmean(base["utility_acc"]) - np.nanmean(res["utility_acc"])
                ),
                "median_true_rank": float(np.median(res["true_rank"])),
                "output_asr@10": float(np.mean(res["success/output/10"])),
                "hp_asr@10": float(np.mean(res["success/hp/10"])),
                "pd_asr@10": float(np.mean(res["success/pd/10"])),
                "ir_asr@20": float(np.mean(res["success/ir/20"]))
                if "success/ir/20" in res
                else float("nan"),
                "chance_decoy@10": chance10,
                "chance_B_over_V@10": 10 / n_values,
                "n": len(res["true_rank"]),
            }
        )
    report.add_table("summary", summary)
    frontier = _frontier_rows(runs, n_values)
    if frontier:
        report.add_table("clamp_frontier", frontier)
    report.add_table("asr", asr_rows)
    report.add_table(
        "tracing",
        [
            {
                "seed": r["seed"],
                "fact_token": ft,
                **{f"block {i}": e for i, e in enumerate(eff)},
                "chosen": ft == r["fact_token"],
                "layer": r["layer"],
            }
            for r in runs
            for ft, eff in r["trace"].items()
        ],
    )
    _claims(report, cfg, pooled, summary, n_values, models)
    _figures(report, cfg, pooled, cells, n_values)
    if frontier:
        _frontier_figure(report, frontier, cfg["rome"].get("clamp_norm_factor"))
    watch.lap("report")
    per_seed = [{"seed": r["seed"], **lap} for r in runs for lap in r["laps"]]
    report.add_table("timing", [{"seed": "all", **lap} for lap in watch.laps] + per_seed)
    report.runtime_s = watch.elapsed_s
    restored = sum(bool(r["restored"]) for r in runs)
    report.notes = (
        _notes(cfg, runs)
        + f" Weights restored bit for bit after every edit in {restored} of {len(runs)} seeds."
    )
    if out_dir is not None:
        write_report(report, out_dir)
    return report


def _notes(cfg: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    picks = ", ".join(
        f"seed {r['seed']}: {r['fact_token']} token, block {r['layer']} (window {r['window']})"
        for r in runs
    )
    models = "; ".join(dict.fromkeys(r["model"] for r in runs))
    return (
        f"Models: {models}. Fact LMs: `fact_lm` size {cfg['size']} ({cfg['arch']}), World "
        f"{cfg['world']}; {cfg['n_edits']} edits per seed to a random other city. ROME's causal "
        "tracing (noise 3 x the subjects' embedding std, 10 samples, a window of blocks scaled to "
        f"the depth as ROME's 10 of 48) chose ({picks}). C: uncentred key second moment over the "
        "training text without the edited people (not the edit corpus). ROME at its published "
        f"clamp 4 ({cfg['rome']}); the frontier reruns plain ROME at clamps "
        f"{cfg.get('clamps', [])}. MEMIT {cfg['memit']} (lambda 15000 leaves 100 edits almost "
        "undone here). Leakage (claims 1-3) is read among successful edits (new target top-1; "
        "for Patil et al.'s defences, run in erasure mode as published, the true token off the "
        "top-1). RCE: R=50, R'=|V|/2, m=1, lambda=1; rce_band: R'=100. Chance is the Output "
        "Attack scored against a random city the subject was never paired with (decoy) and "
        "B/|cities|; claims use the larger."
    )
