"""``reproduce``: linearize a frozen recall teacher with every state update, intervention and baseline
at one budget, and test the paper's six claims.

Per variant and seed (same captured teacher activations, same transfer steps, same data): layerwise
relative attention-output MSE on held-out text, MQAR accuracy at the training length (1x) and at 4x,
passkey and copy at 4x, the graded-word perplexity gap, and, for hybrids, MQAR at 4x with the state
zeroed. The projection analysis reads the teacher's heads (key-dependence index, sink and recent
mass). Knowledge retention: a ``fact_lm`` linearized the same way, multiple choice by
``answer_rank`` (the MMLU stand-in), for our best variant (chosen on recall, not on facts) and every
baseline.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from scipy import stats

from linearize.analysis import attention_mass, key_dependence
from linearize.baselines import (
    elu_linear,
    hedgehog,
    liger,
    lola,
    lolcats,
    sliding_window,
    streaming_llm,
)
from linearize.convert import (
    TransferConfig,
    capture,
    layer_errors,
    linearize,
    transfer,
    transfer_diverged,
)
from linearize.evaluate import fact_accuracy, task_scores
from linearize.student import LinearizeConfig, zero_state
from linearize.tasks import TASKS, make_task
from linearize.teachers import TeacherSpec, recall_teacher
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
    ConfidenceInterval,
    bootstrap_ci,
    extreme_interval,
    log_t_interval,
    t_interval,
)

__all__ = ["SCALES", "reproduce", "variants"]

SCALES: dict[str, dict[str, Any]] = {
    "smoke": {
        "teacher": TeacherSpec(d_model=32, length=8, n_train=300, steps=40, batch_size=16),
        "seeds": [0],
        "n_distill": 32,
        "n_eval": 16,
        "transfer_steps": 6,
        "transfer_lr": 1e-2,
        "budget": 6,
        "sinks": 2,
        "window": 2,
        "grid": "smoke",
        "fact": {
            "world": {"n_people": 12, "n_cities": 8, "n_companies": 5, "n_countries": 4},
            "steps": 60,
            "n_items": 12,
        },
        "workers": 1,
    },
    "quick": {
        "teacher": TeacherSpec(),
        "seeds": [0, 1, 2],
        "n_distill": 256,
        "n_eval": 96,
        "transfer_steps": 150,
        "transfer_lr": 1e-2,
        "budget": 8,
        "sinks": 2,
        "window": 2,
        "grid": "all",
        "fact": {
            "world": {"n_people": 30, "n_cities": 12, "n_companies": 10},
            "steps": 800,
            "n_items": 90,
        },
        "workers": 2,
    },
    # the paper's setting: real models from local paths, MMLU through lm-eval (the `eval` extra),
    # needle retrieval from local data; the recall teachers at length 256 (4x = 1024), both archs
    "full": {
        "teacher": TeacherSpec(n_layers=4, d_model=128, length=256, n_train=30000, steps=20000),
        "archs": ["llama", "qwen2"],
        "seeds": [0, 1, 2, 3, 4],
        "n_distill": 4096,
        "n_eval": 512,
        "transfer_steps": 2000,
        "transfer_lr": 1e-3,
        "budget": 128,
        "sinks": 4,
        "window": 60,
        "grid": "all",
        "fact": {"world": {}, "steps": 3000, "n_items": 400},
        "real_models": [
            "meta-llama/Llama-3.2-1B",
            "meta-llama/Llama-3.1-8B",
            "Qwen/Qwen2.5-7B",
            "Qwen/Qwen2.5-32B",
        ],
        "workers": 1,
    },
}

OURS = "delta+all"
# per-variant numbers in the report's table (means over seeds)
METRICS = ("mse", "mqar_1x", "mqar_2x", "mqar_4x", "passkey_1x", "passkey_4x", "copy_4x", "ppl")


def variants(scale: dict[str, Any], head_dim: int) -> dict[str, tuple[str, LinearizeConfig]]:
    """``name -> (group, config)`` of the grid at ``scale``'s budget. Every state has width
    ``head_dim`` (Hedgehog features of ``head_dim / 2`` doubled), so state sizes are equal."""
    fd = max(1, head_dim // 2)
    b, s, w = scale["budget"], scale["sinks"], scale["window"]
    hh = {"feature_map": "hedgehog", "feature_dim": fd}  # positive, width head_dim
    sg = {"feature_map": "learned"}  # signed, width head_dim, unit-normalised by the delta rules
    grid: dict[str, tuple[str, LinearizeConfig]] = {
        "linear": ("update", LinearizeConfig(update="linear", **hh)),
        "gated": ("update", LinearizeConfig(update="gated", **hh)),
        "diag_gated": ("update", LinearizeConfig(update="diag_gated", **hh)),
        "delta": ("update", LinearizeConfig(update="delta", **sg)),
        "gated_delta": ("update", LinearizeConfig(update="gated_delta", **sg)),
        "control": ("update", LinearizeConfig(update="control", **sg)),
        "delta+sinks": ("intervention", LinearizeConfig(update="delta", budget=s, sinks=s, **sg)),
        "delta+conv": ("intervention", LinearizeConfig(update="delta", conv=True, **sg)),
        "delta+routing": (
            "intervention",
            LinearizeConfig(update="delta", budget=b, window=w, **sg),
        ),
        OURS: (
            "intervention",
            LinearizeConfig(update="delta", conv=True, budget=b, sinks=s, window=w, **sg),
        ),
        "sliding_window": ("baseline", sliding_window(b)),
        "streaming_llm": ("baseline", streaming_llm(s, b - s)),
        "elu_linear": ("baseline", elu_linear()),
        "hedgehog": ("baseline", hedgehog(fd)),
        "lolcats": ("baseline", lolcats(b, fd)),
        "liger": ("baseline", liger(b)),
        "lola": ("baseline", lola(s, w, b - s - w, fd)),
    }
    if scale["grid"] == "smoke":
        keep = ["linear", "gated", "delta", "control", OURS, "lola", "sliding_window"]
        grid = {k: grid[k] for k in keep}
    return grid


# ============================================================================ jobs
def _teacher_and_data(scale: dict[str, Any], arch: str):  # type: ignore[no-untyped-def]
    spec = replace(scale["teacher"], arch=arch)
    teacher, tok = recall_teacher(spec, progress=False)
    distill_texts = _task_mix(scale["n_distill"] // 3, spec.length, seed=50)
    held_texts = _task_mix(32, spec.length, seed=70)
    return spec, teacher, tok, distill_texts, held_texts


def _task_mix(n: int, length: int, seed: int) -> list[str]:
    """``n`` texts of each task at ``length`` (seeds ``seed``, ``seed + 1``, ``seed + 2``)."""
    return [
        t for i, task in enumerate(TASKS) for t in make_task(task, n, length, seed=seed + i).texts
    ]


def _eval_sets(scale: dict[str, Any], spec: TeacherSpec) -> dict[str, Any]:
    n, length = scale["n_eval"], spec.length
    return {
        "mqar_1x": make_task("mqar", n, length, seed=901),
        "mqar_2x": make_task("mqar", n, 2 * length, seed=906),
        "mqar_4x": make_task("mqar", n, 4 * length, seed=902),
        "passkey_1x": make_task("passkey", n, length, seed=903),
        "passkey_4x": make_task("passkey", n, 4 * length, seed=904),
        "copy_4x": make_task("copy", n, 4 * length, seed=905),
    }


def _scores(model, tok, sets) -> dict[str, float]:  # type: ignore[no-untyped-def]
    out = {}
    for name, ts in sets.items():
        sc = task_scores(model, tok, ts)
        out[name] = sc.accuracy
        if name == "mqar_1x":
            out["ppl"] = sc.perplexity
    return out


# every job, and the teacher's warm-up, runs with this many torch and BLAS threads, in a worker or
# in this process alike: the teacher cache is keyed by the thread count, so the warm-up's teacher is
# the one the jobs load, and no result depends on `workers`
JOB_THREADS = 1


def _recall_job(job: tuple[str, str, int, dict[str, Any], str]) -> dict[str, Any]:
    with pinned_threads(JOB_THREADS, torch=True):
        return _recall_run(job)


def _recall_run(job: tuple[str, str, int, dict[str, Any], str]) -> dict[str, Any]:
    name, group, seed, scale, arch = job
    spec, teacher, tok, distill_texts, held_texts = _teacher_and_data(scale, arch)
    sets = _eval_sets(scale, spec)
    row: dict[str, Any] = {"variant": name, "group": group, "seed": seed, "arch": arch}
    if name == "softmax":
        row.update(_scores(teacher, tok, sets))
        held = capture(teacher, tok, held_texts)
        kdi, first, last = [], [], []
        for batch, mask in zip(held.batches, held.masks, strict=True):
            kdi.append([key_dependence(r["q"], r["k"], r["scale"], mask) for r in batch])
            m = [attention_mass(r["q"], r["k"], r["scale"], mask) for r in batch]
            first.append([x[0] for x in m])
            last.append([x[1] for x in m])
        row["key_dependence"] = np.mean(kdi, 0).tolist()  # (layers, heads)
        row["sink_mass"] = np.mean(first, 0).tolist()
        row["recent_mass"] = np.mean(last, 0).tolist()
        row["mse"] = 0.0
        return row
    cfg = variants(scale, teacher.config.hidden_size // teacher.config.num_attention_heads)[name][1]
    torch.manual_seed(seed)
    student = linearize(teacher, cfg)
    train = capture(teacher, tok, distill_texts)
    losses = transfer(
        student,
        train,
        TransferConfig(
            steps=scale["transfer_steps"], lr=scale["transfer_lr"], seed=seed, progress=False
        ),
    )
    row["transfer_diverged"] = transfer_diverged(losses)
    errs = layer_errors(student, capture(teacher, tok, held_texts))
    row["mse_by_head"] = errs.tolist()
    row["mse"] = float(errs.mean())
    row["final_loss"] = float(np.mean(losses[-10:])) if losses else float("nan")
    row.update(_scores(student, tok, sets))
    if cfg.budget and cfg.update != "none":
        with zero_state():
            row["mqar_4x_zeroed"] = task_scores(student, tok, sets["mqar_4x"]).accuracy
    row["backbone_unchanged"] = _backbone_unchanged(teacher, student)
    return row


def _backbone_unchanged(teacher, student) -> bool:  # type: ignore[no-untyped-def]
    t = dict(teacher.named_parameters())
    return all(torch.equal(p, t[n]) for n, p in student.named_parameters() if n in t)


def _fact_data(scale: dict[str, Any], seed: int):  # type: ignore[no-untyped-def]
    from paper_common.facts import World
    from paper_common.lm import fact_lm

    fc = scale["fact"]
    world = World(seed=0, **fc["world"])
    model, tok = fact_lm(world, steps=fc["steps"], progress=False)
    qa = world.qa_pairs("train")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(qa))
    items = [qa[i] for i in order[: fc["n_items"]]]
    mc = {it.fact.key: it for it in world.multiple_choice("train", facts=[q.fact for q in items])}
    prompts = [q.question for q in items]
    answers = [q.answer for q in items]
    cands = [list(mc[q.fact.key].options) for q in items]
    # attention transfer on the model's own training statements (no question of the test)
    texts, _ = world.corpus()
    distill = [texts[i] for i in rng.permutation(len(texts))[:128]]
    return model, tok, prompts, answers, cands, distill


def _fact_job(job: tuple[str, int, dict[str, Any]]) -> dict[str, Any]:
    with pinned_threads(JOB_THREADS, torch=True):
        return _fact_run(job)


def _fact_run(job: tuple[str, int, dict[str, Any]]) -> dict[str, Any]:
    name, seed, scale = job
    model, tok, prompts, answers, cands, distill = _fact_data(scale, 0)
    if name == "softmax":
        return {
            "variant": name,
            "seed": seed,
            "fact_acc": fact_accuracy(model, tok, prompts, answers, cands),
        }
    hd = model.config.hidden_size // model.config.num_attention_heads
    cfg = variants(scale, hd)[name][1]
    torch.manual_seed(seed)
    student = linearize(model, cfg)
    losses = transfer(
        student,
        capture(model, tok, distill),
        TransferConfig(
            steps=scale["transfer_steps"], lr=scale["transfer_lr"], seed=seed, progress=False
        ),
    )
    return {
        "variant": name,
        "seed": seed,
        "fact_acc": fact_accuracy(student, tok, prompts, answers, cands),
        "transfer_diverged": transfer_diverged(losses),
    }


# ============================================================================ report
def _values(runs: list[dict[str, Any]], name: str, key: str) -> list[float]:
    """``key`` of every run of variant ``name`` (one per seed, in seed order)."""
    return [r[key] for r in runs if r["variant"] == name and key in r]


def _head_errors(runs: list[dict[str, Any]], name: str) -> np.ndarray:
    """``(layers, heads)`` relative MSE of variant ``name``, mean over seeds."""
    return np.mean(_values(runs, name, "mse_by_head"), 0)


def _delta_gain(runs: list[dict[str, Any]]) -> np.ndarray:
    """Per head (flattened), gated's error minus delta's: delta's error reduction over gated."""
    return (_head_errors(runs, "gated") - _head_errors(runs, "delta")).ravel()


def _mean_ci(x: list[float]) -> tuple[float, float, float]:
    """Mean and 95% bootstrap CI; the CI is NaN with fewer than 2 values, everything is NaN when a
    value is not finite (a run that was not measured: no interval is made up around it)."""
    a = np.asarray(x, dtype=float)
    if len(a) == 0 or not np.isfinite(a).all():
        return math.nan, math.nan, math.nan
    if len(a) < 2:
        return float(a.mean()), float("nan"), float("nan")
    ci = bootstrap_ci(a, seed=0)
    return float(a.mean()), ci.low, ci.high


@pin_threads(torch=True)
def reproduce(
    scale: str = "quick", seed: int = 0, out_dir: str | os.PathLike[str] | None = None
) -> Report:
    """Run the experiment at ``scale`` (smoke / quick / full); write the report to ``out_dir``."""
    scale = check_scale(scale)
    if scale == "full":
        raise NotImplementedError(
            "the full scale needs real checkpoints (Llama-3.2-1B ... Qwen2.5-32B) from local paths, "
            "lm-eval's MMLU data and a GPU; its configuration is linearize.reproduce.SCALES['full']"
        )
    cfg = SCALES[scale]
    watch = Stopwatch()
    seeds = [seed + s for s in cfg["seeds"]]
    arch = cfg["teacher"].arch
    # the teacher first (trained once, cached), in a worker so the parent runs no torch op before forking
    map_jobs(_warm_teacher, [(cfg, arch)], workers=1 if cfg["workers"] == 1 else 2)
    watch.lap("teacher")
    head_dim = cfg["teacher"].d_model // cfg["teacher"].n_heads
    grid = variants(cfg, head_dim)
    jobs = [("softmax", "teacher", seeds[0], cfg, arch)]
    jobs += [(name, group, s, cfg, arch) for name, (group, _) in grid.items() for s in seeds]
    rows = map_jobs(_recall_job, jobs, workers=cfg["workers"])
    watch.lap("recall")
    teacher_row = rows[0]
    runs = rows[1:]

    # the best of the paper's proposals (delta rules, with or without interventions) on recall
    # (4x MQAR) is the one tested on facts; linear / gated / control are comparison points
    ours = [
        n
        for n, (g, c) in grid.items()
        if g == "intervention" or (g == "update" and c.update in ("delta", "gated_delta"))
    ]
    best, tied = _pick_best(runs, ours, cfg["n_eval"])
    baselines = [n for n, (g, _) in grid.items() if g == "baseline"]
    fact_jobs = [("softmax", seeds[0], cfg)] + [
        (n, s, cfg) for n in [best, *baselines] for s in seeds
    ]
    fact_rows = map_jobs(_fact_job, fact_jobs, workers=cfg["workers"])
    watch.lap("facts")

    report = Report(
        package="linearize",
        title="Linearizing a frozen softmax transformer: state updates and interventions that keep recall",
        scale=scale,
        seed=seed,
    )
    summary = []
    for name, (group, c) in grid.items():
        row = {"variant": name, "group": group, "budget": c.budget}
        for key in (*METRICS, "mqar_4x_zeroed"):
            vals = _values(runs, name, key)
            row[key] = float(np.mean(vals)) if vals else None
        fa = _values(fact_rows, name, "fact_acc")
        row["fact_acc"] = float(np.mean(fa)) if fa else None
        summary.append(row)
    t_fact = fact_rows[0]["fact_acc"]
    summary.insert(
        0,
        {
            "variant": "softmax (teacher)",
            "group": "teacher",
            "budget": None,
            **{k: teacher_row[k] for k in METRICS},
            "mqar_4x_zeroed": None,
            "fact_acc": t_fact,
        },
    )
    for row in summary:
        if row["ppl"] is not None:
            row["ppl_gap"] = row["ppl"] - teacher_row["ppl"]
    report.add_table("variants", summary)
    _claims(
        report, grid, runs, teacher_row, fact_rows, best, baselines, cfg["n_eval"],
        cfg["fact"]["n_items"],
    )  # fmt: skip
    _figures(report, grid, runs, teacher_row)
    watch.lap("report")
    report.add_table("timing", watch.laps)
    report.runtime_s = watch.elapsed_s
    frozen = sum(bool(r["backbone_unchanged"]) for r in runs)
    stopped = sum(bool(r.get("transfer_diverged")) for r in [*runs, *fact_rows])
    report.notes = (
        _notes(cfg, best)
        + f" Best on recall: highest mean 4x MQAR, variants within 1/{cfg['n_eval']} of the top"
        f" tied ({', '.join(tied)}), ties to the lowest mean MSE."
        + f" Backbone bit-identical after transfer in {frozen} of {len(runs)} runs."
        + f" Transfer stopped on a non-finite loss or gradient in {stopped} of"
        f" {len(runs) + len(fact_rows) - 1} runs."
    )
    if out_dir is not None:
        write_report(report, out_dir)
    return report


def _warm_teacher(job: tuple[dict[str, Any], str]) -> bool:
    """Train (or find) the teacher with the jobs' thread count, so that the jobs load it."""
    cfg, arch = job
    with pinned_threads(JOB_THREADS, torch=True):
        recall_teacher(replace(cfg["teacher"], arch=arch), progress=False)
    return True


GAP_MIN_ITEMS = 4  # a gap to close must be worth at least this many eval items (half: 2 items)
MSE_RATIO = 0.9  # "lower MSE": at least a 10% reduction (a null ratio sits at 1)
ISSUE44 = (
    "known bugs (issue 44), not fixed here: transfer and layer_errors do not pass the padding mask, "
    "and task_scores assumes the word tokenizer"
)
MIN_SEEDS = 3  # a t-interval over seeds needs >= 3 (with 2: one degree of freedom)
NAN_CI = ConfidenceInterval(math.nan, math.nan, math.nan, 0.95)


def seed_interval(values: Any) -> ConfidenceInterval:
    """95% t-interval over seeds; NaN (undefined) with < 2 values or a non-finite one."""
    a = np.asarray(values, dtype=float)
    if a.size < MIN_SEEDS or not np.isfinite(a).all():
        return NAN_CI
    return t_interval(a)


def _defined(ci: ConfidenceInterval) -> ConfidenceInterval | None:
    return None if math.isnan(ci.low) or math.isnan(ci.high) else ci


def _method(ci: ConfidenceInterval | None, what: str, n: int) -> str:
    if ci is None:
        return f"missing: {n} linearization seed(s) or an unmeasured run; needs >= {MIN_SEEDS} (3 at quick)"
    return f"95% t-interval over {n} seeds of {what}"


def ratio_interval(num: Any, den: Any) -> ConfidenceInterval:
    """Geometric mean of per-seed ratios ``num / den`` with the t-interval of their logs; NaN
    (undefined) with < 2 seeds or a non-finite or non-positive value."""
    a, b = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if (
        a.size < MIN_SEEDS
        or a.size != b.size
        or not np.isfinite([*a, *b]).all()
        or (a <= 0).any()
        or (b <= 0).any()
    ):
        return NAN_CI
    return log_t_interval(a / b)


def _rotated(x: np.ndarray) -> np.ndarray:
    """A planted-absent effect: an arm against itself with the seeds paired off by one."""
    return x - np.roll(x, 1)


def _self_null(values: np.ndarray, what: str, ratio: bool = False) -> Control:
    ci = ratio_interval(values, np.roll(values, 1)) if ratio else seed_interval(_rotated(values))
    if _defined(ci) is None:
        return Control.absent("negative", f"{what} against itself over >= 2 seeds")
    return Control.negative(f"planted-absent: {what} against itself, seeds paired off by one",
                            ci.estimate, ci)  # fmt: skip


def rho_interval(
    x: np.ndarray, y: np.ndarray, seed: int = 0, n_boot: int = 1000
) -> tuple[ConfidenceInterval, float]:
    """Spearman rho over heads with its 95% percentile bootstrap interval (heads resampled), and
    the share of resamples where rho is defined; the interval is NaN when below 95%."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0 or not np.isfinite([*x, *y]).all():
        return NAN_CI, 0.0
    idx = np.random.default_rng(seed).integers(0, x.size, (n_boot, x.size))
    rx, ry = stats.rankdata(x[idx], axis=1), stats.rankdata(y[idx], axis=1)
    rx, ry = rx - rx.mean(1, keepdims=True), ry - ry.mean(1, keepdims=True)
    den = np.sqrt((rx**2).sum(1) * (ry**2).sum(1))
    ok = den > 0
    rho = float(stats.spearmanr(x, y).statistic)
    if ok.mean() < 0.95:
        return ConfidenceInterval(rho, math.nan, math.nan, 0.95), float(ok.mean())
    low, high = np.quantile((rx * ry).sum(1)[ok] / den[ok], [0.025, 0.975])
    return ConfidenceInterval(rho, float(low), float(high), 0.95), float(ok.mean())


def shuffled_rho(x: np.ndarray, y: np.ndarray, seed: int = 0) -> ConfidenceInterval:
    """The null of a rank correlation: the claim's own measurement (rho with its bootstrap
    interval over heads) on one seeded shuffle of ``x`` over heads. (The mean rho of many shuffles,
    with a t-interval, sits at 0 within a few hundredths whatever the data: refuted by
    construction.)"""
    return rho_interval(np.random.default_rng(seed).permutation(x), y, seed=seed)[0]


def _gap_claim(
    teacher_4x: float,
    delta_by_seed: list[float],
    steps: dict[str, list[float]],
    n_eval: int,
    extra_note: str = "",
) -> Claim:
    """Share of the delta model's 4x MQAR gap to the teacher that ``steps[OURS]`` closes, per seed
    (``(ours_s - delta_s) / (teacher - delta_s)``), decided on its t-interval over seeds.

    Positive control: the gap is resolvable, at least ``GAP_MIN_ITEMS`` items' worth
    (``GAP_MIN_ITEMS / n_eval``) and more than twice the delta model's standard deviation over
    seeds; below that the share is a ratio of noise. Negative control: delta against itself with
    the seeds paired off by one (closes nothing). The note gives every step's absolute gain over
    delta in points."""
    d = np.asarray(delta_by_seed, dtype=float)
    base = float(d.mean())
    gap = teacher_4x - base
    spread = float(np.std(d, ddof=1)) if len(d) > 1 else 0.0
    min_gap = max(GAP_MIN_ITEMS / n_eval, 2 * spread)
    resolvable = bool(gap >= min_gap)  # False for a NaN gap too
    means = {k: float(np.mean(v)) for k, v in steps.items()}
    gains = ", ".join(f"{k} {100 * (v - base):+.1f}" for k, v in means.items())
    note = (
        f"teacher {teacher_4x:.3f}, delta {base:.3f} (gap {100 * gap:.1f} points, minimum "
        f"{100 * min_gap:.1f}: {GAP_MIN_ITEMS} of {n_eval} items or 2 seed SDs); gain over delta "
        f"(points): {gains}"
    )
    if resolvable:
        note += "; closed: " + ", ".join(f"{k} {(v - base) / gap:+.2f}" for k, v in means.items())
    else:
        note = f"not measured: the gap to close is below its minimum; {note}"
    per_gap = teacher_4x - d
    ours = np.asarray(steps[OURS], dtype=float)
    share = (
        (ours - d) / np.where(per_gap > 0, per_gap, math.nan)
        if ours.size == d.size
        else d * math.nan
    )
    ci = _defined(seed_interval(share)) if resolvable else None
    null = seed_interval(_rotated(d) / np.where(per_gap > 0, per_gap, math.nan))
    return Claim.decide(
        "Sinks, short convolutions and routing together close at least half of the delta model's "
        "4x-length MQAR gap to softmax.",
        "share of the gap closed by all three",
        (means[OURS] - base) / gap if resolvable else None,
        ci, ">=", 0.5,
        positive=Control.positive(
            "the gap is resolvable: gap - its minimum (4 items or 2 seed SDs)",
            gap - min_gap if math.isfinite(gap) else -1.0, ">=", 0.0,
        ),
        negative=Control.negative("planted-absent: delta against itself, seeds paired off by one",
                                  null.estimate, null) if _defined(null) else
        Control.absent("negative", "delta against itself over >= 2 seeds"),
        method=_method(ci, "the seed-paired share", len(d)) if resolvable
        else "missing: the gap is not resolvable (positive control)",
        note=note + extra_note,
    )  # fmt: skip


def _equal_budget_claim(
    ours: dict[str, list[float]], lola: dict[str, list[float]], null: dict[str, list[float]]
) -> Claim:
    """Ours within 2 points of LoLA on MQAR@4x and passkey@4x (``{task: accuracy per seed}``
    each), decided on the smaller of the two tasks' seed-paired t-intervals. Both caches at 0 on
    both tasks recall nothing to compare: the positive control (the caches recall something)
    fails. Negative control: ``null`` (a linear map without an exact cache) in ours' place."""

    def worst(a: dict[str, list[float]]) -> ConfidenceInterval:
        cis = [seed_interval(100 * (np.asarray(a[k]) - np.asarray(lola[k]))) for k in a]
        return extreme_interval(cis, largest=False)

    d_m = 100 * float(np.mean(ours["mqar_4x"]) - np.mean(lola["mqar_4x"]))
    d_p = 100 * float(np.mean(ours["passkey_4x"]) - np.mean(lola["passkey_4x"]))
    note = f"MQAR@4x {d_m:+.1f}, passkey@4x {d_p:+.1f} points"
    values = np.array([*ours.values(), *lola.values()], dtype=float)
    unmeasured = bool(np.isnan(values).any() or (values == 0).all())
    if np.isnan(values).any():
        note = f"not measured: an accuracy is NaN; {note}"
    elif unmeasured:
        note = f"not measured: both caches score 0 on both tasks at 4x; {note}"
    ci, neg = worst(ours), worst(null)
    ok = _defined(ci)
    return Claim.decide(
        "At an equal exact-KV budget our routed cache is within 2 points of the LoLA-style "
        "sparse cache on passkey and MQAR (4x length).",
        "worst of (ours - LoLA) over MQAR@4x and passkey@4x (points)",
        None if unmeasured else min(d_m, d_p), None if unmeasured else ok, ">=", -2.0,
        positive=Control.positive("the caches recall something: best accuracy of both at 4x",
                                  float(np.nan_to_num(values.max(), nan=0.0)), ">", 0.0),
        negative=Control.negative("a linear map without an exact cache (elu_linear) in ours' place",
                                  neg.estimate, neg) if _defined(neg) else
        Control.absent("negative", "elu_linear over >= 2 seeds"),
        method=_method(ok, "the seed-paired difference; the worse task", values.shape[-1]),
        note=note,
    )  # fmt: skip


def _pick_best(runs: list[dict[str, Any]], ours: list[str], n_eval: int) -> tuple[str, list[str]]:
    """The variant tested on facts: the highest mean 4x MQAR, where variants within one eval
    item's worth (``1 / n_eval``) of the top are tied and the tie goes to the lowest mean MSE (then
    the name), never to the grid's order. Returns it and the tied variants. A NaN mean counts as
    the lowest accuracy / highest MSE."""

    def mean_or(name: str, key: str, fallback: float) -> float:
        vals = np.asarray(_values(runs, name, key), dtype=float)
        m = float(vals.mean()) if len(vals) else math.nan
        return m if math.isfinite(m) else fallback

    acc = {n: mean_or(n, "mqar_4x", -math.inf) for n in ours}
    top = max(acc.values())
    tied = [n for n in ours if acc[n] >= top - 1 / n_eval]
    best = min(tied, key=lambda n: (mean_or(n, "mse", math.inf), n))
    return best, tied


def _claims(report, grid, runs, teacher_row, fact_rows, best, baselines, n_eval, n_facts) -> None:  # type: ignore[no-untyped-def]
    def by_seed(name: str, key: str, rows: list[dict[str, Any]] = runs) -> dict[int, float]:
        return {r["seed"]: r[key] for r in rows if r["variant"] == name and key in r}

    def arr(name: str, key: str, rows: list[dict[str, Any]] = runs) -> np.ndarray:
        return np.array(list(by_seed(name, key, rows).values()), dtype=float)

    def mean(name: str, key: str) -> float:
        return float(np.mean(_values(runs, name, key)))

    def paired(a: str, b: str, key: str, rows: list[dict[str, Any]] = runs) -> ConfidenceInterval:
        xa, xb = by_seed(a, key, rows), by_seed(b, key, rows)
        return seed_interval([xa[s] - xb[s] for s in xa if s in xb])

    def ratio(a: str, b: str, key: str) -> ConfidenceInterval:
        xa, xb = by_seed(a, key), by_seed(b, key)
        common = [s for s in xa if s in xb]
        return ratio_interval([xa[s] for s in common], [xb[s] for s in common])

    n = len({r["seed"] for r in runs})
    # positive control of the transfer claims: the students approximate the teacher at all
    compared = [v for v in ("linear", "gated", "delta", "gated_delta", "control") if v in grid]
    worst_mse = max(mean(v, "mse") for v in compared) if compared else math.nan
    approx = Control.positive(
        "attention transfer converges: largest mean relative MSE of the compared updates",
        worst_mse, "<", 0.5,
    )  # fmt: skip
    # 1. delta rules beat linear and gated at equal state size (MSE lower, 4x MQAR higher)
    pairs = [
        (d, g)
        for d in ("delta", "gated_delta")
        for g in ("linear", "gated")
        if d in grid and g in grid
    ]
    if pairs:
        ratios = {f"{d} vs {g}": ratio(d, g, "mse") for d, g in pairs}
        gains = {f"{d} vs {g}": paired(d, g, "mqar_4x") for d, g in pairs}
        worst = extreme_interval(ratios.values())
        ci = _defined(worst)
        report.add_claim(Claim.decide(
            "Delta and gated-delta updates reach a lower layerwise MSE than linear and gated "
            "accumulation at equal state size.",
            "largest over the 4 pairs of the MSE ratio delta rule / accumulation (relative MSE)",
            None if ci is None else worst.estimate, ci, "<=", MSE_RATIO,
            positive=approx, negative=_self_null(arr("delta", "mse"), "delta's MSE", ratio=True),
            method=_method(ci, "the log of each seed-paired ratio; the largest of the 4 pairs", n),
            note="; ".join(f"{k}: {c.estimate:.3f} [{c.low:.3f}, {c.high:.3f}]" for k, c in ratios.items())
            + f"; target: a 10% reduction, harder than the paper's 'lower' (< 1), so a null ratio of 1 can be refuted; before: one point check of the MSE and "
            f"the MQAR part together; {ISSUE44}",
        ))  # fmt: skip
        worst = extreme_interval(gains.values(), largest=False)
        ci = _defined(worst)
        report.add_claim(Claim.decide(
            "Delta and gated-delta updates reach a higher 4x-length MQAR accuracy than linear and "
            "gated accumulation at equal state size.",
            "smallest over the 4 pairs of the 4x MQAR gain delta rule - accumulation",
            None if ci is None else worst.estimate, ci, ">=", 1 / n_eval,
            positive=approx, negative=_self_null(arr("delta", "mqar_4x"), "delta's 4x MQAR"),
            method=_method(ci, "each seed-paired gain; the smallest of the 4 pairs", n),
            note="; ".join(f"{k}: {c.estimate:+.3f} [{c.low:+.3f}, {c.high:+.3f}]" for k, c in gains.items())
            + f"; target: one eval item ({n_eval} items), the smallest resolvable gain, harder than the "
            f"paper's 'higher' (> 0), so a null gain of 0 can be refuted; {ISSUE44}",
        ))  # fmt: skip
    # 2. key-tied erase beats the key-independent control; KDI vs delta's advantage over gated
    if "control" in grid and "delta" in grid:
        m = ratio("delta", "control", "mse")
        ci = _defined(m)
        report.add_claim(Claim.decide(
            "The key-tied rank-1 erase beats the same erase along a learned key-independent "
            "direction (lower layerwise MSE).",
            "MSE ratio delta / control (relative MSE, seed-paired)",
            None if math.isnan(m.estimate) else m.estimate, ci, "<=", MSE_RATIO,
            positive=approx, negative=_self_null(arr("delta", "mse"), "delta's MSE", ratio=True),
            method=_method(ci, "the log of the seed-paired ratio", n),
            note="target: a 10% reduction, harder than the paper's 'lower' (< 1), so a null ratio of 1 can be refuted; split from the key-dependence claim "
            f"(before: one point check of both); {ISSUE44}",
        ))  # fmt: skip
        kdi = np.asarray(teacher_row["key_dependence"]).ravel()
        adv = _delta_gain(runs)
        rho, defined = rho_interval(kdi, adv)
        null = shuffled_rho(kdi, adv) if kdi.size > 2 and np.ptp(adv) > 0 else NAN_CI
        ci = _defined(rho)
        report.add_claim(Claim.decide(
            "Heads whose softmax erase is more key-dependent gain more from delta over gated.",
            "Spearman rho (key-dependence index vs gated-minus-delta MSE, per head)",
            None if math.isnan(rho.estimate) else rho.estimate, ci, ">=", 0.5,
            positive=Control.positive(
                "the rank correlation over heads is defined: share of bootstrap resamples",
                defined, ">=", 0.95,
            ),
            negative=Control.negative("key-dependence shuffled over heads (one seeded shuffle): rho",
                                      null.estimate, null) if _defined(null)
            else Control.absent("negative", "a defined rho over >= 3 heads"),
            method=f"95% percentile bootstrap over {kdi.size} heads (1000 resamples; the MSE gain "
            "is the mean over seeds)" if ci is not None
            else f"missing: rho undefined or too few heads ({kdi.size}) to bootstrap",
            note=f"{kdi.size} heads; {ISSUE44}",
        ))  # fmt: skip
    # 3. interventions close the delta model's 4x MQAR gap
    if OURS in grid:
        heads_err = _head_errors(runs, "delta").ravel()
        sink = np.asarray(teacher_row["sink_mass"]).ravel()
        recent = np.asarray(teacher_row["recent_mass"]).ravel()
        rho_s = float(stats.spearmanr(sink, heads_err).statistic)
        rho_r = float(stats.spearmanr(recent, heads_err).statistic)
        steps = [n for n in ("delta+sinks", "delta+conv", "delta+routing", OURS) if n in grid]
        report.add_claim(
            _gap_claim(
                teacher_row["mqar_4x"],
                list(arr("delta", "mqar_4x")),
                {s: list(arr(s, "mqar_4x")) for s in steps},
                n_eval,
                f"; per-head delta error vs sink mass rho {rho_s:+.2f}, vs last-4 mass rho {rho_r:+.2f}"
                f"; {ISSUE44}",
            )
        )
    # 4. routing within 2 points of the LoLA-style cache at equal budget
    if OURS in grid and "lola" in grid:
        keys = ("mqar_4x", "passkey_4x")
        null = "elu_linear" if "elu_linear" in grid else "linear"
        report.add_claim(_equal_budget_claim(
            {k: list(arr(OURS, k)) for k in keys}, {k: list(arr("lola", k)) for k in keys},
            {k: list(arr(null, k)) for k in keys},
        ))  # fmt: skip
    # 5. best frozen variant beats every post-hoc baseline on fact accuracy
    fa = {n: np.mean(_values(fact_rows, n, "fact_acc")) for n in [best, *baselines]}
    margin = fa[best] - max(fa[n] for n in baselines)
    worst = extreme_interval(
        [paired(best, b, "fact_acc", fact_rows) for b in baselines], largest=False
    )
    ci = _defined(worst)
    t_fact = fact_rows[0]["fact_acc"]
    report.add_claim(Claim.decide(
        "The best frozen variant beats every post-hoc baseline on knowledge retention "
        "(multiple-choice fact accuracy, the MMLU stand-in).",
        "best variant - best baseline fact accuracy",
        float(margin), ci, ">=", 1 / n_facts,
        positive=Control.positive("the teacher knows the facts: its fact accuracy", t_fact, ">=", 0.9),
        negative=_self_null(arr(best, "fact_acc", fact_rows), f"{best}'s fact accuracy"),
        method=_method(ci, "each seed-paired difference; the smallest over baselines", n),
        note=f"best (chosen on recall) = {best}: {fa[best]:.3f}; teacher {t_fact:.3f}; "
        + ", ".join(f"{n} {fa[n]:.3f}" for n in baselines)
        + f"; target: one item ({n_facts} items), harder than the paper's 'beats' (> 0), so a null "
        f"difference of 0 can be refuted; {ISSUE44}",
    ))  # fmt: skip
    # 6. no bypass: zeroing the state costs >= 10 points of 4x MQAR
    hybrids = [
        n for n, (g, c) in grid.items() if g == "intervention" and c.budget and c.update != "none"
    ]
    costs = {
        n: 100 * np.array([r["mqar_4x"] - r["mqar_4x_zeroed"] for r in runs if r["variant"] == n])
        for n in hybrids
    }
    if costs:
        worst = extreme_interval([seed_interval(c) for c in costs.values()], largest=False)
        ci = _defined(worst)
        recall = min(mean(h, "mqar_4x") for h in hybrids)
        report.add_claim(Claim.decide(
            "Our hybrids use their state: zeroing it costs at least 10 points of 4x-length MQAR.",
            "smallest cost of zeroing the state (points)",
            float(min(c.mean() for c in costs.values())), ci, ">=", 10.0,
            positive=Control.positive(
                "the cost can reach 10 points: smallest mean 4x MQAR of the hybrids (points)",
                100 * recall, ">=", 10.0,
            ),
            negative=Control.absent("negative", "zeroing the (absent) state of a variant without "
                                    "one, e.g. the sliding-window cache: a run not made yet"),
            method=_method(ci, "each hybrid's cost; the smallest over hybrids", n),
            note=", ".join(f"{k} {v.mean():.1f}" for k, v in costs.items()) + f"; {ISSUE44}",
        ))  # fmt: skip


def _figures(report, grid, runs, teacher_row) -> None:  # type: ignore[no-untyped-def]
    names = list(grid)
    keys, xs = ("mqar_1x", "mqar_2x", "mqar_4x"), [1, 2, 4]
    styles = {"update": "-", "intervention": "--", "baseline": ":"}
    cmap = _colors(len(names))
    fig, ax = new_figure(size=(8, 4.5))
    for i, name in enumerate(names):
        group = grid[name][0]
        m = [np.mean(_values(runs, name, k)) for k in keys]
        ax.plot(xs, m, styles[group], color=cmap[i], marker="o", ms=3, label=f"{name} ({group})")
    ax.plot(xs, [teacher_row[k] for k in keys], "k-", lw=2.5, marker="s", label="softmax teacher")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, ["1x", "2x", "4x"])
    ax.set_xlabel("sequence length (x training length)")
    ax.set_ylabel("MQAR accuracy")
    ax.legend(fontsize=5.5, ncol=2, loc="upper right")
    report.add_figure("mqar_vs_length", fig)

    fig, ax = new_figure(size=(7, 4))
    for name in [n for n in names if grid[n][0] == "update"]:
        per_layer = _head_errors(runs, name).mean(1)
        ax.plot(range(len(per_layer)), per_layer, marker="o", label=name)
    ax.set_xticks(range(len(per_layer)))
    ax.set_xlabel("layer")
    ax.set_ylabel("relative attention-output MSE")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    report.add_figure("mse_per_layer", fig)

    steps = [n for n in ("delta", "delta+sinks", "delta+conv", "delta+routing", OURS) if n in grid]
    vals = [np.mean(_values(runs, n, "mqar_4x")) for n in steps]
    fig, ax = new_figure(size=(7, 4))
    ax.bar(0, vals[0], color="grey")
    for i, v in enumerate(vals[1:], 1):
        ax.bar(i, v - vals[0], bottom=vals[0], color="tab:green" if v >= vals[0] else "tab:red")
    ax.axhline(teacher_row["mqar_4x"], color="k", ls="--", label="softmax")
    ax.set_xticks(range(len(steps)), steps, rotation=20, fontsize=7)
    ax.set_ylabel("MQAR accuracy at 4x")
    ax.legend()
    report.add_figure("ablation_waterfall", fig)

    if "gated" in grid and "delta" in grid:
        kdi = np.asarray(teacher_row["key_dependence"]).ravel()
        adv = _delta_gain(runs)
        fig, ax = new_figure(size=(5, 4))
        ax.scatter(kdi, adv)
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_xlabel("key-dependence index (teacher head)")
        ax.set_ylabel("gated MSE - delta MSE")
        report.add_figure("key_dependence_vs_delta_gain", fig)


def _colors(n: int) -> list[Any]:
    """``n`` distinct colours (tab20)."""
    import matplotlib

    cmap = matplotlib.colormaps["tab20"]
    return [cmap(i % 20) for i in range(n)]


def _notes(cfg: dict[str, Any], best: str) -> str:
    t = cfg["teacher"]
    return (
        f"Teacher: {t.arch} {t.n_layers} layers, d {t.d_model}, {t.n_heads} heads / {t.n_kv_heads} kv heads, "
        f"trained on MQAR / copy / passkey at {t.length}, {2 * t.length}, {4 * t.length} words. Students are "
        f"trained by layerwise attention transfer only ({cfg['transfer_steps']} Adam steps at lr "
        f"{cfg['transfer_lr']:g} on the same captured "
        f"activations for every variant), backbone frozen; no end-to-end KL at this scale. Exact-KV budget "
        f"{cfg['budget']} (sinks {cfg['sinks']}, window {cfg['window']}); baselines' windows are scaled to "
        f"the same budget (LoLCATs/Liger use 64 on 2k-token models). Fact accuracy: a fact_lm linearized "
        f"the same way (transfer on its training statements), its QA prompts, the true value ranked among "
        f"4 options by sequence log-probability; "
        f"best of the delta variants on recall: {best}. The `linear` update and the `hedgehog` baseline "
        f"are the same configuration (reported in both groups). Seeds: {len(cfg['seeds'])} "
        f"linearization seeds on one teacher."
    )
