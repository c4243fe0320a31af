"""Issue 45: searches that must terminate, explorers that must not return partial models silently,
and RF-UCRL / RF-Express as published (bounds checked against values computed by hand)."""

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from phased_explore.algorithms import LayerwiseExplorer
from phased_explore.mdp import TabularMDP, combination_lock, noisy_lock
from phased_explore.protocol import History, run
from phased_explore.reward_free import RFUCRL, RFExpress, rf_error_bound


def _in_subprocess(code: str, limit: float = 30.0) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter killed after ``limit`` seconds (a hang fails the test
    instead of hanging the suite)."""
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                              text=True, timeout=limit)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"did not terminate within {limit} s:\n{code}")


def test_minimal_agents_rejects_unreachable_targets_and_bounds_its_search():
    # before the fix, target >= 1 doubled N forever; one interpreter checks every case
    out = _in_subprocess("""
        from phased_explore.lower_bound import minimal_agents
        cases = [dict(target=t) for t in (1.0, 1.5, 0.0, -0.1, float("nan"))]
        cases.append(dict(H=40, rho=1, max_agents=1_000))  # needs ~2^41 agents
        for kw in cases:
            args = dict(H=6, A=2, rho=2) | kw
            try:
                print("returned", minimal_agents(**args))
            except ValueError as e:
                print("ValueError:", e)
        """)
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 6, out.stdout + out.stderr
    assert all(line.startswith("ValueError") for line in lines)
    assert all("target" in line for line in lines[:5])
    assert "max_agents" in lines[5]
    from phased_explore.lower_bound import minimal_agents

    # enumeration reaches success 1 exactly at A^m agents: target 1 is allowed there
    assert minimal_agents(6, 2, 2, target=1.0, inner="enumerate") == 8


def test_layerwise_explorer_refuses_fewer_than_h_phases():
    mdp = noisy_lock(5, 2, seed=0)
    with pytest.raises(ValueError, match="n_phases"):
        run(LayerwiseExplorer(), mdp, 20, 4)
    from phased_explore.algorithms import BlockExplorer

    with pytest.raises(ValueError, match="n_phases"):
        run(BlockExplorer(rho=3), mdp, 20, 2)  # 3 blocks of 2 layers need 3 phases
    assert run(LayerwiseExplorer(), mdp, 20, 5).phases_used == 5


def _line(T: int, A: int = 1) -> np.ndarray:
    """Counts of T episodes on the 2-state, 2-step MDP where every action stays in state 0."""
    c = np.zeros((2, 2, A, 2))
    c[:, 0, 0, 0] = T
    return c


def test_rf_ucrl_bound_matches_the_published_formula_by_hand():
    # S = 2, A = 1, H = 2, delta = 0.1, T = 10^4 visits of (h, 0, 0), each to state 0.
    # beta(n) = log(2 S A H / delta) + (S - 1) log(e (1 + n / (S - 1))) = log 80 + 1 + log(10001)
    beta = 4.382026634673881 + 1.0 + 9.210440366976517
    b = math.sqrt(2 * beta / 1e4)  # 0.054023...
    E = rf_error_bound(_line(10_000), kind="rf_ucrl", delta=0.1)
    # E_1(0,0) = min(1, 1 * b); E_0(0,0) = min(2, 2 * b + E_1(0,0)); unvisited pairs: H - h
    assert E[1, 0, 0] == pytest.approx(b, rel=1e-9)
    assert E[0, 0, 0] == pytest.approx(3 * b, rel=1e-9)
    assert E[1, 1, 0] == 1.0
    assert E[0, 1, 0] == 2.0
    assert 3 * b == pytest.approx(0.16207, abs=1e-5)


def test_rf_express_bound_matches_the_published_formula_by_hand():
    # beta(n) = log(3 S A H / delta) + S log(8 e (n + 1)) = log 120 + 2 log(8 e 100001)
    beta = 4.787491742782046 + 2 * (2.0794415416798357 + 1.0 + 11.512935464920229)
    b = 15 * 2**2 * beta / 1e5  # 0.02038...
    W = rf_error_bound(_line(100_000), kind="rf_express", delta=0.1)
    assert W[1, 0, 0] == pytest.approx(b, rel=1e-9)
    assert W[0, 0, 0] == pytest.approx(b + 1.5 * b, rel=1e-9)  # (1 + 1/H) p_hat max W_1
    assert W[0, 1, 0] == 2.0  # min(H, .) for an unvisited pair
    assert W[1, 1, 0] == 2.0
    assert b == pytest.approx(0.0203834, abs=1e-6)


def test_rf_ucrl_stops_on_a_deterministic_mdp_when_the_bound_crosses_eps_over_2():
    P = np.zeros((2, 2, 1, 2))
    P[:, :, 0, 0] = 1.0
    mdp = TabularMDP(P, np.array([1.0, 0.0]))
    eps = 1.0

    def bound(T: int) -> float:  # E_0(0, 0) after T episodes, by hand (see the test above)
        beta = math.log(80) + 1 + math.log(1 + T)
        return 3 * math.sqrt(2 * beta / T)

    T_stop = next(T for T in range(1, 10_000) if bound(T) <= eps / 2)
    out = run(RFUCRL(epsilon=eps), mdp, 1, 10_000, seed=0)
    assert out.trajectories == T_stop
    assert out.phases_used == T_stop


def test_rf_express_stopping_statistic_is_published_one():
    W = rf_error_bound(_line(100_000), kind="rf_express", delta=0.1)
    hist = History(2, 1, 2, 1, 1)
    stat = RFExpress(epsilon=1.0).stopping_statistic(W, hist)
    w = W[0, :, 0].max()  # no history: every state may start (the worst one counts)
    assert stat == pytest.approx(3 * math.e * math.sqrt(w) + w)


def test_batched_agents_spread_over_the_greedy_policies_of_their_phase():
    mdp = combination_lock(3, 3, seed=0)
    hist = History(mdp.S, mdp.A, mdp.H, n_agents=3, n_phases=3)
    for algo in (RFUCRL(), RFExpress()):
        pol = algo.policies(0, hist)  # (3, H, S) actions
        assert sorted(pol[:, 0, 0].tolist()) == [0, 1, 2]  # one agent per action at the start
        naive = type(algo)(batch="same").policies(0, hist)
        assert len({tuple(p.ravel()) for p in naive}) == 1  # the strawman: one policy for all
    # one agent per phase: the batched rule is the sequential algorithm
    one = History(mdp.S, mdp.A, mdp.H, n_agents=1, n_phases=1)
    assert np.array_equal(RFExpress().policies(0, one), RFExpress(batch="same").policies(0, one))


def test_rf_bad_input():
    with pytest.raises(ValueError, match="delta"):
        RFUCRL(delta=1.5)
    with pytest.raises(ValueError, match="constants"):
        RFExpress(constants="tuned")
    with pytest.raises(ValueError, match="batch"):
        RFUCRL(batch="all")
    with pytest.raises(ValueError, match="epsilon"):
        RFUCRL(epsilon=-1.0)
    with pytest.raises(ValueError, match="threshold"):
        LayerwiseExplorer(threshold=1.5)


def test_shape_and_step_checks():
    from phased_explore.algorithms import reach_policies
    from phased_explore.planning import certificate, planning_gap

    mdp = noisy_lock(3, 2, seed=0)
    with pytest.raises(ValueError, match="P_hat"):
        certificate(mdp, mdp.P[:2])
    with pytest.raises(ValueError, match="P_hat"):
        planning_gap(mdp, mdp.P[:, :3, :, :3], [])
    with pytest.raises(ValueError, match="h must"):
        reach_policies(mdp.P, mdp.init, 4)
    with pytest.raises(ValueError, match="n_phases"):
        run(LayerwiseExplorer(), mdp, 5, 2.5)


def test_minimal_agents_default_search_ends_on_locks_out_of_reach():
    # review: with the default max_agents = 10^6 the doubling evaluated the exact recursion (whose
    # cost grows like N^2) up to N = 10^6, hours, before raising; and the search for a lock that
    # needs ~2.5 10^4 agents took minutes. A necessary condition (an agent must survive the first m - 1
    # layers of the longest block) now rules out such locks at once and starts the search.
    out = _in_subprocess(
        """
        from phased_explore.lower_bound import lock_success_probability, minimal_agents
        try:
            print("returned", minimal_agents(40, 2, 1))
        except ValueError as e:
            print("ValueError:", e)
        n = minimal_agents(13, 2, 1)
        print(n, lock_success_probability(13, 2, 1, n) >= 0.9,
              lock_success_probability(13, 2, 1, n - 1) < 0.9)
        """,
        limit=120.0,
    )
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 2, out.stdout + out.stderr
    assert lines[0].startswith("ValueError")
    assert "max_agents" in lines[0]
    n, hit, miss = lines[1].split()
    assert hit == "True"
    assert miss == "True"
    # an agent survives 12 layers w.p. 2^-12: N_min >= log(0.1) / log(1 - 2^-12) ~ 9,430
    assert 9_430 <= int(n) <= 2**16


def _block_probability_full(m: int, A: int, n_agents: int) -> float:
    """The recursion of ``lower_bound`` over every survivor count (no truncation): reference."""
    from scipy.stats import binom

    from phased_explore.lower_bound import _cover

    alive = np.zeros(n_agents + 1)
    alive[n_agents] = 1.0
    for _ in range(m):
        nxt = np.zeros_like(alive)
        for n in np.flatnonzero(alive > 0):
            k = np.arange(1, n + 1)
            nxt[k] += alive[n] * binom.pmf(k, n, 1.0 / A) * _cover(n - k, A - 1)
        alive = nxt
    return float(alive.sum())


@pytest.mark.parametrize(("m", "A", "N"), [(1, 2, 1), (4, 2, 2), (3, 3, 1), (3, 2, 7), (4, 3, 90), (6, 2, 300),
                                           (3, 5, 400), (12, 2, 5000)])  # fmt: skip
def test_block_probability_matches_the_untruncated_recursion(m, A, N):
    from phased_explore.lower_bound import _block_probability

    assert _block_probability(m, A, N) == pytest.approx(
        _block_probability_full(m, A, N), rel=1e-9, abs=1e-14
    )


def test_greedy_tie_rules_pick_an_infinite_maximum_and_reject_nan():
    # review: top - rtol * |top| is nan when the maximum is inf, so no entry counted as the
    # maximum and both rules silently returned action 0
    from phased_explore.planning import first_max, value_iteration
    from phased_explore.reward_free import least_visited_max

    E = np.array([[1.0, np.inf, 3.0], [np.inf, 2.0, np.inf]])
    assert least_visited_max(E, np.array([[0, 5, 0], [4, 0, 1]])).tolist() == [1, 2]
    assert first_max(E).tolist() == [1, 0]
    with pytest.raises(ValueError, match="NaN"):
        least_visited_max(np.array([[np.nan, 1.0]]), np.zeros((1, 2)))
    mdp = noisy_lock(3, 2, seed=0)
    r = np.zeros((mdp.H, mdp.S, mdp.A))
    r[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        value_iteration(mdp.P, r)
