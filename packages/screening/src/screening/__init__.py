"""screening: optimal two-stage screening and algorithmic targeting under a coverage budget.

>>> import numpy as np, screening
>>> p = np.array([0.9, 0.6, 0.5, 0.4, 0.1])
>>> plan = screening.OptimalPlanner().plan(p, coverage=2, screen_budget=1)
"""

from screening.costs import Split, optimal_split
from screening.planners import (
    NoScreening,
    OptimalPlanner,
    Oracle,
    Plan,
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
    load_scores_csv,
    margin_uncertainty,
    pmt_population,
)
from screening.value import (
    PlanValue,
    marginal_screening_value,
    plan_value,
    poisson_binomial_pmf,
    simulate,
    window_values,
)

__all__ = [
    "NoScreening",
    "OptimalPlanner",
    "Oracle",
    "Plan",
    "PlanValue",
    "Planner",
    "Population",
    "ScreenOnly",
    "ScreenRandom",
    "ScreenTop",
    "ScreenUncertain",
    "Split",
    "beta_population",
    "brute_force_plan",
    "calibrated_scores",
    "demining_population",
    "is_contiguous",
    "is_margin_window",
    "load_scores_csv",
    "local_search",
    "margin_uncertainty",
    "marginal_screening_value",
    "optimal_split",
    "plan_value",
    "pmt_population",
    "poisson_binomial_pmf",
    "simulate",
    "window_values",
]
