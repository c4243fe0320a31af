"""Planted ties (plateaus of equal scores) and zero budgets / zero coverage: explicit rules."""

import math

import numpy as np
import pytest

from screening import OptimalPlanner, optimal_split
from screening.costs import Split
from screening.planners import first_near_max
from screening.reproduce import application_claim, efficiency_ratio, per_cost


def test_first_near_max_ignores_rounding_noise():
    assert first_near_max([1.0, 1.0 + 1e-15, 0.5]) == 0
    assert first_near_max([0.5, 1.0, 1.0 + 1e-6]) == 2  # a real difference still wins
    assert first_near_max([0.0, 0.0]) == 0
    with pytest.raises(ValueError, match="finite"):
        first_near_max([np.nan, 1.0])


def test_windows_on_a_plateau_pick_the_highest_ranked():
    # ranks 10..39 share one score: every window in the band [K-2m, K+m] = [12, 24] screens four
    # 0.5s and has the same exact value; their computed values differ by ~1e-15 (summation order)
    p = np.array([0.9] * 10 + [0.5] * 30 + [0.1] * 20)
    plan = OptimalPlanner().plan(p, coverage=20, screen_budget=4)
    assert plan.screened.tolist() == [12, 13, 14, 15]
    perm = np.random.default_rng(0).permutation(p.size)  # same rule on shuffled ids
    shuffled = OptimalPlanner().plan(p[perm], coverage=20, screen_budget=4)
    rank = np.empty(p.size, int)
    rank[np.argsort(-p[perm], kind="stable")] = np.arange(p.size)
    assert sorted(rank[shuffled.screened].tolist()) == [12, 13, 14, 15]


def test_split_ties_go_to_fewer_screenings():
    # all scores 0 or 1: screening reveals nothing, every m gives the same value
    p = np.array([1.0] * 5 + [0.0] * 20)
    split = optimal_split(p, budget=10, cost_alloc=1.0, cost_screen=0.5)
    assert split.screen_budget == 0
    assert split.coverage == 10


def test_budget_below_one_allocation_costs_nothing_and_is_undefined_per_cost():
    split = optimal_split(np.array([0.4, 0.6]), budget=0.5, cost_alloc=1.0, cost_screen=0.25)
    assert (split.coverage, split.screen_budget, split.no_screening_coverage) == (0, 0, 0)
    assert math.isnan(per_cost(0.0, 0 * 1.0 + 0 * 0.25))
    assert math.isnan(split.efficiency_gain)  # 0 / 0


def test_efficiency_gain_with_zero_baseline():
    assert Split(3, 1, 0.5, 2, 0.0).efficiency_gain == math.inf
    assert Split(3, 1, 0.6, 2, 0.3).efficiency_gain == pytest.approx(1.0)


def test_efficiency_ratio_rules():
    assert efficiency_ratio(0.2, 0.1) == pytest.approx(2.0)
    assert efficiency_ratio(0.2, 0.0) == math.inf
    assert math.isnan(efficiency_ratio(0.0, 0.0))
    assert math.isnan(efficiency_ratio(float("nan"), 0.1))


def _summary(ratios: dict[str, list[float]], auroc: float = 0.8) -> list[dict]:
    return [
        {"replicate": i, "application": app, "ratio": r, "auroc": auroc + 0.01 * i,
         "no-uncertainty ratio": 1.0}
        for app, rs in ratios.items()
        for i, r in enumerate(rs)
    ]  # fmt: skip


def test_application_claim_is_undecided_when_a_ratio_is_undefined():
    claim = application_claim(_summary({"a": [1.3, 1.4, 1.35], "b": [1.5, float("nan"), 1.4]}))
    assert claim.value is None
    assert claim.verdict == "inconclusive"
    assert "undefined" in claim.reason
    ok = application_claim(_summary({"a": [1.3, 1.4, 1.35], "b": [1.9, 2.0, 2.1]}))
    assert ok.value == pytest.approx((1.3 * 1.4 * 1.35) ** (1 / 3))
    assert ok.verdict == "supported"
    # only targeting alone covers nobody in one seed (x/0 = inf): the log interval of that
    # application is [0, inf] (a replicate at inf has no finite spread), so nothing is decided
    wild = application_claim(_summary({"a": [1.3, 1.4, 1.35], "b": [math.inf, 2.0, 2.1]}))
    assert wild.low == 0.0
    assert wild.verdict == "inconclusive"
