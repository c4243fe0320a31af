"""Splitting one budget between allocations and screenings."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from screening.planners import OptimalPlanner, first_near_max
from screening.value import check_problem

__all__ = ["Split", "optimal_split"]


@dataclass(frozen=True)
class Split:
    """The best (K, m) for a budget, its value, and the best plan without screening at the same cost."""

    coverage: int
    screen_budget: int
    expected_value: float
    no_screening_coverage: int
    no_screening_value: float

    @property
    def efficiency_gain(self) -> float:
        """Relative gain in expected covered vulnerable units over the best no-screening plan:
        ``nan`` when both cover nothing (0/0), ``inf`` when only the no-screening plan does not."""
        if self.no_screening_value > 0:
            return self.expected_value / self.no_screening_value - 1
        return float("nan") if self.expected_value == 0 else float("inf")


def optimal_split(
    p: ArrayLike,
    budget: float,
    cost_alloc: float,
    cost_screen: float,
    max_candidates: int = 40,
    max_screen: int | None = None,
) -> Split:
    """Choose coverage K and screenings m with ``K cost_alloc + m cost_screen <= budget`` to maximise
    the optimal plan's expected covered vulnerable units. ``m`` runs over up to ``max_candidates``
    evenly spaced values from 0 to its maximum (the budget's, or ``max_screen``: planning costs
    O(m^2 log m), so cap it when screening is cheap); K takes the rest of the budget (at most n). Values
    within a relative 1e-12 are ties, won by the smaller m. A budget below ``cost_alloc`` gives
    ``Split(0, 0, 0.0, ...)``: nothing can be allocated."""
    arr = check_problem(p, 0)
    if not (budget >= 0 and cost_alloc > 0 and cost_screen > 0):
        raise ValueError(
            f"need budget >= 0 and positive costs; got {budget}, {cost_alloc}, {cost_screen}"
        )
    if isinstance(max_candidates, bool) or not isinstance(max_candidates, int | np.integer):
        raise ValueError(f"max_candidates must be an int >= 1; got {max_candidates!r}")
    if max_candidates < 1:
        raise ValueError(f"max_candidates must be an int >= 1; got {max_candidates!r}")
    if max_screen is not None and (
        isinstance(max_screen, bool)
        or not isinstance(max_screen, int | np.integer)
        or max_screen < 0
    ):
        raise ValueError(f"max_screen must be None or an int >= 0; got {max_screen!r}")
    n = arr.size
    m_max = int(min(n, budget // cost_screen))
    if max_screen is not None:
        m_max = min(m_max, int(max_screen))
    ms = np.unique(np.linspace(0, m_max, min(max_candidates, m_max + 1)).astype(int))
    planner = OptimalPlanner()
    base_k = int(min(n, budget // cost_alloc))
    base_v = float(np.sort(arr)[::-1][:base_k].sum())
    cands = []
    for m in ms:
        k = int(min(n, (budget - m * cost_screen) // cost_alloc))
        if k > 0:
            cands.append((k, int(m), planner.plan(arr, k, int(min(m, n))).expected_value))
    if not cands:  # the budget cannot pay for one allocation
        return Split(0, 0, 0.0, base_k, base_v)
    # ties within rounding noise go to the fewest screenings (candidates are in increasing m)
    best = cands[first_near_max([c[2] for c in cands])]
    return Split(best[0], best[1], best[2], base_k, base_v)
