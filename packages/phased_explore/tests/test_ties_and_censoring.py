"""Planted ties, censored N_min and zero certificates: explicit rules, not accidents."""

import math

import numpy as np
import pytest

from phased_explore.algorithms import RFUCRL, least_visited_max, reach_policies
from phased_explore.planning import first_max, value_iteration
from phased_explore.protocol import History
from phased_explore.reproduce import (
    SCALES,
    censored_slope,
    equal_trajectory_score,
    frontier_claim,
)


def test_first_max_treats_rounding_noise_as_a_tie():
    q = np.array([[0.5, 0.5 + 1e-16 * 4, 0.1], [0.2, 0.9, 0.9 - 1e-15]])
    assert first_max(q, axis=1).tolist() == [0, 1]
    assert first_max(np.array([[0.1, 0.3]]), axis=1).tolist() == [1]


def test_value_iteration_policy_takes_the_lowest_of_tied_actions():
    # two actions with identical dynamics and rewards up to 1e-15: action 0 by the rule
    P = np.zeros((1, 2, 3, 2))
    P[0, :, :, 0] = 1.0
    r = np.zeros((1, 2, 3))
    r[0, :, 1] = 1.0
    r[0, :, 2] = 1.0 + 1e-15
    assert value_iteration(P, r).policy.tolist() == [[1, 1]]


def test_reach_policies_break_ties_to_the_lowest_action():
    H, S, A = 2, 2, 3
    P = np.full((H, S, A, S), 0.5)  # every action reaches every state equally
    P[:, :, 2] = [0.5 + 1e-16, 0.5 - 1e-16]  # noise on the last action
    pols, reach = reach_policies(P, np.array([1.0, 0.0]), 2)
    assert np.all(pols == 0)
    assert reach == pytest.approx([0.5, 0.5])


def test_rfucrl_ties_go_to_the_least_visited_then_lowest_action():
    E = np.array([[1.0, 1.0 + 1e-15, 1.0, 0.2], [0.3, 0.3, 0.3, 0.3]])
    visits = np.array([[5, 5, 2, 0], [1, 0, 0, 3]])
    assert least_visited_max(E, visits).tolist() == [2, 1]
    # unvisited state-actions have identical bounds: RF-UCRL's greedy policy takes action 0
    hist = History(S=3, A=4, H=2, n_agents=1, n_phases=1)
    assert np.all(RFUCRL().greedy(hist) == 0)


def test_censored_slope_bounds():
    x, y = [1, 2, 3], [1.0, 2.0, 3.0]
    exact = censored_slope(x, y, [False] * 3)
    assert exact.exact
    assert exact.low == pytest.approx(1.0)
    up = censored_slope(x, y, [False, False, True])  # the largest x only known to be >= 3
    assert up.low == pytest.approx(1.0)
    assert up.high == math.inf
    down = censored_slope(x, y, [True, False, False])
    assert down.low == -math.inf
    assert down.high == pytest.approx(1.0)
    assert not censored_slope([2, 2], [1.0, 2.0], [False, False]).defined


def _row(rho, m, n_min, lower=None):
    return {
        "rho": rho,
        "m": m,
        "N_min_simulated": n_min,
        "censored": n_min is None,
        "N_min_lower": lower if n_min is None else n_min,
        "N_min_closed_form": 1,
        "A^m": 2**m,
        "enumerate_N64_success": m <= 6,
    }


def test_frontier_claim_with_a_censored_point_is_not_supported():
    cfg = SCALES["smoke"]
    # rho=1 never reached success on a grid up to 64: N_min > 64, so the slope is >= 0.87, in the
    # band if N_min is near 100, above it if N_min is large; dropping the point (as before) would
    # have fitted the other two alone
    fr = [_row(1, 6, None, 64), _row(2, 3, 16), _row(6, 1, 3)]
    claim = frontier_claim(fr, cfg)
    assert claim.value is None
    assert not claim.point_check
    assert claim.note.startswith("undecided")
    assert "censored" in claim.note
    # the same censored point, far above the band whatever its value: refuted
    steep = [_row(1, 6, None, 2**15), _row(2, 3, 16), _row(6, 1, 3)]
    refuted = frontier_claim(steep, cfg)
    assert not refuted.point_check
    assert refuted.note.startswith("refuted")
    exact = frontier_claim([_row(1, 6, 128), _row(2, 3, 16), _row(6, 1, 3)], cfg)
    assert exact.value is not None


def test_equal_trajectory_score_with_zero_certificates():
    score, price, _ = equal_trajectory_score(0.0, 0.0, 0.5)  # 0/0 price
    assert score is None
    assert not price.defined
    score, price, _ = equal_trajectory_score(0.2, 0.0, 0.9)  # x/0 = inf: 3/price = 0
    assert price.low == math.inf
    assert score == 0.0
    score, _, _ = equal_trajectory_score(0.1, 0.1, 0.6)
    assert score == pytest.approx(min(3.0, 2.0))
