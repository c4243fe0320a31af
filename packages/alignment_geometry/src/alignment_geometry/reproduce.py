"""``reproduce``: quartic onset of alignment loss, and the Fisher as what governs it.

1. The 2-D system (closed form): the slope of ``log u`` against ``log t``, the coefficient
   ``lam c^2 a^2 / 8``, the quadratic onset with an offset, no loss at ``c = 0``, gradient descent
   against gradient flow, and the AIC checker against the measured onsets of a sweep.
2. A tiny aligned LM in float64, per seed (phase 1, one job per seed): pretrain and align it, the
   exact Fisher of the KL alignment loss on held-out harmful prompts (every nonzero eigenvalue),
   each task's gradient and its part ``g_F`` in the Fisher's range.
3. Per seed and task (phase 2): the AIC and the onset coefficients; gradient descent at a tiny step
   (``eta |H|_2 = 0.05 / onset_steps``) on the plain task and on its orthogonalised variant for the
   onset slope; 200 steps at ``eta |H|_2 = 0.5`` on the plain task for the final loss of alignment,
   ``delta^T F delta / 2``, the forecast and the predictor baselines; on some tasks, the mitigations.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np
import torch
from scipy.stats import spearmanr
from scipy.stats import t as t_dist

from alignment_geometry.aic import alignment_risk_forecast
from alignment_geometry.baselines import (
    gradient_cosine,
    hidden_similarity,
    refusal_nll,
    update_norm,
)
from alignment_geometry.finetune import Trajectory, finetune, orthogonalised, task_gradient
from alignment_geometry.fisher import (
    FlatParams,
    HessianOperator,
    PromptBatch,
    SequenceBatch,
    response_logits,
    sequence_nll,
)
from alignment_geometry.geometry import AlignedPoint, TaskGeometry, alignment_monitor
from alignment_geometry.mitigations import (
    EWC,
    FisherPenalty,
    SubspaceProjection,
    add_lora,
    safe_lora,
)
from alignment_geometry.system import TASKS, SystemConfig, build_system, task_examples
from alignment_geometry.toy import Toy2D, loglog_slope
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
from paper_common.stats import ConfidenceInterval, log_t_interval

__all__ = ["SCALES", "reproduce"]

_TOY = {"lam": [10.0, 50.0, 200.0], "c": [0.0, 0.5, 1.0], "offset": [0.0, 0.1]}

SCALES: dict[str, dict[str, Any]] = {
    "smoke": {
        "seeds": [0],
        "tasks": ["copy", "chat_copy"],
        "system": {
            "pretrain_steps": 150,
            "align_steps": 100,
            "n_harmful_eval": 8,
            "n_align_prompts": 200,
        },
        "n_train": 16,
        "d": 4,
        "onset_steps": 30,
        "steps": 30,
        "mitigation_tasks": 1,
        "controls": True,
        "workers": 1,
    },
    "quick": {
        "seeds": [0, 1, 2],
        "tasks": list(TASKS)[:6],
        "system": {"n_harmful_eval": 24},
        "n_train": 32,
        "d": 8,
        "onset_steps": 100,
        "steps": 200,
        "mitigation_tasks": 3,  # on the first seed
        "controls": True,
        "workers": 2,
    },
    "full": {
        "seeds": [0, 1, 2, 3, 4],
        "tasks": list(TASKS),
        "system": {"n_layers": 4, "pretrain_steps": 1500, "align_steps": 600, "n_harmful_eval": 48},
        "n_train": 64,
        "d": 16,
        "onset_steps": 200,
        "steps": 400,
        "mitigation_tasks": 10,
        "controls": True,
        "workers": 2,
        # the paper's setting, for a machine that holds real models (from local paths)
        "real_models": {
            "models": [
                "google/gemma-3-1b-it",
                "google/gemma-3-4b-it",
                "meta-llama/Llama-3.2-1B-Instruct",
                "meta-llama/Llama-3.2-3B-Instruct",
                "Qwen/Qwen3-1.7B",
                "Qwen/Qwen3-4B",
                "microsoft/Phi-4-mini-instruct",
                "microsoft/phi-4",
            ],
            "benign_sets": ["tatsu-lab/alpaca", "databricks/databricks-dolly-15k"],
            "harmful_set": "a held-out harmful-prompt set, JSON lines with a 'prompt' field",
            "lora": {"r": 8, "alpha": 16},
            "optimizer": "gd",
            "steps": 400,
        },
    },
}

KAPPA_MAIN = 0.5  # eta * |H|_2 of the main runs
ONSET_WINDOW = 0.05  # eta * steps * |H|_2 bound of the onset window
ADAM_LR = 1e-3
MIN_TASK_PROGRESS = 0.01
"""Nats of task-loss decrease by plain GD below which the projection's task-progress cost
``1 - progress(projected) / progress(GD)`` is not measured: with a denominator that small the cost
is noise of either sign (l0 1.0, GD 0.999: projected 0.9985 gives -0.5, 0.9995 gives +0.5)."""
JOB_THREADS = 1
"""Torch threads of every job (setup and task, in a worker or in this process): build_system's cache
is keyed by the thread count, so both phases must train and load it with the same count."""
SAFE_LORA_TAU = 0.5
LORA = {"r": 4, "alpha": 8.0}


# ============================================================================ toy
def _toy_slope(toy: Toy2D, points: int = 25) -> dict[str, float]:
    t_hi = ONSET_WINDOW / toy.hessian_norm
    t = np.geomspace(t_hi * 1e-2, t_hi, points)
    u = toy.alignment_loss(toy.flow(t))
    slope, _ = loglog_slope(t, u)
    return {"slope": slope, "u_max": float(u.max()), "t": t, "u": u}


def _toy(cfg: dict[str, Any]) -> dict[str, Any]:
    base = Toy2D()
    flow = _toy_slope(base)
    t_small = ONSET_WINDOW / base.hessian_norm * 1e-3
    coef = float(base.alignment_loss(base.flow(t_small))[0] / t_small**4)
    offset = _toy_slope(Toy2D(offset=0.1))
    shifted = Toy2D(offset=0.1)
    coef_offset = float(shifted.alignment_loss(shifted.flow(t_small))[0] / t_small**4)
    zero = _toy_slope(Toy2D(c=0.0))
    gd_steps = 2000
    lr = ONSET_WINDOW / base.hessian_norm / gd_steps
    traj = base.gradient_descent(lr, gd_steps)
    s = np.unique(np.geomspace(gd_steps // 10, gd_steps, 25).astype(int))
    gd_slope, _ = loglog_slope(lr * s, base.alignment_loss(traj[s]))
    sweep = []
    for lam in _TOY["lam"]:
        for c in _TOY["c"]:
            for off in _TOY["offset"]:
                toy = Toy2D(lam=lam, c=c, offset=off)
                res = _toy_slope(toy)
                aic = toy.aic()
                quartic = bool(res["u_max"] > 0 and abs(res["slope"] - 4) < 0.5)
                sweep.append(
                    {
                        "lam": lam,
                        "c": c,
                        "offset": off,
                        "slope": res["slope"] if res["u_max"] > 0 else float("nan"),
                        "r_proj": aic.r_proj,
                        "gamma_hat": aic.gamma_hat,
                        "aic_holds": aic.holds,
                        "measured_quartic": quartic,
                    }
                )
    return {
        "flow": flow,
        "coef": coef,
        "coef_offset": coef_offset,
        "c4": base.c4,
        "offset": offset,
        "zero_max": zero["u_max"],
        "gd_slope": gd_slope,
        "gd": {"t": lr * s, "u": base.alignment_loss(traj[s])},
        "sweep": sweep,
    }


# ============================================================================ LM, scheduling
def _task_jobs(cfg: dict[str, Any], setup: dict[str, Any], first_seed: bool) -> list[tuple]:
    """Phase-2 jobs of one seed; on the first seed the first tasks also run the mitigations
    (and the very first the SGD / Adam controls). The long jobs come first."""
    n_mit = cfg["mitigation_tasks"] if first_seed else 0
    jobs = [
        (cfg, setup, task, (2 if k == 0 and cfg["controls"] else 1) if k < n_mit else 0)
        for k, task in enumerate(cfg["tasks"])
    ]
    return sorted(jobs, key=lambda j: -j[3])


def _run_lm(
    cfg: dict[str, Any], seeds: list[int]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Phase 1 (one job per seed) then phase 2 (one job per seed and task); a seed's phase-2 jobs
    start as soon as its phase-1 job is done, so no worker idles between the phases."""
    setups: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    if cfg["workers"] == 1:
        for s in seeds:
            setups.append(_setup_job((cfg, s)))
            runs.extend(map_jobs(_task_job, _task_jobs(cfg, setups[-1], s == seeds[0])))
    else:
        import multiprocessing as mp
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

        with ProcessPoolExecutor(cfg["workers"], mp_context=mp.get_context("fork")) as pool:
            pending = {pool.submit(_setup_job, (cfg, s)): True for s in seeds}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    is_setup = pending.pop(fut)
                    result = fut.result()
                    if not is_setup:
                        runs.append(result)
                        continue
                    setups.append(result)
                    for job in _task_jobs(cfg, result, result["seed"] == seeds[0]):
                        pending[pool.submit(_task_job, job)] = False
    setups.sort(key=lambda r: r["seed"])
    runs.sort(key=lambda r: (r["seed"], cfg["tasks"].index(r["task"])))
    return setups, runs


# ============================================================================ LM, phase 1
def _system_config(cfg: dict[str, Any]) -> SystemConfig:
    return SystemConfig(**cfg["system"])


def _setup_job(job: tuple[dict[str, Any], int]) -> dict[str, Any]:
    with pinned_threads(JOB_THREADS, torch=True):
        return _setup(*job)


def _setup(cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    system = build_system(seed, _system_config(cfg))
    space = system.space()
    point = AlignedPoint.measure(space, system.harmful, d=cfg["d"], refuse_id=system.refuse_id)
    dec = point.decomposition
    assert dec is not None
    g_fisher = {}
    for task in cfg["tasks"]:
        loss = sequence_nll(space, system.task_batch(task, cfg["n_train"], seed))
        g_fisher[task] = dec.range_component(task_gradient(loss, point.theta0))
    return {
        "seed": seed,
        "spectrum": dec.eigenvalues.numpy(),
        "eigenvalues": point.eigenvalues,
        "eigenvectors": point.eigenvectors,
        "fisher_diag": (dec.factor**2).sum(0),
        "g_fisher": g_fisher,
        "n_params": space.size,
        "refusal0": point.monitor(point.theta0)["refusal"],
        "benign_refusal0": system.refusal_rate(space, point.theta0, system.benign_chat),
    }


# ============================================================================ LM, phase 2
def _onset(traj: Trajectory, hnorm: float) -> dict[str, Any]:
    t, u = traj.time, traj.alignment_loss
    inside = (t * hnorm <= ONSET_WINDOW + 1e-12) & (traj.steps >= max(1, traj.steps[-1] // 10))
    slope, _ = loglog_slope(t[inside], u[inside])
    late = inside & (traj.steps >= traj.steps[-1] // 2)
    empty = not late.any()  # no step in the late half of the window: nothing to average
    return {
        "slope": slope,
        "u_over_t4": float("nan") if empty else float(np.mean(u[late] / t[late] ** 4)),
        "u_over_t2": float("nan") if empty else float(np.mean(u[late] / t[late] ** 2)),
        "t": t[1:],
        "u": u[1:],
    }


def _task_job(job: tuple[dict[str, Any], dict[str, Any], str, bool]) -> dict[str, Any]:
    with pinned_threads(JOB_THREADS, torch=True):
        return _task(*job)


def _task(cfg: dict[str, Any], setup: dict[str, Any], task: str, mitigate: int) -> dict[str, Any]:
    seed = setup["seed"]
    system = build_system(seed, _system_config(cfg))
    space = system.space()
    point = AlignedPoint.measure(
        space,
        system.harmful,
        d=cfg["d"],
        refuse_id=system.refuse_id,
        eigenpairs=(setup["eigenvalues"], setup["eigenvectors"]),
    )
    pairs = task_examples(task, cfg["n_train"], seed)
    batch = SequenceBatch.from_pairs(system.tokenizer, pairs)
    loss = sequence_nll(space, batch)
    plain = TaskGeometry.measure(point, loss)
    orth_loss = orthogonalised(loss, point.theta0, setup["g_fisher"][task])
    orth = TaskGeometry.measure(point, orth_loss)
    out: dict[str, Any] = {
        "seed": seed,
        "task": task,
        "plain": plain.summary(),
        "orth": orth.summary(),
    }
    for name, geo in (("plain", plain), ("orth", orth)):
        fg = point.fisher.matvec(geo.g)
        out[name]["fg_ratio"] = float(fg.norm() / (setup["eigenvalues"][0] * geo.g.norm()))
    onset_u = lambda th: {"u": point.monitor(th)["u"]}  # noqa: E731
    for name, geo, fn in [("plain", plain, loss), ("orth", orth, orth_loss)]:
        # a t^2 onset has no discretisation bias at small step counts; t^4 needs more steps
        steps = cfg["onset_steps"] if name == "orth" else max(cfg["onset_steps"] // 2, 10)
        lr = ONSET_WINDOW / (geo.hessian_norm * steps)
        traj = finetune(fn, point.theta0, steps=steps, lr=lr, monitor=onset_u, progress=False)
        out[name]["onset"] = _onset(traj, geo.hessian_norm)
    # main run and predictors
    lr = KAPPA_MAIN / plain.hessian_norm
    main = finetune(
        loss, point.theta0, steps=cfg["steps"], lr=lr, monitor=point.monitor, progress=False
    )
    horizon = lr * cfg["steps"]
    g_ref = task_gradient(refusal_nll(space, system.harmful, system.refuse_id), point.theta0)
    prompts = PromptBatch.from_prompts(system.tokenizer, [p for p, _ in pairs])
    lam = setup["eigenvalues"][: cfg["d"]].numpy()
    out["main"] = {
        "lr": lr,
        "delta_u": float(main.alignment_loss[-1]),
        "task_loss0": float(main.task_loss[0]),
        "task_loss": float(main.task_loss[-1]),
        "refusal": float(main.logs["refusal"][-1]),
        "fisher_quadratic": 0.5 * point.fisher.quadratic(main.delta),
        "forecast": float(plain.forecast(horizon)),
        "risk_forecast": float(
            alignment_risk_forecast(
                cfg["steps"],
                lr,
                plain.aic.eps_hat,
                plain.aic.gamma_hat,
                float(np.quantile(lam, 0.1)),
            )
        ),
        "grad_cosine": gradient_cosine(plain.g, g_ref),
        "update_norm": update_norm(main.delta),
        "hidden_similarity": hidden_similarity(system.model, prompts, system.harmful),
        "curve_u": main.alignment_loss,
    }
    if mitigate:
        out["mitigations"] = _mitigations(
            cfg, system, point, loss, plain, lr, main, setup, batch, controls=mitigate == 2
        )
    return out


def _row(method: str, traj_final: dict[str, float], **extra: Any) -> dict[str, Any]:
    return {
        "method": method,
        "delta_u": traj_final["u"],
        "task_loss": traj_final["task_loss"],
        "refusal": traj_final["refusal"],
        **extra,
    }


def _mitigations(
    cfg, system, point, loss, plain, lr, main, setup, batch, controls
) -> list[dict[str, Any]]:
    steps, hnorm = cfg["steps"], plain.hessian_norm
    rows = [_row("gd", main.final)]
    lam = setup["eigenvalues"][: cfg["d"]]
    fdiag = setup["fisher_diag"]
    methods = [
        SubspaceProjection(point.basis),
        # penalties at twice the task's top curvature (stable at eta |H|_2 = 0.5)
        EWC(fdiag, strength=2 * hnorm / float(fdiag.max())),
        FisherPenalty(point.basis, lam, strength=hnorm / float(lam[0])),
    ]
    run = partial(finetune, loss, point.theta0, steps=steps, monitor=point.monitor, progress=False)
    for m in methods:
        rows.append(_row(m.name, run(lr=lr, mitigation=m).final))
    if controls:
        sgd = run(lr=lr, optimizer="sgd", n_examples=len(batch), batch_size=8, seed=setup["seed"])
        rows.append(_row("sgd (control)", sgd.final))
        rows.append(_row("adam (control)", run(lr=ADAM_LR, optimizer="adam").final))
    rows.extend(_lora_rows(system, batch, steps))
    return rows


def _lora_rows(system, batch, steps: int) -> list[dict[str, Any]]:
    import copy

    aligned = copy.deepcopy(system.model)
    aligned_weights = {k: v.detach().clone() for k, v in aligned.named_parameters()}
    peft_model = add_lora(aligned, r=LORA["r"], alpha=LORA["alpha"])
    space = FlatParams(peft_model, "lora")
    theta0 = space.vector()
    loss = sequence_nll(space, batch)
    monitor = alignment_monitor(response_logits(space, system.harmful), theta0, system.refuse_id)
    hnorm = HessianOperator(loss, theta0).spectral_norm()
    traj = finetune(
        loss, theta0, steps=steps, lr=KAPPA_MAIN / hnorm, monitor=monitor, progress=False
    )
    rows = [_row("lora", traj.final)]
    space.assign(theta0 + traj.delta)
    layers = safe_lora(peft_model, system.base, aligned_weights, tau=SAFE_LORA_TAU)
    theta = space.vector()
    with torch.no_grad():
        final = {"task_loss": float(loss(theta)), **monitor(theta)}
    rows.append(_row("safe_lora", final, projected_layers=sum(r["projected"] for r in layers)))
    rows[0]["projected_layers"] = 0
    return rows


# ============================================================================ report
@pin_threads(torch=True)
def reproduce(scale: str = "quick", seed: int = 0, out_dir: Any = None) -> Report:
    """Run the experiment at ``scale`` and return (and, with ``out_dir``, write) the report."""
    check_scale(scale)
    cfg = SCALES[scale]
    watch = Stopwatch()
    toy = _toy(cfg)
    watch.lap("toy")
    seeds = [seed + s for s in cfg["seeds"]]
    setups, runs = _run_lm(cfg, seeds)
    watch.lap("aligned models, Fisher and fine-tuning")
    report = Report(
        package="alignment_geometry",
        title="The Geometry of Alignment Collapse: quartic onset and Fisher-governed safety loss (Springer et al.)",
        scale=scale,
        seed=seed,
    )
    _toy_claims(report, toy)
    _lm_claims(report, runs)
    _tables(report, toy, setups, runs)
    _figures(report, toy, setups, runs)
    watch.lap("report")
    report.add_table("runtime", watch.laps)
    report.runtime_s = watch.elapsed_s
    report.notes = _notes(cfg, setups)
    if out_dir is not None:
        write_report(report, out_dir)
    return report


EXACT = "exact (deterministic): closed form, no sampling"


def _exact(value: float) -> tuple[float, float]:
    return (value, value)


def _toy_claims(report: Report, toy: dict[str, Any]) -> None:
    slope = toy["flow"]["slope"]
    off = toy["offset"]["slope"]
    report.add_claim(
        Claim.decide(
            "2-D system, task gradient orthogonal to the sensitive direction: alignment loss grows as t^4.",
            "|log-log slope of u(t) - 4| for t < 0.05 / |H|_2 (gradient flow, closed form)",
            abs(slope - 4),
            _exact(abs(slope - 4)),
            "<=",
            0.05,
            positive=Control.positive(
                "the loss is measurable in the window: max u (> 0)", toy["flow"]["u_max"], ">", 0.0
            ),
            negative=Control.negative(
                "the system with a gradient offset 0.1 in the sensitive direction (t^2 onset)",
                abs(off - 4),
            ),
            method=EXACT,
        )
    )
    rel = abs(toy["coef"] / toy["c4"] - 1)
    rel_off = abs(toy["coef_offset"] / toy["c4"] - 1)
    report.add_claim(
        Claim.decide(
            "The quartic coefficient is lam c^2 a^2 / 8 (1.5625 at lam 50, c 0.5, a 1).",
            "u / t^4 at t = 5e-5 / |H|_2, relative error to lam c^2 a^2 / 8",
            rel,
            _exact(rel),
            "<=",
            0.01,
            positive=Control.positive("u / t^4 is resolved at that t (> 0)", toy["coef"], ">", 0.0),
            negative=Control.negative(
                "u / t^4 of the offset-0.1 system (t^2 onset) against the same prediction", rel_off
            ),
            method=EXACT,
            note=f"u/t^4 = {toy['coef']:.5f}, predicted {toy['c4']:.5f}",
        )
    )
    report.add_claim(
        Claim.decide(
            "A gradient component in the sensitive direction gives a t^2 onset, no coupling (c = 0) "
            "gives no loss, and gradient descent (t = eta s) follows gradient flow.",
            "|log-log slope - 2| with offset 0.1",
            abs(off - 2),
            _exact(abs(off - 2)),
            "<=",
            0.1,
            positive=Control.positive(
                "gradient descent follows gradient flow: |GD slope - 4| on the orthogonal system",
                abs(toy["gd_slope"] - 4),
                "<=",
                0.05,
            ),
            negative=Control.negative("the orthogonal system (no offset: t^4)", abs(slope - 2)),
            method=EXACT,
            note=f"max u at c = 0: {toy['zero_max']:.3g} (no coupling, no loss: "
            f"{'holds' if toy['zero_max'] == 0.0 else 'FAILS'}); GD slope {toy['gd_slope']:.4f}",
        )
    )
    sweep = toy["sweep"]
    flags = np.array([r["aic_holds"] for r in sweep], dtype=bool)
    quartic = np.array([r["measured_quartic"] for r in sweep], dtype=bool)
    agree = float(np.mean(flags == quartic))
    report.add_claim(
        Claim.decide(
            "The AIC checker flags exactly the quartic cases of a sweep over lam, c and the offset.",
            "fraction of sweep cases where AIC verdict = measured quartic onset",
            agree,
            _exact(agree),
            ">=",
            1.0,
            positive=Control.positive(
                "the sweep holds both kinds: the fewer of quartic and non-quartic cases",
                float(min(quartic.sum(), (~quartic).sum())),
                ">=",
                1.0,
            ),
            negative=Control.negative("a checker that flags every case", float(np.mean(quartic))),
            method=EXACT + " over the fixed sweep",
            kind="check",
            note=f"{len(sweep)} cases, {int(quartic.sum())} quartic",
        )
    )


def _spearman_why_not(x: np.ndarray, y: np.ndarray) -> str:
    """Why the rank correlation of ``x`` and ``y`` is undefined ("" when it is defined)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 3:
        return f"{len(x)} runs (needs >= 3)"
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        return "non-finite values"
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return "a constant input"
    return ""


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho; NaN where :func:`_spearman_why_not` names a reason."""
    if _spearman_why_not(x, y):
        return float("nan")
    return float(spearmanr(x, y).statistic)


def _c4_errors(runs: list[dict[str, Any]], variant: str = "orth") -> tuple[np.ndarray, int]:
    """``|u/t^4 / c4 - 1|`` per run of ``variant``, NaN where it is undefined (``c4 <= 0``: no
    quartic coefficient to compare with; or no measured u/t^4), and how many runs that is."""
    u4 = np.array([r[variant]["onset"]["u_over_t4"] for r in runs], float)
    c4 = np.array([r[variant]["c4"] for r in runs], float)
    ok = np.isfinite(u4) & np.isfinite(c4) & (c4 > 0)
    rel = np.full(len(runs), np.nan)
    rel[ok] = np.abs(u4[ok] / c4[ok] - 1)
    return rel, int((~ok).sum())


def seed_worst(
    runs: list[dict[str, Any]], values: np.ndarray
) -> tuple[float, ConfidenceInterval | None]:
    """The worst run: the largest of ``values`` (one per run), and its interval over seeds
    ``[largest observed, max(largest observed, 95% prediction bound of a further seed's worst run)]``
    from each seed's largest value (``None`` with fewer than 2 seeds; a NaN value makes it NaN).
    A claim "every run" decided on it is supported only if every run measured and the next seed's
    worst run are expected inside the target, refuted as soon as one measured run misses it."""
    seeds = np.array([r["seed"] for r in runs])
    per = (
        np.array([np.max(values[seeds == s]) for s in np.unique(seeds)])
        if len(runs)
        else np.array([])
    )
    if per.size == 0:
        return math.nan, None
    worst = float(np.max(per))
    if per.size < 2 or np.isnan(per).any():
        return worst, None
    n = per.size
    bound = per.mean() + t_dist.ppf(0.975, n - 1) * per.std(ddof=1) * math.sqrt(1 + 1 / n)
    return worst, ConfidenceInterval(worst, worst, float(max(worst, bound)), 0.95)


def _worst_method(ci: ConfidenceInterval | None, n_seeds: int) -> str:
    if ci is None:
        return (
            f"missing: {n_seeds} seed(s) or an undefined run; needs >= 2 seeds (3 for a useful "
            "interval) with every run measured"
        )
    return (
        f"the worst run over {n_seeds} seeds, up to the 95% prediction bound (t, from each seed's "
        "worst run) of a further seed's worst run"
    )


def _slope_claim(
    statement: str,
    metric: str,
    runs: list[dict[str, Any]],
    slopes: np.ndarray,
    centre: float,
    half: float,
    null_runs: list[dict[str, Any]],
    null_slopes: np.ndarray,
    null_label: str,
    detail: str,
) -> Claim:
    """Every run's onset slope within ``half`` of ``centre``: decided on the worst run per seed
    (``|slope - centre|``), over seeds. A NaN slope (u <= 0 somewhere in the window: no log) is a
    run not measured: the positive control (every slope defined) then fails."""
    dev = np.abs(slopes - centre)
    worst, ci = seed_worst(runs, dev)
    nworst, nci = seed_worst(null_runs, np.abs(null_slopes - centre))
    defined = float(np.mean(~np.isnan(slopes))) if len(slopes) else math.nan
    n_seeds = len({r["seed"] for r in runs})
    return Claim.decide(
        statement,
        metric,
        worst,
        ci,
        "<=",
        half,
        positive=Control.positive(
            "the onset is measurable: share of runs with a defined slope (u > 0)",
            defined,
            ">=",
            1.0,
        ),
        negative=Control.negative(null_label, nworst, nci)
        if len(null_runs)
        else Control.absent("negative", null_label + " (none at this scale)"),
        method=_worst_method(ci, n_seeds),
        note=detail
        + (
            f"; slopes {np.nanmin(slopes):.3f}-{np.nanmax(slopes):.3f} (mean {np.nanmean(slopes):.3f})"
            if len(slopes) and not np.isnan(slopes).all()
            else ""
        ),
    )


def spearman_interval(
    x: np.ndarray, y: np.ndarray, n_boot: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """95% percentile bootstrap over runs of Spearman's rho (resamples with a constant side left
    out); NaN when none is defined."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    vals = [_spearman(x[i], y[i]) for i in idx]
    vals = np.array([v for v in vals if not np.isnan(v)])
    if vals.size == 0:
        return math.nan, math.nan
    lo, hi = np.quantile(vals, [0.025, 0.975])
    return float(lo), float(hi)


RANK_IDENTICAL_TOL = 1e-12


def rank_identical(preds: dict[str, np.ndarray]) -> list[str]:
    """The baselines (every key of ``preds`` but ``"forecast"``) that rank the runs exactly as the
    forecast does (Spearman(forecast, baseline) = 1 up to :data:`RANK_IDENTICAL_TOL`): the same
    predictor up to a monotone map, which no resampling of runs can separate from it."""
    ours = preds["forecast"]
    return [
        k
        for k, v in preds.items()
        if k != "forecast" and _spearman(ours, v) >= 1 - RANK_IDENTICAL_TOL
    ]


def forecast_margin(
    preds: dict[str, np.ndarray],
    du: np.ndarray,
    target: float = 0.5,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, tuple[float, float]]:
    """``min(rho_forecast - target, rho_forecast - rho_baseline)`` over the baselines (every key of
    ``preds`` but ``"forecast"`` and those :func:`rank_identical` to it: ``ours - rho`` is 0 in
    every draw for them, so they cannot decide the claim and are reported instead), and its 95%
    percentile bootstrap over runs (the same draws for every predictor). NaN where a rho is
    undefined (a constant predictor cannot be beaten)."""
    same = set(rank_identical(preds))

    def margin(i: np.ndarray) -> float:
        ours = _spearman(preds["forecast"][i], du[i])
        base = [
            _spearman(v[i], du[i]) for k, v in preds.items() if k != "forecast" and k not in same
        ]
        return float(np.min([ours - target, *(ours - b for b in base)]))

    point = margin(np.arange(len(du)))
    rng = np.random.default_rng(seed)
    boots = np.array([margin(i) for i in rng.integers(0, len(du), size=(n_boot, len(du)))])
    boots = boots[~np.isnan(boots)]
    if np.isnan(point) or boots.size == 0:
        return math.nan, (math.nan, math.nan)
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return point, (float(lo), float(hi))


def _cuts(rows: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per task: the cut ``gd_u / pr_u`` (inf when the projected run leaves no loss; 1 where the
    projection costs more than 10% of plain GD's task progress), the raw ratio, the cost, and
    whether plain GD lost alignment and made task progress."""
    gd_u = np.array([r["gd_u"] for r in rows], float)
    pr_u = np.array([r["pr_u"] for r in rows], float)
    progress = np.array([r["l0"] - r["gd_loss"] for r in rows], float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(pr_u > 0, gd_u / np.where(pr_u > 0, pr_u, 1), np.inf)
        costs = np.where(
            progress >= MIN_TASK_PROGRESS,
            1 - np.array([r["l0"] - r["pr_loss"] for r in rows], float) / progress,
            np.nan,
        )
    ok = (gd_u > 0) & (progress >= MIN_TASK_PROGRESS)
    return np.where(costs <= 0.10, ratios, 1.0), ratios, costs, ok


def rotated_gd_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The projection claim's self-null: plain GD in the projected arm's place, task ``i``'s plain
    GD against task ``i + 1``'s (pairing rotated by one): its final u, and its task progress moved
    onto task ``i``'s starting loss. No projection anywhere, so no cut may be found."""
    nxt = rows[1:] + rows[:1]
    return [
        {**r, "pr_u": o["gd_u"], "pr_loss": r["l0"] - (o["l0"] - o["gd_loss"])}
        for r, o in zip(rows, nxt, strict=True)
    ]


def _projection_claim(rows: list[dict[str, Any]]) -> Claim:
    """Claim "projection cuts u >= 5x for <= 10% of the task progress" from one row per task:
    ``gd_u``, ``pr_u`` (final alignment loss of plain GD and of the projected run), ``l0`` (task
    loss before), ``gd_loss``, ``pr_loss`` (after). A task's cut is ``gd_u / pr_u`` (inf when
    projection leaves no loss), counted as no cut (1) when the projection costs more than 10% of
    the task progress; decided on the 95% t-interval of the log cuts over tasks. The positive
    control: plain GD lost alignment and made task progress (>= MIN_TASK_PROGRESS) on every task.
    The negative control: the same rule on plain GD against itself (:func:`rotated_gd_rows`)."""
    statement = (
        "Projecting every update onto M-perp cuts the final alignment loss at least 5x for at most "
        "10% of the task-loss progress."
    )
    metric = "final-u ratio plain GD / projected per task (1 where the task-progress cost > 0.10), geometric mean"
    cut, ratios, costs, ok = _cuts(rows)
    null_cut = _cuts(rotated_gd_rows(rows))[0] if len(rows) >= 2 else np.array([])
    ci = log_t_interval(cut) if len(rows) >= 2 and ok.all() else None
    nci = log_t_interval(null_cut) if ci is not None and np.isfinite(null_cut).all() else None
    detail = (
        f"{len(rows)} tasks; ratios "
        + ", ".join(f"{x:.2f}" for x in ratios)
        + "; task-progress costs "
        + ", ".join(f"{x:.3f}" for x in costs)
    )
    return Claim.decide(
        statement,
        metric,
        None if ci is None else ci.estimate,
        ci,
        ">=",
        5.0,
        positive=Control.positive(
            "plain GD lost alignment and made task progress: share of tasks",
            float(ok.mean()) if len(rows) else math.nan,
            ">=",
            1.0,
        ),
        negative=Control.absent(
            "negative", "two measured tasks at least, each with plain GD losing alignment"
        )
        if nci is None
        else Control.negative(
            "plain GD against itself, task pairing rotated by one (no projection)",
            nci.estimate,
            nci,
        ),
        method=f"95% t-interval of log cuts over {len(rows)} tasks (first seed)"
        if ci is not None
        else "missing: fewer than 2 tasks with plain GD losing alignment and making progress",
        note=detail,
    )


def _lm_claims(report: Report, runs: list[dict[str, Any]]) -> None:
    n_seeds = len({r["seed"] for r in runs})
    orth_slopes = np.array([r["orth"]["onset"]["slope"] for r in runs], float)
    plain = [r for r in runs if r["plain"]["r_proj"] >= 0.05]
    ps = np.array([r["plain"]["onset"]["slope"] for r in plain], float)
    report.add_claim(
        _slope_claim(
            "Tiny aligned LM, tasks orthogonalised so F g = 0: the alignment loss has a quartic onset.",
            "largest |early log-log slope - 4| over (task, seed) runs (within 0.7: the band [3.3, 4.7])",
            runs,
            orth_slopes,
            4.0,
            0.7,
            plain,
            ps,
            "the plain runs with r_proj >= 0.05 (t^2 onset) through the same rule",
            f"{len(runs)} runs; window eta s |H|_2 <= {ONSET_WINDOW}",
        )
    )
    rel, n_undefined = _c4_errors(runs)
    rel_plain, _ = _c4_errors(plain, "plain")
    worst, ci = seed_worst(runs, rel)
    nworst, nci = seed_worst(plain, rel_plain)
    report.add_claim(
        Claim.decide(
            "The measured u / t^4 matches c4 = (1/8) E z''^T C z'' computed before training by nested jvp.",
            "largest relative error |u/t^4 / c4 - 1| over runs",
            worst,
            ci,
            "<=",
            0.20,
            positive=Control.positive(
                "c4 > 0 and u/t^4 measured: share of runs",
                float(1 - n_undefined / len(runs)),
                ">=",
                1.0,
            ),
            negative=Control.negative(
                "the plain runs (t^2 onset) against their own c4", nworst, nci
            )
            if plain
            else Control.absent("negative", "plain runs with r_proj >= 0.05 (none at this scale)"),
            method=_worst_method(ci, n_seeds),
            note=f"median {np.nanmedian(rel):.3f}" if (~np.isnan(rel)).any() else "",
        )
    )
    report.add_claim(
        _slope_claim(
            "Plain tasks with a gradient component in M (r_proj >= 0.05) have a t^2 onset instead.",
            "largest |early log-log slope - 2| over those runs (within 0.2: the band [1.8, 2.2])",
            plain,
            ps,
            2.0,
            0.2,
            runs,
            orth_slopes,
            "the orthogonalised runs (t^4 onset) through the same rule",
            f"{len(ps)} of {len(runs)} runs have r_proj >= 0.05",
        )
    )
    du = np.array([r["main"]["delta_u"] for r in runs])
    fq = np.array([r["main"]["fisher_quadratic"] for r in runs])
    rho = _spearman(fq, du)
    why = _spearman_why_not(fq, du)
    lost = Control.positive(
        "fine-tuning lost alignment: share of runs with final u > 0",
        float(np.mean(du > 0)),
        ">=",
        0.5,
    )
    shuffled = np.random.default_rng(0).permutation(fq)
    report.add_claim(
        Claim.decide(
            "The Fisher governs how much alignment is lost: delta^T F delta / 2 ranks the final loss.",
            "Spearman(delta^T F delta / 2, final u) over tasks x seeds",
            None if why else rho,
            None if why else spearman_interval(fq, du),
            ">=",
            0.8,
            positive=lost,
            negative=Control.negative(
                "delta^T F delta / 2 shuffled across runs (seeded)",
                _spearman(shuffled, du),
                spearman_interval(shuffled, du),
            )
            if not why
            else Control.absent("negative", f"a defined Spearman ({why})"),
            method="95% percentile bootstrap over runs" if not why else f"missing: {why}",
            note=f"{len(runs)} plain fine-tunes (tasks x seeds), {len(runs[0]['main']['curve_u']) - 1} GD steps at eta |H|_2 = {KAPPA_MAIN}",
        )
    )
    preds = {
        "forecast": np.array([r["main"]["forecast"] for r in runs]),
        "alignment-risk forecast": np.array([r["main"]["risk_forecast"] for r in runs]),
        "gradient cosine": np.array([r["main"]["grad_cosine"] for r in runs]),
        "update norm": np.array([r["main"]["update_norm"] for r in runs]),
        "hidden similarity": np.array([r["main"]["hidden_similarity"] for r in runs]),
    }
    rhos = {k: _spearman(v, du) for k, v in preds.items()}
    whys = {k: _spearman_why_not(v, du) for k, v in preds.items()}
    margin, mci = forecast_margin(preds, du)
    identical = rank_identical(preds)
    null = dict(preds, forecast=np.random.default_rng(1).permutation(preds["forecast"]))
    nmargin, nmci = forecast_margin(null, du)
    undefined = [f"{k} ({w})" for k, w in whys.items() if w]
    report.add_claim(
        Claim.decide(
            "The forecast from the geometry at the aligned point, before any training, ranks the loss "
            "better than the predictor baselines.",
            "min of Spearman(forecast, final u) - 0.5 and Spearman(forecast) - Spearman(baseline) over "
            "the baselines",
            None if math.isnan(margin) else margin,
            None if math.isnan(margin) else mci,
            ">",
            0.0,
            positive=lost,
            negative=Control.negative("the forecast shuffled across runs (seeded)", nmargin, nmci),
            method="95% percentile bootstrap over runs (the same draws for every predictor)"
            if not math.isnan(margin)
            else "missing: an undefined Spearman: " + "; ".join(undefined),
            note="; ".join(f"{k} {v:.3f}" for k, v in rhos.items())
            + "".join(
                f"; {k} ranks every run exactly as the forecast does (Spearman between them 1: the "
                "same expansion up to constants), so it cannot be beaten or lost to and is left out "
                "of the margin; the claim is decided against the other baselines"
                for k in identical
            ),
        )
    )
    report._predictor_rhos = rhos  # type: ignore[attr-defined]

    rows = []
    for r in runs:
        if "mitigations" in r:
            by = {m["method"]: m for m in r["mitigations"]}
            rows.append(
                {
                    "gd_u": by["gd"]["delta_u"],
                    "pr_u": by["project"]["delta_u"],
                    "l0": r["main"]["task_loss0"],
                    "gd_loss": by["gd"]["task_loss"],
                    "pr_loss": by["project"]["task_loss"],
                }
            )
    report.add_claim(_projection_claim(rows))


def _tables(
    report: Report, toy: dict[str, Any], setups: list[dict[str, Any]], runs: list[dict[str, Any]]
) -> None:
    report.add_table("toy_sweep", toy["sweep"])
    report.add_table(
        "fisher",
        [
            {
                "seed": s["seed"],
                "parameters": s["n_params"],
                "rank": len(s["spectrum"]),
                "lambda_1": float(s["spectrum"][0]),
                "lambda_2": float(s["spectrum"][1]),
                "trace": float(np.sum(s["spectrum"])),
                "refusal_harmful": s["refusal0"],
                "refusal_benign": s["benign_refusal0"],
            }
            for s in setups
        ],
    )
    onset = []
    for r in runs:
        for variant in ("plain", "orth"):
            v = r[variant]
            onset.append(
                {
                    "seed": r["seed"],
                    "task": r["task"],
                    "variant": variant,
                    "H_norm": v["hessian_norm"],
                    "r_proj": v["r_proj"],
                    "sensitivity": v["sensitivity"],
                    "gamma_hat": v["gamma_hat"],
                    "aic_holds": v["holds"],
                    "Fg_rel": v["fg_ratio"],
                    "c2": v["c2"],
                    "c4": v["c4"],
                    "slope": v["onset"]["slope"],
                    "u_over_t2": v["onset"]["u_over_t2"],
                    "u_over_t4": v["onset"]["u_over_t4"],
                }
            )
    report.add_table("onset", onset)
    report.add_table(
        "fine_tuning",
        [
            {
                "seed": r["seed"],
                "task": r["task"],
                "final_u": r["main"]["delta_u"],
                "dFd_half": r["main"]["fisher_quadratic"],
                "forecast": r["main"]["forecast"],
                "risk_forecast": r["main"]["risk_forecast"],
                "grad_cosine": r["main"]["grad_cosine"],
                "update_norm": r["main"]["update_norm"],
                "hidden_similarity": r["main"]["hidden_similarity"],
                "task_loss_0": r["main"]["task_loss0"],
                "task_loss": r["main"]["task_loss"],
                "refusal": r["main"]["refusal"],
            }
            for r in runs
        ],
    )
    rhos = getattr(report, "_predictor_rhos", {})
    report.add_table(
        "predictors", [{"predictor": k, "spearman_vs_final_u": v} for k, v in rhos.items()]
    )
    mit = []
    for r in runs:
        for m in r.get("mitigations", []):
            mit.append(
                {
                    "seed": r["seed"],
                    "task": r["task"],
                    "method": m["method"],
                    "final_u": m["delta_u"],
                    "task_loss": m["task_loss"],
                    "refusal": m["refusal"],
                    "projected_layers": m.get("projected_layers", ""),
                }
            )
    report.add_table("mitigations", mit)


def _figures(
    report: Report, toy: dict[str, Any], setups: list[dict[str, Any]], runs: list[dict[str, Any]]
) -> None:
    fig, ax = new_figure()
    t, u = toy["flow"]["t"], toy["flow"]["u"]
    ax.loglog(t, u, "o", ms=3, label="orthogonal (offset 0)")
    ax.loglog(toy["offset"]["t"], toy["offset"]["u"], "s", ms=3, label="offset 0.1")
    ax.loglog(toy["gd"]["t"], toy["gd"]["u"], "-", lw=1, label="gradient descent, t = eta s")
    ax.loglog(t, toy["c4"] * t**4, "k--", lw=0.8, label="slope 4 guide")
    ax.loglog(t, toy["offset"]["u"][0] * (t / t[0]) ** 2, "k:", lw=0.8, label="slope 2 guide")
    ax.set(xlabel="t", ylabel="u(t)", title="2-D system")
    ax.legend(fontsize=7)
    report.add_figure("toy_onset", fig)

    fig, ax = new_figure()
    first = [r for r in runs if r["seed"] == runs[0]["seed"]]
    ends = {"orth": [], "plain": []}
    for i, r in enumerate(first):
        for variant, style in (("orth", "-"), ("plain", ":")):
            o = r[variant]["onset"]
            keep = slice(len(o["t"]) // 10, None)  # the fitted window (GD's first steps are biased)
            x = o["t"][keep] * r[variant]["hessian_norm"]
            ax.loglog(
                x,
                o["u"][keep],
                style,
                color=f"C{i}",
                lw=1,
                label=r["task"] if variant == "orth" else None,
            )
            ends[variant].append(o["u"][-1])
    x = np.geomspace(5e-3, ONSET_WINDOW, 10)
    for variant, power, style in (("orth", 4, "k--"), ("plain", 2, "k-.")):
        ax.loglog(
            x,
            10 * np.median(ends[variant]) * (x / x[-1]) ** power,
            style,
            lw=0.8,
            label=f"slope {power}",
        )
    ax.set(
        xlabel="t |H|_2",
        ylabel="u (KL to aligned model)",
        title="tiny LM: orthogonalised (solid), plain (dotted)",
    )
    ax.legend(fontsize=6, ncol=2)
    report.add_figure("lm_onset", fig)

    fig, ax = new_figure()
    for s in setups:
        ax.semilogy(
            np.arange(1, len(s["spectrum"]) + 1), s["spectrum"], lw=1, label=f"seed {s['seed']}"
        )
    ax.set(
        xscale="log",
        xlabel="rank",
        ylabel="Fisher eigenvalue",
        title="Fisher spectrum of u at the aligned model",
    )
    ax.legend(fontsize=7)
    report.add_figure("fisher_spectrum", fig)

    fig, axes = new_figure(1, 2)
    du = np.array([r["main"]["delta_u"] for r in runs])
    for ax, key, label in (
        (axes[0], "fisher_quadratic", "delta^T F delta / 2"),
        (axes[1], "forecast", "forecast before training"),
    ):
        x = np.array([r["main"][key] for r in runs])
        ax.loglog(np.abs(x) + 1e-12, du, "o", ms=4)
        ax.set(xlabel=label, ylabel="final u", title=f"Spearman {_spearman(x, du):.2f}")
    report.add_figure("predicted_vs_measured", fig)

    fig, ax = new_figure(size=(5.5, 3.8))
    mit_runs = [r for r in runs if "mitigations" in r]
    methods = list(dict.fromkeys(m["method"] for r in mit_runs for m in r["mitigations"]))
    markers = "osD^v<>p"
    palette = [f"C{i}" for i in range(10) if i != 7]  # C7 is grey: kept for the task markers
    for j, r in enumerate(mit_runs):  # colour = method, marker = task
        for m in r["mitigations"]:
            color = palette[methods.index(m["method"]) % 9]
            ax.scatter(
                m["task_loss"],
                m["delta_u"],
                s=22,
                c=color,
                marker=markers[j % 8],
                edgecolors="none",
            )
    for i, name in enumerate(methods):
        ax.scatter([], [], s=22, c=palette[i % 9], label=name, edgecolors="none")
    for j, r in enumerate(mit_runs):
        ax.scatter(
            [],
            [],
            s=22,
            c="0.5",
            marker=markers[j % 8],
            label=f"task {r['task']}",
            edgecolors="none",
        )
    ax.legend(fontsize=6, ncol=2)
    ax.set(yscale="log", xlabel="final task loss", ylabel="final u", title="mitigations (seed 0)")
    report.add_figure("mitigations", fig)

    fig, ax = new_figure()
    for i, r in enumerate(first):
        ax.semilogy(r["main"]["curve_u"][1:], color=f"C{i}", lw=1, label=r["task"])
    ax.set(
        xlabel="GD step (eta |H|_2 = 0.5)",
        ylabel="u (KL to aligned model)",
        title="plain fine-tuning, first seed",
    )
    ax.legend(fontsize=6, ncol=2)
    report.add_figure("lm_training", fig)


def _notes(cfg: dict[str, Any], setups: list[dict[str, Any]]) -> str:
    n = setups[0]["n_params"]
    return (
        f"Tiny Llama-architecture LM ({n} parameters, float64 with dtype-preserving norms and attention), "
        f"{len(cfg['seeds'])} seeds, {len(cfg['tasks'])} tasks, {cfg['n_train']} training examples per task, "
        f"full-batch gradient descent. Onset runs: {cfg['onset_steps']} steps at eta |H|_2 = {ONSET_WINDOW}/{cfg['onset_steps']}; "
        f"main runs: {cfg['steps']} steps at eta |H|_2 = {KAPPA_MAIN}. M = top {cfg['d']} Fisher eigenvectors. "
        "The alignment loss is the KL to the aligned model's first response token on held-out harmful prompts; "
        "the refusal rate is reported, never fitted. Mitigations run on the first seed only. "
        "The paper's theorem constants and AIC thresholds were not read; the thresholds are ours (see the seeds note)."
    )
