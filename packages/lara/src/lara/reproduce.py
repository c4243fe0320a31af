"""Reproduce the paper's claims at CPU scale.

``python -m lara reproduce --scale quick`` runs, in one process:

1. the efficiency harness: forward and forward+backward time and peak memory of every method against
   sequence length (causal), softmax through ``scaled_dot_product_attention`` and, as the baseline
   older papers timed against, the explicit ``softmax (naive)`` matrix;
2. decoding: KV cache vs recurrent state size and time per token;
3. the unified distillation protocol on a trained fact LM (``paper_common.lm.fact_lm``): every
   kernelized method gets the same attention-transfer + KL budget; QA accuracy, perplexity and the
   direct attention error on real activations;
4. the estimator check: LARA / LARA++ output error against the number of samples on real activations.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from lara.attention import make_attention
from lara.claims import (
    decoding_check,
    estimator_claim,
    memory_claim,
    quality_gap_claim,
    recovery_claim,
    shrink_claim,
    speed_claim,
    timing_noise,
    wall_claim,
)
from lara.distill import (
    DistillConfig,
    attention_error,
    capture_attention,
    distill,
    greedy_match,
    perplexity,
)
from lara.efficiency import (
    crossovers,
    decoding_sweep,
    efficiency_sweep,
    plot_decoding,
    plot_efficiency,
)
from paper_common import (
    Report,
    Stopwatch,
    check_scale,
    new_figure,
    pin_threads,
    write_report,
)

# the efficiency and decoding sweeps time the CPU (see _sweep_environment); only the distillation
# follows the teacher's device
SWEEP_DEVICE = "cpu"
KERNELIZED = ("performer", "rfa", "cosformer", "linear", "nystrom", "lara", "lara++")
CAUSAL_KERNELIZED = tuple(m for m in KERNELIZED if m != "nystrom")


@dataclass(frozen=True)
class Scale:
    seq_lens: tuple[int, ...]
    backward_lens: tuple[int, ...]
    decode_lens: tuple[int, ...]
    heads: int
    head_dim: int
    repeat: int
    world: dict[str, int]
    teacher_size: str
    teacher_steps: int | None
    distill: DistillConfig
    samples: tuple[int, ...]
    proposals: tuple[int, ...]
    estimator_seeds: int
    extra: dict[str, Any] = field(default_factory=dict)


SCALES = {
    "smoke": Scale(
        (64, 128), (64,), (8, 32), 2, 16, 1,
        {"n_people": 8, "n_cities": 6, "n_companies": 4, "n_countries": 3}, "tiny", 40,
        DistillConfig(transfer_steps=2, finetune_steps=3, batch_size=8), (1, 4), (4, 8), 2,
    ),
    "quick": Scale(
        (256, 512, 1024, 2048, 4096, 8192), (256, 1024, 4096), (64, 256, 1024, 4096), 4, 64, 3,
        {"n_people": 40, "n_cities": 12, "n_companies": 10, "n_countries": 4}, "tiny", 1000,
        DistillConfig(transfer_steps=60, finetune_steps=200, batch_size=32), (1, 4, 16, 64),
        (4, 16, 64), 2,
    ),
    "full": Scale(
        (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072), (1024, 4096, 16384, 32768),
        (256, 1024, 4096, 16384, 65536), 16, 128, 5,
        {"n_people": 200, "n_cities": 40, "n_companies": 30, "n_countries": 10}, "small", None,
        DistillConfig(transfer_steps=1000, finetune_steps=3000, batch_size=64, lr=3e-4),
        (1, 2, 4, 8, 16, 32, 64, 128, 256), (4, 8, 16, 32, 64, 128, 256), 10,
    ),
}  # fmt: skip


def _efficiency_methods(heads: int, head_dim: int, max_len: int) -> dict[str, Any]:
    mods = {
        "softmax": make_attention("softmax", head_dim, heads),
        "softmax (naive)": make_attention("softmax", head_dim, heads, form="quadratic"),
    }
    for name in CAUSAL_KERNELIZED:
        kw = {"max_len": max_len} if name == "cosformer" else {}
        mods[name] = make_attention(name, head_dim, heads, **kw)
    return mods


def _win_fraction(rows: list[dict], baseline: str, metric: str) -> tuple[float, int]:
    """Share of (kernelized method, length) pairs where ``baseline`` is lower on ``metric``, over
    the pairs where both were measured (a skipped run is NaN: left out, not counted as a loss);
    NaN when no pair was measured."""
    base = {r["seq_len"]: r[metric] for r in rows if r["method"] == baseline}
    wins = [
        base[r["seq_len"]] < r[metric]
        for r in rows
        if r["method"] in CAUSAL_KERNELIZED
        and math.isfinite(r[metric])
        and math.isfinite(base.get(r["seq_len"], math.nan))
    ]
    return (float(np.mean(wins)) if wins else math.nan), len(wins)


def _sweep_environment(threads: int) -> str:
    """Where the efficiency sweeps ran, for the claims' notes: always the CPU (they are called
    with ``device=SWEEP_DEVICE``), whatever accelerator the distillation may use."""
    return f"{SWEEP_DEVICE.upper()}, {threads} torch thread{'s' if threads != 1 else ''}"


def _fraction(acc: float, teacher_acc: float) -> float:
    """``acc / teacher_acc``; NaN when the teacher answers nothing (0/0 or x/0 is no fraction)."""
    return acc / teacher_acc if teacher_acc > 0 else math.nan


def _ratio(num: float, den: float) -> float:
    """``num / den`` for two measured times; NaN unless both are finite and ``den > 0``."""
    return num / den if math.isfinite(num) and math.isfinite(den) and den > 0 else math.nan


def _slope(xs: list[float], ys: list[float]) -> float:
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def _estimator_rows(
    teacher: Any, tok: Any, texts: list[str], cfg: Scale
) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """Output error of LARA++ against samples per proposal, LARA and Performer against features,
    on the teacher's real queries/keys/values (every layer), averaged over seeds; and per method
    the errors per (seed, layer) record, one row per sample count."""
    from lara.distill import _batch

    batch = _batch(tok, texts, 64, next(teacher.parameters()).device)
    with torch.no_grad(), capture_attention(teacher) as rec:
        teacher(**batch)
    valid = batch["attention_mask"].bool()[:, None, :, None]
    rows, records = [], {}
    specs = [("lara++", s, {"num_proposals": 16, "samples_per_proposal": s}) for s in cfg.samples]
    specs += [("lara", c, {"num_proposals": c}) for c in cfg.proposals]
    specs += [("performer", c, {"num_features": c}) for c in cfg.proposals]
    for name, n_samples, kw in specs:
        errs = []
        for seed in range(cfg.estimator_seeds if name != "lara" else 1):  # LARA is deterministic
            for r in rec:
                kern = make_attention(
                    name, r["q"].shape[-1], r["q"].shape[1], seed=seed, **kw
                ).eval()
                kern.calibrate(r["q"], r["k"])
                with torch.no_grad():
                    out = kern(
                        r["q"], r["k"], r["v"], True, key_mask=r["key_mask"], scale=r["scale"]
                    )
                sel = valid.expand_as(out)
                errs.append(float((out - r["out"])[sel].norm() / r["out"][sel].norm()))
        rows.append({"method": name, "samples": n_samples, "rel_error": float(np.mean(errs))})
        records.setdefault(name, []).append(errs)
    return rows, {k: np.array(v) for k, v in records.items()}


@pin_threads(torch=True)
def reproduce(
    scale: str = "quick", seed: int = 0, out_dir: str | os.PathLike[str] | None = None
) -> Report:
    """Run the experiment at ``scale`` and return (and, with ``out_dir``, write) the report."""
    from paper_common.facts import World
    from paper_common.lm import fact_lm

    check_scale(scale)
    cfg = SCALES[scale]
    torch.manual_seed(seed)
    watch = Stopwatch()
    report = Report(package="lara", title="Kernelized attention vs softmax/FlashAttention, and LARA++",
                    scale=scale, seed=seed)  # fmt: skip
    threads = torch.get_num_threads()

    # ---------------------------------------------------------------- 1. efficiency
    mods = _efficiency_methods(cfg.heads, cfg.head_dim, max(cfg.seq_lens))
    common = {"heads": cfg.heads, "head_dim": cfg.head_dim, "repeat": cfg.repeat, "progress": False}
    fwd = efficiency_sweep(mods, cfg.seq_lens, causal=True, device=SWEEP_DEVICE, **common)
    bwd = efficiency_sweep(
        mods,
        cfg.backward_lens,
        causal=True,
        backward=True,
        max_seconds=30,
        device=SWEEP_DEVICE,
        **common,
    )
    report.add_table("efficiency_forward", fwd)
    report.add_table("efficiency_forward_backward", bwd)
    report.add_figure("efficiency_forward", plot_efficiency(fwd, "causal forward"))
    report.add_figure(
        "efficiency_forward_backward", plot_efficiency(bwd, "causal forward + backward")
    )
    cross = {
        "time": crossovers(fwd, "softmax", "time_s"),
        "memory": crossovers(fwd, "softmax", "peak_mib"),
        "time vs naive": crossovers(fwd, "softmax (naive)", "time_s"),
    }
    report.add_table(
        "crossovers",
        [
            {"method": m, **{k: (v[m] if v[m] is not None else "never") for k, v in cross.items()}}
            for m in CAUSAL_KERNELIZED
        ],
    )
    # a second, independent sweep of the baselines and LARA: the timing noise, and the negative
    # controls of the ratio claims
    again = efficiency_sweep(
        {k: mods[k] for k in ("softmax", "softmax (naive)", "lara")},
        cfg.seq_lens,
        causal=True,
        device=SWEEP_DEVICE,
        **common,
    )
    noise = timing_noise(fwd, again)
    t_win, _ = _win_fraction(fwd, "softmax", "time_s")
    naive_win, _ = _win_fraction(fwd, "softmax (naive)", "time_s")
    where = ", ".join(f"{m} from {cross['time'][m]}" for m in CAUSAL_KERNELIZED if cross["time"][m])
    env = _sweep_environment(threads)
    report.add_claim(speed_claim(
        fwd, noise, CAUSAL_KERNELIZED,
        f"lengths {cfg.seq_lens[0]}-{cfg.seq_lens[-1]}, {env}; kernelized faster for good: "
        f"{where or 'none'}",
    ))  # fmt: skip
    where_m = ", ".join(
        f"{m} from {cross['memory'][m]}" for m in CAUSAL_KERNELIZED if cross["memory"][m]
    )
    report.add_claim(memory_claim(
        fwd, timing_noise(fwd, again, "peak_mib"), CAUSAL_KERNELIZED,
        f"kernelized lighter for good: {where_m or 'none'}",
    ))  # fmt: skip
    report.add_claim(shrink_claim(fwd, again, noise, (1 - naive_win) - (1 - t_win)))

    watch.lap("efficiency sweeps")

    # ---------------------------------------------------------------- 2. decoding
    dec_mods = {k: v for k, v in mods.items() if k != "softmax (naive)"}
    dec = decoding_sweep(
        dec_mods, cfg.decode_lens, heads=cfg.heads, head_dim=cfg.head_dim, device=SWEEP_DEVICE
    )
    report.add_table("decoding", dec)
    report.add_figure("decoding", plot_decoding(dec))
    first, last = min(cfg.decode_lens), max(cfg.decode_lens)

    def state(m: str, n: int) -> float:
        return next(r["state_mib"] for r in dec if r["method"] == m and r["tokens"] == n)

    growth = {
        m: _ratio(state(m, last), state(m, first)) for m in dict.fromkeys(r["method"] for r in dec)
    }
    report.add_claim(decoding_check(
        growth, CAUSAL_KERNELIZED, first, last,
        f"KV cache grew x{growth['softmax']:.0f} (tokens x{last // first}); at {last} tokens the KV "
        f"cache is {state('softmax', last):.2f} MiB vs LARA state {state('lara', last):.3f} MiB",
    ))  # fmt: skip

    # ---------------------------------------------------------------- 3. quality
    world = World(seed=seed, **cfg.world)
    teacher, tok = fact_lm(
        world, size=cfg.teacher_size, seed=seed, steps=cfg.teacher_steps, progress=False
    )
    texts, pairs = world.corpus()
    train = texts + [p + a for p, a in pairs]
    qa = world.qa_pairs("train", templates="all")
    prompts, answers = [x.question for x in qa], [x.target for x in qa]
    rng = np.random.default_rng(seed)
    probe = [train[i] for i in rng.choice(len(train), min(64, len(train)), replace=False)]
    correct = {"softmax (teacher)": greedy_match(teacher, tok, prompts, answers)}
    t_acc = float(correct["softmax (teacher)"].mean())
    t_ppl = perplexity(teacher, tok, train)
    quality = [{"method": "softmax (teacher)", "qa_accuracy": t_acc, "fraction_of_softmax": 1.0,
                "gap_points": 0.0, "perplexity": t_ppl, "attn_error_before": 0.0,
                "attn_error_after": 0.0, "matrix_tv_after": 0.0, "distill_s": 0.0}]  # fmt: skip
    dcfg = DistillConfig(**{**cfg.distill.__dict__, "seed": seed, "progress": False})
    untrained = DistillConfig(**{**dcfg.__dict__, "transfer_steps": 0, "finetune_steps": 0})
    for name in CAUSAL_KERNELIZED:
        # the kernel as built (and calibrated), before any training: raw approximation error
        err0 = attention_error(
            distill(teacher, tok, name, train, untrained).student, teacher, tok, probe
        )
        res = distill(teacher, tok, name, train, dcfg)
        err1 = attention_error(res.student, teacher, tok, probe)
        correct[name] = greedy_match(res.student, tok, prompts, answers)
        acc = float(correct[name].mean())
        quality.append({
            "method": name, "qa_accuracy": acc, "fraction_of_softmax": _fraction(acc, t_acc),
            "gap_points": 100 * (t_acc - acc), "perplexity": perplexity(res.student, tok, train),
            "attn_error_before": err0["output_rel_error"], "attn_error_after": err1["output_rel_error"],
            "matrix_tv_after": err1["matrix_tv"], "distill_s": res.seconds,
        })  # fmt: skip
    report.add_table("quality", quality)
    others = [m for m in CAUSAL_KERNELIZED if m != "lara++"]
    report.add_claim(quality_gap_claim(correct, others, seed))
    report.add_claim(recovery_claim(correct, CAUSAL_KERNELIZED, seed))
    t_lpp = {r["seq_len"]: r["time_s"] for r in fwd if r["method"] == "lara++"}
    t_l = {r["seq_len"]: r["time_s"] for r in fwd if r["method"] == "lara"}
    ratios = np.array([_ratio(t_lpp[n], t_l[n]) for n in cfg.seq_lens])
    spread = (
        f"ratio over lengths {np.nanmin(ratios):.2f}-{np.nanmax(ratios):.2f}"
        if np.isfinite(ratios).any()
        else "no length with both times measured"
    )
    report.add_claim(wall_claim(
        fwd, again, noise,
        f"{spread}; LARA++ uses 16 proposals x 4 samples, LARA 64 proposals (same number of "
        "random features)",
    ))  # fmt: skip

    watch.lap("distillation and quality")

    # ---------------------------------------------------------------- 4. estimator
    est, records = _estimator_rows(teacher, tok, probe, cfg)
    watch.lap("estimator check")
    report.add_table("estimator", est)
    fig, ax = new_figure(1, 1, size=(5.5, 4))
    for name in ("lara++", "lara", "performer"):
        pts = [r for r in est if r["method"] == name]
        label = {"lara++": "LARA++ (16 proposals, x samples each)", "lara": "LARA (x proposals)",
                 "performer": "Performer (x features)"}[name]  # fmt: skip
        ax.plot([p["samples"] for p in pts], [p["rel_error"] for p in pts], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("samples / proposals / features")
    ax.set_ylabel("relative output error (real activations)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    report.add_figure("estimator", fig)
    pp = [r for r in est if r["method"] == "lara++"]
    la = [r for r in est if r["method"] == "lara"]
    pf = [r for r in est if r["method"] == "performer"]
    report.add_claim(estimator_claim(
        [r["samples"] for r in pp], records["lara++"],
        _slope([r["samples"] for r in pf], [r["rel_error"] for r in pf]),
        f"error {pp[0]['rel_error']:.3f} at {pp[0]['samples']} -> {pp[-1]['rel_error']:.3f} at "
        f"{pp[-1]['samples']} samples; LARA slope vs proposals "
        f"{_slope([r['samples'] for r in la], [r['rel_error'] for r in la]):.2f}; Monte Carlo rate "
        "-0.5",
        seed,
    ))  # fmt: skip

    fig, ax = new_figure(1, 1, size=(6, 3.6))
    names = [r["method"] for r in quality]
    ax.bar(
        names,
        [r["fraction_of_softmax"] for r in quality],
        color=["black"] + ["C0"] * (len(names) - 1),
    )
    ax.axhline(0.95, ls="--", color="C3", lw=1, label="95% of softmax")
    fractions = np.array([r["fraction_of_softmax"] for r in quality], dtype=float)
    low = float(np.nanmin(fractions)) if np.isfinite(fractions).any() else 1.0  # NaN: teacher at 0
    ax.set_ylim(min(0.5, low - 0.05), 1.02)
    ax.set_ylabel("QA accuracy / softmax")
    ax.tick_params(axis="x", rotation=30)
    ax.legend(fontsize=7)
    report.add_figure("quality", fig)
    report.add_table("runtime", watch.laps)
    report.runtime_s = watch.elapsed_s
    if out_dir is not None:
        write_report(report, out_dir)
    return report
