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

from gv_gap.curves import discordance_test, learning_epoch, retention_gap
from gv_gap.measure import two_by_two
from gv_gap.phases import GVConfig, GVRun, run_gv
from paper_common import (
    Claim,
    Report,
    Stopwatch,
    check_scale,
    map_jobs,
    new_figure,
    pin_threads,
    write_report,
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


def _job(args: tuple[str, GVConfig, int, int]) -> dict[str, Any]:
    name, config, seed, workers = args
    if workers > 1:
        import torch

        torch.set_num_threads(1)
    run = run_gv(config, seed, progress=False)
    run.checkpoints.clear()
    return {"name": name, "seed": seed, "run": run}


def _times(run: GVRun) -> dict[str, float]:
    acq = run.curves["acquisition"]
    out = {f"t_{m}": learning_epoch([r[m] for r in acq]) for m in _METRICS}
    out["half_gen"] = learning_epoch([r["gen_acc"] for r in acq], fraction=0.5)
    return out


def _mean_curve(runs: list[GVRun], phase: str, metric: str) -> np.ndarray:
    return np.mean([r.curve(phase, metric) for r in runs], axis=0)


def _nan_lt(a: float, b: float) -> bool:
    return bool(np.isfinite(a) and (np.isnan(b) or a < b))


def _fmt_t(t: float) -> str:
    return "never" if np.isnan(t) else f"{t:.0f}"


def _analyse(name: str, runs: list[GVRun]) -> dict[str, Any]:
    seeds_rows, disc_rows = [], []
    for run in runs:
        t = _times(run)
        row = {"config": name, "seed": run.seed, **t}
        row["saturation"] = run.info["saturation_epoch"]
        seeds_rows.append(row)
        acq = run.results["acquisition"]
        e = t["half_gen"]
        epoch = int(e) if np.isfinite(e) else len(acq) - 1
        res = acq[epoch]
        d = discordance_test(res.gen_ok, res.ver_ok)
        disc_rows.append(
            {"config": name, "seed": run.seed, "epoch": epoch, **two_by_two(res.gen_ok, res.ver_ok),
             "ver_only": d.ver_only, "gen_only": d.gen_only, "p_value": d.p_value}
        )  # fmt: skip
    continual = {}
    phases = [p for p in runs[0].curves if p.startswith("continual")]
    for phase in sorted(phases, key=lambda p: int(p.split("+")[1])):
        first = [r.results[phase][0] for r in runs]
        last = [r.results[phase][-1] for r in runs]

        def cat(res: list[Any], attr: str) -> np.ndarray:
            return np.concatenate([getattr(x, attr) for x in res])

        value, lo, hi = retention_gap(
            cat(first, "gen_ok"), cat(last, "gen_ok"), cat(first, "ver_ok"), cat(last, "ver_ok")
        )
        ll_value, ll_lo, ll_hi = retention_gap(
            cat(first, "gen_ok"), cat(last, "gen_ok"), cat(first, "ll_ok"), cat(last, "ll_ok")
        )
        summaries = {"start": [x.summary() for x in first], "end": [x.summary() for x in last]}
        row: dict[str, Any] = {"config": name, "phase": phase}
        for metric, label in (("gen_acc", "gen"), ("ver_acc", "ver"), ("balanced_acc", "balanced"),
                              ("ll_acc", "ll")):  # fmt: skip
            for when, rows in summaries.items():
                row[f"{label}_{when}"] = float(np.mean([x[metric] for x in rows]))
        continual[phase] = {
            **row,
            "retention_gap": value,
            "ci_low": lo,
            "ci_high": hi,
            "ll_retention_gap": ll_value,
            "ll_ci_low": ll_lo,
            "ll_ci_high": ll_hi,
        }
    updating = {}
    for phase in [p for p in ("updating", "updating+replay") if p in runs[0].curves]:
        mv = _mean_curve(runs, phase, "multiverse")
        old = _mean_curve(runs, phase, "gen_old")
        k = int(np.argmax(mv))
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
    return {"seeds": seeds_rows, "discordance": disc_rows, "continual": continual,
            "updating": updating}  # fmt: skip


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
    _claims(report, analysis)
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
def _claims(report: Report, analysis: dict[str, Any]) -> None:
    rows = [r for a in analysis.values() for r in a["seeds"]]
    per_config = {
        name: all(_nan_lt(r["t_ver_acc"], r["t_gen_acc"]) for r in a["seeds"])
        for name, a in analysis.items()
    }
    share = float(np.mean([_nan_lt(r["t_ver_acc"], r["t_gen_acc"]) for r in rows]))
    t_summary = "; ".join(
        f"seed {r['seed']}: t_V {_fmt_t(r['t_ver_acc'])}, t_G {_fmt_t(r['t_gen_acc'])}"
        for r in rows
    )
    need = 0.75 if len(per_config) > 1 else 1.0
    report.add_claim(
        Claim(
            "Verification of a fact is learned before its generation (t_V < t_G in every seed)",
            "share of configs where t_V < t_G in every seed (t = first epoch at 80% of the rise "
            "to the plateau; per-fact ver ✓ vs greedy generation)",
            float(np.mean(list(per_config.values()))),
            f">= {need:g}",
            bool(np.mean(list(per_config.values())) >= need),
            f"seed share {share:.2f}; {t_summary}. Log-prob readout, not the paper's reasoning "
            "answers.",
        )
    )
    disc = [r for a in analysis.values() for r in a["discordance"]]
    worst = max(r["p_value"] for r in disc)
    ok = all(r["p_value"] < 0.05 and r["ver_only"] > r["gen_only"] for r in disc)
    report.add_claim(
        Claim(
            "Per fact, verified-not-generated outnumbers generated-not-verified while facts are "
            "being learned",
            "largest one-sided exact binomial p over seeds (discordant facts at the epoch "
            "generation is half learned)",
            worst,
            "< 0.05 in every seed, ver-only > gen-only",
            ok,
            "; ".join(
                f"seed {r['seed']} epoch {r['epoch']}: ver-only {r['ver_only']}, gen-only "
                f"{r['gen_only']}"
                for r in disc
            ),
        )
    )
    matched = [
        _nan_lt(r["t_ver_acc"], r["t_gen_rank3"]) and _nan_lt(r["t_ver_acc"], r["t_mc_acc"])
        for r in rows
    ]
    report.add_claim(
        Claim(
            "Verification still leads against matched generation (answer in the top 3 tokens, "
            "3-option multiple choice)",
            "share of seeds where t_V < t_G@3 and t_V < t_MC",
            float(np.mean(matched)),
            "= 1",
            bool(np.all(matched)),
            "; ".join(
                f"seed {r['seed']}: t_G@3 {_fmt_t(r['t_gen_rank3'])}, t_MC {_fmt_t(r['t_mc_acc'])}, "
                f"t_LL {_fmt_t(r['t_ll_acc'])}, t_balanced {_fmt_t(r['t_balanced_acc'])}"
                for r in rows
            ),
        )
    )
    for a in analysis.values():
        for row in a["continual"].values():
            n = row["phase"].split("+")[1]
            report.add_claim(
                Claim.threshold(
                    f"Verification survives continual learning better than generation "
                    f"({row['config']}, from saturation + {n} epochs)",
                    "ver/ver0 − gen/gen0 after continual training (per-fact rates pooled over seeds)",
                    row["retention_gap"],
                    ">=",
                    0.10,
                    f"95% CI [{row['ci_low']:.2f}, {row['ci_high']:.2f}]; gen {row['gen_start']:.2f}"
                    f" → {row['gen_end']:.2f}, ver {row['ver_start']:.2f} → {row['ver_end']:.2f} "
                    f"(undefined when ver0 = 0); likelihood verifier {row['ll_start']:.2f} → "
                    f"{row['ll_end']:.2f}, its retention gap {row['ll_retention_gap']:.2f} "
                    f"[{row['ll_ci_low']:.2f}, {row['ll_ci_high']:.2f}]",
                )
            )
        for row in a["updating"].values():
            mv, old = row["multiverse"], row["gen_old_at_peak"]
            report.add_claim(
                Claim(
                    f"After an update the model accepts both the old and the new value "
                    f"({row['config']}, {row['phase']})",
                    "peak multi-verse rate over update epochs (mean of seeds)",
                    mv,
                    ">= 0.2 and > old-value generation at that epoch",
                    bool(mv >= 0.2 and mv > old),
                    f"epoch {row['peak_epoch']}: old-value generation {old:.2f}; at the end new "
                    f"accepted {row['new_accept_end']:.2f}, old accepted {row['old_accept_end']:.2f}, "
                    f"generation new {row['gen_new_end']:.2f} / old {row['gen_old_end']:.2f}; "
                    f"likelihood multi-verse (both beat the controls) peaks at "
                    f"{row['ll_multiverse_max']:.2f} ({row['ll_multiverse_start']:.2f} before the "
                    "update)",
                )
            )


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
                song_rows.append(
                    {"config": name, "phase": phase,
                     **{k: float(np.nanmean([s[k] for s in song])) for k in song[0]}}
                )  # fmt: skip
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


# ============================================================================ figures
_LABELS = {
    "gen_acc": "generation (greedy)",
    "gen_rank3": "generation, rank ≤ 3",
    "mc_acc": "3-option MC",
    "ll_acc": "likelihood verifier",
    "ver_acc": "verification (per fact)",
    "balanced_acc": "verification, balanced acc.",
}


def _figures(report: Report, runs: dict[str, list[GVRun]], analysis: dict[str, Any]) -> None:
    name = next(iter(runs))
    rs, a = runs[name], analysis[name]
    fig, ax = new_figure(1, 1, size=(6.0, 3.8))
    for m, label in _LABELS.items():
        ax.plot(
            _mean_curve(rs, "acquisition", m),
            label=label,
            lw=2 if m in ("gen_acc", "ver_acc") else 1,
        )
    for key, style in (("t_gen_acc", "-"), ("t_ver_acc", "--")):
        ts = [r[key] for r in a["seeds"] if np.isfinite(r[key])]
        if ts:
            ax.axvline(float(np.median(ts)), color="k", ls=style, lw=0.8,
                       label=f"median {'t_G' if 'gen' in key else 't_V'}")  # fmt: skip
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
