"""The measurements: for every model scale, base objective, lambda (and the masked lambda = 0
control) and seed, pretrain on SyntheticShapes and run every diagnostic; the baselines beside them;
the population model's fits against the closed form."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from paper_common import map_jobs
from paper_common.device import pinned_threads
from paper_common.experiment import replicate_seeds
from patch_distill.config import PretrainConfig
from patch_distill.data import ImageSet, SyntheticShapes, view_pair
from patch_distill.reproduce.scales import MASKED, METRICS, SYNTHETIC, Scale, masked

N_THEORY = 3  # replicate fit seeds of the population model (about 1 s each)


def _datasets(cfg: Scale, seed: int) -> dict[str, tuple[ImageSet, ImageSet, ImageSet]]:
    """(pretrain, probe-train, test) per dataset; real ones only where their files are on disk."""
    gen = SyntheticShapes(n_classes=cfg.n_classes)
    out = {SYNTHETIC: (gen.sample(cfg.n_pretrain, 10_000 + seed),
                                gen.sample(cfg.n_probe, 20_000 + seed), gen.sample(cfg.n_test, 30_000 + seed))}  # fmt: skip
    root = os.environ.get("PATCH_DISTILL_DATA")
    for name in cfg.real_datasets:
        if root is None:
            continue
        from patch_distill.data import torchvision_dataset

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

    from patch_distill.diagnostics import evaluate
    from patch_distill.models import build_vit, encode_tokens
    from patch_distill.train import pretrain, resolve_device

    vit_name, vit, method, lam, seed, cfg, data_name, keep_tokens = args
    pre, probe, test = _datasets(cfg, seed)[data_name]
    device = resolve_device(cfg.device)
    t0 = time.perf_counter()
    final_loss = math.nan
    if method == "random":
        torch.manual_seed(seed)
        encoder = build_vit(vit).to(device)
    else:
        common = dict(vit=vit, steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr, seed=seed,
                      momentum=cfg.momentum, precision=cfg.precision)  # fmt: skip
        base = method.removesuffix(MASKED)
        pc = (PretrainConfig.baseline(method, **common) if method in ("mae", "latent")
              else PretrainConfig(objective=base, patch_weight=lam, koleo_weight=dict(cfg.koleo).get(base, 0.0),
                                  mask_student=True if method.endswith(MASKED) else None,
                                  **common))  # type: ignore[arg-type]  # fmt: skip
        res = pretrain(pc, pre, device=device)
        encoder = res.backbone
        final_loss = res.history[-1]["loss"]
    train_s = time.perf_counter() - t0
    metrics = evaluate(encoder, probe, test)
    row: dict[str, Any] = {"dataset": data_name, "vit": vit_name, "method": method, "lambda": lam,
                           "seed": seed, **metrics, "final_loss": final_loss, "train_s": train_s,
                           "eval_s": time.perf_counter() - t0 - train_s, "device": str(device)}  # fmt: skip
    if (
        keep_tokens
    ):  # patch tokens of two test images (first seed), for the similarity / matching plots
        pair = view_pair(test.images[:2], "shift", 8, vit.patch_size)
        _, pa = encode_tokens(encoder, pair.a)
        _, pb = encode_tokens(encoder, pair.b)
        row["_tokens"] = (pa.numpy(), pb.numpy())
    return row


def grid(cfg: Scale, seeds: tuple[int, ...]) -> list[tuple[Any, ...]]:
    """One job per (seed, dataset, ViT, arm): the lambda sweep, each objective's masked lambda = 0
    control, the baselines; long jobs first."""
    names = [SYNTHETIC] + [d for d in cfg.real_datasets if os.environ.get("PATCH_DISTILL_DATA")]
    jobs = []
    for s in seeds:
        for data_name in names:
            for vit_name, vit in cfg.vits.items():
                keep = s == seeds[0]
                jobs += [(vit_name, vit, obj, lam, s, cfg, data_name, keep)
                         for obj in cfg.objectives for lam in cfg.lambdas]  # fmt: skip
                jobs += [(vit_name, vit, masked(obj), 0.0, s, cfg, data_name, keep)
                         for obj in cfg.objectives]  # fmt: skip
                jobs += [(vit_name, vit, b, 0.0, s, cfg, data_name, keep) for b in cfg.baselines]
    jobs.sort(key=lambda j: j[2] == "random")  # long jobs first
    return jobs


@dataclass
class Measured:
    """Every run's row, the patch tokens kept for the plots, the population-model fits."""

    runs: list[dict[str, Any]]
    tokens: dict[tuple[str, str, str, float], tuple[np.ndarray, np.ndarray]]
    theory: list[list[dict[str, Any]]]
    null: list[dict[str, Any]]


def measure(cfg: Scale, seed: int) -> Measured:
    """Run the grid (in ``cfg.workers`` processes) and the population model."""
    seeds = tuple(seed + s for s in cfg.seeds)
    jobs = grid(cfg, seeds)
    if cfg.workers > 1:
        # forked workers share these imports (torch/timm/lightly take ~15 s to import here); the
        # parent has run no torch op yet, so no thread pool is copied
        import lightly.loss  # noqa: F401
        import sklearn.linear_model
        import sklearn.neighbors  # noqa: F401
        import timm  # noqa: F401
    runs = map_jobs(_job, jobs, cfg.workers)
    tokens = {key(r): r.pop("_tokens") for r in runs if "_tokens" in r}
    tokens = {k: v for k, v in tokens.items() if k[0] == SYNTHETIC}
    theory = [
        theory_rows(cfg.theory_steps, s) for s in (seed, *replicate_seeds(seed, N_THEORY - 1))
    ]
    null = theory_rows(cfg.theory_steps, seed, null=True)
    return Measured(runs, tokens, theory, null)


def key(r: dict[str, Any]) -> tuple[str, str, str, float]:
    """(dataset, ViT, method, lambda): one arm of the grid."""
    return r["dataset"], r["vit"], r["method"], r["lambda"]


def label(method: str, lam: float) -> str:
    """The arm's name in tables and plots (``dino λ=1``, ``dino λ=0 masked``, ``mae``)."""
    if method.endswith(MASKED):
        return f"{method.removesuffix(MASKED)} λ={lam:g} masked"
    return method if method in ("mae", "latent", "random") else f"{method} λ={lam:g}"


def summary(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and SD over seeds of every metric, per arm."""
    rows = []
    for k in dict.fromkeys(key(r) for r in runs):
        rs = [r for r in runs if key(r) == k]
        row: dict[str, Any] = {"dataset": k[0], "vit": k[1], "model": label(k[2], k[3]),
                               "method": k[2], "lambda": k[3], "n_seeds": len(rs)}  # fmt: skip
        for m in METRICS:
            vals = [r[m] for r in rs if m in r]
            if vals:
                row[m] = float(np.mean(vals))
                row[f"{m}_sd"] = float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0
        rows.append(row)
    return rows


def theory_rows(steps: int, seed: int, null: bool = False) -> list[dict[str, Any]]:
    """Closed form against trained predictors, masked and visible. ``null``: populations with
    nothing to average out (Gaussian noise 0, a teacher that ignores the hidden token), where the
    paper's averaging-out cannot show (the share of ``u`` retained is then undefined and left
    out). Each row also carries ``swapped_error``: the relative error
    against the other view's closed form (masked fit vs unmasked closed form and vice versa)."""
    from patch_distill.theory import (
        DiscretePopulation,
        GaussianPopulation,
        fit_discrete,
        fit_gaussian,
    )

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
