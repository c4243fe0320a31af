"""Reproduce the paper's claims at CPU scale.

``python -m lora_alpha reproduce --scale quick`` runs, in one process:

1. the alpha x rank sweep on the regression task at the standard small learning rate (1e-4) and
   the power-law fit of the best alpha against rank (exponent, coefficient, bootstrap CI); an
   alpha x learning-rate surface at one rank;
2. the alpha-vs-learning-rate test on all three tasks: from (alpha=16, lr=1e-4), scale alpha by k
   or the learning rate by k; final score and the Signal-Drift drift ratio against the
   full-fine-tuning update (and, for comparison, the initial full-fine-tuning gradient);
3. LoRA-alpha (``alpha = DEFAULT_C * sqrt(r)``, lr 1e-4, untuned) against standard LoRA and rsLoRA
   (alpha 16) tuned over a learning-rate grid, alpha=2r and LoRA+ on the regression task, across
   ranks; the LM tasks were not used to fit ``DEFAULT_C``;
4. training diagnostics (update norm, drift ratio, stable rank of dW, top Hessian eigenvalue) of
   three runs of the regression task.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from lora_alpha.baselines import alpha_2r, lora_alpha, loraplus, rslora, standard
from lora_alpha.config import DEFAULT_C, get_lora_alpha_model
from lora_alpha.diagnostics import (
    SignalDriftCallback,
    full_finetune_delta,
    reference_gradient,
    spectral_summary,
)
from lora_alpha.sweep import (
    PowerLawFit,
    SweepResult,
    _optimal_alpha,
    fit_optimal_alpha,
    scaling_interaction,
    sweep,
)
from lora_alpha.tasks import ClassificationTask, KnowledgeInjectionTask, RegressionTask, Task
from lora_alpha.train import finetune
from paper_common import (
    Claim,
    Control,
    Report,
    Stopwatch,
    check_scale,
    new_figure,
    pin_threads,
    write_report,
)
from paper_common.stats import extreme_interval, log_t_interval

SMALL_LR = 1e-4
BASE_ALPHA = 16.0


@dataclass(frozen=True)
class Scale:
    regression: dict[str, Any]
    world: dict[str, int]
    lm_steps: int
    cutoff: int
    alphas: tuple[float, ...]
    ranks: tuple[int, ...]
    seeds: tuple[int, ...]
    sweep_steps: int
    surface_rank: int
    surface_lrs: tuple[float, ...]
    factors: tuple[float, ...]
    interaction_rank: int
    lm_finetune_steps: int
    reference_steps: int
    compare_ranks: tuple[int, ...]
    compare_lm_ranks: tuple[int, ...]
    compare_lrs: tuple[float, ...]
    batch_size: int
    extra: dict[str, Any] = field(default_factory=dict)


SCALES = {
    "smoke": Scale(
        {"d_in": 8, "hidden": 16, "d_out": 4, "shift_rank": 4, "n_train": 128, "n_test": 64},
        {"n_people": 8, "n_cities": 6, "n_companies": 4, "n_countries": 3}, 40, 2016,
        (16, 64, 256), (1, 4), (0, 1), 20, 4, (1e-4, 1e-3), (1, 4), 4, 10, 10,
        (4,), (4,), (1e-4, 1e-3), 16,
    ),
    "quick": Scale(
        {}, {"n_people": 40, "n_cities": 12, "n_companies": 10, "n_countries": 4}, 1000, 2018,
        (16, 32, 64, 128, 256, 512, 1024, 2048), (1, 4, 16, 64), (0, 1, 2), 200, 8,
        (1e-4, 1e-3, 1e-2), (1, 4, 16, 64), 8, 80, 100,
        (4, 16, 64), (4, 16), (1e-4, 1e-3, 1e-2), 32,
    ),
    # the paper's setting, for a GPU: a 0.5B model on GSM8K (generation) and GLUE SST-2
    # (classification); needs `datasets` and the hub (see _full_tasks)
    "full": Scale(
        {"d_in": 64, "hidden": 512, "d_out": 32, "shift_rank": 64, "n_train": 8192},
        {}, 0, 0,
        tuple(float(2**k) for k in range(2, 14)), (4, 8, 16, 32, 64, 128, 256), (0, 1, 2, 3, 4),
        1000, 16, (1e-5, 3e-5, 1e-4, 3e-4, 1e-3), (1, 2, 4, 8, 16, 32, 64), 16, 1000, 500,
        (8, 32, 128), (8, 32, 128), (1e-5, 3e-5, 1e-4, 3e-4, 1e-3), 16,
        {"model": "Qwen/Qwen2.5-0.5B", "gen_dataset": ("openai/gsm8k", "main"),
         "cls_dataset": ("nyu-mll/glue", "sst2")},
    ),
}  # fmt: skip


def _full_tasks(cfg: Scale) -> list[Task]:
    """GSM8K and SST-2 on a 0.5B model: needs the hub and ``datasets`` (not installed here)."""
    try:
        import datasets
    except ImportError as err:  # pragma: no cover - the full scale runs elsewhere
        raise RuntimeError(
            "scale 'full' fine-tunes Qwen2.5-0.5B on GSM8K and SST-2: `pip install datasets` on a "
            "machine with the Hugging Face hub and a GPU"
        ) from err
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from lora_alpha.tasks import CausalLMTask, SequenceClassificationTask

    name = cfg.extra["model"]
    gsm = datasets.load_dataset(*cfg.extra["gen_dataset"])

    def pairs(split: Any) -> list[tuple[str, str]]:
        qa = zip(split["question"], split["answer"], strict=True)
        return [(f"Question: {q}\nAnswer:", " " + a) for q, a in qa]

    gen = CausalLMTask.from_pretrained(
        name, pairs(gsm["train"]), eval_sets={"test": pairs(gsm["test"])}
    )
    sst = datasets.load_dataset(*cfg.extra["cls_dataset"])
    tok = AutoTokenizer.from_pretrained(name)
    tok.pad_token = tok.pad_token or tok.eos_token
    model = AutoModelForSequenceClassification.from_pretrained(name, num_labels=2)
    model.config.pad_token_id = tok.pad_token_id
    cls = SequenceClassificationTask(
        model, tok, (sst["train"]["sentence"], sst["train"]["label"]),
        (sst["validation"]["sentence"], sst["validation"]["label"]),
    )  # fmt: skip
    return [gen, cls]


def _references(task: Task, rank: int, steps: int, batch_size: int) -> dict[str, Any]:
    """Full-fine-tuning update (Adam, lr 1e-3) and initial gradient, keyed like LoRA's layers."""
    wrapped = get_lora_alpha_model(
        task.base_model(), standard().lora_config(rank, task.target_modules, **task.lora_kwargs)
    )
    grad = reference_gradient(wrapped, task.loss, task.reference_batch())
    full = full_finetune_delta(
        task.base_model(), task.loss, task.batches(batch_size, 10_000), sorted(grad), 1e-3, steps
    )
    return {"full_ft": full, "gradient": grad}


def _finite_or(x: float, fallback: float) -> float:
    return x if math.isfinite(x) else fallback


def _win(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Does run ``a`` beat run ``b``: a run that did not diverge beats one that did (two diverged
    runs: neither); then higher score, ties (within 1e-9) broken by lower loss. A NaN score or
    loss counts as the worst value, never as an unordered one."""
    if bool(a.get("diverged")) != bool(b.get("diverged")):
        return not a.get("diverged")
    if a.get("diverged"):
        return False
    sa, sb = _finite_or(a["score"], -math.inf), _finite_or(b["score"], -math.inf)
    if sa != sb and abs(sa - sb) > 1e-9:
        return sa > sb
    return _finite_or(a["loss"], math.inf) < _finite_or(b["loss"], math.inf)


def _tuned(runs: list[Any]) -> Any:
    """The learning-rate-tuned run: the one no other run beats (:func:`_win`); ties go to the
    smallest learning rate, whatever order the grid was run in."""
    rows = sorted(
        ({"score": r.score, "loss": r.loss, "diverged": r.diverged, "run": r} for r in runs),
        key=lambda x: x["run"].lr,
    )
    best = rows[0]
    for row in rows[1:]:
        if _win(row, best):
            best = row
    return best["run"]


@pin_threads(torch=True)
def reproduce(
    scale: str = "quick", seed: int = 0, out_dir: str | os.PathLike[str] | None = None
) -> Report:
    """Run the experiment at ``scale`` and return (and, with ``out_dir``, write) the report."""
    from paper_common.facts import World

    check_scale(scale)
    cfg = SCALES[scale]
    torch.manual_seed(seed)
    watch = Stopwatch()
    report = Report(package="lora_alpha", title="LoRA-alpha: the scaling factor, not the learning rate",
                    scale=scale, seed=seed)  # fmt: skip

    seeds = tuple(seed + s for s in cfg.seeds)
    reg = RegressionTask(**cfg.regression, seed=seed)
    if scale == "full":
        lm_tasks = _full_tasks(cfg)
    else:
        world = World(seed=seed, **cfg.world)
        lm_tasks = [
            KnowledgeInjectionTask(world, cfg.cutoff, cfg.lm_steps, seed),
            ClassificationTask(world, cfg.lm_steps, cfg.cutoff, seed),
        ]
    watch.lap("tasks (fact LM)")

    # ---------------------------------------------------------------- 1. alpha x rank, the law
    res = sweep(reg, cfg.alphas, (SMALL_LR,), cfg.ranks, seeds, cfg.sweep_steps, cfg.batch_size,
                progress=None)  # fmt: skip
    fit = fit_optimal_alpha(res, "loss", n_boot=1000, seed=seed)
    best = res.optimal_alpha("loss")
    surface = sweep(reg, cfg.alphas, cfg.surface_lrs, (cfg.surface_rank,), seeds[:1],
                    cfg.sweep_steps, cfg.batch_size, progress=None)  # fmt: skip
    report.add_table("alpha_rank_sweep", res.table("loss"))
    report.add_table(
        "optimal_alpha",
        [{"r": r, "alpha*": a, "fit c*r^b": float(fit.predict(r)), "alpha=16": 16, "alpha=2r": 2 * r,
          "alpha* / max(16, 2r)": a / max(16, 2 * r)} for r, a in best.items()],
    )  # fmt: skip
    report.add_table("alpha_lr_surface", surface.table("loss"))
    report.add_figure("optimal_alpha", _plot_law(res, best, fit))
    report.add_figure("alpha_lr_surface", _plot_surface(surface, cfg.surface_rank))
    watch.lap("alpha x rank sweep")

    # ---------------------------------------------------------------- 2. alpha vs lr, drift
    interaction: dict[str, list[dict[str, Any]]] = {}
    for task in [reg, *lm_tasks]:
        steps = cfg.sweep_steps if task is reg else cfg.lm_finetune_steps
        refs = _references(task, cfg.interaction_rank, cfg.reference_steps, cfg.batch_size)
        interaction[task.name] = scaling_interaction(
            task, cfg.interaction_rank, BASE_ALPHA, SMALL_LR, cfg.factors, seeds[:1], steps,
            cfg.batch_size, refs, progress=None,
        )  # fmt: skip
    rows = [{"task": t, **r} for t, rs in interaction.items() for r in rs]
    report.add_table("alpha_vs_lr", rows)
    report.add_figure("alpha_vs_lr", _plot_interaction(interaction))
    watch.lap("alpha vs lr")

    # ---------------------------------------------------------------- 3. LoRA-alpha vs baselines
    compare: list[dict[str, Any]] = []
    for task in [reg, *lm_tasks]:
        is_reg = task is reg
        steps = cfg.sweep_steps if is_reg else cfg.lm_finetune_steps
        baselines = [standard(), rslora()] + ([alpha_2r(), loraplus()] if is_reg else [])
        for r in cfg.compare_ranks if is_reg else cfg.compare_lm_ranks:
            for m in baselines:
                runs = [
                    finetune(task, m, r, lr, steps, cfg.batch_size, seed) for lr in cfg.compare_lrs
                ]
                tuned = _tuned(runs)
                small = next((x.score for x in runs if x.lr == SMALL_LR), math.nan)
                compare.append({"task": task.name, "r": r, "method": m.name, "lr": tuned.lr,
                                "tuned": True, "loss": tuned.loss, "score": tuned.score,
                                f"score at lr {SMALL_LR:g}": small})  # fmt: skip
            run = finetune(task, lora_alpha(), r, SMALL_LR, steps, cfg.batch_size, seed)
            compare.append({"task": task.name, "r": r, "method": run.method, "lr": SMALL_LR,
                            "tuned": False, "loss": run.loss, "score": run.score,
                            f"score at lr {SMALL_LR:g}": run.score})  # fmt: skip
    report.add_table("lora_alpha_vs_tuned", compare)
    report.add_figure("lora_alpha_vs_tuned", _plot_compare(compare))
    watch.lap("LoRA-alpha vs tuned baselines")

    # ---------------------------------------------------------------- 4. diagnostics curves
    diag = _diagnostics(reg, cfg, seed)
    report.add_table("diagnostics", diag["rows"])
    report.add_figure("diagnostics", _plot_diagnostics(diag["curves"]))
    watch.lap("diagnostics")

    _claims(report, fit, best, interaction, compare, [t.name for t in lm_tasks], cfg, res)
    report.add_table("stages", watch.laps)
    report.runtime_s = watch.elapsed_s
    if out_dir is not None:
        write_report(report, out_dir)
    return report


def _diagnostics(task: RegressionTask, cfg: Scale, seed: int) -> dict[str, Any]:
    """Three runs with Signal-Drift and sharpness recorded; full fine-tuning's spectrum beside."""
    r = cfg.interaction_rank
    refs = _references(task, r, cfg.reference_steps, cfg.batch_size)
    every = max(1, cfg.sweep_steps // 10)
    runs = {
        f"standard, lr {SMALL_LR:g}": (standard(), SMALL_LR),
        f"standard, lr {100 * SMALL_LR:g}": (standard(), 100 * SMALL_LR),
        f"LoRA-alpha, lr {SMALL_LR:g}": (lora_alpha(), SMALL_LR),
    }
    curves, rows = {}, []
    for name, (method, lr) in runs.items():
        cb = SignalDriftCallback(refs["full_ft"], every=every,
                                 sharpness=(task.loss, task.reference_batch()),
                                 sharpness_every=every * 2, sharpness_iters=10)  # fmt: skip
        run = finetune(task, method, r, lr, cfg.sweep_steps, cfg.batch_size, seed, diagnostics=cb)
        curves[name] = cb.history
        last = cb.history[-1]
        sharp = [h["sharpness"] for h in cb.history if "sharpness" in h]
        rows.append({"run": name, "loss": run.loss, "score": run.score,
                     "update_norm": last["update_norm"], "drift_ratio": last["drift_ratio"],
                     "stable_rank": last["stable_rank"], "top1_energy": last["top1_energy"],
                     "sharpness_final": sharp[-1] if sharp else math.nan})  # fmt: skip
    ft = spectral_summary(refs["full_ft"])
    rows.append({"run": "full fine-tuning (lr 1e-3)", "stable_rank": ft["stable_rank"],
                 "top1_energy": ft["top1_energy"],
                 "update_norm": float(torch.sqrt(sum((d**2).sum() for d in refs["full_ft"].values())))})  # fmt: skip
    return {"rows": rows, "curves": curves}


def _pick(rows: list[dict[str, Any]], kind: str, k: float) -> dict[str, Any]:
    return next(r for r in rows if r["kind"] == kind and r["factor"] == k)


def _drift_ratios(rows: list[dict[str, Any]], kmax: float) -> tuple[float, float, str | None]:
    """Drift ratio at ``kmax`` over the shared base run (lr series at k=1), for the alpha and the lr
    series of one task; with the reason when the base gives no scale (None when it does).

    A diverged run has drift ratio ``+inf`` (:func:`~lora_alpha.signal_drift`): censored at the
    top, so its ratio is ``+inf`` too. A base that is 0, infinite or NaN leaves both undefined.
    """
    base = _pick(rows, "lr", 1)["drift_ratio_full_ft"]
    if not (math.isfinite(base) and base > 0):
        return math.nan, math.nan, f"base drift ratio {base:g} at k=1"
    a, l_ = _pick(rows, "alpha", kmax), _pick(rows, "lr", kmax)
    return a["drift_ratio_full_ft"] / base, l_["drift_ratio_full_ft"] / base, None


def _geomean(ratios: list[float]) -> float:
    """Geometric mean of non-negative ratios, with the limits explicit (no log of 0 or inf): a
    ``+inf`` (censored) makes it ``+inf``, a 0 makes it 0, both together or a NaN or negative
    ratio leave it undefined (NaN)."""
    x = np.asarray(ratios, dtype=float)
    if len(x) == 0 or np.isnan(x).any() or (x < 0).any():
        return math.nan
    zero, inf = bool((x == 0).any()), bool(np.isinf(x).any())
    if zero or inf:
        return math.nan if zero and inf else (0.0 if zero else math.inf)
    return float(np.exp(np.mean(np.log(x))))


ONE_SEED = "missing: one training seed per task; needs >= 3 replicate seeds of the runs (issue 47)"
MIN_SEEDS = 3  # an interval over seeds needs >= 3 of them (with 2: 1 degree of freedom)
EXPONENT_TOL = 0.15  # |b - 0.5| <= 0.15: the paper's sqrt(r) law, b in [0.35, 0.65]
FLAT = 1.25  # "flat": the drift ratio moves by at most a factor 1.25 (within [0.8, 1.25])


def abs_dev_interval(low: float, high: float, center: float) -> tuple[float, float]:
    """The interval of ``|b - center|`` for ``b`` in ``[low, high]`` (NaN stays NaN).

    >>> abs_dev_interval(0.2, 0.6, 0.5), abs_dev_interval(0.6, 0.9, 0.5)
    ((0.0, 0.3), (0.09999999999999998, 0.4))
    """
    if math.isnan(low) or math.isnan(high):
        return math.nan, math.nan
    lo, hi = abs(low - center), abs(high - center)
    return (0.0 if low <= center <= high else min(lo, hi)), max(lo, hi)


def _fold(x: float) -> float:
    """How far a ratio is from 1 as a factor >= 1 (``max(x, 1/x)``; 0 and inf give inf)."""
    if math.isnan(x):
        return math.nan
    return math.inf if x in (0.0, math.inf) else max(x, 1.0 / x)


def _responds(interaction: dict[str, list[dict[str, Any]]], kmax: float) -> Control:
    gains = [_finite_or(_pick(rows, "lr", kmax)["score"], -math.inf)
             - _finite_or(_pick(rows, "lr", 1)["score"], math.inf) for rows in interaction.values()]  # fmt: skip
    return Control.positive(
        f"fine-tuning responds to scale: min over tasks of score(lr x {kmax:g}) - score(k=1)",
        float(min(gains)), ">", 0.0,
    )  # fmt: skip


def _drift_claim(interaction: dict[str, list[dict[str, Any]]], kmax: float) -> Claim:
    """The drift claim: the alpha series' drift ratio (k / k=1, geometric mean over tasks) stays
    within a factor ``FLAT`` of 1; the lr series, where the drift must rise, is the negative
    control. Not measured when a task's base ratio is 0 or not finite. One seed per task, so no
    interval: inconclusive until replicate seeds exist."""
    alpha_ratio, lr_ratio, problems = [], [], []
    for task, rows in interaction.items():
        a, l_, why = _drift_ratios(rows, kmax)
        alpha_ratio.append(a)
        lr_ratio.append(l_)
        if why is not None:
            problems.append(f"{task}: {why}")
    ga, gl = _geomean(alpha_ratio), _geomean(lr_ratio)
    per_task = "per task alpha / lr: " + ", ".join(
        f"{t} {a:.2f} / {b:.2f}" for t, a, b in zip(interaction, alpha_ratio, lr_ratio, strict=True)
    )
    statement = f"The drift ratio stays flat as alpha grows ({kmax:g}x) but rises as the learning rate grows"
    metric = (
        "fold change of the drift ratio at k vs k=1, max(x, 1/x) (full-FT reference, geometric "
        "mean over tasks): alpha series"
    )
    bases = [_pick(rows, "lr", 1)["drift_ratio_full_ft"] for rows in interaction.values()]
    positive = Control.positive(
        "the drift estimator is defined: min over tasks of the base drift ratio",
        float(np.nan_to_num(np.min(np.asarray(bases, dtype=float)), nan=-1.0, posinf=-1.0)),
        ">", 0.0,
    )  # fmt: skip
    if problems or math.isnan(ga) or math.isnan(gl):
        why = "; ".join(problems) or "a drift ratio is NaN (a zero update), or 0 and inf meet"
        return Claim.decide(statement, metric, None, None, "<=", FLAT, positive=positive,
                            negative=Control.absent("negative", "a defined lr-series drift ratio"),
                            method=ONE_SEED, note=f"not measured: {why}; {per_task}")  # fmt: skip
    censored = " (inf: a diverged run, drift censored at +inf)" if math.inf in (ga, gl) else ""
    return Claim.decide(
        statement, metric, _fold(ga), None, "<=", FLAT, positive=positive,
        negative=Control.negative(
            f"the lr series (where the drift must rise): fold change {gl:.2f}x", _fold(gl)
        ),
        method=ONE_SEED,
        note=per_task + censored + "; before: a point check of [0.8, 1.25] and lr series above",
    )  # fmt: skip


def exponent_claim(
    fit: PowerLawFit, null: PowerLawFit, interior: float, n_seeds: int = MIN_SEEDS
) -> Claim:
    """The sqrt(r) law, decided on the fit's bootstrap CI (over ``n_seeds`` seeds, >= MIN_SEEDS)
    of ``|b - 0.5|``; the same rule on the fit of the permutation null (:func:`permuted_ranks`,
    no rank trend) is the negative control."""
    note = (
        f"b = {fit.exponent:.3f}, 95% CI [{fit.exponent_ci[0]:.3f}, {fit.exponent_ci[1]:.3f}] "
        f"(bootstrap over seeds), c = {fit.coefficient:.1f}, R^2 = {fit.r2:.2f}"
        + (f"; ranks left out (every alpha diverged): {', '.join(f'{r:g}' for r in fit.excluded)}"
           if fit.excluded else "")
        + "; before issue 43 a point check of |b - 0.5| <= 0.15 (it passed at quick on b = 0.493 "
        "with a CI of [0.16, 0.51])"
    )  # fmt: skip
    defined = (fit.defined and not any(map(math.isnan, fit.exponent_ci))
               and n_seeds >= MIN_SEEDS)  # fmt: skip
    return Claim.decide(
        "The optimal alpha grows like sqrt(r): fitted exponent b of alpha* = c r^b",
        "|b - 0.5| (regression task, lr 1e-4)",
        abs(fit.exponent - 0.5) if fit.defined else None,
        abs_dev_interval(*fit.exponent_ci, 0.5) if defined else None,
        "<=", EXPONENT_TOL,
        positive=Control.positive(
            "the sweep brackets the optimum: share of ranks whose alpha* is inside the alpha grid",
            interior, ">=", 1.0,
        ),
        negative=Control.negative(
            f"permutation null: each seed's rank labels shuffled (seeded; b = {null.exponent:.2f})",
            abs(null.exponent - 0.5), abs_dev_interval(*null.exponent_ci, 0.5),
        ) if null.defined else Control.absent("negative", "a defined fit with permuted ranks"),
        method="95% bootstrap CI of b over seeds (the fit's own), as |b - 0.5|"
        if defined else f"missing: fewer than two ranks have an optimal alpha, or < {MIN_SEEDS} "
        "seeds to bootstrap",
        note=("" if fit.defined else "not measured: fewer than two ranks have an optimal alpha; ")
        + note,
    )  # fmt: skip


def permuted_ranks(res: SweepResult, seed: int = 0) -> SweepResult:
    """The permutation null of the rank law: each training seed's rank labels shuffled by its own
    seeded permutation (uniform, the identity included), so the seed-mean loss at a rank mixes
    ranks and alpha* carries no rank trend. (Reversing the ranks was the exact mirror image of the
    claim: b -> -b, refuted whenever b is near 0.5, supported when the law points the other way.)
    """
    ranks, seeds = res.values("r"), res.values("seed")
    perm = np.random.default_rng(seed).permuted(np.tile(ranks, (len(seeds), 1)), axis=1)
    relabel = {
        s: dict(zip(ranks, map(int, p), strict=True)) for s, p in zip(seeds, perm, strict=True)
    }
    return SweepResult([{**row, "r": relabel[row["seed"]][row["r"]]} for row in res.rows])


def alpha_step(alphas: list[float]) -> float:
    """The alpha grid's resolution: the smallest ratio of neighbouring grid points."""
    a = np.sort(np.asarray(alphas, dtype=float))
    return float(np.min(a[1:] / a[:-1]))


def _heuristic_claim(
    res: SweepResult, best: dict[int, float], fit: PowerLawFit, interior: float
) -> Claim:
    """alpha* / max(16, 2r) >= one alpha-grid step at every rank, on the log-t interval over seeds
    of each rank's per-seed optimum; the smallest over ranks. Negative control: the self-null,
    each rank's per-seed optimum against the next seed's (seed s vs s + 1)."""
    seeds = res.values("seed")
    step = alpha_step(res.values("alpha"))
    per_seed = [_optimal_alpha([row for row in res.rows if row["seed"] == s], "loss", None, True)
                for s in seeds]  # fmt: skip
    no_optimum = [r for r, a in best.items() if not math.isfinite(a)]
    bad = any(not math.isfinite(p[r]) for p in per_seed for r in p)
    ci = negative = None
    if not no_optimum and not bad and len(seeds) >= MIN_SEEDS:
        ci = extreme_interval([log_t_interval([p[r] / max(16, 2 * r) for p in per_seed])
                               for r in sorted(best)], largest=False)  # fmt: skip
        opt = np.array([[p[r] for r in sorted(best)] for p in per_seed])  # seeds x ranks
        null = extreme_interval([log_t_interval(col / np.roll(col, 1)) for col in opt.T],
                                largest=False)  # fmt: skip
        negative = Control.negative("self-null: each rank's alpha* against the next seed's "
                                    "(seed s vs s + 1), the smallest over ranks", null.estimate, null)  # fmt: skip
    ratio = None if no_optimum else float(min(a / max(16, 2 * r) for r, a in best.items()))
    return Claim.decide(
        "The optimal alpha is larger than the heuristics alpha=16 and alpha=2r imply, at every rank",
        "min over ranks of alpha* / max(16, 2r)", ratio, ci, ">=", step,
        positive=Control.positive(
            "the sweep brackets the optimum: share of ranks whose alpha* is inside the alpha grid",
            interior, ">=", 1.0,
        ),
        negative=negative or Control.absent(
            "negative", f"per-seed optima at every rank over >= {MIN_SEEDS} seeds (self-null)"),
        method=f"95% t-interval over {len(seeds)} seeds of each rank's log ratio (per-seed "
        "optimum); the smallest over ranks" if ci is not None
        else f"missing: an optimum diverged in a seed, or < {MIN_SEEDS} seeds",
        note=(f"not measured: every alpha diverged at rank {', '.join(map(str, no_optimum))}; "
              if no_optimum else "")
        + f"target: one alpha-grid step (x{step:g}), the smallest ratio the grid resolves; the "
        "paper's '> 1' is met by a null that sits at 1 (the draft's negative control, the "
        "heuristic itself at ratio 1, was refuted by construction, not by data); "
        + f"fitted c = {fit.coefficient:.1f} (CI {fit.coefficient_ci[0]:.1f}-"
        f"{fit.coefficient_ci[1]:.1f}); alpha=2r is c = 2 sqrt(r), alpha=16 is c = 16/sqrt(r)",
    )  # fmt: skip


def _claims(
    report: Report,
    fit: PowerLawFit,
    best: dict[int, float],
    interaction: dict[str, list[dict[str, Any]]],
    compare: list[dict[str, Any]],
    held_out: list[str],
    cfg: Scale,
    res: SweepResult,
) -> None:
    kmax = max(cfg.factors)
    wins, losses, detail = [], [], []
    for task, rows in interaction.items():
        a, l_ = _pick(rows, "alpha", kmax), _pick(rows, "lr", kmax)
        wins.append(_win(a, l_))
        losses.append(_win(_pick(rows, "alpha", 1), l_))  # the unchanged base run
        detail.append(
            f"{task}: alpha {a['score']:.3f}{' (diverged)' if a.get('diverged') else ''}"
            f" vs lr {l_['score']:.3f}{' (diverged)' if l_.get('diverged') else ''}"
        )
    report.add_claim(Claim.decide(
        f"At lr {SMALL_LR:g}, raising alpha by {kmax:g}x beats raising the learning rate by {kmax:g}x",
        "share of tasks where alpha x k scores higher (ties: lower loss; a diverged run never wins)",
        float(np.mean(wins)), None, ">=", 1.0,
        positive=_responds(interaction, kmax),
        negative=Control.negative(f"null: the base run (alpha and lr x 1) in the alpha x {kmax:g} place",
                                  float(np.mean(losses))),
        method=ONE_SEED, note="; ".join(detail),
    ))  # fmt: skip
    report.add_claim(_drift_claim(interaction, kmax))
    grid = np.array(cfg.alphas, dtype=float)
    interior = float(np.mean([grid[0] < a < grid[-1] for a in best.values()]))
    report.add_claim(exponent_claim(fit, fit_optimal_alpha(permuted_ranks(res), "loss", n_boot=1000,
                                                           seed=0), interior, len(res.values("seed"))))  # fmt: skip
    report.add_claim(_heuristic_claim(res, best, fit, interior))
    cells, untuned, notes = [], [], []
    for task in sorted({r["task"] for r in compare}):
        for r in sorted({c["r"] for c in compare if c["task"] == task}):
            rows = [c for c in compare if c["task"] == task and c["r"] == r]
            ours = next(c for c in rows if not c["tuned"])
            rivals = [
                c
                for c in rows
                if c["tuned"] and c["method"].split(" ")[0] in ("standard", "rsLoRA")
            ]
            # scores are finite (a diverged run scores 0); NaN would still count as the worst
            top = float(np.max([_finite_or(c["score"], -math.inf) for c in rivals]))
            ok = ours["score"] >= top - 0.02
            std = next(c for c in rivals if c["method"].startswith("standard"))
            if task in held_out:
                cells.append(ok)
                untuned.append(
                    _finite_or(std[f"score at lr {SMALL_LR:g}"], -math.inf) >= top - 0.02
                )
            notes.append(f"{task} r={r}: {ours['score']:.3f} vs {top:.3f}")
    report.add_claim(Claim.decide(
        f"LoRA-alpha (c={DEFAULT_C:g}) at lr {SMALL_LR:g} matches or beats tuned standard LoRA and "
        "rsLoRA across ranks",
        "share of (LM task, rank) cells with score >= best tuned - 0.02", float(np.mean(cells)),
        None, ">=", 1.0,
        positive=_responds(interaction, kmax),
        negative=Control.negative(
            f"null: untuned standard LoRA (alpha=16, lr {SMALL_LR:g}) in LoRA-alpha's place",
            float(np.mean(untuned)),
        ),
        method="missing: one training seed per cell; needs >= 3 replicate seeds (issue 47)",
        note="; ".join(notes) + " (regression cells were used to fit c: shown, not counted)",
    ))  # fmt: skip


# ---------------------------------------------------------------------------------- plots


def _plot_law(res: SweepResult, best: dict[int, float], fit: PowerLawFit) -> Any:
    fig, (ax1, ax2) = new_figure(1, 2, size=(10, 4))
    means = res.mean("loss")
    for r in sorted(best):
        alphas = sorted(a for rr, a, _ in means if rr == r)
        ax1.plot(alphas, [means[(r, a, SMALL_LR)] for a in alphas], marker="o", label=f"r={r}")
        if math.isfinite(best[r]):  # NaN: every alpha diverged at this rank
            ax1.axvline(best[r], color=ax1.lines[-1].get_color(), ls=":", lw=1)
    ax1.set(xscale="log", yscale="log", xlabel="alpha (scale alpha/r)", ylabel="test MSE",
            title=f"regression, lr {SMALL_LR:g}")  # fmt: skip
    ax1.legend(fontsize=8)
    ranks = np.array(sorted(best), dtype=float)
    ax2.plot(ranks, [best[int(r)] for r in ranks], "o", label="best alpha")
    grid = np.geomspace(ranks[0], ranks[-1], 50)
    ax2.plot(grid, fit.predict(grid), label=f"fit {fit.coefficient:.0f} r^{fit.exponent:.2f}")
    ax2.plot(grid, 2 * grid, "--", label="alpha = 2r")
    ax2.plot(grid, 16 + 0 * grid, ":", label="alpha = 16")
    ax2.set(xscale="log", yscale="log", xlabel="rank r", ylabel="alpha*", title="optimal alpha")
    ax2.legend(fontsize=8)
    return fig


def _plot_surface(surface: SweepResult, r: int) -> Any:
    alphas, lrs, table = surface.surface(r, "loss")
    fig, ax = new_figure(1, 1, size=(5.5, 4))
    im = ax.imshow(np.log10(table), aspect="auto", origin="lower", cmap="viridis_r")
    ax.set_xticks(range(len(lrs)), [f"{x:g}" for x in lrs])
    ax.set_yticks(range(len(alphas)), [f"{a:g}" for a in alphas])
    ax.set(xlabel="learning rate", ylabel="alpha", title=f"log10 test MSE, r={r}")
    fig.colorbar(im, ax=ax)
    return fig


def _plot_interaction(interaction: dict[str, list[dict[str, Any]]]) -> Any:
    fig, axes = new_figure(2, len(interaction), size=(4 * len(interaction), 6.5))
    axes = np.asarray(axes).reshape(2, -1)
    for j, (task, rows) in enumerate(interaction.items()):
        for kind, style in (("alpha", "o-"), ("lr", "s--")):
            rs = sorted((r for r in rows if r["kind"] == kind), key=lambda r: r["factor"])
            ks = [r["factor"] for r in rs]
            axes[0, j].plot(ks, [r["score"] for r in rs], style, label=f"{kind} x k")
            axes[1, j].plot(ks, [r["drift_ratio_full_ft"] for r in rs], style, label=f"{kind} x k")
        axes[0, j].set(xscale="log", title=task, ylabel="score")
        axes[1, j].set(xscale="log", xlabel="factor k", ylabel="drift ratio (full-FT ref.)")
        axes[0, j].legend(fontsize=8)
    return fig


def _plot_compare(compare: list[dict[str, Any]]) -> Any:
    tasks = sorted({c["task"] for c in compare})
    fig, axes = new_figure(1, len(tasks), size=(4.5 * len(tasks), 3.8))
    axes = np.atleast_1d(axes)
    for ax, task in zip(axes, tasks, strict=True):
        rows = [c for c in compare if c["task"] == task]
        methods = list(dict.fromkeys(c["method"] for c in rows))
        ranks = sorted({c["r"] for c in rows})
        width = 0.8 / len(methods)
        for i, m in enumerate(methods):
            vals = [
                next(c["score"] for c in rows if c["method"] == m and c["r"] == r) for r in ranks
            ]
            ax.bar(np.arange(len(ranks)) + i * width, vals, width, label=m)
        ax.set_xticks(np.arange(len(ranks)) + 0.4 - width / 2, [f"r={r}" for r in ranks])
        ax.set(title=task, ylabel="score")
    axes[0].legend(fontsize=7)
    return fig


def _plot_diagnostics(curves: dict[str, list[dict[str, float]]]) -> Any:
    keys = [("update_norm", "||dW||_F"), ("drift_ratio", "drift ratio (full-FT ref.)"),
            ("stable_rank", "stable rank of dW"), ("sharpness", "top Hessian eigenvalue")]  # fmt: skip
    fig, axes = new_figure(1, 4, size=(15, 3.5))
    for ax, (key, label) in zip(axes, keys, strict=True):
        for name, hist in curves.items():
            pts = [(h["step"], h[key]) for h in hist if key in h and math.isfinite(h[key])]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker=".", label=name)
        ax.set(xlabel="step", title=label)
        if key in ("sharpness", "update_norm"):
            ax.set_yscale("log")
    axes[0].legend(fontsize=7)
    return fig


__all__ = ["SCALES", "Scale", "reproduce"]
