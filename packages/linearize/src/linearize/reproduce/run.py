"""The measurements: the grid of arms, the recall jobs (transfer, layerwise error, recall tasks, the
state-zeroed check) and the fact jobs, each in a worker with one thread."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import torch

from linearize.analysis import attention_mass, key_dependence
from linearize.baselines import (
    elu_linear,
    liger_gla,
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
from linearize.reproduce.scales import Scale
from linearize.student import LinearizeConfig, scale_state, zero_state
from linearize.tasks import TASKS, make_task
from linearize.teachers import TeacherSpec, recall_teacher
from paper_common.device import pinned_threads

OURS = "deltanet+all"
# claim 1: the delta rules against purely additive / gated accumulation (the paper's Hedgehog and
# GLA arms, and our scalar gate), at equal state width
DELTA_ARMS = ("deltanet", "gated_deltanet")
ACCUMULATION = ("hedgehog", "gated_scalar", "gla")
# the nulls that run through the data (not in the grid's table): an arm's independent replicate
# (the same config, linearization seeds offset by REPLICATE_OFFSET, paired with the originals by
# seed) and the control update with another initial direction (same seeds)
REPLICATE_OFFSET = 1000
NULL_ARMS = ("deltanet@replicate", "control@direction1")
# claim 6's placebo: the state's read-out scaled by this factor instead of zeroed
PLACEBO_SCALE = 0.999
# per-variant numbers in the report's table (means over seeds)
METRICS = ("mse", "mqar_1x", "mqar_2x", "mqar_4x", "passkey_1x", "passkey_4x", "copy_4x", "ppl")


def variants(scale: Scale, head_dim: int) -> dict[str, tuple[str, LinearizeConfig]]:
    """``name -> (group, config)`` of the grid at ``scale``'s budget. Every state has width
    ``head_dim`` (Hedgehog features of ``head_dim / 2`` doubled), so state sizes are equal."""
    fd = max(1, head_dim // 2)
    b, s, w = scale.budget, scale.sinks, scale.window
    hh = {"feature_map": "hedgehog", "feature_dim": fd}  # positive, width head_dim
    sg = {"feature_map": "learned"}  # signed, width head_dim, unit-normalised by the delta rules
    grid: dict[str, tuple[str, LinearizeConfig]] = {
        # the paper's arms: the Hedgehog feature map, GLA, (kGLA: not defined in the sources we
        # have, not run), DeltaNet and Gated DeltaNet; the scalar gate and the control are ours
        "hedgehog": ("update", LinearizeConfig(update="linear", **hh)),
        "gated_scalar": ("update", LinearizeConfig(update="gated", **hh)),
        # normalised diagonal gate with Hedgehog features (GLA as published is usually unnormalised)
        "gla": ("update", LinearizeConfig(update="diag_gated", **hh)),
        "deltanet": ("update", LinearizeConfig(update="delta", **sg)),
        "gated_deltanet": ("update", LinearizeConfig(update="gated_delta", **sg)),
        "control": ("update", LinearizeConfig(update="control", **sg)),
        "deltanet+sinks": (
            "intervention",
            LinearizeConfig(update="delta", budget=s, sinks=s, **sg),
        ),
        "deltanet+conv": ("intervention", LinearizeConfig(update="delta", conv=True, **sg)),
        "deltanet+routing": (
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
        "lolcats": ("baseline", lolcats(b, fd)),
        "liger_gla": ("baseline", liger_gla(b)),
        "lola": ("baseline", lola(s, w, b - s - w, fd)),
    }
    if scale.grid == "smoke":
        keep = ["hedgehog", "gated_scalar", "deltanet", "control", OURS, "lola", "sliding_window"]
        grid = {k: grid[k] for k in keep}
    return grid


# ============================================================================ jobs
def resolve(name: str, scale: Scale, head_dim: int, seed: int) -> tuple[LinearizeConfig, int]:
    """Config and linearization seed of arm ``name`` at ``seed``: a grid arm, ``<arm>@replicate``
    (its seed offset by :data:`REPLICATE_OFFSET`) or ``<control arm>@direction1`` (the control's
    initial direction drawn with seed 1)."""
    base, _, tag = name.partition("@")
    grid = variants(scale, head_dim)
    if base not in grid:
        raise ValueError(f"unknown arm {base!r} in {name!r}; allowed: {', '.join(grid)}")
    cfg = grid[base][1]
    if tag == "":
        return cfg, seed
    if tag == "replicate":
        return cfg, seed + REPLICATE_OFFSET
    if tag == "direction1" and cfg.update == "control":
        return replace(cfg, control_seed=1), seed
    raise ValueError(f"arm tag must be 'replicate' or 'direction1' (control only); got {name!r}")


def _teacher_and_data(scale: Scale, arch: str):  # type: ignore[no-untyped-def]
    spec = replace(scale.teacher, arch=arch)
    teacher, tok = recall_teacher(spec, progress=False)
    distill_texts = _task_mix(scale.n_distill // 3, spec.length, seed=50)
    held_texts = _task_mix(32, spec.length, seed=70)
    return spec, teacher, tok, distill_texts, held_texts


def _task_mix(n: int, length: int, seed: int) -> list[str]:
    """``n`` texts of each task at ``length`` (seeds ``seed``, ``seed + 1``, ``seed + 2``)."""
    return [
        t for i, task in enumerate(TASKS) for t in make_task(task, n, length, seed=seed + i).texts
    ]


def _eval_sets(scale: Scale, spec: TeacherSpec) -> dict[str, Any]:
    n, length = scale.n_eval, spec.length
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


def _recall_job(job: tuple[str, str, int, Scale, str]) -> dict[str, Any]:
    with pinned_threads(JOB_THREADS, torch=True):
        return _recall_run(job)


def _recall_run(job: tuple[str, str, int, Scale, str]) -> dict[str, Any]:
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
    hd = teacher.config.hidden_size // teacher.config.num_attention_heads
    cfg, lin_seed = resolve(name, scale, hd, seed)
    row["linearization_seed"] = lin_seed
    torch.manual_seed(lin_seed)
    student = linearize(teacher, cfg)
    train = capture(teacher, tok, distill_texts)
    losses = transfer(
        student,
        train,
        TransferConfig(
            steps=scale.transfer_steps, lr=scale.transfer_lr, seed=lin_seed, progress=False
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
        with scale_state(PLACEBO_SCALE):
            row["mqar_4x_placebo"] = task_scores(student, tok, sets["mqar_4x"]).accuracy
    row["backbone_unchanged"] = _backbone_unchanged(teacher, student)
    return row


def _backbone_unchanged(teacher, student) -> bool:  # type: ignore[no-untyped-def]
    t = dict(teacher.named_parameters())
    return all(torch.equal(p, t[n]) for n, p in student.named_parameters() if n in t)


def _fact_data(scale: Scale, seed: int):  # type: ignore[no-untyped-def]
    from paper_common.facts import World
    from paper_common.lm import fact_lm

    fc = scale.fact
    world = World(seed=0, **dict(fc.world))
    model, tok = fact_lm(world, steps=fc.steps, progress=False)
    qa = world.qa_pairs("train")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(qa))
    items = [qa[i] for i in order[: fc.n_items]]
    mc = {it.fact.key: it for it in world.multiple_choice("train", facts=[q.fact for q in items])}
    prompts = [q.question for q in items]
    answers = [q.answer for q in items]
    cands = [list(mc[q.fact.key].options) for q in items]
    # attention transfer on the model's own training statements (no question of the test)
    texts, _ = world.corpus()
    distill = [texts[i] for i in rng.permutation(len(texts))[:128]]
    return model, tok, prompts, answers, cands, distill


def _fact_job(job: tuple[str, int, Scale]) -> dict[str, Any]:
    with pinned_threads(JOB_THREADS, torch=True):
        return _fact_run(job)


def _fact_run(job: tuple[str, int, Scale]) -> dict[str, Any]:
    name, seed, scale = job
    model, tok, prompts, answers, cands, distill = _fact_data(scale, 0)
    if name == "softmax":
        return {
            "variant": name,
            "seed": seed,
            "fact_acc": fact_accuracy(model, tok, prompts, answers, cands),
        }
    hd = model.config.hidden_size // model.config.num_attention_heads
    cfg, lin_seed = resolve(name, scale, hd, seed)
    torch.manual_seed(lin_seed)
    student = linearize(model, cfg)
    losses = transfer(
        student,
        capture(model, tok, distill),
        TransferConfig(
            steps=scale.transfer_steps, lr=scale.transfer_lr, seed=lin_seed, progress=False
        ),
    )
    return {
        "variant": name,
        "seed": seed,
        "fact_acc": fact_accuracy(student, tok, prompts, answers, cands),
        "transfer_diverged": transfer_diverged(losses),
    }


def _warm_teacher(job: tuple[Scale, str]) -> bool:
    """Train (or find) the teacher with the jobs' thread count, so that the jobs load it."""
    cfg, arch = job
    with pinned_threads(JOB_THREADS, torch=True):
        recall_teacher(replace(cfg.teacher, arch=arch), progress=False)
    return True
