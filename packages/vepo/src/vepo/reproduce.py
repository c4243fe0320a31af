"""Reproduce the paper's claims at CPU scale.

``python -m vepo reproduce --scale quick``:

1. Countdown problems (3 numbers, targets up to 30, at least 2 valid expressions each) in three
   disjoint sets: warm-up, RL, held-out. A tiny LM (2 layers, d=64) is warmed up on 2 solutions of
   each warm-up problem.
2. Every method of :data:`vepo.rl.METHODS` (GRPO, + token entropy, + sequence entropy,
   clip-higher, VEPO) runs RL on the RL problems from the same warm-up model, with the same sample
   budget, for several seeds (two worker processes).
3. Evaluation on the RL problems (16 samples each): pass@1/8/16, distinct valid solutions,
   entropies and the invalid-entropy share; pass@16 on the held-out problems; training curves.
"""

from __future__ import annotations

import copy
import math
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from paper_common import (
    Claim,
    Report,
    check_scale,
    map_jobs,
    new_figure,
    paired_comparison,
    pin_threads,
    write_report,
)
from paper_common.device import pinned_threads
from vepo.metrics import evaluate_policy
from vepo.rl import METHODS, train_rl, warmup
from vepo.tasks import countdown


@dataclass(frozen=True)
class Scale:
    n_warmup: int
    n_rl: int
    n_heldout: int
    warmup_steps: int
    rl_steps: int
    prompts_per_step: int
    num_generations: int
    eval_samples: int
    seeds: tuple[int, ...]
    workers: int
    model: str = ""


SCALES = {
    "smoke": Scale(40, 8, 8, 40, 2, 2, 4, 4, (0, 1), 1),
    "quick": Scale(300, 48, 32, 600, 40, 4, 8, 16, (0, 1, 2), 2),
    # for a GPU: Qwen2.5-1.5B-Instruct on Countdown (TinyZero-style); steps and groups as in GRPO papers
    "full": Scale(0, 1024, 512, 0, 500, 32, 16, 64, (0, 1, 2), 1, "Qwen/Qwen2.5-1.5B-Instruct"),
}


def _job(args: tuple[Any, ...]) -> dict[str, Any]:
    """One (method, seed) run in a worker: RL from the warm-up weights, then evaluation.

    Always one torch and BLAS thread, in a spawned worker or in this process alike (a spawned
    worker inherits neither the parent's torch pin nor its BLAS limits): the result does not
    depend on ``workers``."""
    with pinned_threads(1, torch=True):
        return _run(args)


def _run(args: tuple[Any, ...]) -> dict[str, Any]:
    model, tok, rl_set, heldout, method, seed, cfg = args
    res = train_rl(copy.deepcopy(model), tok, rl_set, method, steps=cfg.rl_steps,
                   prompts_per_step=cfg.prompts_per_step, num_generations=cfg.num_generations,
                   seed=seed)  # fmt: skip
    ev = evaluate_policy(res.model, tok, rl_set, n=cfg.eval_samples,
                         ks=_ks(cfg.eval_samples), seed=1000 + seed)  # fmt: skip
    held = evaluate_policy(
        res.model, tok, heldout, n=cfg.eval_samples, ks=(cfg.eval_samples,), seed=2000 + seed
    )
    ev["heldout pass@k"] = held[f"pass@{cfg.eval_samples}"]
    return {"method": method, "seed": seed, **ev, "seconds": res.seconds, "history": res.history}


def _ks(n: int) -> tuple[int, ...]:
    return tuple(k for k in (1, 8, 16) if k <= n) or (1,)


@pin_threads(torch=True)
def reproduce(
    scale: str = "quick", seed: int = 0, out_dir: str | os.PathLike[str] | None = None
) -> Report:
    """Run the experiment at ``scale`` and return (and, with ``out_dir``, write) the report."""
    check_scale(scale)
    if scale == "full":
        raise RuntimeError(
            "scale 'full' (Qwen2.5-1.5B-Instruct on Countdown/GSM8K) needs a GPU and the hub: build "
            "the model with AutoModelForCausalLM.from_pretrained and call vepo.rl.train_rl with "
            "SCALES['full']'s budgets"
        )
    cfg = SCALES[scale]
    start = time.perf_counter()
    report = Report(
        package="vepo", title="VEPO: validity-aware entropy for RLVR", scale=scale, seed=seed
    )
    problems = countdown(cfg.n_warmup + cfg.n_rl + cfg.n_heldout, seed=seed)
    warm = problems[: cfg.n_warmup]
    rl_set = problems[cfg.n_warmup : cfg.n_warmup + cfg.n_rl]
    heldout = problems[cfg.n_warmup + cfg.n_rl :]
    model, tok = warmup(warm, steps=cfg.warmup_steps, seed=seed)
    base = evaluate_policy(
        model, tok, rl_set, n=cfg.eval_samples, ks=_ks(cfg.eval_samples), seed=999
    )
    seeds = [seed + s for s in cfg.seeds]
    jobs = [(model, tok, rl_set, heldout, m, s, cfg) for s in seeds for m in METHODS]
    runs = map_jobs(_job, jobs, cfg.workers, start_method="spawn")

    k = _ks(cfg.eval_samples)
    cols = [f"pass@{x}" for x in k] + ["distinct_valid", "effective_entropy", "sequence_entropy",
                                        "invalid_entropy_share", "token_entropy", "heldout pass@k"]  # fmt: skip
    report.add_table(
        "runs", [{c: r[c] for c in ("method", "seed", *cols, "seconds")} for r in runs]
    )
    summary = [{"method": "warm-up (before RL)", **{c: base.get(c, math.nan) for c in cols}}]
    for m in METHODS:
        rs = [r for r in runs if r["method"] == m]
        summary.append({"method": m, **{c: float(np.mean([r[c] for r in rs])) for c in cols}})
    report.add_table("summary", summary)
    report.add_figure("curves", _plot_curves(runs))
    report.add_figure("pass_at_k", _plot_pass(summary, k))
    _claims(report, runs, k, seeds)
    report.runtime_s = time.perf_counter() - start
    if out_dir is not None:
        write_report(report, out_dir)
    return report


def _per_seed(runs: list[dict[str, Any]], method: str, key: str, seeds: list[int]) -> np.ndarray:
    return np.array(
        [next(r[key] for r in runs if r["method"] == method and r["seed"] == s) for s in seeds]
    )


def _claims(
    report: Report, runs: list[dict[str, Any]], ks: tuple[int, ...], seeds: list[int]
) -> None:
    baselines = [m for m in METHODS if not m.startswith("VEPO")]
    mean = {(m, key): float(np.mean([r[key] for r in runs if r["method"] == m]))
            for m in METHODS for key in runs[0] if key not in ("method", "history")}  # fmt: skip
    top_k = [x for x in ks if x > 1] or [ks[-1]]
    margins = {
        x: min(mean[("VEPO", f"pass@{x}")] - mean[(b, f"pass@{x}")] for b in baselines)
        for x in top_k
    }
    variants = [m for m in METHODS if m.startswith("VEPO") and m != "VEPO"]
    note = "; ".join(f"pass@{x}: VEPO {mean[('VEPO', f'pass@{x}')]:.3f}, best baseline "
                     f"{max(mean[(b, f'pass@{x}')] for b in baselines):.3f}"
                     + "".join(f", {v} {mean[(v, f'pass@{x}')]:.3f}" for v in variants)
                     for x in top_k)  # fmt: skip
    report.add_claim(Claim.threshold(
        f"VEPO's pass@k (k = {', '.join(map(str, top_k))}) exceeds GRPO's and the entropy variants'",
        f"min over k and baselines of VEPO - baseline (mean of {len(seeds)} seeds)",
        min(margins.values()), ">", 0.0, note,
    ))  # fmt: skip
    dv, dg = mean[("VEPO", "distinct_valid")], mean[("GRPO", "distinct_valid")]
    report.add_claim(Claim.threshold(
        "VEPO keeps more distinct valid solutions per problem than GRPO",
        "distinct valid solutions per problem (eval samples): VEPO - GRPO", dv - dg, ">", 0.0,
        f"VEPO {dv:.2f}, GRPO {dg:.2f}"
        + "".join(f", {v} {mean[(v, 'distinct_valid')]:.2f}" for v in variants),
    ))  # fmt: skip
    se = {m: _mean_se(runs, m, seeds) for m in METHODS}
    report.add_claim(_blind_bonus_claim(mean, se))
    a, b = _per_seed(runs, "VEPO", "pass@1", seeds), _per_seed(runs, "GRPO", "pass@1", seeds)
    report.add_claim(_pass1_claim(a, b))


def _mean_se(runs: list[dict[str, Any]], method: str, seeds: list[int]) -> float:
    """Monte Carlo standard error of ``method``'s seed-mean sequence entropy: the runs' own
    standard errors combined as for a mean of independent estimates."""
    per_seed = _per_seed(runs, method, "sequence_entropy_se", seeds)
    return float(np.sqrt(np.sum(per_seed**2)) / len(per_seed))


BLIND = ("GRPO + token entropy", "GRPO + sequence entropy")
NOISE_SE = 2.0  # a rise counts only above this many Monte Carlo standard errors of the difference


def _blind_bonus_claim(mean: dict[tuple[str, str], float], se: dict[str, float]) -> Claim:
    """Both blind bonuses must raise sequence entropy above GRPO's, by more than the noise floor
    (``NOISE_SE`` standard errors of the difference of the two Monte Carlo estimates), before the
    share of the rise on invalid trajectories means anything: a bonus that did not raise entropy,
    or raised it within noise (where the share is an unbounded ratio), leaves the claim not
    measured, never decided by the other bonus alone. ``mean[(method, key)]``: seed means."""
    statement = (
        "Blind entropy bonuses raise entropy mostly on invalid trajectories; VEPO raises "
        "effective entropy"
    )
    metric = (
        "smallest share of a blind bonus's entropy rise (vs GRPO) that is on invalid trajectories"
    )
    target = "> 0.5 for both blind bonuses, and VEPO's effective entropy above GRPO's"
    seq_g, share_g = mean[("GRPO", "sequence_entropy")], mean[("GRPO", "invalid_entropy_share")]
    rises = {b: mean[(b, "sequence_entropy")] - seq_g for b in BLIND}
    floors = {b: NOISE_SE * math.hypot(se[b], se["GRPO"]) for b in BLIND}
    inval = {
        b: mean[(b, "sequence_entropy")] * mean[(b, "invalid_entropy_share")] - seq_g * share_g
        for b in BLIND
    }
    eff_gain = mean[("VEPO", "effective_entropy")] - mean[("GRPO", "effective_entropy")]
    note = "; ".join(
        f"{b}: entropy {rises[b]:+.3f} nats (noise floor {floors[b]:.3f}), invalid part "
        f"{inval[b]:+.3f}"
        for b in BLIND
    )
    note += f"; VEPO effective entropy {eff_gain:+.3f} nats vs GRPO"
    # NaN rises or floors fail the test too: `not rise > floor` is True for NaN
    flat = [b for b in BLIND if not rises[b] > floors[b]]
    undefined = [b for b in BLIND if b not in flat and math.isnan(inval[b])]
    if flat or undefined:
        why = (
            f"{', '.join(flat)} did not raise sequence entropy above the noise floor"
            if flat
            else f"invalid-entropy share undefined for {', '.join(undefined)}"
        )
        return Claim(statement, metric, None, target, False, f"not measured: {why}; {note}")
    worst = min(inval[b] / rises[b] for b in BLIND)  # finite: every rise > floor >= 0
    return Claim(statement, metric, worst, target, bool(worst > 0.5 and eff_gain > 0), note)


def _pass1_claim(a: np.ndarray, b: np.ndarray) -> Claim:
    """VEPO's pass@1 (``a``, per seed) not worse than GRPO's (``b``) beyond noise: the upper end
    of the paired bootstrap CI >= 0. Not measured with one seed (no interval) or when neither
    arm solves anything on any seed (0 vs 0 says nothing about either method)."""
    statement = "VEPO's pass@1 is not worse than GRPO's beyond noise"
    metric = "pass@1 VEPO - GRPO (mean over seeds, 95% bootstrap CI)"
    diff = float(np.mean(a - b))
    if len(a) < 2:
        why = "one seed gives no interval"
    elif not (np.any(a > 0) or np.any(b > 0)):
        why = f"pass@1 is 0 for VEPO and GRPO on all {len(a)} seeds (positive control)"
    else:
        cmp = paired_comparison(a, b, seed=0)
        lo, hi = cmp.ci.low, cmp.ci.high
        note = f"CI [{lo:.3f}, {hi:.3f}] over {len(a)} seeds (few seeds: a wide interval)"
        return Claim(statement, metric, diff, "CI upper bound >= 0", bool(hi >= 0), note)
    note = f"not measured: {why}; mean difference {diff:+.3f}"
    return Claim(statement, metric, None, "CI upper bound >= 0", False, note)


def _plot_curves(runs: list[dict[str, Any]]) -> Any:
    keys = [("reward", "training reward"), ("entropy/effective_entropy", "effective entropy (nats)"),
            ("entropy/sequence_entropy", "sequence entropy (nats)"),
            ("entropy/invalid_entropy_share", "invalid share of entropy")]  # fmt: skip
    fig, axes = new_figure(1, 4, size=(16, 3.6))
    for ax, (key, label) in zip(axes, keys, strict=True):
        for m in METHODS:
            hs = [r["history"] for r in runs if r["method"] == m]
            n = min(len(h) for h in hs)
            if n == 0:
                continue
            y = np.nanmean([[float(h[i].get(key, math.nan)) for i in range(n)] for h in hs], 0)
            w = max(1, n // 10)
            smooth = np.convolve(y, np.ones(w) / w, mode="valid")
            ax.plot(np.arange(len(smooth)) + w, smooth, label=m)
        ax.set(xlabel="RL step", title=label)
    axes[0].legend(fontsize=7)
    return fig


def _plot_pass(summary: list[dict[str, Any]], ks: tuple[int, ...]) -> Any:
    fig, (ax1, ax2) = new_figure(1, 2, size=(11, 3.8))
    for row in summary:
        ax1.plot(ks, [row[f"pass@{k}"] for k in ks], marker="o", label=row["method"])
    ax1.set(xscale="log", xlabel="k", ylabel="pass@k", title="pass@k on the RL problems")
    ax1.legend(fontsize=7)
    names = [r["method"] for r in summary]
    ax2.barh(names, [r["distinct_valid"] for r in summary])
    ax2.set(xlabel="distinct valid solutions per problem (16 samples)")
    return fig


__all__ = ["SCALES", "Scale", "reproduce"]
