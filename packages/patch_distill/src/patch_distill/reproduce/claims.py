"""Verdicts with their controls.

The lambda sweep of each base objective is decided with masking held fixed: its lambda = 0 arm is
the masked lambda = 0 control (the student sees the same masked views, no patch loss), so lambda
moves the patch loss alone; the effect of masking alone (masked against unmasked lambda = 0) is a
table of its own. Every claim needs, as part of its positive control, that the models it compares
learned something, read where the claim reads them: the CLS linear probe above the random-init
ViT's for the CLS probe claim, the mean-pooled patch-token probe above the random-init ViT's for
the patch-level claims (texture code, correspondence, MAE), seed-paired. Each base objective gets
its own claims (its own arms, its own controls), so an objective whose models learned nothing does
not block another's verdict.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from scipy.stats import rankdata, spearmanr

from paper_common import Claim, Control
from paper_common.stats import ConfidenceInterval, extreme_interval, t_interval
from patch_distill.reproduce.run import key
from patch_distill.reproduce.scales import SYNTHETIC, Scale, masked

RHO = -0.5  # "falls": a strong rank correlation, not merely a negative one (a null sits at 0)
MARGIN = 0.02  # "keeps more local evidence": by at least 0.02 R^2 (a null difference sits at 0)
#: "at least that of lambda = 0" read as "better by at least 2 points of probe accuracy": an
#: a-priori minimum effect of interest (ours), so the self-null (mean 0 by construction) can be
#: refuted when the seed noise resolves 2 points; it makes support harder, never easier
PROBE_MARGIN = 0.02
#: the probe that tells a trained model from a random-init ViT, per what the claim reads: CLS
#: (``linear``) for the CLS probe claim, mean-pooled patch tokens for the patch-level claims (MAE
#: never trains its CLS token, and those claims are about patch tokens)
CLS_PROBE, PATCH_PROBE = "linear", "linear_pooled"
CODE_READ = 0.5  # positive control: the ridge probe reads the texture code (R^2) of the MAE model
THEORY_TOL = 0.05  # the check: trained predictors within 5% of the closed form
MIN_SEEDS = 3  # a t-interval over seeds needs >= 3 (with 2: one degree of freedom, no interval)
N_BOOT = 1000
Arm = tuple[str, str, str, float]


def reference(d: str, v: str, o: str) -> Arm:
    """The lambda = 0 arm of objective ``o``'s sweep: its masked lambda = 0 control."""
    return d, v, masked(o), 0.0


def sweep_arm(d: str, v: str, o: str, lam: float) -> Arm:
    """The arm at ``lam`` of the sweep with masking held fixed."""
    return reference(d, v, o) if lam == 0 else (d, v, o, lam)


def sweep_runs(runs: list[dict[str, Any]], d: str, v: str, o: str) -> list[dict[str, Any]]:
    """The runs of ``o``'s sweep: the masked lambda = 0 control at lambda 0, then lambda > 0."""
    ref = reference(d, v, o)
    return [r for r in runs if key(r) == ref] + [
        r for r in runs if (r["dataset"], r["vit"], r["method"]) == (d, v, o) and r["lambda"] > 0
    ]


def learned_control(
    runs: list[dict[str, Any]], arms: list[Arm], what: str, probe: str = CLS_PROBE
) -> Control:
    """Positive control: the compared models learned something, i.e. the smallest seed-paired
    ``probe`` gain over the random-init ViT of the same scale is above 0 on its interval (a
    random-init ViT passes every probe-reads-it check, so a check that does not compare with it
    cannot tell a trained model from an untrained one). ``probe``: :data:`CLS_PROBE` (CLS linear
    probe) or :data:`PATCH_PROBE` (linear probe on mean-pooled patch tokens)."""
    if probe not in (CLS_PROBE, PATCH_PROBE):
        raise ValueError(f"probe must be {CLS_PROBE!r} or {PATCH_PROBE!r}; got {probe!r}")
    name = "CLS linear-probe" if probe == CLS_PROBE else "pooled-patch-token linear-probe"
    cis = [paired_interval(runs, a, (a[0], a[1], "random", 0.0), probe) for a in arms]
    if not cis or any(math.isnan(c.estimate) for c in cis):
        return Control.absent("positive", f"{what}: {name} accuracy of every arm and of the "
                              f"random init over >= {MIN_SEEDS} seeds")  # fmt: skip
    worst = extreme_interval(cis, largest=False)
    return Control.positive(
        f"{what} learned something: min over them of {name} acc - random-init acc "
        "(seed-paired; interval: [min of the lows, min of the highs] over the arms, each arm's "
        "own in the learned_vs_random table)", worst.estimate, ">", 0.0, interval=worst,
    )  # fmt: skip


def learned_table(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every trained arm's seed-paired gain over the random-init ViT of the same scale, on the CLS
    and on the pooled-patch-token linear probe, each with its own 95% t-interval."""
    rows = []
    for d, v, o, lam in dict.fromkeys(key(r) for r in runs):
        if o == "random":
            continue
        row: dict[str, Any] = {"dataset": d, "vit": v, "method": o, "lambda": lam}
        for probe in (CLS_PROBE, PATCH_PROBE):
            ci = paired_interval(runs, (d, v, o, lam), (d, v, "random", 0.0), probe)
            row |= {f"{probe}_gain": ci.estimate, f"{probe}_low": ci.low, f"{probe}_high": ci.high}
        rows.append(row)
    return rows


def random_mean(runs: list[dict[str, Any]], d: str, v: str, metric: str) -> float:
    """Mean over seeds of the random-init ViT's ``metric`` (NaN: no such runs)."""
    xs = [r[metric] for r in runs_of(runs, d, v, "random", 0.0).values()]
    return float(np.mean(xs)) if xs else math.nan


def all_of(*controls: Control) -> Control:
    """Several conditions of one positive control: the first that did not pass (else the first,
    its description naming the others)."""
    for c in controls:
        if not c.passed:
            return c
    rest = "; ".join(c.text() for c in controls[1:])
    return dataclasses.replace(controls[0], description=f"{controls[0].description} (and: {rest})")


def runs_of(
    runs: list[dict[str, Any]], d: str, v: str, o: str, lam: float
) -> dict[int, dict[str, Any]]:
    return {r["seed"]: r for r in runs if key(r) == (d, v, o, lam)}


def paired_interval(
    runs: list[dict[str, Any]], a: tuple[str, str, str, float], b: tuple[str, str, str, float],
    metric: str, confidence: float = 0.95,
) -> ConfidenceInterval:  # fmt: skip
    """t-interval over seeds of ``metric(a) - metric(b)``, paired by seed (NaN: undefined, also
    with fewer than ``MIN_SEEDS`` seeds)."""
    ra, rb = runs_of(runs, *a), runs_of(runs, *b)
    d = np.array([ra[s][metric] - rb[s][metric] for s in sorted(ra) if s in rb], dtype=float)
    if d.size < MIN_SEEDS or np.isnan(d).any():
        return ConfidenceInterval(math.nan, math.nan, math.nan, confidence)
    return t_interval(d, confidence)


def self_null_interval(
    runs: list[dict[str, Any]], arm: tuple[str, str, str, float], metric: str
) -> ConfidenceInterval:
    """Self-null: ``metric`` of one arm against itself with the seed pairing rotated (seed s vs
    s + 1), a t-interval over seeds of a difference with no effect in it (NaN: undefined)."""
    ra = runs_of(runs, *arm)
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
    """``metric`` falls as lambda grows in every (dataset, scale) group of one base objective
    (``groups``, called once per objective by :func:`decide_claims`): the largest
    Spearman rho(lambda, metric) over the groups, each with its bootstrap interval over runs, is
    below ``RHO`` on its whole interval. A group where rho is undefined (the metric, or lambda,
    constant over its runs) cannot show a fall: the claim is then not measured, whatever the other
    groups say, and the note names the group. Negative control: the lambda labels shuffled;
    positive control: the sweep's models learned something (pooled-patch-token probe above the
    random-init ViT, :data:`PATCH_PROBE`) and a planted fall (3 across-run SDs of the metric over the lambda range, added to the
    same runs) is detected by the same rule. The sweep holds masking fixed: lambda = 0 is the
    masked lambda = 0 control (the paper-practice sweep, unmasked at lambda = 0, is in the note)."""
    cis, nulls, planted, practice = {}, [], [], {}
    for d, v, o in groups:
        rs = sweep_runs(runs, d, v, o)
        plain = [r for r in runs if (r["dataset"], r["vit"], r["method"]) == (d, v, o)]
        practice[(d, v, o)] = rho_interval(np.array([r["lambda"] for r in plain], dtype=float),
                                           np.array([r[metric] for r in plain], dtype=float))  # fmt: skip
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
        + "; ".join(f"{o} " + "/".join(f"{mean[sweep_arm(d, v, o, lam)][metric]:.3f}" for lam in cfg.lambdas)
                    + f" (unmasked λ=0: {mean[(d, v, o, 0.0)][metric]:.3f})" for d, v, o in groups)
        + "; with the unmasked lambda = 0 arm instead (paper practice, masking and patch loss "
        "together): " + "; ".join(f"{o}/{v}: rho = {c.estimate:+.2f} [{c.low:+.2f}, {c.high:+.2f}]"
                                  for (_, v, o), c in practice.items())
        + "; random-init ViT " + ", ".join(f"{v}: {random_mean(runs, d, v, metric):.3f}"
                                           for d, v, _ in groups)
        + f" (the level of {metric} with nothing learned; the sweep's means above are to be read "
        "against it)"
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
        arms = [sweep_arm(d, v, o, lam) for d, v, o in groups for lam in cfg.lambdas]
        positive = all_of(
            learned_control(runs, arms, "the sweep's models (masked λ=0 and λ > 0)", PATCH_PROBE),
            Control.positive(
                "a planted fall (3 SD of the metric over the lambda range) is detected: max rho",
                pl.estimate, "<", RHO, interval=pl,
            ),
        )  # fmt: skip
        negative = Control.negative(
            "lambda labels shuffled (one seeded shuffle per group, bootstrap over runs): max rho",
            nl.estimate, nl,
        )  # fmt: skip
    objective = "/".join(dict.fromkeys(o for _, _, o in groups))
    return Claim.decide(
        f"{objective}: {what} falls as lambda grows, at every model scale",
        f"max over model scales of Spearman rho(lambda, {metric}) over "
        f"{len(cfg.lambdas)} lambdas (lambda = 0: masked control) x {len(cfg.seeds)} seeds",
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
    diffs = {(d, v, o, lam): paired_interval(runs, (d, v, o, lam), reference(d, v, o), "linear")
             for d, v, o in groups for lam in pos}  # fmt: skip
    practice = {(d, v, o, lam): paired_interval(runs, (d, v, o, lam), (d, v, o, 0.0), "linear")
                for d, v, o in groups for lam in pos}  # fmt: skip
    null = [self_null_interval(runs, reference(d, v, o), "linear") for d, v, o in groups]
    nan_diffs = [
        f"{o}/{v} λ={lam:g}" for (_, v, o, lam), x in diffs.items() if math.isnan(x.estimate)
    ]
    worst = extreme_interval(diffs.values(), largest=False)
    neg = extreme_interval(null, largest=False)
    objective = "/".join(dict.fromkeys(o for _, _, o in groups))
    return Claim.decide(
        f"{objective}: with the patch objective (lambda > 0) the linear-probe accuracy (CLS) is at "
        f"least that of lambda = 0 (read: higher by more than {PROBE_MARGIN}), at every model scale",
        f"min over scale, lambda > 0 of acc(lambda) - acc(masked lambda = 0), mean of "
        f"{n} seeds",
        None if nan_diffs else worst.estimate, worst, ">", PROBE_MARGIN,
        positive=learned_control(runs, [reference(d, v, o) for d, v, o in groups],
                                 "the masked lambda = 0 models"),
        negative=Control.negative(
            "self-null: each masked lambda = 0 model against itself, seed s vs s + 1 (mean 0 by "
            f"construction; refuted when its interval stays below the {PROBE_MARGIN} margin)",
            neg.estimate, neg,
        ) if not math.isnan(neg.estimate) else Control.absent(
            "negative", f"a masked lambda = 0 arm over >= {MIN_SEEDS} seeds (self-null)"),
        method=f"95% t-interval over {n} seeds of the seed-paired difference; the smallest over "
        "scales and lambdas (envelope: min of the estimates, lows, highs; each arm's own in the note)" if n >= MIN_SEEDS
        else f"missing: {n} seeds; a t-interval needs >= {MIN_SEEDS} (quick has 3)",
        note=(f"not measured: probe accuracy NaN (or < {MIN_SEEDS} seeds) for "
              f"{', '.join(nan_diffs)}; " if nan_diffs else "")
        + "; ".join(f"{o}/{v} λ={lam:g}: {x.estimate:+.3f} [{x.low:+.3f}, {x.high:+.3f}]"
                    for (_, v, o, lam), x in diffs.items())
        + "; against the unmasked lambda = 0 arm instead (paper practice): "
        + "; ".join(f"{o}/{v} λ={lam:g}: {x.estimate:+.3f} [{x.low:+.3f}, {x.high:+.3f}]"
                    for (_, v, o, lam), x in practice.items())
        + f"; target restated from the paper's 'at least' (>= 0) to > {PROBE_MARGIN} (an a-priori "
        "minimum effect of 2 points, ours; harder than the paper's, never easier): with '>= 0' "
        "identical arms met the target, and with '> 0' the self-null, whose mean is 0 by "
        "construction, straddles the target whatever the seed noise, so the claim could not be "
        "supported; with the margin the self-null is refuted when the seed noise resolves it "
        "(before, issue 43 draft: the random-init ViT in the lambda > 0 model's place, the mirror "
        "image of the positive control)",
    )  # fmt: skip


def _mae_claim(runs: list[dict[str, Any]], groups: list[tuple[str, str, str]], cfg: Scale) -> Claim:
    pos = [lam for lam in cfg.lambdas if lam > 0]
    scales = sorted({(g[0], g[1]) for g in groups})
    pairs = [(d, v, o, lam) for d, v in scales for dd, vv, o in groups if (dd, vv) == (d, v)
             for lam in pos]  # fmt: skip
    cis = [paired_interval(runs, (a[0], a[1], "mae", 0.0), a, "r2_code") for a in pairs]
    worst = extreme_interval(cis, largest=False)
    vs_random = [paired_interval(runs, (d, v, "mae", 0.0), (d, v, "random", 0.0), "r2_code")
                 for d, v in scales]  # fmt: skip
    mae = [
        np.array([r["r2_code"] for r in runs_of(runs, d, v, "mae", 0.0).values()])
        for d, v in scales
    ]
    nan = ConfidenceInterval(math.nan, math.nan, math.nan, 0.95)
    read = extreme_interval([t_interval(m) if m.size >= MIN_SEEDS else nan for m in mae],
                            largest=False)  # fmt: skip
    reads = Control.positive(
        "the ridge probe reads the texture code: MAE R^2 (smallest over scales)",
        read.estimate, ">=", CODE_READ, interval=read,
    )  # fmt: skip
    compared = [(d, v, "mae", 0.0) for d, v in scales] + [
        (d, v, o, lam) for d, v, o in groups for lam in pos
    ]
    # planted-absent: MAE against itself with the seeds paired off by one (no effect, seed noise)
    null = [self_null_interval(runs, (d, v, "mae", 0.0), "r2_code") for d, v in scales]
    neg = extreme_interval(null, largest=False)
    undefined = math.isnan(worst.estimate)
    objective = "/".join(dict.fromkeys(o for _, _, o in groups))
    return Claim.decide(
        f"{objective}: MAE keeps more local evidence (texture-code R^2) than every lambda > 0 model",
        "MAE R^2 - lambda > 0 model R^2 (seed-paired); min over lambda > 0 and scales",
        None if undefined else worst.estimate, worst, ">", MARGIN,
        positive=all_of(
            learned_control(runs, compared, "MAE and the lambda > 0 models", PATCH_PROBE), reads
        ),
        negative=Control.negative(
            "self-null: MAE against itself, seed s vs s + 1", neg.estimate, neg
        ) if not math.isnan(neg.estimate) else Control.absent(
            "negative", f"MAE over >= {MIN_SEEDS} seeds (self-null)"),
        method=f"95% t-interval over {len(cfg.seeds)} seeds of the seed-paired difference; the "
        "smallest over lambda > 0 models and scales (envelope: min of the estimates, lows, highs; "
        "each model's own in the note)" if len(cfg.seeds) >= MIN_SEEDS
        else f"missing: {len(cfg.seeds)} seeds; a t-interval needs >= {MIN_SEEDS} (quick has 3)",
        note=(f"not measured: a texture-code R^2 is NaN, or < {MIN_SEEDS} seeds; " if undefined else "")
        + f"target restated from > 0 to > {MARGIN} (harder than the paper's > 0, never easier) so "
        "that the self-null, whose mean is 0 by construction, can be refuted; the positive control "
        "compares with the random-init ViT since issue 44 (it keeps the most texture-code R^2 of "
        "all, so 'the probe reads the code' alone passed for a model that learned nothing), on the "
        "pooled patch tokens (MAE never trains its CLS token); random-init ViT R^2 "
        + ", ".join(f"{v}: {random_mean(runs, d, v, 'r2_code'):.3f}" for d, v in scales)
        + "; MAE - lambda > 0 model (seed-paired): "
        + "; ".join(f"{o}/{v} λ={lam:g}: {c.estimate:+.3f} [{c.low:+.3f}, {c.high:+.3f}]"
                    for (_, v, o, lam), c in zip(pairs, cis, strict=True))
        + "; MAE - random init (seed-paired) "
        + ", ".join(f"{v}: {c.estimate:+.3f} [{c.low:+.3f}, {c.high:+.3f}]"
                    for (_, v), c in zip(scales, vs_random, strict=True)),
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


def masking_effects(runs: list[dict[str, Any]], groups: list[tuple[str, str, str]],
                    cfg: Scale) -> list[dict[str, Any]]:  # fmt: skip
    """What masking alone does (masked against unmasked lambda = 0) and what the patch loss does
    with masking held fixed (largest lambda against the masked control): seed-paired mean
    differences with their 95% t-intervals (``low``, ``high``; uncorrected: of k such intervals
    about 0.05 k exclude 0 by chance) and Bonferroni-corrected ones over the table's k rows
    (``bonf_low``, ``bonf_high``: each at 1 - 0.05 / k, all k together at >= 95%)."""
    top = max(cfg.lambdas)
    k = 2 * 3 * len(groups)
    rows = []
    for d, v, o in groups:
        for metric in ("linear", "r2_code", "corr_mean"):
            for effect, a, b in (("masking alone (masked λ=0 − λ=0)", reference(d, v, o), (d, v, o, 0.0)),
                                 (f"patch loss (λ={top:g} − masked λ=0)", (d, v, o, top), reference(d, v, o))):  # fmt: skip
                ci = paired_interval(runs, a, b, metric)
                bonf = paired_interval(runs, a, b, metric, 1 - 0.05 / k)
                rows.append({"dataset": d, "vit": v, "objective": o, "metric": metric,
                             "effect": effect, "difference": ci.estimate, "low": ci.low,
                             "high": ci.high, "bonf_low": bonf.low, "bonf_high": bonf.high})  # fmt: skip
    return rows


def decide_claims(runs: list[dict[str, Any]], summary: list[dict[str, Any]],
                  theory: list[list[dict[str, Any]]], null: list[dict[str, Any]],
                  cfg: Scale) -> list[Claim]:  # fmt: skip
    """The four paper claims, each once per base objective (its own arms and controls, so one
    objective's models that learned nothing do not block another's verdict), and the check of our
    code, in the report's order: probe, texture code, correspondence, MAE (each for every
    objective in ``cfg.objectives`` order), theory."""
    mean = {key(r): r for r in summary}
    groups = sorted({(r["dataset"], r["vit"], r["method"]) for r in summary
                     if r["method"] in cfg.objectives and r["dataset"] == SYNTHETIC})  # fmt: skip
    per = [[g for g in groups if g[2] == o] for o in cfg.objectives]
    per = [gs for gs in per if gs]
    claims = [_probe_claim(runs, gs, cfg) for gs in per]
    # 2./3. local evidence and correspondence fall with lambda (Spearman over the sweep, all seeds)
    for metric, what in (("r2_code", "local-evidence R^2 of the patch's own texture code"),
                         ("corr_mean", "correspondence accuracy (mean of shift / zoom / flip)")):  # fmt: skip
        claims += [_falls_claim(runs, mean, gs, metric, what, cfg) for gs in per]
    claims += [_mae_claim(runs, gs, cfg) for gs in per]
    claims.append(_theory_check(theory, null))
    return claims
