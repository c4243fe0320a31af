"""Planted ties, censored N_min and zero certificates: explicit rules, not accidents."""

import math

import numpy as np
import pytest

from phased_explore.algorithms import RFUCRL, least_visited_max, reach_policies
from phased_explore.planning import first_max, value_iteration
from phased_explore.protocol import History
from phased_explore.reproduce import Frontier, n_min_bounds, slope_bounds
from phased_explore.reproduce.claims import distance_interval


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


def test_slope_bounds_with_censored_and_resolution_limited_values():
    x = [1, 2, 3]
    exact = slope_bounds(x, [1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert exact == pytest.approx((1.0, 1.0))
    up = slope_bounds(x, [1.0, 2.0, 3.0], [1.0, 2.0, math.inf])  # the largest x censored above
    assert up[0] == pytest.approx(1.0)
    assert up[1] == math.inf
    down = slope_bounds(x, [1.0, 2.0, 3.0], [math.inf, 2.0, 3.0])  # the smallest x censored
    assert down[0] == -math.inf
    assert down[1] == pytest.approx(1.0)
    # one grid step of resolution (0.5 in log2) at each end widens the slope by 0.25 each way
    wide = slope_bounds(x, [0.5, 2.0, 2.5], [1.0, 2.0, 3.0])
    assert wide == pytest.approx((0.75, 1.25))
    assert all(math.isnan(v) for v in slope_bounds([2, 2], [1.0, 2.0], [1.0, 2.0]))


def test_n_min_bounds_resolution_and_censoring():
    f = Frontier(rho=1, m=4, ns=[2, 3, 4, 6], success=[[False] * 4, [True, False, False, False],
                                                        [True, True, True, False], [True] * 4])  # fmt: skip
    every = np.arange(4)
    assert n_min_bounds(f, every, 0.75) == (math.log2(3), math.log2(4))  # 3/4 at N = 4
    assert n_min_bounds(f, every, 1.0) == (math.log2(4), math.log2(6))
    assert n_min_bounds(f, np.array([3, 3, 3, 3]), 0.9) == (2.0, math.log2(6))  # seed 3: N = 6
    never = Frontier(rho=1, m=4, ns=[2, 3], success=[[False, True], [False, True]])
    assert n_min_bounds(never, np.array([0, 0]), 0.9) == (math.log2(3), math.inf)  # censored
    assert n_min_bounds(f, np.array([0, 0, 0, 0]), 0.9) == (1.0, math.log2(3))  # seed 0: N = 3
    first = Frontier(rho=1, m=1, ns=[2, 3], success=[[True, True], [True, True]])
    assert n_min_bounds(first, np.arange(2), 0.9) == (0.0, 1.0)  # N_min <= 2: at least 1 agent


def test_band_claims_are_decided_on_the_distance_interval():
    assert distance_interval(-0.6, -0.4, -0.5) == pytest.approx((0.0, 0.1))
    assert distance_interval(0.2, 0.4, 0.0) == pytest.approx((0.2, 0.4))
    assert distance_interval(-0.3, 0.1, 0.0) == pytest.approx((0.0, 0.3))
    assert all(math.isnan(v) for v in distance_interval(math.nan, 1.0, 0.0))
