"""``python -m spherical_grokking reproduce``: does the bounded sphere skip memorisation, and where not?

1. a + b mod p: LayerNorm (the null), the bounded sphere, uniform attention with either; every seed
   shares its split and initial-weight seed across arms.
2. a * b mod p: LayerNorm and the sphere.
3. S_n composition (S5): the sphere, whose test accuracy should stay at chance.
4. Reported, not gated: the sphere without weight decay, and the published delay-shorteners on the
   null (more weight decay, more data, Grokfast-EMA), with fewer seeds at ``quick``.

Fourier diagnostics of every Z_p embedding, coset probes of every S_n embedding (and of the
untrained one), and the figures of the paper: accuracy curves, grokking times with CIs, residual
and logit norms, embedding spectra.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from paper_common import (
    Claim,
    Control,
    Report,
    Stopwatch,
    bootstrap_ci,
    check_scale,
    map_jobs,
    pin_threads,
    write_report,
)
from paper_common.stats import (
    Bounds,
    ConfidenceInterval,
    censored_median,
    log_t_interval,
    median_bounds,
    proportion_interval,
    ratio_bounds,
)

from .baselines import METHOD_ARMS, Arm, baseline_arms
from .cosets import coset_probe
from .experiment import run_arm
from .metrics import delay_bounds, memorisation_point
from .model import ModelConfig, build_model
from .plots import plot_curves, plot_norms, plot_spectra, plot_times
from .tasks import make_task
from .train import TrainConfig


@dataclass(frozen=True)
class Scale:
    """One scale of the experiment. ``*_arms`` name :data:`~.baselines.METHOD_ARMS`."""

    p: int
    train_fraction: float
    d_model: int
    n_heads: int
    d_mlp: int
    lr: float
    betas: tuple[float, float]
    steps: int
    eval_every: int
    seeds: int
    perm_n: int
    perm_fraction: float
    perm_lr: float
    perm_steps: int
    add_arms: tuple[str, ...] = ("layernorm", "sphere", "layernorm+uniform", "sphere+uniform")
    mul_arms: tuple[str, ...] = ("layernorm", "sphere")
    perm_arms: tuple[str, ...] = ("sphere",)
    extra_arms: tuple[Arm, ...] = field(default_factory=tuple)  # on a + b, reported only
    extra_seeds: int = 1
    extra_steps: int | None = None  # their budget (None: ``steps``); they stop at test >= 0.95
    extra_lrs: tuple[
        float, ...
    ] = ()  # method arms on a + b at further learning rates, reported only
    workers: int = 2


_EXTRAS = (METHOD_ARMS["sphere wd=0"], *baseline_arms(weight_decays=(3.0,), train_fraction=None))
SCALES: dict[str, Scale] = {
    "smoke": Scale(p=13, train_fraction=0.5, d_model=32, n_heads=2, d_mlp=64, lr=3e-3,
                   betas=(0.9, 0.98), steps=120, eval_every=20, seeds=2, perm_n=3,
                   perm_fraction=0.5, perm_lr=3e-3, perm_steps=60, extra_arms=_EXTRAS, workers=1),
    # the quick setting; reductions against the paper are listed in the report's notes
    "quick": Scale(p=59, train_fraction=0.4, d_model=64, n_heads=4, d_mlp=256, lr=1e-3,
                   betas=(0.9, 0.98), steps=6000, eval_every=50, seeds=3, perm_n=5,
                   perm_fraction=0.3, perm_lr=1e-3, perm_steps=1000, extra_arms=_EXTRAS, extra_steps=2000),
    # the paper: Z_113, 30% train, d 128 / 4 heads / MLP 512, AdamW (0.9, 0.999), 10 seeds;
    # S5 at lr 1e-3 for 100k epochs
    "full": Scale(p=113, train_fraction=0.3, d_model=128, n_heads=4, d_mlp=512, lr=6e-4,
                  betas=(0.9, 0.999), steps=15_000, eval_every=100, seeds=10, perm_n=5,
                  perm_fraction=0.3, perm_lr=1e-3, perm_steps=100_000,
                  add_arms=("layernorm", "rmsnorm", "sphere", "layernorm+uniform", "sphere+uniform"),
                  mul_arms=("layernorm", "sphere", "layernorm+uniform", "sphere+uniform"),
                  perm_arms=("layernorm", "rmsnorm", "sphere", "sphere wd=0"),
                  extra_arms=(METHOD_ARMS["sphere wd=0"], Arm("ngpt", "ngpt", weight_decay=0.0),
                              *baseline_arms(weight_decays=(0.3, 3.0), train_fraction=0.5)),
                  extra_seeds=10, extra_lrs=(1e-4,), workers=1),
}  # fmt: skip

_METHOD = {arm.name: arm for arm in METHOD_ARMS.values()} | {
    "rmsnorm": Arm("rmsnorm", "rmsnorm"),
}


@dataclass(frozen=True)
class _Job:
    task: str
    arm: Arm
    seed: int
    lr: float
    scale: str
    threads: int | None
    extra: bool = False

    @property
    def cost(self) -> float:
        """Rough relative cost, to start the longest jobs first."""
        cfg = SCALES[self.scale]
        if self.task == "perm":
            return 3.0 * cfg.perm_steps * (1 if self.arm.variant.startswith("sphere") else 1.3)
        steps = (cfg.extra_steps or cfg.steps) if self.extra else cfg.steps
        return steps * (
            0.25 if self.arm.variant.startswith("sphere") and self.arm.weight_decay != 0 else 1.0
        )


def _run_job(job: _Job) -> dict[str, Any]:
    """Train one arm and diagnose it; module level so worker processes can run it."""
    import torch

    if job.threads is not None:
        torch.set_num_threads(job.threads)
    cfg = SCALES[job.scale]
    perm = job.task == "perm"
    task = make_task(job.task, p=cfg.p, n=cfg.perm_n)
    steps = cfg.perm_steps if perm else cfg.steps
    train_config = TrainConfig(
        lr=cfg.perm_lr if perm else job.lr,
        betas=cfg.betas,
        weight_decay=1.0,
        steps=(cfg.extra_steps or steps) if job.extra else steps,
        eval_every=cfg.eval_every,
        stop_at=0.95 if job.extra else 0.99,
        device="cpu" if job.threads is not None else None,
    )
    # one process: a bar per run on a terminal; worker processes stay quiet (bars would interleave)
    progress = None if job.threads is None else False
    run = run_arm(task, job.arm, job.seed, cfg.perm_fraction if perm else cfg.train_fraction,
                  train_config, progress=progress, d_model=cfg.d_model, n_heads=cfg.n_heads,
                  d_mlp=cfg.d_mlp)  # fmt: skip
    return {
        "row": run.row(),
        "history": {k: v.tolist() for k, v in run.result.history.items()},
        "memorised": memorisation_point(run.result.history),
        **run.diagnostics(),
    }


def _jobs(scale: str, seed: int) -> list[_Job]:
    cfg = SCALES[scale]
    threads = 1 if cfg.workers > 1 else None
    seeds = [seed + s for s in range(cfg.seeds)]
    jobs = [_Job(task, _METHOD[a], s, cfg.lr, scale, threads)
            for task, arms in (("add", cfg.add_arms), ("mul", cfg.mul_arms), ("perm", cfg.perm_arms))
            for a in arms for s in seeds]  # fmt: skip
    extra_seeds = seeds[: cfg.extra_seeds]
    jobs += [_Job("add", arm, s, cfg.lr, scale, threads, extra=True)
             for arm in cfg.extra_arms for s in extra_seeds]  # fmt: skip
    jobs += [_Job("add", _METHOD[a], s, lr, scale, threads, extra=True)
             for lr in cfg.extra_lrs for a in cfg.add_arms for s in extra_seeds]  # fmt: skip
    return jobs


def _values(rows: Sequence[dict[str, Any]], task: str, arm: str, key: str) -> np.ndarray:
    return np.array([float(r[key]) for r in rows if r["task"] == task and r["arm"] == arm])


def _median(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(np.median(x)) if x.size else math.nan


def _time(rows: Sequence[dict[str, Any]], task: str, arm: str, key: str) -> Bounds | None:
    """Median of a time (``t_test95``...) over the seeds; a censored time is a lower bound."""
    sel = [r for r in rows if r["task"] == task and r["arm"] == arm]
    if not sel:
        return None
    return censored_median([r[key] for r in sel], [r[f"{key}_censored"] for r in sel])


def _delay(rows: Sequence[dict[str, Any]], task: str, arm: str) -> Bounds | None:
    """Median delay over the seeds, from what each run's two crossing times say of it."""
    sel = [r for r in rows if r["task"] == task and r["arm"] == arm]
    if not sel:
        return None
    cols = ("t_train99", "t_train99_censored", "t_test95", "t_test95_censored")
    return median_bounds(*delay_bounds(*([r[c] for r in sel] for c in cols)))


def _ratio(num: Bounds | None, den: Bounds | None, floor: float) -> Bounds:
    """``num / den`` with both raised to the evaluation interval ``floor`` (undefined if either is
    missing)."""
    return (
        Bounds(math.nan, math.nan) if num is None or den is None else ratio_bounds(num, den, floor)
    )


_TIMES = ("t_train99", "t_test95", "t_test99")


def _summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per task and arm: medians of the times (``median_<t>`` the low end of what censoring allows,
    ``median_<t>_high`` the high end, ``inf`` when censored runs reach the middle) and of the rest."""
    out = []
    for task, arm in dict.fromkeys((r["task"], r["arm"]) for r in rows):
        sel = [r for r in rows if r["task"] == task and r["arm"] == arm]
        times = {k: _time(rows, task, arm, k) for k in _TIMES} | {"delay": _delay(rows, task, arm)}
        other = {k: _values(rows, task, arm, k) for k in ("test_at_train99", "final_test", "peak_test",
                                                            "area_between", "max_residual_norm",
                                                            "max_logit_norm")}  # fmt: skip
        done = [r["t_test95"] for r in sel if not r["t_test95_censored"]]
        ci = bootstrap_ci(done, np.median, method="percentile") if len(done) >= 2 else None
        out.append({
            "task": task, "arm": arm, "head": sel[0]["head"], "lr": sel[0]["lr"],
            "weight_decay": sel[0]["weight_decay"], "train_fraction": sel[0]["train_fraction"],
            "seeds": len(sel),
            **{f"median_{k}{end}": getattr(b, attr) for k, b in times.items() if b is not None
               for end, attr in (("", "low"), ("_high", "high"))},
            **{f"median_{k}": _median(x) for k, x in other.items()},
            "t_test95_ci_low": ci.low if ci and len(done) == len(sel) else math.nan,
            "t_test95_ci_high": ci.high if ci and len(done) == len(sel) else math.nan,
            "censored_t_test95": sum(bool(r["t_test95_censored"]) for r in sel),
        })  # fmt: skip
    return out


def seed_ratio_interval(
    num: Sequence[tuple[float, float]], den: Sequence[tuple[float, float]], floor: float
) -> ConfidenceInterval | None:
    """The interval over seeds of a paired ratio ``num / den`` when each seed's times are known
    only within bounds (censoring): each seed's ratio is ``[max(num_low, floor) / max(den_high,
    floor), max(num_high, floor) / max(den_low, floor)]``; the interval is the 95% t-interval of the
    log lows' low end to that of the log highs' high end (:func:`~paper_common.stats.log_t_interval`),
    so it holds every value the censored seeds allow. ``None`` with fewer than 2 paired seeds."""
    if len(num) != len(den) or len(num) < 2:
        return None
    n, d = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    lows = np.maximum(n[:, 0], floor) / np.maximum(d[:, 1], floor)
    highs = np.maximum(n[:, 1], floor) / np.maximum(d[:, 0], floor)
    lo, hi = log_t_interval(lows), log_t_interval(highs)
    return ConfidenceInterval(float(np.exp(np.log(lows).mean())) if lows.all() else 0.0,
                              lo.low, hi.high, 0.95)  # fmt: skip


def _seed_times(
    rows: Sequence[dict[str, Any]], task: str, arm: str
) -> dict[int, tuple[float, float]]:
    """Per seed, what is known of ``t_test95``: ``(t, t)``, or ``(budget, inf)`` when censored."""
    return {r["seed"]: (r["t_test95"], math.inf if r["t_test95_censored"] else r["t_test95"])
            for r in rows if r["task"] == task and r["arm"] == arm}  # fmt: skip


def _seed_delays(
    rows: Sequence[dict[str, Any]], task: str, arm: str
) -> dict[int, tuple[float, float]]:
    """Per seed, the bounds :func:`~.metrics.delay_bounds` gives its delay."""
    sel = [r for r in rows if r["task"] == task and r["arm"] == arm]
    cols = ("t_train99", "t_train99_censored", "t_test95", "t_test95_censored")
    lo, hi = delay_bounds(*([r[c] for r in sel] for c in cols))
    return {r["seed"]: (float(a), float(b)) for r, a, b in zip(sel, lo, hi, strict=True)}


def _paired(
    a: dict[int, tuple[float, float]], b: dict[int, tuple[float, float]]
) -> tuple[list, list]:
    seeds = sorted(set(a) & set(b))
    return [a[s] for s in seeds], [b[s] for s in seeds]


def self_null_interval(
    times: dict[int, tuple[float, float]], floor: float
) -> ConfidenceInterval | None:
    """The ratio rule's interval on one arm against itself: seed ``s``'s time (or delay) bounds
    over seed ``s + 1``'s (the pairing rotated, the last seed over the first), where no arm effect
    exists. With every time known its geometric mean is exactly 1; a target that names the smallest
    effect (``>= 3``, ``<= 0.9``) must come out refuted on it. ``None`` with fewer than 2 seeds."""
    seeds = sorted(times)
    num = [times[s] for s in seeds]
    return seed_ratio_interval(num, num[1:] + num[:1], floor)


def _self_null(times: dict[int, tuple[float, float]], floor: float, what: str) -> Control:
    """Negative control of a ratio claim: :func:`self_null_interval` on the LayerNorm arm."""
    ci = self_null_interval(times, floor)
    if ci is None:
        return Control.absent("negative", "two seeds of the LayerNorm arm at least")
    return Control.negative(
        f"self-null: {what}(LayerNorm, seed s) / {what}(LayerNorm, seed s+1), pairing rotated",
        ci.estimate, ci,
    )  # fmt: skip


def _memorises(rows: Sequence[dict[str, Any]], task: str, arm: str) -> Control:
    """Positive control of a delay or grokking-time claim: the null (``arm``) memorises the
    training set (train accuracy 0.99) in every seed, so there is a memorisation phase to skip."""
    sel = [r for r in rows if r["task"] == task and r["arm"] == arm]
    share = float(np.mean([not r["t_train99_censored"] for r in sel])) if sel else math.nan
    return Control.positive(f"{arm} memorises {task}: share of seeds reaching train 0.99",
                            share, ">=", 1.0)  # fmt: skip


def _interval_method(ci: ConfidenceInterval | None, n: int) -> str:
    if ci is None:
        return f"missing: {n} paired seed(s); needs >= 2 (3 for a useful interval, issue 47)"
    return (f"95% t-interval over {n} seeds of each seed's log ratio bounds (censored times "
            "widen a seed's ratio to what they allow)")  # fmt: skip


def _ratio_claim(
    rows: Sequence[dict[str, Any]], task: str, label: str, budget: int, eval_every: int
) -> Claim:
    ln, sp = _time(rows, task, "layernorm", "t_test95"), _time(rows, task, "sphere", "t_test95")
    per = {
        a: [r for r in rows if r["task"] == task and r["arm"] == a] for a in ("layernorm", "sphere")
    }
    cens = [sum(r["t_test95_censored"] for r in per[a]) for a in ("layernorm", "sphere")]
    per_seed = ", ".join(f"{a['t_test95']:.0f}/{b['t_test95']:.0f}"
                         for a, b in zip(per["layernorm"], per["sphere"], strict=False))  # fmt: skip
    num, den = _paired(_seed_times(rows, task, "layernorm"), _seed_times(rows, task, "sphere"))
    ci = seed_ratio_interval(num, den, eval_every)
    median = _ratio(ln, sp, eval_every)
    note = (f"median t_test95 LayerNorm {ln} vs sphere {sp} steps "
            f"({len(per['layernorm'])} seeds; per seed {per_seed}); ratio of medians {median}; "
            f"censored at {budget}: LayerNorm {cens[0]}, sphere {cens[1]}; times below the "
            f"{eval_every}-step evaluation interval count as one interval")  # fmt: skip
    return Claim.decide(
        f"The bounded sphere groks sooner than the LayerNorm transformer on {label}",
        "t_test95(LayerNorm) / t_test95(sphere), paired by seed (geometric mean)",
        None if ci is None else ci.estimate, ci, ">=", 3.0,
        positive=_memorises(rows, task, "layernorm"),
        negative=_self_null(_seed_times(rows, task, "layernorm"), eval_every, "t_test95"),
        method=_interval_method(ci, len(num)), note=note,
    )  # fmt: skip


def _timing_claims(rows: Sequence[dict[str, Any]], cfg: Scale) -> list[Claim]:
    """Claims 1-3 from the per-run rows at the main learning rate: the sphere's and uniform
    attention's grokking times and delays against LayerNorm's, paired by seed, censoring-aware."""
    ev = cfg.eval_every
    add, mul = f"add_mod_{cfg.p}", f"mul_mod_{cfg.p}"
    claims: list[Claim] = []
    claims.append(_ratio_claim(rows, add, f"a + b mod {cfg.p}", cfg.steps, ev))
    d_ln, d_sp = _delay(rows, add, "layernorm"), _delay(rows, add, "sphere")
    ln_delays = _seed_delays(rows, add, "layernorm")
    num, den = _paired(ln_delays, _seed_delays(rows, add, "sphere"))
    ci = seed_ratio_interval(num, den, ev)
    claims.append(Claim.decide(
        f"Train and test accuracy rise together on the sphere: its delay is far below LayerNorm's (a + b mod {cfg.p})",
        "delay(LayerNorm) / delay(sphere), paired by seed, each at least the eval interval",
        None if ci is None else ci.estimate, ci, ">=", 3.0,
        positive=_memorises(rows, add, "layernorm"),
        negative=_self_null(ln_delays, ev, "delay"),
        method=_interval_method(ci, len(num)),
        note=f"delay = t_test95 - t_train99; medians LayerNorm {d_ln}, sphere {d_sp} steps (ratio of "
        f"medians {_ratio(d_ln, d_sp, ev)}); a delay below "
        f"the {ev}-step eval interval (0, or negative when test accuracy leads) counts as one interval; "
        "a run that never reaches test 0.95 has a delay of at least the rest of its budget, one that "
        "never reaches train 0.99 an unknown delay (a range, never 0)",
    ))  # fmt: skip
    # 2. uniform attention (with LayerNorm: the attention intervention alone)
    lnu = [r for r in rows if r["task"] == add and r["arm"] == "layernorm+uniform"]
    d_lnu, d_su = _delay(rows, add, "layernorm+uniform"), _delay(rows, add, "sphere+uniform")
    reach = float(np.mean([not r["t_test95_censored"] for r in lnu])) if lnu else math.nan
    num, den = _paired(_seed_delays(rows, add, "layernorm+uniform"), ln_delays)
    ci = seed_ratio_interval(num, den, ev)
    claims.append(Claim.decide(
        "Uniform attention alone removes delay: it reaches test >= 0.95 in every seed with a "
        "shorter delay than LayerNorm",
        "delay(LayerNorm + uniform) / delay(LayerNorm), paired by seed, each at least the eval interval",
        None if ci is None else ci.estimate, ci, "<=", 0.9,
        positive=Control.positive("LayerNorm + uniform generalises: share of seeds reaching test 0.95",
                                  reach, ">=", 1.0),
        negative=_self_null(ln_delays, ev, "delay"),
        method=_interval_method(ci, len(num)),
        note=f"target restated from < 1 to <= 0.9 (a 10% shorter delay, the smallest that counts); "
        f"median delays LayerNorm + uniform {d_lnu}, LayerNorm {d_ln}, sphere + uniform {d_su} steps; "
        f"delays below the {ev}-step eval interval count as one interval",
    ))  # fmt: skip
    # 3. a * b
    claims.append(_ratio_claim(rows, mul, f"a * b mod {cfg.p}", cfg.steps, ev))
    return claims


def _n_test(task: Any, train_fraction: float) -> int:
    """Test pairs of a split (:func:`~.tasks.split`: the first ``floor(fraction n)`` train)."""
    n = len(task.labels)
    return n - math.floor(float(train_fraction) * n)


def _layernorm_on_sn(final: Sequence[float], n_test: int, n: int) -> Control:
    if not len(final):
        return Control.absent(
            "negative",
            f"a LayerNorm arm on S{n} trained to memorisation and beyond (the paper's contrast); "
            "perm_arms lacks layernorm at this scale",
        )
    ci = proportion_interval(round(float(np.sum(final)) * n_test), n_test * len(final))
    return Control.negative(
        f"LayerNorm on S{n} (generalises in the paper): final test accuracy, pooled over "
        f"{len(final)} seeds (Clopper-Pearson)",
        ci.estimate, ci,
    )  # fmt: skip


def perm_claim(
    sn: Sequence[dict[str, Any]],
    n_test: int,
    zp_test: float,
    final: float,
    cfg: Scale,
    layernorm_final: Sequence[float] = (),
) -> Claim:
    """Claim 4: the sphere's test accuracy on S_n when it memorises (train accuracy 0.99). Decided
    on a Clopper-Pearson interval of the test accuracy pooled over seeds (``n_test`` test pairs a
    seed) at the memorisation point; its positive control is that S_n was memorised at all (every
    seed reached train 0.99: at chance a model that learned nothing passes "<= 0.05" too); its
    negative control is LayerNorm on S_n, which memorises and then generalises in the paper (so
    "fails on S_n" must not hold for it): the same rule on its final test accuracies
    ``layernorm_final`` (one per seed, pooled the same way), absent when that arm was not run."""
    acc = np.array([m["test_acc"] for m in sn], dtype=float)
    reached = sum(bool(m["reached"]) for m in sn)
    ci = None
    if len(sn):
        hits = round(float(acc.sum()) * n_test)
        ci = proportion_interval(hits, n_test * len(sn))
    peaks = ", ".join(f"{m['train_acc']:.2f}" for m in sn if not m["reached"])
    return Claim.decide(
        f"The sphere that skips the delay on Z_p fails on non-commutative S{cfg.perm_n}",
        f"sphere's test accuracy on S{cfg.perm_n} when train accuracy first reaches 0.99 (or peaks), "
        "pooled over seeds",
        None if ci is None else ci.estimate, ci, "<=", 0.05,
        positive=Control.positive(
            f"S{cfg.perm_n} memorised: share of sphere seeds reaching train 0.99",
            reached / len(sn) if sn else math.nan, ">=", 1.0),
        negative=_layernorm_on_sn(layernorm_final, n_test, cfg.perm_n),
        method=f"Clopper-Pearson 95% interval over {n_test} test pairs x {len(sn)} seeds"
        if ci is not None else "missing: no S_n run",
        note=f"Z_p (a + b) at memorisation: median {zp_test:.3f}; largest final S{cfg.perm_n} test "
        f"accuracy {final:.4f} after {cfg.perm_steps} steps; training accuracy reached 0.99 in "
        f"{reached}/{len(sn)} seeds" + ("" if reached == len(sn) else f" (peaks {peaks}): not "
        "memorised, so the claim is inconclusive; the former rule passed on any model at chance"),
    )  # fmt: skip


@pin_threads(torch=True)
def reproduce(
    scale: str = "quick", seed: int = 0, out_dir: str | os.PathLike[str] | None = None
) -> Report:
    """Run the experiment at ``scale`` and return (and, with ``out_dir``, write) the report."""
    check_scale(scale)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer; got {seed!r}")
    cfg = SCALES[scale]
    watch = Stopwatch()
    report = Report(package="spherical_grokking",
                    title="Bounded spherical topology and uniform attention vs the memorisation phase",
                    scale=scale, seed=seed)  # fmt: skip
    jobs = _jobs(scale, seed)
    # longest jobs first, so the workers finish together
    by_cost = sorted(range(len(jobs)), key=lambda i: -jobs[i].cost)
    done = map_jobs(_run_job, [jobs[i] for i in by_cost], workers=cfg.workers)
    results: list[dict[str, Any]] = [{}] * len(jobs)
    for i, result in zip(by_cost, done, strict=True):
        results[i] = result  # back in the order the jobs were listed: task, arm, seed
    watch.lap("training")
    rows = [r["row"] for r in results]
    main = [r for r in results if r["row"]["lr"] == cfg.lr or r["row"]["task"].startswith("perm")]
    main_rows = [r["row"] for r in main]
    add, mul = f"add_mod_{cfg.p}", f"mul_mod_{cfg.p}"
    perm = f"perm_S{cfg.perm_n}"
    claim_arms = {(add, a) for a in cfg.add_arms} | {(mul, a) for a in cfg.mul_arms}
    claim_arms |= {(perm, a) for a in cfg.perm_arms}

    for claim in _timing_claims(main_rows, cfg):
        report.add_claim(claim)
    # 4. the S_n contrast
    zp = [
        r["memorised"]["test_acc"]
        for r in main
        if (r["row"]["task"], r["row"]["arm"]) == (add, "sphere")
    ]
    sn = [r["memorised"] for r in main if (r["row"]["task"], r["row"]["arm"]) == (perm, "sphere")]
    sn_final = float(np.max(_values(main_rows, perm, "sphere", "final_test"))) if sn else math.nan
    perm_task = make_task("perm", n=cfg.perm_n)
    n_test = _n_test(perm_task, cfg.perm_fraction)
    ln_final = _values(main_rows, perm, "layernorm", "final_test")
    report.add_claim(perm_claim(sn, n_test, _median(np.array(zp)), sn_final, cfg, ln_final))
    watch.lap("claims")

    # tables
    report.add_table("summary", _summary(rows))
    report.add_table("runs", rows)
    extra_names = {a.name for a in cfg.extra_arms}
    base = _time(main_rows, add, "layernorm", "t_test95")

    def speedup(r: dict[str, Any]) -> str:
        own = Bounds(r["t_test95"], math.inf if r["t_test95_censored"] else r["t_test95"])
        return str(_ratio(base, own, cfg.eval_every))

    report.add_table("baselines", [{
        "arm": r["arm"], "seed": r["seed"], "weight_decay": r["weight_decay"],
        "train_fraction": r["train_fraction"], "grokfast": r["grokfast"], "lr": r["lr"],
        "t_train99": r["t_train99"], "t_test95": r["t_test95"], "t_test95_censored": r["t_test95_censored"],
        "delay": r["delay"], "final_test": r["final_test"],
        "speedup_vs_layernorm": speedup(r),
    } for r in rows if r["task"] == add and (r["arm"] in extra_names or r["lr"] != cfg.lr or r["arm"] == "layernorm")])  # fmt: skip
    report.add_table("fourier", [{"task": r["row"]["task"], "arm": r["row"]["arm"], "seed": r["row"]["seed"],
                                  **r["fourier"]} for r in results if "fourier" in r])  # fmt: skip
    cosets = [{"arm": r["row"]["arm"], "seed": r["row"]["seed"], "trained": True, **c}
              for r in results if "cosets" in r for c in r["cosets"]]  # fmt: skip
    for s in sorted({c["seed"] for c in cosets}):
        untrained = build_model(ModelConfig.for_task(perm_task, "sphere", d_model=cfg.d_model,
                                                     n_heads=cfg.n_heads, d_mlp=cfg.d_mlp), seed=s)  # fmt: skip
        cosets += [{"arm": "sphere (untrained)", "seed": s, "trained": False, **c}
                   for c in coset_probe(untrained.embed.weight.detach().numpy(), cfg.perm_n, seed=s)]  # fmt: skip
    report.add_table("cosets", cosets)
    watch.lap("diagnostics")

    # figures
    claim_runs = [r for r in main if (r["row"]["task"], r["row"]["arm"]) in claim_arms]
    report.add_figure(
        "accuracy_curves",
        plot_curves(claim_runs, "train (dashed) and test (solid) accuracy, every seed"),
    )
    report.add_figure(
        "grokking_times", plot_times([r["row"] for r in claim_runs if r["row"]["task"] != perm])
    )
    report.add_figure(
        "norms", plot_norms([r for r in main if r["row"]["arm"] in cfg.add_arms], add)
    )
    report.add_figure(
        "fourier_spectrum",
        plot_spectra([r for r in claim_runs if r["row"]["arm"] in ("layernorm", "sphere")]),
    )
    watch.lap("figures")
    report.add_table("timings", watch.laps)
    report.notes = _notes(scale, cfg)
    report.runtime_s = watch.elapsed_s
    if out_dir is not None:
        write_report(report, out_dir)
    return report


def _notes(scale: str, cfg: Scale) -> str:
    lines = [
        f"Z_p tasks: p = {cfg.p}, train fraction {cfg.train_fraction}, d_model {cfg.d_model}, "
        f"{cfg.n_heads} heads, MLP {cfg.d_mlp}, full-batch AdamW lr {cfg.lr}, betas {cfg.betas}, "
        f"weight decay 1 (every arm unless its name says otherwise), budget {cfg.steps} steps, "
        f"evaluated every {cfg.eval_every} steps, early stop at test accuracy 0.99; {cfg.seeds} seeds "
        f"(a seed fixes both the split and the initial weights, shared across arms).",
        f"S{cfg.perm_n}: train fraction {cfg.perm_fraction}, lr {cfg.perm_lr}, budget {cfg.perm_steps} steps.",
        "The sphere uses the cosine head (tau = 10); LayerNorm, RMSNorm and uniform-attention-with-LayerNorm "
        "use the plain linear unembedding (the `head` column of every table).",
        f"Reported-only arms ({', '.join(a.name for a in cfg.extra_arms)}) run on a + b with "
        f"{cfg.extra_seeds} seed(s), a budget of {cfg.extra_steps or cfg.steps} steps and early stop at "
        "test accuracy 0.95 (their comparison is t_test95, so their t_test99 is not measured); "
        "`speedup_vs_layernorm` divides the null's median t_test95 by theirs, both at least the eval "
        "interval; a censored time is a lower bound, so the speedup is then a range (`>= x`, `in [x, y]`).",
        "Censoring: a time never reached within the budget is recorded at the budget and flagged; "
        "medians over seeds are then ranges (the low end puts censored runs at the budget, the high "
        "end at infinity), and every ratio claim is decided on the whole range its medians allow: "
        "supported only if all of it meets the target. A delay below the eval interval (0, or "
        "negative when test accuracy leads) counts as one interval, so no ratio divides by 0.",
    ]
    if scale != "full":
        lines.append(
            "Reduced against the paper (p = 113, 30% train, d 128 / MLP 512, lr 6e-4, betas (0.9, 0.999), "
            "10 seeds, S5 for 100k epochs): a smaller prime with more training data, half-width model, "
            "larger lr, fewer seeds, and S5 trained for only "
            f"{cfg.perm_steps} steps, so S5 is not memorised here; `--scale full` keeps the paper's setting."
        )
    return "\n\n".join(lines)
