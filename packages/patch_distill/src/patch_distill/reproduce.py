"""``python -m patch_distill reproduce``: the lambda sweep, the baselines, the diagnostics, the theory.

For every model scale, base objective, lambda and seed: pretrain on :class:`SyntheticShapes`, then
measure semantic abstraction (k-NN / linear probe on CLS and mean-pooled tokens), local evidence
(ridge R^2 of a patch's own pixels and its own texture code), correspondence (shift / zoom / flip)
and the dense probe; the same for MAE (and, at ``full``, latent prediction) and a random-init ViT.
Then the population model: trained predictors against the closed form.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import rankdata, spearmanr

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
from paper_common.experiment import replicate_seeds
from paper_common.stats import ConfidenceInterval, extreme_interval, t_interval

from .config import PretrainConfig
from .data import ImageSet, SyntheticShapes, view_pair
from .models import VIT_SCALES, ViTConfig

METRICS = ("knn", "linear", "linear_pooled", "r2_pixels", "r2_code", "corr_shift", "corr_zoom",
           "corr_flip", "corr_mean", "dense_acc", "dense_iou")  # fmt: skip


@dataclass(frozen=True)
class Scale:
    vits: dict[str, ViTConfig]
    objectives: tuple[str, ...]
    lambdas: tuple[float, ...]
    baselines: tuple[str, ...]
    n_pretrain: int
    n_probe: int
    n_test: int
    steps: int
    batch_size: int
    lr: float
    seeds: tuple[int, ...]
    workers: int
    theory_steps: int
    n_classes: int = 4
    momentum: tuple[float, float] = (0.96, 1.0)
    koleo: tuple[tuple[str, float], ...] = (("dino", 0.1),)  # KoLeo weight per base objective
    real_datasets: tuple[str, ...] = field(default_factory=tuple)


SYNTHETIC = "synthetic_shapes"
QUICK_VIT = ViTConfig(embed_dim=48, depth=3, num_heads=2)
SCALES = {
    "smoke": Scale({"quick": ViTConfig(embed_dim=32, depth=1, num_heads=2)}, ("dino",),
                   (0.0, 1.0), ("mae", "random"), 64, 64, 40, 2, 16, 1e-3, (0, 1), 1, 50),
    "quick": Scale({"quick": QUICK_VIT}, ("dino", "vicreg"), (0.0, 1.0, 2.0), ("mae", "random"),
                   2048, 300, 200, 100, 32, 1.5e-3, (0, 1, 2), 2, 400),
    # the whole grid at the two model scales; add CIFAR-10 / STL-10 from PATCH_DISTILL_DATA
    "full": Scale(dict(VIT_SCALES), ("dino", "contrastive", "vicreg", "barlow"), (0.0, 0.5, 1.0, 2.0),
                  ("mae", "latent", "random"), 50000, 5000, 2000, 20000, 256, 5e-4, (0, 1, 2), 1,
                  3000, 6, (0.99, 1.0), (("dino", 0.1),), ("cifar10", "stl10")),
}  # fmt: skip


def _datasets(cfg: Scale, seed: int) -> dict[str, tuple[ImageSet, ImageSet, ImageSet]]:
    """(pretrain, probe-train, test) per dataset; real ones only where their files are on disk."""
    gen = SyntheticShapes(n_classes=cfg.n_classes)
    out = {SYNTHETIC: (gen.sample(cfg.n_pretrain, 10_000 + seed),
                                gen.sample(cfg.n_probe, 20_000 + seed), gen.sample(cfg.n_test, 30_000 + seed))}  # fmt: skip
    root = os.environ.get("PATCH_DISTILL_DATA")
    for name in cfg.real_datasets:
        if root is None:
            continue
        from .data import torchvision_dataset

        train = torchvision_dataset(name, os.path.join(root, name), "train", limit=cfg.n_pretrain)  # type: ignore[arg-type]
        test = torchvision_dataset(name, os.path.join(root, name), "test", limit=cfg.n_test)  # type: ignore[arg-type]
        out[name] = (train, train.subset(slice(0, cfg.n_probe)), test)
    return out


def _job(args: tuple[Any, ...]) -> dict[str, Any]:
    """Pretrain one configuration and run every diagnostic (one worker process).

    Always one torch and one BLAS thread (the scikit-learn probes run on BLAS), in a worker or in
    this process alike, so the row does not depend on ``workers``."""
    with pinned_threads(1, torch=True):
        return _run_job(args)


def _run_job(args: tuple[Any, ...]) -> dict[str, Any]:
    import torch

    from .diagnostics import evaluate
    from .models import build_vit, encode_tokens
    from .train import pretrain

    vit_name, vit, method, lam, seed, cfg, data_name = args
    pre, probe, test = _datasets(cfg, seed)[data_name]
    t0 = time.perf_counter()
    final_loss = math.nan
    if method == "random":
        torch.manual_seed(seed)
        encoder = build_vit(vit)
    else:
        common = dict(vit=vit, steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr, seed=seed,
                      momentum=cfg.momentum)  # fmt: skip
        pc = (PretrainConfig.baseline(method, **common) if method in ("mae", "latent")
              else PretrainConfig(objective=method, patch_weight=lam, koleo_weight=dict(cfg.koleo).get(method, 0.0),
                                  **common))  # type: ignore[arg-type]  # fmt: skip
        res = pretrain(pc, pre)
        encoder = res.backbone
        final_loss = res.history[-1]["loss"]
    train_s = time.perf_counter() - t0
    metrics = evaluate(encoder, probe, test)
    row: dict[str, Any] = {"dataset": data_name, "vit": vit_name, "method": method, "lambda": lam,
                           "seed": seed, **metrics, "final_loss": final_loss, "train_s": train_s,
                           "eval_s": time.perf_counter() - t0 - train_s}  # fmt: skip
    if seed == cfg.seeds[0]:  # patch tokens of two test images, for the similarity / matching plots
        pair = view_pair(test.images[:2], "shift", 8, vit.patch_size)
        _, pa = encode_tokens(encoder, pair.a)
        _, pb = encode_tokens(encoder, pair.b)
        row["_tokens"] = (pa.numpy(), pb.numpy())
    return row


@pin_threads(torch=True)
def reproduce(
    scale: str = "quick", seed: int = 0, out_dir: str | os.PathLike[str] | None = None
) -> Report:
    """Run the experiment at ``scale`` and return (and, with ``out_dir``, write) the report."""
    check_scale(scale)
    cfg = SCALES[scale]
    watch = Stopwatch()
    report = Report(package="patch_distill",
                    title="Masked patch self-distillation: semantic abstraction vs local detail",
                    scale=scale, seed=seed)  # fmt: skip
    seeds = tuple(seed + s for s in cfg.seeds)
    names = [SYNTHETIC] + [d for d in cfg.real_datasets if os.environ.get("PATCH_DISTILL_DATA")]
    jobs = []
    for s in seeds:
        for data_name in names:
            for vit_name, vit in cfg.vits.items():
                jobs += [(vit_name, vit, obj, lam, s, cfg, data_name)
                         for obj in cfg.objectives for lam in cfg.lambdas]  # fmt: skip
                jobs += [(vit_name, vit, b, 0.0, s, cfg, data_name) for b in cfg.baselines]
    jobs.sort(key=lambda j: j[2] == "random")  # long jobs first
    if cfg.workers > 1:
        # forked workers share these imports (torch/timm/lightly take ~15 s to import here); the
        # parent has run no torch op yet, so no thread pool is copied
        import lightly.loss  # noqa: F401
        import sklearn.linear_model
        import sklearn.neighbors  # noqa: F401
        import timm  # noqa: F401
    runs = map_jobs(_job, jobs, cfg.workers)
    watch.lap("pretrain + diagnostics")
    tokens = {_key(r): r.pop("_tokens") for r in runs if "_tokens" in r}
    tokens = {k: v for k, v in tokens.items() if k[0] == SYNTHETIC}
    report.add_table("runs", runs)
    summary = _summary(runs)
    report.add_table("tradeoff", summary)
    theory = [_theory(cfg.theory_steps, s) for s in (seed, *replicate_seeds(seed, N_THEORY - 1))]
    report.add_table(
        "theory", [{k: v for k, v in r.items() if k != "swapped_error"} for r in theory[0]]
    )
    null = _theory(cfg.theory_steps, seed, null=True)
    watch.lap("theory")
    _claims(report, runs, summary, theory, null, cfg)
    report.add_figure("tradeoff", _plot_tradeoff(summary, cfg))
    report.add_figure("similarity", _plot_similarity(tokens, cfg))
    report.add_figure("correspondence", _plot_correspondence(tokens, runs, cfg))
    watch.lap("plots")
    report.add_table("runtime", watch.laps)
    report.runtime_s = watch.elapsed_s
    if out_dir is not None:
        write_report(report, out_dir)
    return report


def _key(r: dict[str, Any]) -> tuple[str, str, str, float]:
    return r["dataset"], r["vit"], r["method"], r["lambda"]


def _label(method: str, lam: float) -> str:
    return method if method in ("mae", "latent", "random") else f"{method} λ={lam:g}"


def _summary(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for key in dict.fromkeys(_key(r) for r in runs):
        rs = [r for r in runs if _key(r) == key]
        row: dict[str, Any] = {"dataset": key[0], "vit": key[1], "model": _label(key[2], key[3]),
                               "method": key[2], "lambda": key[3], "n_seeds": len(rs)}  # fmt: skip
        for m in METRICS:
            vals = [r[m] for r in rs if m in r]
            if vals:
                row[m] = float(np.mean(vals))
                row[f"{m}_sd"] = float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0
        rows.append(row)
    return rows


def _theory(steps: int, seed: int, null: bool = False) -> list[dict[str, Any]]:
    """Closed form against trained predictors, masked and visible. ``null``: populations with
    nothing to average out (Gaussian noise 0, a teacher that ignores the hidden token), where the
    paper's averaging-out cannot show (the share of ``u`` retained is then undefined and left
    out). Each row also carries ``swapped_error``: the relative error
    against the other view's closed form (masked fit vs unmasked closed form and vice versa)."""
    from .theory import DiscretePopulation, GaussianPopulation, fit_discrete, fit_gaussian

    rows = []
    g = GaussianPopulation(noise_std=0.0 if null else 1.0, seed=seed)
    d = DiscretePopulation(n_hidden=1, seed=seed) if null else DiscretePopulation(seed=seed)
    for visible in (False, True):
        view = "visible (unmasked)" if visible else "masked"
        cf, fit = g.closed_form(visible), fit_gaussian(g, visible=visible, steps=steps, seed=seed)
        other = g.closed_form(not visible)
        # the share of u retained is 0 / 0 (undefined) when u has no variance
        for q in ("loss_floor", "retained_variance", "retained_unpredictable")[: 2 if null else 3]:
            measured = fit["loss" if q == "loss_floor" else q]
            rows.append({"model": "gaussian", "view": view, "quantity": q,
                         "closed_form": cf[q], "measured": measured, "_other": other[q]})  # fmt: skip
        cf, fit = d.closed_form(visible), fit_discrete(d, visible=visible, steps=steps, seed=seed)
        other = d.closed_form(not visible)
        for q in ("loss_floor", "averaged_out"):
            measured = fit["loss" if q == "loss_floor" else q]
            rows.append({"model": "discrete", "view": view, "quantity": q,
                         "closed_form": cf[q], "measured": measured, "_other": other[q]})  # fmt: skip
    # error relative to the closed form; where that is 0, relative to the natural scale instead
    # (target variance for the Gaussian, log K for the discrete model, 1 for a share)
    natural = {"gaussian": g.closed_form()["target_variance"], "discrete": math.log(d.n_prototypes)}
    for r in rows:
        for key, ref_key in (("rel_error", "closed_form"), ("swapped_error", "_other")):
            ref = abs(r[ref_key]) or (
                1.0 if r["quantity"] == "retained_unpredictable" else natural[r["model"]]
            )
            r[key] = abs(r["measured"] - r[ref_key]) / ref
        del r["_other"]
    return rows


N_THEORY = 3  # replicate fit seeds of the population model (about 1 s each)
RHO = -0.5  # "falls": a strong rank correlation, not merely a negative one (a null sits at 0)
MARGIN = 0.02  # "keeps more local evidence": by at least 0.02 R^2 (a null difference sits at 0)
CODE_READ = 0.5  # positive control: the ridge probe reads the texture code (R^2) of the MAE model
THEORY_TOL = 0.05  # the check: trained predictors within 5% of the closed form
MIN_SEEDS = 3  # a t-interval over seeds needs >= 3 (with 2: one degree of freedom, no interval)
N_BOOT = 1000


def _runs_of(
    runs: list[dict[str, Any]], d: str, v: str, o: str, lam: float
) -> dict[int, dict[str, Any]]:
    return {r["seed"]: r for r in runs if _key(r) == (d, v, o, lam)}


def paired_interval(
    runs: list[dict[str, Any]], a: tuple[str, str, str, float], b: tuple[str, str, str, float],
    metric: str,
) -> ConfidenceInterval:  # fmt: skip
    """t-interval over seeds of ``metric(a) - metric(b)``, paired by seed (NaN: undefined, also
    with fewer than ``MIN_SEEDS`` seeds)."""
    ra, rb = _runs_of(runs, *a), _runs_of(runs, *b)
    d = np.array([ra[s][metric] - rb[s][metric] for s in sorted(ra) if s in rb], dtype=float)
    if d.size < MIN_SEEDS or np.isnan(d).any():
        return ConfidenceInterval(math.nan, math.nan, math.nan, 0.95)
    return t_interval(d)


def self_null_interval(
    runs: list[dict[str, Any]], arm: tuple[str, str, str, float], metric: str
) -> ConfidenceInterval:
    """Self-null: ``metric`` of one arm against itself with the seed pairing rotated (seed s vs
    s + 1), a t-interval over seeds of a difference with no effect in it (NaN: undefined)."""
    ra = _runs_of(runs, *arm)
    x = np.array([ra[s][metric] for s in sorted(ra)], dtype=float)
    if x.size < MIN_SEEDS or np.isnan(x).any():
        return ConfidenceInterval(math.nan, math.nan, math.nan, 0.95)
    return t_interval(x - np.roll(x, 1))


def rho_interval(
    lam: np.ndarray, y: np.ndarray, seed: int = 0, n_boot: int = N_BOOT
) -> ConfidenceInterval:
    """Spearman rho(lam, y) and its 95% percentile bootstrap interval over the runs (resampled with
    replacement). Resamples where rho is undefined (a constant column) are dropped; with more than
    5% of them, or a NaN ``y``, the interval is undefined (NaN)."""
    lam, y = np.asarray(lam, float), np.asarray(y, float)
    nan = ConfidenceInterval(math.nan, math.nan, math.nan, 0.95)
    if np.isnan(y).any() or np.ptp(y) == 0 or np.ptp(lam) == 0:
        return nan
    idx = np.random.default_rng(seed).integers(0, lam.size, (n_boot, lam.size))
    rx, ry = rankdata(lam[idx], axis=1), rankdata(y[idx], axis=1)
    rx, ry = rx - rx.mean(1, keepdims=True), ry - ry.mean(1, keepdims=True)
    den = np.sqrt((rx**2).sum(1) * (ry**2).sum(1))
    ok = den > 0
    if ok.mean() < 0.95:
        return nan
    rho = (rx * ry).sum(1)[ok] / den[ok]
    low, high = np.quantile(rho, [0.025, 0.975])
    return ConfidenceInterval(float(spearmanr(lam, y).statistic), float(low), float(high), 0.95)


def shuffled_rho(lam: np.ndarray, y: np.ndarray, seed: int = 0) -> ConfidenceInterval:
    """The null of a fall: the claim's own measurement (Spearman rho with its bootstrap interval
    over runs) on one seeded shuffle of the lambda labels. (The mean rho of many shuffles, with a
    t-interval, sits at 0 within a few hundredths whatever the data: refuted by construction.)"""
    gen = np.random.default_rng(seed)
    return rho_interval(gen.permutation(lam), y, seed=seed)


def _falls_claim(
    runs: list[dict[str, Any]],
    mean: dict[tuple[str, str, str, float], dict[str, Any]],
    groups: list[tuple[str, str, str]],
    metric: str,
    what: str,
    cfg: Scale,
) -> Claim:
    """``metric`` falls as lambda grows in every (dataset, scale, objective) group: the largest
    Spearman rho(lambda, metric) over the groups, each with its bootstrap interval over runs, is
    below ``RHO`` on its whole interval. A group where rho is undefined (the metric, or lambda,
    constant over its runs) cannot show a fall: the claim is then not measured, whatever the other
    groups say, and the note names the group. Negative control: the lambda labels shuffled;
    positive control: a planted fall (one across-run SD of the metric per unit of lambda, added to
    the same runs) is detected by the same rule."""
    cis, nulls, planted = {}, [], []
    for d, v, o in groups:
        rs = [r for r in runs if (r["dataset"], r["vit"], r["method"]) == (d, v, o)]
        lam = np.array([r["lambda"] for r in rs], dtype=float)
        y = np.array([r[metric] for r in rs], dtype=float)
        cis[(d, v, o)] = rho_interval(lam, y)
        if not np.isnan(y).any() and np.ptp(lam) > 0 and np.ptp(y) > 0:
            nulls.append(shuffled_rho(lam, y, seed=len(nulls)))
            planted.append(rho_interval(lam, y - 3 * (y.std() + 1e-12) * lam / np.ptp(lam)))
    undefined = [f"{o}/{v}" for (_, v, o), c in cis.items() if math.isnan(c.estimate)]
    note = (
        "; ".join(f"{o}/{v}: rho = {c.estimate:+.2f} [{c.low:+.2f}, {c.high:+.2f}]"
                  for (_, v, o), c in cis.items()) + "; means: "
        + "; ".join(f"{o} " + "/".join(f"{mean[(d, v, o, lam)][metric]:.3f}" for lam in cfg.lambdas)
                    for d, v, o in groups)
    )  # fmt: skip
    if undefined:
        note = (f"not measured: Spearman rho undefined (constant {metric} or lambda, or too few runs to bootstrap) for "
                f"{', '.join(undefined)}; {note}")  # fmt: skip
    note += (
        f"; target restated from rho < 0 to rho < {RHO} (harder than the paper's, never "
        "easier) so that a shuffled-lambda null near rho 0 can be refuted"
    )
    worst = None if undefined else extreme_interval(cis.values())
    if undefined or not nulls:
        positive = Control.absent("positive", "a group where rho is defined")
        negative = Control.absent("negative", "a group where rho is defined")
    else:
        pl, nl = extreme_interval(planted), extreme_interval(nulls)
        positive = Control.positive(
            "a planted fall (3 SD of the metric over the lambda range) is detected: max rho",
            pl.estimate, "<", RHO, interval=pl,
        )  # fmt: skip
        negative = Control.negative(
            "lambda labels shuffled (one seeded shuffle per group, bootstrap over runs): max rho",
            nl.estimate, nl,
        )  # fmt: skip
    return Claim.decide(
        f"{what} falls as lambda grows, for every base objective and scale",
        f"max over objective and scale of Spearman rho(lambda, {metric}) over "
        f"{len(cfg.lambdas)} lambdas x {len(cfg.seeds)} seeds",
        None if worst is None else worst.estimate, worst, "<", RHO,
        positive=positive, negative=negative,
        method=f"95% percentile bootstrap over each group's runs ({N_BOOT} resamples); "
        "the largest over groups" if worst is not None else "missing: rho undefined in a group",
        note=note,
    )  # fmt: skip


def _probe_claim(
    runs: list[dict[str, Any]], groups: list[tuple[str, str, str]], cfg: Scale
) -> Claim:
    pos = [lam for lam in cfg.lambdas if lam > 0]
    n = len(cfg.seeds)
    diffs = {(d, v, o, lam): paired_interval(runs, (d, v, o, lam), (d, v, o, 0.0), "linear")
             for d, v, o in groups for lam in pos}  # fmt: skip
    learned = [paired_interval(runs, (d, v, o, 0.0), (d, v, "random", 0.0), "linear")
               for d, v, o in groups]  # fmt: skip
    null = [self_null_interval(runs, (d, v, o, 0.0), "linear") for d, v, o in groups]
    nan_diffs = [
        f"{o}/{v} λ={lam:g}" for (_, v, o, lam), x in diffs.items() if math.isnan(x.estimate)
    ]
    worst = extreme_interval(diffs.values(), largest=False)
    pc, neg = extreme_interval(learned, largest=False), extreme_interval(null, largest=False)
    return Claim.decide(
        "with the patch objective (lambda > 0) the linear-probe accuracy (CLS) is at least that of "
        "lambda = 0, for every base objective and model scale",
        f"min over objective, scale, lambda > 0 of acc(lambda) - acc(0), mean of {n} seeds",
        None if nan_diffs else worst.estimate, worst, ">", 0.0,
        positive=Control.positive(
            "pretraining learns semantics: min over objectives of acc(lambda=0) - acc(random init)",
            pc.estimate, ">", 0.0, interval=pc,
        ),
        negative=Control.negative(
            "self-null: each lambda = 0 model against itself, seed s vs s + 1", neg.estimate, neg
        ) if not math.isnan(neg.estimate) else Control.absent(
            "negative", f"a lambda = 0 arm over >= {MIN_SEEDS} seeds (self-null)"),
        method=f"95% t-interval over {n} seeds of the seed-paired difference; the smallest over "
        "objectives, scales and lambdas" if n >= MIN_SEEDS
        else f"missing: {n} seeds; a t-interval needs >= {MIN_SEEDS} (quick has 3)",
        note=(f"not measured: probe accuracy NaN (or < {MIN_SEEDS} seeds) for "
              f"{', '.join(nan_diffs)}; " if nan_diffs else "")
        + "; ".join(f"{o}/{v} λ={lam:g}: {x.estimate:+.3f}" for (_, v, o, lam), x in diffs.items())
        + "; target '> 0' (stricter than the paper's 'at least', '>= 0', only at exactly 0): with "
        "'>= 0' a null difference of exactly 0 (identical arms) met the target, so the rule could "
        "not fail; before (issue 43 draft) the negative control was the random-init ViT in the "
        "lambda > 0 model's place, the mirror image of the positive control, refuted whenever "
        "that passed",
    )  # fmt: skip


def _mae_claim(runs: list[dict[str, Any]], groups: list[tuple[str, str, str]], cfg: Scale) -> Claim:
    pos = [lam for lam in cfg.lambdas if lam > 0]
    scales = sorted({(g[0], g[1]) for g in groups})
    cis = [paired_interval(runs, (d, v, "mae", 0.0), (d, v, o, lam), "r2_code")
           for d, v in scales for dd, vv, o in groups if (dd, vv) == (d, v) for lam in pos]  # fmt: skip
    worst = extreme_interval(cis, largest=False)
    mae = [
        np.array([r["r2_code"] for r in _runs_of(runs, d, v, "mae", 0.0).values()])
        for d, v in scales
    ]
    nan = ConfidenceInterval(math.nan, math.nan, math.nan, 0.95)
    read = extreme_interval([t_interval(m) if m.size >= MIN_SEEDS else nan for m in mae],
                            largest=False)  # fmt: skip
    # planted-absent: MAE against itself with the seeds paired off by one (no effect, seed noise)
    null = [self_null_interval(runs, (d, v, "mae", 0.0), "r2_code") for d, v in scales]
    neg = extreme_interval(null, largest=False)
    undefined = math.isnan(worst.estimate)
    return Claim.decide(
        "MAE keeps more local evidence (texture-code R^2) than every lambda > 0 model",
        "MAE R^2 - lambda > 0 model R^2 (seed-paired); min over models and scales",
        None if undefined else worst.estimate, worst, ">", MARGIN,
        positive=Control.positive(
            "the ridge probe reads the texture code: MAE R^2 (smallest over scales)",
            read.estimate, ">=", CODE_READ, interval=read,
        ),
        negative=Control.negative(
            "self-null: MAE against itself, seed s vs s + 1", neg.estimate, neg
        ) if not math.isnan(neg.estimate) else Control.absent(
            "negative", f"MAE over >= {MIN_SEEDS} seeds (self-null)"),
        method=f"95% t-interval over {len(cfg.seeds)} seeds of the seed-paired difference; the "
        "smallest over lambda > 0 models and scales" if len(cfg.seeds) >= MIN_SEEDS
        else f"missing: {len(cfg.seeds)} seeds; a t-interval needs >= {MIN_SEEDS} (quick has 3)",
        note=(f"not measured: a texture-code R^2 is NaN, or < {MIN_SEEDS} seeds; " if undefined else "")
        + f"target restated from > 0 to > {MARGIN} (harder than the paper's > 0, never easier) so "
        "that the self-null, whose mean is 0 by construction, can be refuted; random-init ViT "
        + ", ".join(f"{np.mean([r['r2_code'] for r in _runs_of(runs, d, v, 'random', 0.0).values()]):.3f}"
                    for d, v in scales),
    )  # fmt: skip


def _theory_check(theory: list[list[dict[str, Any]]], null: list[dict[str, Any]]) -> Claim:
    """The population model: our trained predictors reach the closed form (a check of our optimiser:
    the closed form is the minimiser, and SGD on the population finds it by construction). Decided
    on the worst relative error over every replicate fit seed and quantity."""
    errs = np.array([r["rel_error"] for rows in theory for r in rows], dtype=float)
    err = None if np.isnan(errs).any() else float(errs.max())  # NaN: a fit that diverged
    swapped = float(np.max([r["swapped_error"] for rows in theory for r in rows]))
    gap = next(r["closed_form"] for r in theory[0]
               if (r["model"], r["view"], r["quantity"]) == ("discrete", "masked", "averaged_out"))  # fmt: skip
    null_err = float(max(r["rel_error"] for r in null))
    return Claim.decide(
        "the population model's trained predictors reach the closed-form loss floor, retained "
        "variance and averaged-out part",
        f"max relative error over {len(theory)} fit seeds x Gaussian / discrete x masked / visible "
        "quantities",
        err, None if err is None else (err, err), "<", THEORY_TOL,
        positive=Control.positive(
            "there is something to average out: the discrete model's Jensen gap (nats, closed form)",
            gap, ">", 0.05,
        ),
        negative=Control.negative(
            "swapped arms: each fit against the other view's closed form (masked vs unmasked)", swapped
        ),
        method=f"the worst of {errs.size} fits (exact closed form; every replicate seed)"
        if err is not None else "missing: a fitted quantity is NaN (a fit diverged)",
        kind="check",
        note=("not measured: a fitted quantity is NaN; " if err is None else "")
        + "a check of our optimiser, not a paper claim: as a paper claim the rule cannot fail, since "
        f"it also passes on a null population with nothing to average out (noise 0, teacher "
        f"independent of the hidden token: max relative error {null_err:.3f} < {THEORY_TOL}); "
        + "; ".join(f"{r['model']} {r['view']} {r['quantity']}: {r['measured']:.3f} vs {r['closed_form']:.3f}"
                    for r in theory[0]),
    )  # fmt: skip


def _claims(report: Report, runs: list[dict[str, Any]], summary: list[dict[str, Any]],
            theory: list[list[dict[str, Any]]], null: list[dict[str, Any]], cfg: Scale) -> None:  # fmt: skip
    mean = {(r["dataset"], r["vit"], r["method"], r["lambda"]): r for r in summary}
    groups = sorted({(r["dataset"], r["vit"], r["method"]) for r in summary
                     if r["method"] in cfg.objectives and r["dataset"] == SYNTHETIC})  # fmt: skip
    report.add_claim(_probe_claim(runs, groups, cfg))
    # 2./3. local evidence and correspondence fall with lambda (Spearman over the sweep, all seeds)
    for metric, what in (("r2_code", "local-evidence R^2 of the patch's own texture code"),
                         ("corr_mean", "correspondence accuracy (mean of shift / zoom / flip)")):  # fmt: skip
        report.add_claim(_falls_claim(runs, mean, groups, metric, what, cfg))
    report.add_claim(_mae_claim(runs, groups, cfg))
    report.add_claim(_theory_check(theory, null))


def _plot_tradeoff(summary: list[dict[str, Any]], cfg: Scale):  # type: ignore[no-untyped-def]
    panels = (("linear", "linear probe accuracy (CLS)"), ("r2_code", "texture-code R² (own patch)"),
              ("corr_mean", "correspondence accuracy"))  # fmt: skip
    fig, axes = new_figure(1, len(panels))
    for ax, (metric, title) in zip(axes, panels, strict=True):
        for d, v, o in sorted(
            {
                (r["dataset"], r["vit"], r["method"])
                for r in summary
                if r["method"] in cfg.objectives
            }
        ):
            rs = sorted(
                (r for r in summary if (r["dataset"], r["vit"], r["method"]) == (d, v, o)),
                key=lambda r: r["lambda"],
            )
            ax.errorbar([r["lambda"] for r in rs], [r[metric] for r in rs], yerr=[r[f"{metric}_sd"] for r in rs],
                        marker="o", capsize=3, label=f"{o} ({v})")  # fmt: skip
        for b, style in (("mae", "--"), ("latent", "-."), ("random", ":")):
            for r in (r for r in summary if r["method"] == b and r["dataset"] == SYNTHETIC):
                ax.axhline(r[metric], ls=style, color="grey", lw=1)
                ax.annotate(
                    b,
                    (max(cfg.lambdas), r[metric]),
                    fontsize=7,
                    color="grey",
                    ha="right",
                    va="bottom",
                )
        ax.set_xlabel("patch-loss weight λ")
        ax.set_title(title, fontsize=9)
    axes[0].legend(fontsize=7)
    return fig


def _plot_similarity(tokens: dict[Any, Any], cfg: Scale):  # type: ignore[no-untyped-def]
    keys = sorted(tokens, key=lambda k: (k[2] == "random", k[2] == "mae", k[2], k[3]))
    fig, axes = new_figure(1, len(keys), size=(1.9 * len(keys), 2.2))
    axes = np.atleast_1d(axes)
    for ax, key in zip(axes, keys, strict=True):
        pa = tokens[key][0][0]  # first image, view A, (P, D)
        g = round(math.sqrt(pa.shape[0]))
        x = pa / (np.linalg.norm(pa, axis=1, keepdims=True) + 1e-8)
        q = (g // 2) * g + g // 2
        ax.imshow((x @ x[q]).reshape(g, g), cmap="viridis")  # own colour range: contrast, not level
        ax.plot(q % g, q // g, "r+", ms=8)
        ax.set_title(_label(key[2], key[3]), fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle("cosine similarity to the query patch (+), one test image", fontsize=9)
    return fig


def _plot_correspondence(tokens: dict[Any, Any], runs: list[dict[str, Any]], cfg: Scale):  # type: ignore[no-untyped-def]
    """Matches of every patch of view A in the 8-pixel-shifted view B: green = within one patch."""
    import torch

    from .data import chebyshev_hits

    top = max(cfg.lambdas)
    keys = sorted((k for k in tokens if k[2] in ("mae", "latent") or (k[2] in cfg.objectives and k[3] in (0.0, top))),
                  key=lambda k: (k[2] in ("mae", "latent"), k[2], k[3]))  # fmt: skip
    fig, axes = new_figure(1, len(keys), size=(2.4 * len(keys), 2.6))
    axes = np.atleast_1d(axes)
    for ax, key in zip(axes, keys, strict=True):
        pa, pb = (torch.tensor(t[:1]) for t in tokens[key])
        g = round(math.sqrt(pa.shape[1]))
        ps = cfg.vits[key[1]].patch_size
        pair = view_pair(torch.zeros(1, 3, g * ps, g * ps), "shift", 8, ps)
        a = torch.nn.functional.normalize(pa[0][pair.valid], dim=-1)
        b = torch.nn.functional.normalize(pb[0], dim=-1)
        nn_idx = (a @ b.T).argmax(-1)
        pred = torch.stack([nn_idx // g, nn_idx % g], -1)
        hit = chebyshev_hits(pred, pair.target[pair.valid])
        src = pair.target[pair.valid]
        for (r0, c0), (r1, c1), h in zip(src.tolist(), pred.tolist(), hit.tolist(), strict=True):
            ax.plot([c0, c1], [r0, r1], color="tab:green" if h else "tab:red", lw=0.6, alpha=0.7)
        ax.set_xlim(-0.5, g - 0.5)
        ax.set_ylim(g - 0.5, -0.5)
        ax.set_title(f"{_label(key[2], key[3])}: {float(hit.float().mean()):.2f}", fontsize=8)
        ax.set_aspect("equal")
    fig.suptitle("shift-by-2-patches matches (true cell -> matched cell), one image", fontsize=9)
    return fig
