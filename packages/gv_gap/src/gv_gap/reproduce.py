"""``reproduce``: generation and verification of the same facts through three training phases.

Per architecture and seed (:func:`gv_gap.run_gv`): acquisition from scratch on a World's format
split (target facts only as statements), continual learning on new subjects from saturation + N
epochs, and updating to the facts' later values with and without replay; every epoch evaluated.
Claims (targets are ours; the abstract gives no numbers):

1. verification first: t_V < t_G in every seed, and at the epoch generation is half learned more
   facts are verified-not-generated than generated-not-verified (exact binomial test);
2. matched control: verification still leads generation at rank <= 3 and 3-option multiple choice;
3. robustness: after continual learning, ver/ver0 − gen/gen0 >= 10 points, per N (bootstrap CI);
4. multi-verse: old and new values both accepted for >= 20% of updated facts at some epoch, more
   than still generate the old value, with and without replay.

Our models read log-probs (P(True) vs P(False), greedy answers); the paper's reason before answering.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np

from gv_gap.curves import LearningTime, discordance_test, learning_time, retention_gap
from gv_gap.measure import GVResult, two_by_two
from gv_gap.phases import GVConfig, GVRun, run_gv
from paper_common import (
    Claim,
    Control,
    Report,
    Stopwatch,
    check_scale,
    map_jobs,
    new_figure,
    pin_threads,
    write_report,
)
from paper_common.device import pinned_threads
from paper_common.stats import (
    bootstrap_ci,
    extreme_interval,
    median_bounds,
    proportion_interval,
    t_interval,
)

__all__ = ["PAPER_SETTINGS", "SCALES", "reproduce"]

log = logging.getLogger(__name__)

#: the paper's own training recipe (factgap), kept for a machine that can fine-tune its models
PAPER_SETTINGS: dict[str, Any] = {
    "models": [
        "google/gemma-3-4b-it",
        "google/gemma-3-12b-it",
        "meta-llama/Llama-3.2-3B-Instruct",
        "meta-llama/Llama-3.2-11B-Vision-Instruct",
        "Qwen/Qwen3-4B",
        "Qwen/Qwen3-14B",
        "microsoft/Phi-4-mini-instruct",
        "microsoft/phi-4",
    ],
    "acquisition": {"optimizer": "AdamW", "lr": 5e-6, "schedule": "constant", "warmup": 0.05,
                    "weight_decay": 0.05, "batch_size": 8, "epochs": 20},
    "updating": {"lr": 2.5e-6, "from_epoch": 5, "epochs": 20},
    "continual": {"lr": 1e-6, "schedule": "cosine", "data": "1,000 T-REx triplet texts",
                  "offsets": [0, 3, 6, 12]},
    "inference": {"temperature": 0.3, "prompts": "generative_response + double_critic, reasoning"},
}  # fmt: skip

SCALES: dict[str, dict[str, Any]] = {
    "smoke": {
        "seeds": [0],
        "workers": 1,
        "configs": {
            "llama-d32-L2": GVConfig(
                d_model=32, n_people=16, n_cities=6, n_companies=4, n_countries=3,
                n_new_people=8, n_new_companies=2, epochs=4, continual_offsets=(0, 1),
                continual_epochs=2, update_epochs=2, song_samples=2, format_eval=8,
            ),
        },
    },
    "quick": {
        "seeds": [0, 1, 2],
        "workers": 2,
        "configs": {
            "llama-d64-L2": GVConfig(epochs=24, continual_epochs=12, update_epochs=12),
        },
    },
    "full": {
        "seeds": [0, 1, 2],
        "workers": 2,
        "configs": {
            f"{arch}-d{d}-L{n}": GVConfig(
                arch=arch, d_model=d, n_layers=n, n_people=150, n_cities=24, n_companies=20,
                n_countries=8, n_new_people=100, n_new_companies=16, epochs=80,
                continual_offsets=(0, 3, 6, 12), continual_epochs=30, update_epochs=20,
            )
            for arch in ("gpt2", "llama")
            for d, n in ((64, 2), (128, 4))
        },
    },
}  # fmt: skip

_METRICS = ("gen_acc", "gen_rank3", "mc_acc", "ll_acc", "ver_acc", "balanced_acc")
#: the headline verification curve: per-prompt balanced accuracy, as factgap reports it (the mean
#: of the accuracy on the answer's prompts and on the controls' prompts); ``ver_acc``, the per-fact
#: six-way conjunction, is secondary
VER = "balanced_acc"


def _job(args: tuple[str, GVConfig, int, int]) -> dict[str, Any]:
    name, config, seed, _workers = args
    # one thread in a worker and in this process alike, so a seed's run does not depend on workers
    with pinned_threads(1, torch=True):
        run = run_gv(config, seed, progress=False)
    run.checkpoints.clear()
    return {"name": name, "seed": seed, "run": run}


def _times(run: GVRun) -> dict[str, LearningTime]:
    acq = run.curves["acquisition"]
    out = {m: learning_time([r[m] for r in acq]) for m in _METRICS}
    out["half_gen"] = learning_time([r["gen_acc"] for r in acq], fraction=0.5)
    return out


def _mean_curve(runs: list[GVRun], phase: str, metric: str) -> np.ndarray:
    return np.mean([r.curve(phase, metric) for r in runs], axis=0)


def _before(a: LearningTime, b: LearningTime) -> bool | None:
    """Is ``a`` learned before ``b``? Censored times are lower bounds (:meth:`Bounds.less`):
    ``None`` (undecided) when they leave it open, e.g. both censored."""
    return a.bounds.less(b.bounds)


def _analyse(name: str, runs: list[GVRun]) -> dict[str, Any]:
    seeds_rows, disc_rows, times = [], [], []
    for run in runs:
        t = _times(run)
        times.append(t)
        row: dict[str, Any] = {"config": name, "seed": run.seed}
        row.update({f"t_{m}": t[m].value for m in _METRICS})
        row["half_gen"] = t["half_gen"].value
        # a censored time is NaN above; here its lower bound and why
        row["censored"] = ", ".join(f"{m} {v}" for m, v in t.items() if v.censored)
        row["saturation"] = run.info["saturation_epoch"]
        seeds_rows.append(row)
        acq = run.results["acquisition"]
        half = t["half_gen"]
        # pre-declared: the epoch generation is half learned; the last epoch if it never was
        epoch = int(half.epoch) if not half.censored else len(acq) - 1
        res = acq[epoch]
        d = discordance_test(res.gen_ok, res.ver_ok)
        disc_rows.append(
            {"config": name, "seed": run.seed, "epoch": epoch,
             "half_gen_censored": half.censored, **two_by_two(res.gen_ok, res.ver_ok),
             "ver_only": d.ver_only, "gen_only": d.gen_only, "p_value": d.p_value}
        )  # fmt: skip
    continual = {}
    phases = [p for p in runs[0].curves if p.startswith("continual")]
    for phase in sorted(phases, key=lambda p: int(p.split("+")[1])):
        # a seed whose saturation + N is past the acquisition budget started from the last
        # checkpoint: it does not measure this offset, so it is left out (and counted)
        kept = [r for r in runs if not r.info.get(f"{phase}_clamped", False)]
        row = {"config": name, "phase": phase, "seeds": len(kept), "clamped": len(runs) - len(kept)}
        continual[phase] = {**row, **_retention(kept, phase)}
    updating, counts = {}, {}
    for phase in [p for p in ("updating", "updating+replay") if p in runs[0].curves]:
        mv = _mean_curve(runs, phase, "multiverse")
        old = _mean_curve(runs, phase, "gen_old")
        k = int(np.argmax(mv))
        # per-fact multi-verse at the peak and before the update (epoch 0), pooled over seeds
        counts[phase] = (
            int(sum(r.results[phase][k].multiverse.sum() for r in runs)),
            int(sum(r.results[phase][k].multiverse.size for r in runs)),
            int(sum(r.results[phase][0].multiverse.sum() for r in runs)),
        )
        updating[phase] = {
            "config": name,
            "phase": phase,
            "peak_epoch": k,
            "multiverse": float(mv[k]),
            "gen_old_at_peak": float(old[k]),
            "new_accept_end": float(_mean_curve(runs, phase, "new_accept")[-1]),
            "old_accept_end": float(_mean_curve(runs, phase, "old_accept")[-1]),
            "gen_new_end": float(_mean_curve(runs, phase, "gen_acc")[-1]),
            "gen_old_end": float(old[-1]),
            "ll_new_end": float(_mean_curve(runs, phase, "ll_acc")[-1]),
            "ll_multiverse_start": float(_mean_curve(runs, phase, "ll_multiverse")[0]),
            "ll_multiverse_max": float(_mean_curve(runs, phase, "ll_multiverse").max()),
        }
    return {"seeds": seeds_rows, "times": times, "discordance": disc_rows,
            "continual": continual, "updating": updating, "multiverse_counts": counts}  # fmt: skip


def _retention(runs: list[GVRun], phase: str) -> dict[str, Any]:
    """Start and end rates and the retention gaps of one continual phase over ``runs`` (NaN when
    no run is left)."""
    metrics = (
        ("gen_acc", "gen"),
        ("balanced_acc", "ver"),
        ("ver_acc", "conjunction"),
        ("ll_acc", "ll"),
    )
    keys = [f"{label}_{when}" for _, label in metrics for when in ("start", "end")]
    gaps = ("retention_gap", "ci_low", "ci_high", "dropped", "ll_retention_gap", "ll_ci_low",
            "ll_ci_high", "ll_dropped")  # fmt: skip
    if not runs:
        return dict.fromkeys([*keys, *gaps], float("nan"))
    first = [r.results[phase][0] for r in runs]
    last = [r.results[phase][-1] for r in runs]

    def cat(res: list[Any], attr: str) -> np.ndarray:
        return np.concatenate([getattr(x, attr) for x in res])

    # the headline verification rate is per-prompt balanced accuracy, whose chance level is 0.5:
    # retained is what stays above chance (ours), (b_end − 0.5) / (b_start − 0.5), as
    # generation's chance level is 0
    above = [np.concatenate([x.item_balanced() - 0.5 for x in res]) for res in (first, last)]
    ver = retention_gap(cat(first, "gen_ok"), cat(last, "gen_ok"), above[0], above[1])
    ll = retention_gap(
        cat(first, "gen_ok"), cat(last, "gen_ok"), cat(first, "ll_ok"), cat(last, "ll_ok")
    )
    summaries = {"start": [x.summary() for x in first], "end": [x.summary() for x in last]}
    out: dict[str, Any] = {}
    for metric, label in metrics:
        for when, rows in summaries.items():
            out[f"{label}_{when}"] = float(np.mean([x[metric] for x in rows]))
    return {**out, **dict(zip(gaps, (*ver, *ll), strict=True))}


@pin_threads(torch=True)
def reproduce(
    scale: str = "quick", seed: int = 0, out_dir: str | os.PathLike[str] | None = None
) -> Report:
    """Run the experiment at ``scale`` and return (and, with ``out_dir``, write) the report."""
    check_scale(scale)
    cfg = SCALES[scale]
    watch = Stopwatch()
    seeds = [seed + s for s in cfg["seeds"]]
    jobs = [(n, c, s, cfg["workers"]) for n, c in cfg["configs"].items() for s in seeds]
    done = map_jobs(_job, jobs, workers=min(cfg["workers"], len(jobs)))
    watch.lap("training")
    runs: dict[str, list[GVRun]] = {}
    for d in done:
        runs.setdefault(d["name"], []).append(d["run"])
    analysis = {name: _analyse(name, rs) for name, rs in runs.items()}
    watch.lap("analysis")
    report = Report(
        package="gv_gap",
        title="The factual generation-verification gap through acquisition, continual learning "
        "and updating",
        scale=scale,
        seed=seed,
    )
    _claims(report, runs, analysis)
    _tables(report, runs, analysis)
    _figures(report, runs, analysis)
    watch.lap("report")
    report.add_table("runtime", watch.laps)
    report.runtime_s = watch.elapsed_s
    report.notes = _notes(cfg, runs)
    if out_dir is not None:
        write_report(report, out_dir)
    return report


# ============================================================================ claims
#: pre-declared: the True/False format counts as learned when the balanced accuracy on the trained
#: format facts is >= 0.75 over its whole interval (0.5 is chance)
FORMAT_MIN = 0.75


def _item_balanced(res: GVResult) -> np.ndarray:
    """Each fact's balanced per-prompt verification accuracy (:meth:`GVResult.item_balanced`):
    their mean is ``res.summary()["balanced_acc"]``."""
    return res.item_balanced()


def _model(runs: dict[str, list[GVRun]]) -> str:
    """Which model the claims ran on, per config."""
    return ", ".join(f"{name}: {rs[0].info.get('model', name)}" for name, rs in runs.items())


def _format_control(groups: dict[str, list[GVRun]]) -> Control:
    """Positive control: the True/False format is learned on the trained format facts at the end of
    acquisition, in every config (the smallest config's 95% bootstrap interval over facts, pooled
    over seeds). Without it no verification claim can be tested."""
    cis = []
    for rs in groups.values():
        scores = [_item_balanced(r.format_result) for r in rs if r.format_result is not None]
        x = np.concatenate(scores) if scores else np.zeros(0)
        if x.size < 2:
            return Control.absent("positive", "format facts evaluated (GVConfig.format_eval >= 2)")
        cis.append(bootstrap_ci(x, seed=0))
    ci = extreme_interval(cis, largest=False)
    where = "" if len(cis) == 1 else " (the lowest config)"
    return Control.positive(
        f"True/False format learned: balanced accuracy on the trained format facts{where}, "
        "95% bootstrap over facts pooled over seeds",
        ci.estimate,
        ">=",
        FORMAT_MIN,
        ci,
    )


def _lead(
    first: list[LearningTime], later: list[list[LearningTime]]
) -> tuple[float | None, tuple[float, float] | None]:
    """How many epochs ``first`` leads the earliest of ``later`` per seed (``later[k][i]``: the
    k-th other curve of seed ``i``), censored times as lower bounds: per seed the lead lies in
    [min_k(other.low) − first.high, min_k(other.high) − first.low]. The interval is the 95%
    t-interval over seeds of the lows (its low end) and of the highs (its high end): an infinite
    end stays infinite. The value is the mean lead when no time is censored. ``None`` with < 2 seeds.
    """
    lows = np.array(
        [min(o[i].bounds.low for o in later) - f.bounds.high for i, f in enumerate(first)]
    )
    highs = np.array(
        [min(o[i].bounds.high for o in later) - f.bounds.low for i, f in enumerate(first)]
    )
    if lows.size < 2:
        return None, None

    def end(x: np.ndarray, side: str) -> float:
        if not np.all(np.isfinite(x)):
            return float(-np.inf if side == "low" else np.inf)
        return float(getattr(t_interval(x), side))

    exact = bool(np.all(lows == highs))
    return (float(lows.mean()) if exact else None), (end(lows, "low"), end(highs, "high"))


def _lead_claim(
    statement: str,
    metric: str,
    v: list[LearningTime],
    others: list[list[LearningTime]],
    positive: Control,
    note: str,
) -> Claim:
    """Claims 1 and 2: verification leads the other curve(s) by >= 1 epoch over seeds; negative
    control: the same rule with the arms swapped (the others lead verification)."""
    value, interval = _lead(v, others)
    if interval is None:
        return Claim.decide(statement, metric, None, None, ">=", 1.0, positive=positive,
                            negative=Control.absent("negative", "swapped arms need >= 2 seeds"),
                            method="missing: one seed; needs >= 2 (3 at quick) replicate seeds",
                            note=note)  # fmt: skip
    # swapped arms: each other curve leads verification, i.e. min over k of (t_V − t_k)
    swapped = [_lead(o, [v])[1] for o in others]
    low = min(s[0] for s in swapped if s is not None)
    high = min(s[1] for s in swapped if s is not None)
    negative = Control.negative(
        "swapped arms (the other curve leads verification)", None, (low, high)
    )
    return Claim.decide(
        statement, metric, value, interval, ">=", 1.0, positive=positive, negative=negative,
        method="95% t-interval over seeds of the per-seed lead's lower (and upper) bound; a "
        "censored time leaves that end infinite",
        note="1 epoch is the smallest lead we count (times are in whole epochs); " + note,
    )  # fmt: skip


def _share_claim(
    statement: str,
    metric: str,
    hits: int,
    trials: int,
    threshold: float,
    positive: Control,
    negative: Control,
    method: str,
    note: str,
) -> Claim:
    """A share decided on its Clopper-Pearson interval (``None`` when nothing was counted)."""
    ci = proportion_interval(hits, trials) if trials else None
    return Claim.decide(statement, metric, None if ci is None else ci.estimate, ci, ">=",
                        threshold, positive=positive, negative=negative,
                        method=method if ci else "missing: nothing counted", note=note)  # fmt: skip


def _claims(report: Report, runs: dict[str, list[GVRun]], analysis: dict[str, Any]) -> None:
    times = [(r, t) for a in analysis.values() for r, t in zip(a["seeds"], a["times"], strict=True)]
    fmt = _format_control(runs)
    censored = (
        f"censored: t_V in {sum(bool(t[VER].censored) for _, t in times)}, t_G in "
        f"{sum(bool(t['gen_acc'].censored) for _, t in times)} of {len(times)} seeds; "
    )
    ts = [t for _, t in times]
    report.add_claim(_lead_claim(
        "Verification of a fact is learned before its generation",
        "t_G − t_V (epochs; t = first epoch at 80% of the rise to the plateau, censored when never "
        "learned or still rising; per-prompt balanced verification accuracy vs greedy "
        "generation), seeds of every config",
        [t[VER] for t in ts], [[t["gen_acc"] for t in ts]], fmt,
        f"model: {_model(runs)}; " + censored
        + "; ".join(f"seed {r['seed']}: t_V {t[VER]}, t_G {t['gen_acc']} (secondary, six-way "
                    f"conjunction per fact: t {t['ver_acc']})" for r, t in times)
        + ". Log-prob readout, not the paper's reasoning answers.",
    ))  # fmt: skip
    disc = [r for a in analysis.values() for r in a["discordance"]]
    ver_only, gen_only = sum(r["ver_only"] for r in disc), sum(r["gen_only"] for r in disc)
    n = ver_only + gen_only
    swap = proportion_interval(gen_only, n) if n else None
    report.add_claim(_share_claim(
        "Per fact, verified-not-generated outnumbers generated-not-verified while facts are "
        "being learned",
        "share of discordant facts that are verified-not-generated (verified: the six-way "
        "conjunction per fact, secondary; at the epoch generation is half learned; pooled over "
        "seeds)",
        ver_only, n, 0.6, fmt,
        Control.negative("swapped arms (share generated-not-verified)",
                         None if swap is None else swap.estimate, swap),
        "95% Clopper-Pearson over discordant facts",
        f"model: {_model(runs)}; restated: the paper's binomial test asks > 0.5; 0.6 (ver-only 1.5x gen-only) is the "
        "smallest lead we count, so a null is refuted; "
        + "; ".join(
            f"seed {r['seed']} epoch {r['epoch']}"
            + (f" (the last: generation's half time censored, {r['half_gen_censored']})"
               if r["half_gen_censored"] else "")
            + f": ver-only {r['ver_only']}, gen-only {r['gen_only']}, p {r['p_value']:.3g}"
            for r in disc
        ),
    ))  # fmt: skip
    detail = "; ".join(
        f"seed {r['seed']}: t_V {t[VER]}, t_G@3 {t['gen_rank3']}, t_MC {t['mc_acc']}, "
        f"t_LL {t['ll_acc']}, t_conjunction {t['ver_acc']}"
        for r, t in times
    )
    detail = f"model: {_model(runs)}; " + detail
    report.add_claim(_lead_claim(
        "Verification still leads against matched generation (answer in the top 3 tokens, "
        "3-option multiple choice)",
        "min(t_G@3, t_MC) − t_V (epochs, censored times as lower bounds; t_V from per-prompt "
        "balanced verification accuracy), seeds of every config",
        [t[VER] for t in ts], [[t["gen_rank3"] for t in ts], [t["mc_acc"] for t in ts]],
        fmt, detail,
    ))  # fmt: skip
    for name, a in analysis.items():
        own = _format_control({name: runs[name]})
        for row in a["continual"].values():
            report.add_claim(_continual_claim(row, own, _model({name: runs[name]})))
        for phase, row in a["updating"].items():
            mv, old = row["multiverse"], row["gen_old_at_peak"]
            k, n_facts, k0 = a["multiverse_counts"][phase]
            before = proportion_interval(k0, n_facts) if n_facts else None
            report.add_claim(_share_claim(
                f"After an update the model accepts both the old and the new value "
                f"({row['config']}, {row['phase']})",
                "multi-verse share of updated facts at the peak update epoch (pooled over seeds)",
                k, n_facts, 0.2, own,
                Control.negative("before the update (epoch 0: the new value not yet trained)",
                                 None if before is None else before.estimate, before),
                "95% Clopper-Pearson over updated facts and seeds (peak epoch chosen on the mean "
                "curve, so optimistic)",
                f"model: {_model(runs)}; epoch {row['peak_epoch']}: mean multi-verse {mv:.2f}, old-value generation "
                f"{old:.2f} (the paper also asks multi-verse > old generation: "
                f"{'yes' if mv > old else 'no'}); at the end new "
                f"accepted {row['new_accept_end']:.2f}, old accepted {row['old_accept_end']:.2f}, "
                f"generation new {row['gen_new_end']:.2f} / old {row['gen_old_end']:.2f}; "
                f"likelihood multi-verse (both beat the controls) peaks at "
                f"{row['ll_multiverse_max']:.2f} ({row['ll_multiverse_start']:.2f} before the "
                "update)",
            ))  # fmt: skip


def _continual_claim(row: dict[str, Any], positive: Control, model: str = "") -> Claim:
    """Claim 3 for one continual offset from its ``continual`` table row: the retention gap's
    bootstrap interval against >= 0.1; negative control: the arms swapped (gen − ver)."""
    n = row["phase"].split("+")[1]
    statement = (
        f"Verification survives continual learning better than generation "
        f"({row['config']}, from saturation + {n} epochs)"
    )
    metric = (
        "(ver − 0.5)/(ver0 − 0.5) − gen/gen0 after continual training (ver: per-prompt balanced "
        "verification accuracy, its chance level 0.5 removed; per-fact rates pooled over seeds)"
    )
    clamped = (
        f"{row['clamped']} seed(s) left out: saturation + {n} is past the acquisition budget; "
        if row["clamped"]
        else ""
    )
    if not row["seeds"] or np.isnan(row["retention_gap"]):
        why = (
            f"every seed's saturation + {n} is past the acquisition budget (the branch would "
            "start from the last checkpoint)"
            if not row["seeds"]
            else f"{'verification' if row['ver_start'] <= 0.5 else 'generation'} starts at chance, "
            "nothing to retain"
        )
        return Claim.decide(statement, metric, None, None, ">=", 0.1, positive=positive,
                            negative=Control.absent("negative", f"swapped arms: {why}"),
                            method=f"missing: not measured: {why}",
                            note=f"not measured: {why}; {clamped}")  # fmt: skip
    ll = (
        f"likelihood verifier {row['ll_start']:.2f} → {row['ll_end']:.2f}, its retention gap "
        f"{row['ll_retention_gap']:.2f} [{row['ll_ci_low']:.2f}, {row['ll_ci_high']:.2f}]"
    )
    rates = (
        f"gen {row['gen_start']:.2f} → {row['gen_end']:.2f}, ver {row['ver_start']:.2f} → "
        f"{row['ver_end']:.2f} (balanced), six-way conjunction {row['conjunction_start']:.2f} → "
        f"{row['conjunction_end']:.2f}"
    )
    if model:
        rates = f"model: {model}; {rates}"
    return Claim.decide(
        statement, metric, row["retention_gap"], (row["ci_low"], row["ci_high"]), ">=", 0.10,
        positive=positive,
        negative=Control.negative("swapped arms (gen/gen0 − ver/ver0)", -row["retention_gap"],
                                  (-row["ci_high"], -row["ci_low"])),
        method=f"95% bootstrap over facts pooled over seeds ({1 - row['dropped']:.0%} of "
        "resamples where both start above 0)",
        note=f"{clamped}{rates}; {ll}",
    )  # fmt: skip


# ============================================================================ tables
def _tables(report: Report, runs: dict[str, list[GVRun]], analysis: dict[str, Any]) -> None:
    report.add_table("learning_epochs", [r for a in analysis.values() for r in a["seeds"]])
    report.add_table("discordance", [r for a in analysis.values() for r in a["discordance"]])
    report.add_table("continual", [r for a in analysis.values() for r in a["continual"].values()])
    report.add_table("updating", [r for a in analysis.values() for r in a["updating"].values()])
    curve_rows, song_rows, leak_rows = [], [], []
    for name, rs in runs.items():
        for phase in rs[0].curves:
            keys = [k for k in (*_METRICS, "multiverse", "ll_multiverse", "gen_old", "leak", "format_gen_acc",
                                "format_balanced_acc") if k in rs[0].curves[phase][0]]  # fmt: skip
            for e in range(len(rs[0].curves[phase])):
                curve_rows.append(
                    {"config": name, "phase": phase, "epoch": e,
                     **{k: float(np.mean([r.curves[phase][e][k] for r in rs])) for k in keys}}
                )  # fmt: skip
            song = [r.song[phase] for r in rs if phase in r.song]
            if song:
                song_rows.append({"config": name, "phase": phase, **_song_means(song)})
            if "leak" in rs[0].curves[phase][0]:
                leak_rows.append(
                    {"config": name, "phase": phase,
                     "leak_end": float(np.mean([r.curves[phase][-1]["leak"] for r in rs])),
                     "leak_max": float(np.max([r.curve(phase, "leak").max() for r in rs]))}
                )  # fmt: skip
    report.add_table("curves", curve_rows)
    report.add_table("song_gap", song_rows)
    report.add_table("leak", leak_rows)
    report.add_table(
        "setup",
        [{"config": n, "seed": r.seed, **{k: v for k, v in r.info.items() if k != "config"}}
         for n, rs in runs.items() for r in rs],
    )  # fmt: skip


def _song_means(song: list[dict[str, float]]) -> dict[str, float]:
    """Mean over seeds of each Song-gap number, over the seeds where it is defined (the relative
    gap is NaN at accuracy 1), and ``seeds_<key>``: how many seeds that is."""
    out: dict[str, float] = {}
    for k in song[0]:
        v = np.array([s[k] for s in song], dtype=float)
        ok = np.isfinite(v)
        out[k] = float(v[ok].mean()) if ok.any() else float("nan")
        out[f"seeds_{k}"] = int(ok.sum())
    return out


# ============================================================================ figures
_LABELS = {
    "gen_acc": "generation (greedy)",
    "gen_rank3": "generation, rank ≤ 3",
    "mc_acc": "3-option MC",
    "ll_acc": "likelihood verifier",
    "ver_acc": "verification, six-way conjunction per fact",
    "balanced_acc": "verification, per-prompt balanced (headline)",
}


def _figures(report: Report, runs: dict[str, list[GVRun]], analysis: dict[str, Any]) -> None:
    name = next(iter(runs))
    rs, a = runs[name], analysis[name]
    fig, ax = new_figure(1, 1, size=(6.0, 3.8))
    for m, label in _LABELS.items():
        ax.plot(
            _mean_curve(rs, "acquisition", m),
            label=label,
            lw=2 if m in ("gen_acc", VER) else 1,
        )
    for key, style in (("gen_acc", "-"), (VER, "--")):
        b = median_bounds([t[key].bounds.low for t in a["times"]],
                          [t[key].bounds.high for t in a["times"]])  # fmt: skip
        n_cens = sum(bool(t[key].censored) for t in a["times"])
        label = f"median {'t_G' if 'gen' in key else 't_V'} {b}"
        if n_cens:
            label += f" ({n_cens} of {len(a['times'])} censored)"
        if b.low <= len(rs[0].curves["acquisition"]) - 1:  # a line only inside the budget
            ax.axvline(b.low, color="k", ls=style, lw=0.8, label=label)
    ax.set(xlabel="epoch", ylabel="rate on target facts", ylim=(-0.02, 1.02),
           title=f"Acquisition ({name}, mean of {len(rs)} seeds)")  # fmt: skip
    ax.legend(fontsize=7)
    report.add_figure("acquisition.png", fig)

    fig, ax = new_figure(1, 1, size=(6.0, 3.5))
    keys = ["gen+ver+", "gen+ver-", "gen-ver+", "gen-ver-"]
    shares = np.array([_mean_curve(rs, "acquisition", k) for k in keys])
    ax.stackplot(np.arange(shares.shape[1]), shares, labels=["gen ✓ ver ✓", "gen ✓ ver ✗",
                 "gen ✗ ver ✓", "gen ✗ ver ✗"], alpha=0.85)  # fmt: skip
    ax.set(xlabel="epoch", ylabel="share of target facts", ylim=(0, 1),
           title="Per-fact 2 × 2 table during acquisition")  # fmt: skip
    ax.legend(fontsize=7, loc="center right")
    report.add_figure("two_by_two.png", fig)

    phases = [p for p in rs[0].curves if p.startswith("continual")]
    fig, axes = new_figure(1, max(len(phases), 1), squeeze=False)
    for ax, phase in zip(axes[0], phases, strict=False):
        for m in ("gen_acc", "ver_acc", "balanced_acc", "ll_acc"):
            y = _mean_curve(rs, phase, m)
            ax.plot(y / y[0] if y[0] > 0 else np.full_like(y, np.nan), label=_LABELS[m])
        ax.axhline(1, color="k", lw=0.5)
        ax.set(xlabel="continual epoch", ylabel="retention (value / value at start)",
               title=f"{phase}: retention")  # fmt: skip
        ax.legend(fontsize=7)
    report.add_figure("continual.png", fig)

    phases = [p for p in ("updating", "updating+replay") if p in rs[0].curves]
    fig, axes = new_figure(1, max(len(phases), 1), squeeze=False)
    for ax, phase in zip(axes[0], phases, strict=False):
        mv = _mean_curve(rs, phase, "multiverse")
        x = np.arange(len(mv))
        ax.fill_between(
            x, 0, mv, color="tab:purple", alpha=0.25, label="multi-verse (both accepted)"
        )
        for m, label in (("new_accept", "new value accepted"), ("old_accept", "old value accepted"),
                         ("gen_acc", "generates new"), ("gen_old", "generates old"),
                         ("ll_multiverse", "likelihood: old and new beat controls")):  # fmt: skip
            ls = "-" if "accept" in m else "--" if m.startswith("ll") else ":"
            ax.plot(x, _mean_curve(rs, phase, m), label=label, ls=ls)
        ax.axhline(0.2, color="k", lw=0.5, ls="--")
        ax.set(xlabel="update epoch", ylabel="share of updated facts", ylim=(-0.02, 1.02),
               title=phase)  # fmt: skip
        ax.legend(fontsize=7)
    report.add_figure("updating.png", fig)


def _notes(cfg: dict[str, Any], runs: dict[str, list[GVRun]]) -> str:
    rs = next(iter(runs.values()))
    info = rs[0].info
    last = [r.curves["acquisition"][-1] for r in rs]
    fmt = ""
    if "format_balanced_acc" in last[0]:
        fmt = (
            "At the end of acquisition the format facts (trained on QA and True/False items) are "
            f"generated at {np.mean([x['format_gen_acc'] for x in last]):.2f} and verified at "
            f"balanced accuracy {np.mean([x['format_balanced_acc'] for x in last]):.2f} (mean of "
            "seeds): where that is near 0.5 the True/False format itself was not learned, and "
            "claims about verification of the target facts cannot be tested at this scale. "
        )
    return fmt + (
        "Tiny models trained from scratch on a synthetic World; the paper fine-tunes pretrained "
        "instruct models (its recipe: PAPER_SETTINGS) on fictional facts and reads reasoned "
        "answers at temperature 0.3, we read log-probs (P(' True') vs P(' False') after each claim "
        "in both polarities; greedy answers). "
        f"Setup of the first run: {info['n_targets']} target facts, {info['n_formats']} format "
        f"facts, {info['n_updates']} updated facts, {info['parameters']:,} parameters. "
        f"Configs: {', '.join(cfg['configs'])}; seeds {cfg['seeds']}."
    )
