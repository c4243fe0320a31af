"""The measurements: the exact optimum's structure on small instances, planners across aleatoric
uncertainty, and two worked applications, each over replicate seeds."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from paper_common.experiment import replicate_seeds
from screening.costs import optimal_split
from screening.planners import (
    NoScreening,
    OptimalPlanner,
    Oracle,
    Planner,
    ScreenOnly,
    ScreenRandom,
    ScreenTop,
    ScreenUncertain,
    brute_force_plan,
    is_contiguous,
    is_margin_window,
    local_search,
)
from screening.populations import (
    Population,
    beta_population,
    calibrated_scores,
    demining_population,
    margin_uncertainty,
    pmt_population,
)
from screening.reproduce.scales import Scale
from screening.value import plan_value

log = logging.getLogger(__name__)

COVERAGE_SHARE, SCREEN_SHARE = 0.2, 0.05  # K = 20% of units, m = 5% in the sweeps
VALUE_TOL = 1e-9  # exact values closer than this are equal
SMALL_N = 10  # brute force over all screening sets


def per_cost(covered: float, cost: float) -> float:
    """Covered units per unit of cost; ``nan`` for a plan that spends nothing (the budget paid for
    no allocation: ``optimal_split`` returned K = m = 0), never a division by zero."""
    return float(covered) / float(cost) if cost > 0 else float("nan")


def efficiency_ratio(screened: float, plain: float) -> float:
    """``screened / plain`` covered-per-cost: ``nan`` if either is ``nan`` (a plan that spent
    nothing) or both are 0 (0/0: neither covers anyone), ``inf`` if only targeting alone covers 0."""
    if np.isnan(screened) or np.isnan(plain):
        return float("nan")
    if plain == 0:
        return float("nan") if screened == 0 else float("inf")
    return float(screened) / float(plain)


def baselines(seed: int) -> list[Planner]:
    return [NoScreening(), ScreenTop(), ScreenUncertain(), ScreenRandom(seed), ScreenOnly(seed)]


def _best_window(p: np.ndarray, coverage: int, m: int, touching: bool) -> float:
    """The best exact value over blocks of ``m`` consecutive ranks (start ``s``) that touch the
    cut-off, ``s <= K <= s + m`` (``touching``), or that do not; ``-inf`` when there is none."""
    order = np.argsort(-p, kind="stable")
    starts = [s for s in range(p.size - m + 1) if (s <= coverage <= s + m) == touching]
    return max((plan_value(p, order[s : s + m], coverage).mean for s in starts), default=-np.inf)


def best_margin_window(p: np.ndarray, coverage: int, m: int) -> float:
    """The best exact value over the margin windows: blocks of ``m`` ranks touching the cut-off."""
    return _best_window(p, coverage, m, touching=True)


def best_far_window(p: np.ndarray, coverage: int, m: int) -> float:
    """The best exact value over blocks of ``m`` ranks away from the cut-off (``-inf`` when every
    block touches it): the negative control of the structure claim."""
    return _best_window(p, coverage, m, touching=False)


def structure(cfg: Scale, rng: np.random.Generator) -> dict[str, float]:
    """Brute-force optima of ``cfg.n_small_instances`` random instances (n = 10): in how many a
    margin window attains the optimum (plans of equal value are all optimal: the brute force's own
    pick among them is arbitrary), in how many a block away from the cut-off does (the negative
    control), how many have a screening value at all (the positive control), screen-top's record,
    the structured planner's and screen-top's largest gap to the optimum, and in how many the
    structured planner's plan is a margin window whose direct targets are the top of the ranking."""
    out = dict.fromkeys(
        (
            "windows",
            "far_windows",
            "top_windows",
            "top_contiguous",
            "valuable",
            "gap",
            "top_gap",
            "planner_margin_plans",
        ),
        0.0,
    )
    for _ in range(cfg.n_small_instances):
        a, b = rng.uniform(0.3, 3, 2)
        p = rng.beta(a, b, SMALL_N)
        k, m = int(rng.integers(1, 7)), int(rng.integers(1, 4))
        best = brute_force_plan(p, k, m).expected_value
        top = ScreenTop().plan(p, k, m)
        none = NoScreening().plan(p, k, 0).expected_value
        out["windows"] += best - best_margin_window(p, k, m) <= VALUE_TOL
        out["far_windows"] += best - best_far_window(p, k, m) <= VALUE_TOL
        out["top_windows"] += best - top.expected_value <= VALUE_TOL
        out["top_contiguous"] += is_contiguous(p, top.screened)
        out["valuable"] += best - none > VALUE_TOL
        opt = OptimalPlanner().plan(p, k, m)
        out["gap"] = max(out["gap"], best - opt.expected_value)
        # the structured planner's plan: a window touching the cut-off, the top targeted directly
        out["planner_margin_plans"] += is_margin_window(p, opt.screened, k, direct=opt.direct)
        out["top_gap"] = max(out["top_gap"], best - top.expected_value)
    out["n"] = float(cfg.n_small_instances)
    return out


def medium(cfg: Scale, rng: np.random.Generator) -> list[dict]:
    """Five medium instances: the structured optimum against swap local search started from it."""
    rows = []
    for i in range(5):
        p = rng.beta(1.5, 2.5, cfg.n_medium)
        k, m = cfg.n_medium // 4, 4
        opt = OptimalPlanner().plan(p, k, m)
        ls = local_search(p, k, opt)
        rows.append(
            {
                "instance": i,
                "n": cfg.n_medium,
                "K": k,
                "m": m,
                "structured": opt.expected_value,
                "after local search": ls.expected_value,
                "gap": ls.expected_value - opt.expected_value,
            }
        )
    return rows


def sweep(cfg: Scale, seed: int) -> list[dict]:
    """Expected units covered by every planner on PMT (noise sigma) and Beta (concentration)
    populations of ``cfg.n_population`` units, K = 20% and m = 5% of them."""
    n = cfg.n_population
    K, m = int(COVERAGE_SHARE * n), int(SCREEN_SHARE * n)
    rows = []
    for knob, values in (("sigma", cfg.sigmas), ("concentration", cfg.concentrations)):
        for v in values:
            if knob == "sigma":
                p = pmt_population(n, v, seed=seed).p
            else:
                p = beta_population(n, 0.3, v, seed=seed).p
            row = {
                "population": "PMT" if knob == "sigma" else "Beta",
                "knob": knob,
                "level": float(v),
                "margin p(1-p)": margin_uncertainty(p, K),
                "optimal": OptimalPlanner().plan(p, K, m).expected_value,
            }
            for planner in baselines(seed):
                row[planner.name] = planner.plan(p, K, m).expected_value
            row["oracle"] = Oracle().plan(p, K).expected_value
            row["gain vs no screening"] = row["optimal"] - row["no screening"]
            rows.append(row)
    return rows


APPLICATIONS = (("cash transfer (PMT)", (1.0, 0.1)), ("demining", (1.0, 0.25)))


def _population(label: str, cfg: Scale, seed: int) -> Population:
    if label.startswith("cash"):
        return pmt_population(2 * cfg.n_app, 0.5, seed=seed)
    return demining_population(cfg.demining_side, seed=seed)


def applications(cfg: Scale, seed: int) -> tuple[list[dict], list[dict]]:
    """Features -> calibrated classifier on half the units -> plans for the other half, valued
    under the generator's true probabilities. Returns the planner rows and, per application, the
    claim's ratio with its controls: the classifier's AUROC and the ratio in a world with no
    aleatoric uncertainty (scores and truth are the realised outcomes)."""
    from sklearn.metrics import roc_auc_score

    rows, summary = [], []
    for label, costs in APPLICATIONS:
        pop = _population(label, cfg, seed)
        idx = np.random.default_rng(seed).permutation(pop.p.size)
        tr, te = idx[: idx.size // 2], idx[idx.size // 2 :]
        scores = calibrated_scores(pop.X[tr], pop.y[tr], pop.X[te], seed=seed % 2**31)
        truth, y = pop.p[te], pop.y[te]
        budget = COVERAGE_SHARE * te.size * costs[0]
        split = optimal_split(
            scores, budget, *costs, max_candidates=20, max_screen=int(budget) // 2
        )
        planners = [(OptimalPlanner(), split.coverage, split.screen_budget)]
        planners += [(pl, split.coverage, split.screen_budget) for pl in baselines(seed)[1:]]
        planners.append((NoScreening(), split.no_screening_coverage, 0))
        per = {}
        for planner, k, mm in planners:
            plan = planner.plan(scores, k, mm)
            cost = k * costs[0] + mm * costs[1]
            expected = plan_value(scores, plan.screened, k, plan.use_scores, truth=truth).mean
            realised = int(y[plan.allocate(y[plan.screened])].sum())
            per[planner.name] = per_cost(expected, cost)
            rows.append(
                {
                    "application": label,
                    "planner": planner.name,
                    "K": k,
                    "m": mm,
                    "cost": cost,
                    "expected covered": expected,
                    "expected per cost": per[planner.name],
                    "realised covered": realised,
                    "realised per cost": per_cost(realised, cost),
                }
            )
        known = optimal_split(
            y.astype(float), budget, *costs, max_candidates=20, max_screen=int(budget) // 2
        )
        known_ratio = efficiency_ratio(
            per_cost(
                known.expected_value, known.coverage * costs[0] + known.screen_budget * costs[1]
            ),
            per_cost(known.no_screening_value, known.no_screening_coverage * costs[0]),
        )
        summary.append(
            {
                "application": label,
                "ratio": efficiency_ratio(per["optimal (margin window)"], per["no screening"]),
                "auroc": float(roc_auc_score(y, scores)) if 0 < y.mean() < 1 else float("nan"),
                "no-uncertainty ratio": known_ratio,
            }
        )
    return rows, summary


@dataclass
class Results:
    """Everything :func:`measure` found, one entry per replicate seed."""

    seeds: list[int]
    structure: list[dict[str, float]] = field(default_factory=list)
    medium: list[dict] = field(default_factory=list)
    sweep: list[dict] = field(default_factory=list)
    apps: list[dict] = field(default_factory=list)
    app_summary: list[dict] = field(default_factory=list)


def measure(cfg: Scale, seed: int) -> Results:
    """Every measurement for :attr:`Scale.seeds` replicates derived from ``seed``."""
    res = Results(seeds=replicate_seeds(seed, cfg.seeds))
    for rep, s in enumerate(res.seeds):
        log.info("replicate %d (seed %d)", rep, s)
        rng = np.random.default_rng(s)
        res.structure.append(structure(cfg, rng))
        if rep == 0:
            res.medium = medium(cfg, rng)
        res.sweep += [{"replicate": rep, **r} for r in sweep(cfg, s)]
        rows, summary = applications(cfg, s)
        res.apps += [{"replicate": rep, **r} for r in rows]
        res.app_summary += [{"replicate": rep, **r} for r in summary]
    return res
