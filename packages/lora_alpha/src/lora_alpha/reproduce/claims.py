"""The verdicts: each claim decided on an interval with a positive and a negative control.

Constants labelled "ours" are this package's choices (see ``seeds/lora_alpha.md``): the smallest
effects that count (:data:`MARGIN`, :data:`FLAT`, :data:`EXPONENT_TOL`) and :data:`MIN_SEEDS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lora_alpha.reproduce.run import BASE_ALPHA, BASE_LR, RECIPES, SELECT, Measurements
from lora_alpha.reproduce.scales import Scale
from lora_alpha.sweep import PowerLawFit, SweepResult, _optimal_alpha, fit_optimal_alpha
from paper_common import Claim, Control
from paper_common.stats import ConfidenceInterval, extreme_interval, log_t_interval, t_interval

MIN_SEEDS = 3  # an interval over seeds needs >= 3 of them (with 2: 1 degree of freedom)
EXPONENT_TOL = 0.15  # ours: |b - 0.5| <= 0.15, the paper's sqrt(r) law as b in [0.35, 0.65]
FLAT = 1.25  # ours: a drift ratio "rises" when it grows by more than x1.25; "flat" within it
MARGIN = 0.02  # ours: the smallest score gap that counts (scores are shares in [0, 1])
B_ONLY = (
    "B only (lora_A frozen, Adam without weight decay): alpha x k and lr x k give the same "
    "dW up to Adam's eps"
)
PUSH = (
    "off-task push: every second training batch carries a second planted shift (seeds as the claim)"
)


def _missing_seeds(n: int) -> str:
    return f"missing: {n} seed(s); an interval over seeds needs >= {MIN_SEEDS}"


def _by_seed(rows: list[dict[str, Any]], kind: str, k: float) -> list[dict[str, Any]]:
    """The rows of one series point (``kind``, factor ``k``), ordered by seed."""
    return sorted((r for r in rows if r["kind"] == kind and r["factor"] == k),
                  key=lambda r: r["seed"])  # fmt: skip


def worst_score(rows: Sequence[dict[str, Any]]) -> float:
    """The score a diverged (non-finite) run counts as: the worst of ``rows``' finite scores, and
    at most 0 (a regression score below 0 is worse than a blow-up's old 0; accuracy's worst is 0).
    """
    finite = [r["score"] for r in rows if math.isfinite(r["score"])]
    return min([0.0, *finite])


def _scores(rows: list[dict[str, Any]], floor: float) -> np.ndarray:
    """Scores, a non-finite one (a diverged run) counted as ``floor`` (:func:`worst_score`)."""
    return np.array([r["score"] if math.isfinite(r["score"]) else floor for r in rows])


def _min_t(groups: Sequence[np.ndarray]) -> ConfidenceInterval:
    return extreme_interval([t_interval(g) for g in groups], largest=False)


def score_gap_claim(
    interaction: dict[str, list[dict[str, Any]]],
    controls: dict[str, dict[str, list[dict[str, Any]]]],
    kmax: float,
) -> Claim:
    """Claim 1: score(alpha x k) - score(lr x k) > :data:`MARGIN` on every task, on the t-interval
    over seeds of each task's gap (the smallest over tasks). Negative control: the same gap with
    ``lora_A`` frozen (B only), where the two arms train the same ``dW`` up to Adam's eps: the rule
    must come out refuted. Positive: fine-tuning responds to scale (lr x k scores above the base
    run by more than :data:`MARGIN` on every task)."""
    gaps, nulls, gains, notes = [], [], [], []
    for task, rows in interaction.items():
        ctrl = controls[task]["b_only"]
        floor = worst_score([*rows, *ctrl])
        a, l_ = (_scores(_by_seed(rows, kind, kmax), floor) for kind in ("alpha", "lr"))
        ba, bl = (_scores(_by_seed(ctrl, kind, kmax), floor) for kind in ("alpha", "lr"))
        base = _scores(_by_seed(rows, "lr", 1), floor)
        gaps.append(a - l_)
        nulls.append(ba - bl)
        gains.append(l_ - base)
        div = [sum(r["diverged"] for r in _by_seed(rows, kind, kmax)) for kind in ("alpha", "lr")]
        notes.append(f"{task}: alpha {a.mean():.3f} vs lr {l_.mean():.3f} (diverged runs "
                     f"{div[0]} / {div[1]}; B only {ba.mean():.3f} vs {bl.mean():.3f})")  # fmt: skip
    n = len(gaps[0])
    value = float(min(g.mean() for g in gaps))
    statement = (f"At lr {BASE_LR:g}, raising alpha by {kmax:g}x beats raising the learning rate by "
                 f"{kmax:g}x")  # fmt: skip
    metric = (f"min over tasks of score(alpha x {kmax:g}) - score(lr x {kmax:g}), from alpha "
              f"{BASE_ALPHA:g} at lr {BASE_LR:g}")  # fmt: skip
    gain_text = (
        f"fine-tuning responds to scale: min over tasks of score(lr x {kmax:g}) - score(k=1)"
    )
    if n < MIN_SEEDS:
        return Claim.decide(
            statement, metric, value, None, ">", MARGIN,
            positive=Control.positive(f"{gain_text} (point)",
                                      float(min(g.mean() for g in gains)), ">", MARGIN),
            negative=Control.absent("negative", f"{B_ONLY}, over >= {MIN_SEEDS} seeds"),
            method=_missing_seeds(n), note="; ".join(notes),
        )  # fmt: skip
    ci, null, gain = _min_t(gaps), _min_t(nulls), _min_t(gains)
    return Claim.decide(
        statement, metric, ci.estimate, ci, ">", MARGIN,
        positive=Control.positive(gain_text, gain.estimate, ">", MARGIN, gain),
        negative=Control.negative(f"{B_ONLY}: the same gap", null.estimate, null),
        method=f"95% t-interval over {n} seeds of each task's gap; the smallest over tasks",
        note="; ".join(notes) + f"; a diverged run scores the task's worst score; target: a gap "
        f"above {MARGIN:g} (ours), not any gap; before the review of issue 44 the negative control "
        "was the alpha arm against itself with seeds rotated (mean 0 by construction)",
    )  # fmt: skip


def _geo(x: np.ndarray) -> float:
    """The geometric mean of positive ratios over seeds (one seed: itself; 0 and inf as in
    :func:`~paper_common.stats.log_t_interval`)."""
    return float(x[0]) if len(x) < 2 else log_t_interval(x).estimate


def _drift(rows: list[dict[str, Any]]) -> np.ndarray:
    return np.array([r["drift_ratio_full_ft"] for r in rows], dtype=float)


def _ratios(
    tasks: Sequence[str],
    make: Callable[[str], np.ndarray],
) -> tuple[list[np.ndarray], list[str]]:
    """Per task, the seed-wise drift ratios ``make(task)``; with the tasks where one is undefined
    (a NaN from a zero update or two diverged runs, or a negative value)."""
    out, bad = [], []
    for task in tasks:
        with np.errstate(divide="ignore", invalid="ignore"):
            x = make(task)
        out.append(x)
        if np.isnan(x).any() or (x < 0).any():
            bad.append(task)
    return out, bad


def _drift_series(
    interaction: dict[str, list[dict[str, Any]]],
    controls: dict[str, dict[str, list[dict[str, Any]]]],
    kmax: float,
) -> dict[str, tuple[list[np.ndarray], list[str]]]:
    """The drift ratios over seeds, per task: ``alpha`` = drift(alpha x k) / drift(base), ``rise``
    = drift(lr x k) / drift(alpha x k), ``b_only`` = drift(lr x k) / drift(alpha x k) with B only,
    ``push`` = drift(base with the off-task push) / drift(base)."""
    tasks = list(interaction)
    base = lambda t: _drift(_by_seed(interaction[t], "lr", 1))  # noqa: E731
    arm = lambda t, kind, k: _drift(_by_seed(interaction[t], kind, k))  # noqa: E731
    ctl = lambda t, part, kind, k: _drift(_by_seed(controls[t][part], kind, k))  # noqa: E731
    return {
        "alpha": _ratios(tasks, lambda t: arm(t, "alpha", kmax) / base(t)),
        "rise": _ratios(tasks, lambda t: arm(t, "lr", kmax) / arm(t, "alpha", kmax)),
        "b_only": _ratios(tasks, lambda t: ctl(t, "b_only", "lr", kmax)
                          / ctl(t, "b_only", "alpha", kmax)),
        "push": _ratios(tasks, lambda t: ctl(t, "push", "lr", 1) / base(t)),
    }  # fmt: skip


def _per_task(tasks: Sequence[str], xs: list[np.ndarray]) -> str:
    return ", ".join(f"{t} {np.round(x, 2).tolist()}" for t, x in zip(tasks, xs, strict=True))


def _log_t(xs: list[np.ndarray], largest: bool) -> ConfidenceInterval:
    return extreme_interval([log_t_interval(x) for x in xs], largest=largest)


def drift_flat_claim(
    interaction: dict[str, list[dict[str, Any]]],
    controls: dict[str, dict[str, list[dict[str, Any]]]],
    kmax: float,
) -> Claim:
    """Claim 2a (one-sided, as the paper's "without increasing the drift ratio"): raising alpha by
    ``kmax`` does not raise the drift ratio (full-FT reference) by more than a factor :data:`FLAT`
    on any task: x = drift(alpha x k) / drift(base), its log-t interval over seeds (the largest
    over tasks) <= FLAT. Negative control: the base run with an off-task push during training
    against the base run (the drift must rise: the rule must come out refuted). Positive: with B
    only the two arms train the same dW, and the same rule on drift(lr x k) / drift(alpha x k)
    must find no rise (the testbed can show a drift ratio that does not rise)."""
    series = _drift_series(interaction, controls, kmax)
    tasks = list(interaction)
    (alpha, bad), (b_only, bad2), (push, bad3) = series["alpha"], series["b_only"], series["push"]
    n = len(alpha[0])
    statement = f"Raising alpha ({kmax:g}x) does not increase the drift ratio"
    metric = (f"largest over tasks of x = drift(alpha x {kmax:g}) / drift(base) (full-FT "
              "reference); a rise is x above the target")  # fmt: skip
    note = f"per task x: {_per_task(tasks, alpha)}; push: {_per_task(tasks, push)}"
    undefined = sorted(set(bad) | set(bad2) | set(bad3))
    if n < MIN_SEEDS or undefined:
        why = (
            _missing_seeds(n)
            if n < MIN_SEEDS
            else f"missing: a drift ratio undefined in {undefined}"
        )
        point = None if set(bad) else max(_geo(x) for x in alpha)
        return Claim.decide(
            statement, metric, point, None, "<=", FLAT,
            positive=Control.absent("positive", f"{B_ONLY}, over >= {MIN_SEEDS} seeds"),
            negative=Control.absent("negative", f"{PUSH}, over >= {MIN_SEEDS} seeds"),
            method=why, note=("not measured: " if undefined else "") + note,
        )  # fmt: skip
    ci, pos, neg = _log_t(alpha, True), _log_t(b_only, True), _log_t(push, True)
    return Claim.decide(
        statement, metric, ci.estimate, ci, "<=", FLAT,
        positive=Control.positive(f"{B_ONLY}: drift(lr x {kmax:g}) / drift(alpha x {kmax:g}), "
                                  "largest over tasks", pos.estimate, "<=", FLAT, pos),
        negative=Control.negative(f"{PUSH}: drift(pushed base) / drift(base), largest over tasks",
                                  neg.estimate, neg),
        method=f"95% log-t interval over {n} seeds of each task's ratio; the largest over tasks",
        note=note + f"; a rise: above x{FLAT:g} (ours); one-sided since the review of issue 44 "
        "(it was a two-sided fold, and its controls were constant: a planted component with a "
        "fold of at least ~1.4 by construction, and a seed-rotated self-null)",
    )  # fmt: skip


def drift_rise_claim(
    interaction: dict[str, list[dict[str, Any]]],
    controls: dict[str, dict[str, list[dict[str, Any]]]],
    kmax: float,
) -> Claim:
    """Claim 2b: raising the learning rate by ``kmax`` raises the drift ratio more than raising
    alpha does: drift(lr x k) / drift(alpha x k) > :data:`FLAT` on every task (log-t interval over
    seeds, the smallest over tasks). Negative control: the same ratio with B only (the two arms
    train the same dW: must come out refuted). Positive: the off-task push during training shows
    as a rise above FLAT (drift(pushed base) / drift(base), smallest over tasks)."""
    series = _drift_series(interaction, controls, kmax)
    tasks = list(interaction)
    (ratio, bad), (b_only, bad2), (push, bad3) = series["rise"], series["b_only"], series["push"]
    n = len(ratio[0])
    statement = (f"Raising the learning rate ({kmax:g}x) raises the drift ratio more than raising "
                 f"alpha ({kmax:g}x)")  # fmt: skip
    metric = (f"smallest over tasks of drift(lr x {kmax:g}) / drift(alpha x {kmax:g}) "
              "(full-FT reference)")  # fmt: skip
    note = (f"per task: {_per_task(tasks, ratio)}; B only: {_per_task(tasks, b_only)}; push: "
            f"{_per_task(tasks, push)}")  # fmt: skip
    undefined = sorted(set(bad) | set(bad2) | set(bad3))
    if n < MIN_SEEDS or undefined:
        why = (
            _missing_seeds(n)
            if n < MIN_SEEDS
            else f"missing: a drift ratio undefined in {undefined}"
        )
        point = None if set(bad) else min(_geo(x) for x in ratio)
        return Claim.decide(
            statement, metric, point, None, ">", FLAT,
            positive=Control.absent("positive", f"{PUSH}, over >= {MIN_SEEDS} seeds"),
            negative=Control.absent("negative", f"{B_ONLY}, over >= {MIN_SEEDS} seeds"),
            method=why, note=("not measured: " if undefined else "") + note,
        )  # fmt: skip
    ci, pos, neg = _log_t(ratio, False), _log_t(push, False), _log_t(b_only, False)
    return Claim.decide(
        statement, metric, ci.estimate, ci, ">", FLAT,
        positive=Control.positive(f"{PUSH}: drift(pushed base) / drift(base), smallest over tasks",
                                  pos.estimate, ">", FLAT, pos),
        negative=Control.negative(f"{B_ONLY}: the same ratio", neg.estimate, neg),
        method=f"95% log-t interval over {n} seeds of each task's ratio; the smallest over tasks",
        note=note + f"; a rise: above x{FLAT:g} (ours)",
    )  # fmt: skip


def abs_dev_interval(low: float, high: float, center: float) -> tuple[float, float]:
    """The interval of ``|b - center|`` for ``b`` in ``[low, high]`` (NaN stays NaN).

    >>> abs_dev_interval(0.2, 0.6, 0.5), abs_dev_interval(0.6, 0.9, 0.5)
    ((0.0, 0.3), (0.09999999999999998, 0.4))
    """
    if math.isnan(low) or math.isnan(high):
        return math.nan, math.nan
    lo, hi = abs(low - center), abs(high - center)
    return (0.0 if low <= center <= high else min(lo, hi)), max(lo, hi)


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
        f"|b - 0.5| (regression task, lr {BASE_LR:g}, optimum on validation loss)",
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


def heuristic_claim(
    res: SweepResult,
    best: dict[int, float],
    fit: PowerLawFit,
    interior: float,
    metric: str = SELECT,
) -> Claim:
    """alpha* / max(16, 2r) >= one alpha-grid step at every rank, on the log-t interval over seeds
    of each rank's per-seed optimum; the smallest over ranks. Negative control: the self-null,
    each rank's per-seed optimum against the next seed's (seed s vs s + 1)."""
    seeds = res.values("seed")
    step = alpha_step(res.values("alpha"))
    per_seed = [_optimal_alpha([row for row in res.rows if row["seed"] == s], metric, None, True)
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
        f"{fit.coefficient_ci[1]:.1f}) against the paper's 256; alpha=2r is c = 2 sqrt(r), "
        "alpha=16 is c = 16/sqrt(r)",
    )  # fmt: skip


def recipe_claim(
    compare: list[dict[str, Any]],
    held_out: list[str],
    recipe: str,
    base_scores: dict[str, float] | None = None,
) -> Claim:
    """Claims 5 and 6: LoRA-alpha with one recipe (``"paper"``: c = 256 at lr 2e-5; ``"ours"``:
    c = 128 at lr 1e-4), untuned, scores within :data:`MARGIN` of the best of standard LoRA and
    rsLoRA (alpha 16) tuned over the learning-rate grid on validation, in every (LM task, rank)
    cell. Negative control: untuned standard LoRA at the recipe's learning rate in its place.
    Positive: the tuned baselines learn, beating the base model's score (``base_scores``, the
    untrained model per task) by more than :data:`MARGIN` in every LM cell."""
    c, lr = RECIPES[recipe]
    cells, untuned, notes = [], [], []
    for task in sorted({r["task"] for r in compare}):
        for r in sorted({x["r"] for x in compare if x["task"] == task}):
            rows = [x for x in compare if x["task"] == task and x["r"] == r]
            ours = next(x for x in rows if not x["tuned"] and x["recipe"] == recipe)
            rivals = [
                x
                for x in rows
                if x["tuned"] and x["method"].split(" ")[0] in ("standard", "rsLoRA")
            ]
            top = float(
                np.max([x["score"] if math.isfinite(x["score"]) else -math.inf for x in rivals])
            )
            std = next(x for x in rivals if x["method"].startswith("standard"))
            if task in held_out:
                cells.append(ours["score"] >= top - MARGIN)
                at = std[f"score at {recipe} lr"]
                untuned.append(math.isfinite(at) and at >= top - MARGIN)
            notes.append(f"{task} r={r}: {ours['score']:.3f} vs {top:.3f}")
    label = "the paper's recipe" if recipe == "paper" else "our variant"
    return Claim.decide(
        f"LoRA-alpha ({label}: c={c:g}, lr {lr:g}, untuned) matches or beats standard LoRA and "
        "rsLoRA tuned over the learning rate, across ranks",
        f"share of (LM task, rank) cells with score >= best tuned - {MARGIN:g} (baselines tuned "
        "on validation)", float(np.mean(cells)) if cells else None, None, ">=", 1.0,
        positive=Control.positive(
            "the baselines learn: min over LM cells of the best tuned score - the base model's",
            float(min(x["score"] - base_scores[x["task"]] for x in compare
                      if x["tuned"] and x["task"] in held_out)),
            ">", MARGIN,
        ) if held_out and base_scores else Control.absent(
            "positive", "an LM task and the base model's score"),
        negative=Control.negative(
            f"null: untuned standard LoRA (alpha=16, lr {lr:g}) in LoRA-alpha's place",
            float(np.mean(untuned)) if untuned else None,
        ),
        method="missing: one training seed per cell; needs >= 3 replicate seeds (issue 47)",
        note="; ".join(notes) + " (regression cells shown, not counted: our c was fitted on "
        "them)",
    )  # fmt: skip


def decide_claims(m: Measurements, cfg: Scale) -> list[Claim]:
    """Every claim of the report, in order."""
    kmax = max(cfg.factors)
    grid = np.array(cfg.alphas, dtype=float)
    interior = float(np.mean([grid[0] < a < grid[-1] for a in m.best.values()]))
    null = fit_optimal_alpha(permuted_ranks(m.res), SELECT, n_boot=1000, seed=0)
    return [
        score_gap_claim(m.interaction, m.controls, kmax),
        drift_flat_claim(m.interaction, m.controls, kmax),
        drift_rise_claim(m.interaction, m.controls, kmax),
        exponent_claim(m.fit, null, interior, len(m.res.values("seed"))),
        heuristic_claim(m.res, m.best, m.fit, interior),
        recipe_claim(m.compare, m.held_out, "paper", m.base_scores),
        recipe_claim(m.compare, m.held_out, "ours", m.base_scores),
    ]
