"""The measurements: the alpha x rank sweep and its power law, the alpha-vs-learning-rate test
with its Signal-Drift numbers (every seed), LoRA-alpha against tuned baselines, and training
diagnostics. No verdicts here (see :mod:`~lora_alpha.reproduce.claims`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from lora_alpha.baselines import alpha_2r, lora_alpha, loraplus, rslora, standard
from lora_alpha.config import OURS_C, OURS_LR, PAPER_C, PAPER_LR, get_lora_alpha_model
from lora_alpha.diagnostics import (
    SignalDriftCallback,
    full_finetune_delta,
    reference_gradient,
    spectral_summary,
)
from lora_alpha.reproduce.scales import Scale
from lora_alpha.sweep import PowerLawFit, SweepResult, fit_optimal_alpha, scaling_interaction, sweep
from lora_alpha.tasks import (
    ClassificationTask,
    KnowledgeInjectionTask,
    OffTaskPush,
    RegressionTask,
    Task,
)
from lora_alpha.train import RunResult, finetune
from paper_common import Stopwatch

#: The base point of the alpha-vs-lr test and the learning rate of the alpha x rank sweep: the
#: paper's standard small learning rate (AdamW), with the standard alpha.
BASE_LR = PAPER_LR
BASE_ALPHA = 16.0
#: The two LoRA-alpha recipes: the paper's (c, lr) and ours (a variant).
RECIPES = {"paper": (PAPER_C, PAPER_LR), "ours": (OURS_C, OURS_LR)}
#: The sweep's optimum is located on the validation loss (the test loss is reported).
SELECT = "val_loss"
#: The off-task push of the drift controls: every PUSH_EVERY-th training batch carries a second
#: planted shift (ours; :class:`~lora_alpha.tasks.OffTaskPush`).
PUSH_EVERY = 2


@dataclass
class Measurements:
    """Everything :func:`measure` ran, for the claims, tables and figures."""

    res: SweepResult
    fit: PowerLawFit
    best: dict[int, float]
    surface: SweepResult
    interaction: dict[str, list[dict[str, Any]]]
    controls: dict[str, dict[str, list[dict[str, Any]]]]
    compare: list[dict[str, Any]]
    diag: dict[str, Any]
    held_out: list[str]
    base_scores: dict[str, float] = field(default_factory=dict)
    stages: list[dict[str, Any]] = field(default_factory=list)


def full_tasks(cfg: Scale) -> list[Task]:
    """GSM8K and SST-2 on a 0.5B model: needs the hub and ``datasets`` (not installed here).

    Validation: the last ``extra["n_val"]`` training examples of each, never trained on (GSM8K's
    and SST-2's own evaluation splits are the test sets).
    """
    try:
        import datasets
    except ImportError as err:  # pragma: no cover - the full scale runs elsewhere
        raise RuntimeError(
            "scale 'full' fine-tunes Qwen2.5-0.5B on GSM8K and SST-2: `pip install datasets` on a "
            "machine with the Hugging Face hub and a GPU"
        ) from err
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from lora_alpha.tasks import CausalLMTask, SequenceClassificationTask

    name, n_val = cfg.extra["model"], cfg.extra["n_val"]
    gsm = datasets.load_dataset(*cfg.extra["gen_dataset"])

    def pairs(split: Any) -> list[tuple[str, str]]:
        qa = zip(split["question"], split["answer"], strict=True)
        return [(f"Question: {q}\nAnswer:", " " + a) for q, a in qa]

    train = pairs(gsm["train"])
    gen = CausalLMTask.from_pretrained(
        name, train[:-n_val], eval_sets={"test": pairs(gsm["test"])}, validation=train[-n_val:]
    )
    sst = datasets.load_dataset(*cfg.extra["cls_dataset"])
    tok = AutoTokenizer.from_pretrained(name)
    tok.pad_token = tok.pad_token or tok.eos_token
    model = AutoModelForSequenceClassification.from_pretrained(name, num_labels=2)
    model.config.pad_token_id = tok.pad_token_id
    texts, labels = sst["train"]["sentence"], sst["train"]["label"]
    cls = SequenceClassificationTask(
        model, tok, (texts[:-n_val], labels[:-n_val]),
        (sst["validation"]["sentence"], sst["validation"]["label"]),
        validation=(texts[-n_val:], labels[-n_val:]),
    )  # fmt: skip
    return [gen, cls]


def references(task: Task, rank: int, steps: int, batch_size: int) -> dict[str, Any]:
    """Full-fine-tuning update (Adam, lr 1e-3) and initial gradient, keyed like LoRA's layers.

    A reference that is not finite (full fine-tuning diverged) raises: every drift ratio measured
    against it would be meaningless."""
    wrapped = get_lora_alpha_model(
        task.base_model(), standard().lora_config(rank, task.target_modules, **task.lora_kwargs)
    )
    grad = reference_gradient(wrapped, task.loss, task.reference_batch())
    full = full_finetune_delta(
        task.base_model(), task.loss, task.batches(batch_size, 10_000), sorted(grad), 1e-3, steps
    )
    bad = [k for k, v in full.items() if not torch.isfinite(v).all()]
    if bad:
        raise RuntimeError(f"{task.name}: the full-fine-tuning reference diverged in {bad}")
    return {"full_ft": full, "gradient": grad}


def win(a: dict[str, Any], b: dict[str, Any]) -> bool:
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


def _finite_or(x: float, fallback: float) -> float:
    return x if math.isfinite(x) else fallback


def tuned(runs: list[RunResult]) -> RunResult:
    """The learning-rate-tuned run: the one no other run beats (:func:`win`) on the *validation*
    split; ties go to the smallest learning rate, whatever order the grid was run in. A run without
    validation metrics raises (never a silent fallback to the test metrics it reports)."""
    missing = [r.lr for r in runs if not r.val_metrics]
    if missing:
        raise ValueError(
            f"runs at lr {missing} have no validation metrics: run finetune(..., validate=True)"
        )
    rows = sorted(
        ({"score": r.val_metrics["score"], "loss": r.val_metrics["loss"], "diverged": r.diverged,
          "run": r} for r in runs),
        key=lambda x: x["run"].lr,
    )  # fmt: skip
    best = rows[0]
    for row in rows[1:]:
        if win(row, best):
            best = row
    return best["run"]


def measure(cfg: Scale, seed: int, scale: str) -> Measurements:
    """Run every measurement of one scale."""
    from paper_common.facts import World

    torch.manual_seed(seed)
    watch = Stopwatch()
    seeds = tuple(seed + s for s in cfg.seeds)
    reg = RegressionTask(**cfg.regression, seed=seed)
    if scale == "full":
        lm_tasks = full_tasks(cfg)
    else:
        world = World(seed=seed, **cfg.world)
        lm_tasks = [
            KnowledgeInjectionTask(world, cfg.cutoff, cfg.lm_steps, seed),
            ClassificationTask(world, cfg.lm_steps, cfg.cutoff, seed),
        ]
    watch.lap("tasks (fact LM)")

    # 1. alpha x rank at the paper's small lr; the optimum located on validation loss
    res = sweep(reg, cfg.alphas, (BASE_LR,), cfg.ranks, seeds, cfg.sweep_steps, cfg.batch_size,
                progress=None, validate=True)  # fmt: skip
    fit = fit_optimal_alpha(res, SELECT, n_boot=1000, seed=seed)
    best = res.optimal_alpha(SELECT)
    surface = sweep(reg, cfg.alphas, cfg.surface_lrs, (cfg.surface_rank,), seeds[:1],
                    cfg.sweep_steps, cfg.batch_size, progress=None)  # fmt: skip
    watch.lap("alpha x rank sweep")

    # 2. alpha x k vs lr x k from (alpha 16, lr 2e-5), every seed; the controls run through
    # training: B only (lora_A frozen: alpha x k and lr x k give the same dW up to Adam's eps) and
    # an off-task push (every PUSH_EVERY-th batch carries a second planted shift)
    kmax = max(cfg.factors)
    interaction: dict[str, list[dict[str, Any]]] = {}
    controls: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for task in [reg, *lm_tasks]:
        steps = cfg.sweep_steps if task is reg else cfg.lm_finetune_steps
        refs = references(task, cfg.interaction_rank, cfg.reference_steps, cfg.batch_size)
        args = (cfg.interaction_rank, BASE_ALPHA, BASE_LR)
        interaction[task.name] = scaling_interaction(
            task, *args, cfg.factors, seeds, steps, cfg.batch_size, refs, progress=None
        )
        controls[task.name] = {
            "b_only": scaling_interaction(task, *args, (kmax,), seeds, steps, cfg.batch_size, refs,
                                          progress=None, freeze_a=True),
            "push": scaling_interaction(OffTaskPush(task, PUSH_EVERY, seed), *args, (1,), seeds,
                                        steps, cfg.batch_size, refs, progress=None),
        }  # fmt: skip
    watch.lap("alpha vs lr (every seed)")

    # 3. LoRA-alpha (paper's recipe, and ours) vs baselines tuned over lr on validation
    compare: list[dict[str, Any]] = []
    base_scores = {t.name: t.evaluate(t.base_model())["score"] for t in [reg, *lm_tasks]}
    for task in [reg, *lm_tasks]:
        is_reg = task is reg
        steps = cfg.sweep_steps if is_reg else cfg.lm_finetune_steps
        baselines = [standard(), rslora()] + ([alpha_2r(), loraplus()] if is_reg else [])
        for r in cfg.compare_ranks if is_reg else cfg.compare_lm_ranks:
            for m in baselines:
                runs = [finetune(task, m, r, lr, steps, cfg.batch_size, seed, validate=True)
                        for lr in cfg.compare_lrs]  # fmt: skip
                best_run = tuned(runs)
                row = {"task": task.name, "r": r, "method": m.name, "recipe": "tuned",
                       "lr": best_run.lr, "tuned": True, "loss": best_run.loss,
                       "score": best_run.score, "val_score": best_run.val_metrics["score"]}  # fmt: skip
                for name, (_, lr) in RECIPES.items():
                    row[f"score at {name} lr"] = next(
                        (x.score for x in runs if x.lr == lr), math.nan
                    )
                compare.append(row)
            for name, (c, lr) in RECIPES.items():
                run = finetune(
                    task, lora_alpha(c), r, lr, steps, cfg.batch_size, seed, validate=True
                )
                compare.append({"task": task.name, "r": r, "method": run.method, "recipe": name,
                                "lr": lr, "tuned": False, "loss": run.loss, "score": run.score,
                                "val_score": run.val_metrics["score"]})  # fmt: skip
    watch.lap("LoRA-alpha vs tuned baselines")

    diag = diagnostics(reg, cfg, seed)
    watch.lap("diagnostics")
    return Measurements(res, fit, best, surface, interaction, controls, compare, diag,
                        [t.name for t in lm_tasks], base_scores, watch.laps)  # fmt: skip


def diagnostics(task: RegressionTask, cfg: Scale, seed: int) -> dict[str, Any]:
    """Runs with Signal-Drift and sharpness recorded; full fine-tuning's spectrum beside."""
    r = cfg.interaction_rank
    refs = references(task, r, cfg.reference_steps, cfg.batch_size)
    every = max(1, cfg.sweep_steps // 10)
    runs = {
        f"standard, lr {BASE_LR:g}": (standard(), BASE_LR),
        f"standard, lr {100 * OURS_LR:g}": (standard(), 100 * OURS_LR),
        f"LoRA-alpha paper (c={PAPER_C:g}), lr {PAPER_LR:g}": (lora_alpha(PAPER_C), PAPER_LR),
        f"LoRA-alpha ours (c={OURS_C:g}), lr {OURS_LR:g}": (lora_alpha(OURS_C), OURS_LR),
    }
    curves, rows = {}, []
    for name, (method, lr) in runs.items():
        cb = SignalDriftCallback(refs["full_ft"], every=every,
                                 sharpness=(task.loss, task.reference_batch()),
                                 sharpness_every=every * 2, sharpness_iters=10)  # fmt: skip
        run = finetune(task, method, r, lr, cfg.sweep_steps, cfg.batch_size, seed, diagnostics=cb)
        curves[name] = cb.history
        last = cb.history[-1] if cb.history else {}
        sharp = [h["sharpness"] for h in cb.history if "sharpness" in h]
        rows.append({"run": name, "loss": run.loss, "score": run.score, "diverged": run.diverged,
                     **{k: last.get(k, math.nan) for k in
                        ("update_norm", "drift_ratio", "stable_rank", "top1_energy")},
                     "sharpness_final": sharp[-1] if sharp else math.nan})  # fmt: skip
    ft = spectral_summary(refs["full_ft"])
    norm = float(torch.sqrt(sum((d**2).sum() for d in refs["full_ft"].values())))
    rows.append({"run": "full fine-tuning (lr 1e-3)", "stable_rank": ft["stable_rank"],
                 "top1_energy": ft["top1_energy"], "update_norm": norm})  # fmt: skip
    return {"rows": rows, "curves": curves}
