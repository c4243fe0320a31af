import itertools
import math

import numpy as np
import pytest
from scipy.stats import chisquare

from phased_explore.algorithms import BlockExplorer, LayerwiseExplorer, UniformExplorer
from phased_explore.lower_bound import lock_success_probability, minimal_agents
from phased_explore.mdp import TabularMDP, combination_lock, noisy_lock, random_layered
from phased_explore.planning import certificate, policy_value, value_iteration
from phased_explore.protocol import History, empirical_model, run


def test_batched_rollout_matches_per_agent_reference_in_distribution():
    m = random_layered(3, 2, 3, seed=0)
    rng = np.random.default_rng(1)
    pol = rng.dirichlet(np.ones(2), size=(3, 3))  # one stochastic policy
    n = 20000
    batch = m.rollout(np.broadcast_to(pol, (n, 3, 3, 2)), rng=2)
    ref_rng = np.random.default_rng(3)  # a plain per-agent loop
    ref = []
    for _ in range(n):
        s = ref_rng.choice(3, p=m.init)
        for h in range(3):
            a = ref_rng.choice(2, p=pol[h, s])
            s = ref_rng.choice(3, p=m.P[h, s, a])
        ref.append(s)
    got = np.bincount(batch.states[:, -1], minlength=3)
    want = np.bincount(ref, minlength=3)
    assert chisquare(got, want * got.sum() / want.sum()).pvalue > 1e-3
    exact = m.occupancy(pol)[-1]
    assert np.allclose(got / n, exact, atol=0.015)


def test_deterministic_rollouts_are_exact():
    lock = combination_lock(5, 3, seed=4, deterministic=True)
    secret = lock.P[:4, 0, :, 0].argmax(-1)  # the action that keeps the agent alive
    pol = np.zeros((2, 5, 3), dtype=np.int64)
    pol[0, :4, 0] = secret  # agent 0 knows the combination, agent 1 plays action 0 throughout
    tr = lock.rollout(pol, rng=0)
    assert tr.states[0, :5].tolist() == [0] * 5
    ok = secret[0] == 0
    assert tr.states[1, 1] == (0 if ok else 1)


def test_value_iteration_matches_brute_force_enumeration():
    m = random_layered(2, 2, 3, seed=5)
    r = np.random.default_rng(6).random((3, 2, 2))
    plan = value_iteration(m.P, r)
    best = max(policy_value(m, np.array(p).reshape(3, 2), r)
               for p in itertools.product(range(2), repeat=6))  # fmt: skip
    assert float(m.init @ plan.V[0]) == pytest.approx(best, abs=1e-12)
    assert policy_value(m, plan.policy, r) == pytest.approx(best, abs=1e-12)


def test_protocol_hides_rewards_and_dynamics_and_counts_agents():
    m = noisy_lock(4, 2, seed=0)

    class Greedy(UniformExplorer):
        name = "asks for rewards"

        def policies(self, phase, history):
            return history.rewards

    with pytest.raises(PermissionError, match="reward"):
        run(Greedy(), m, 10, 1)

    class TooMany(UniformExplorer):
        name = "too many"

        def policies(self, phase, history):
            return np.full((history.n_agents + 1, 4, m.S, 2), 0.5)

    with pytest.raises(ValueError, match="only 10"):
        run(TooMany(), m, 10, 1)
    with pytest.raises(PermissionError, match="unknown"):
        _ = History(4, 2, 4, 1, 1).P
    out = run(LayerwiseExplorer(), m, 30, 4, seed=0)
    assert out.trajectories == 120
    assert out.phases_used == 4
    assert out.agents_per_phase == [30] * 4


def test_empirical_model_converges_like_inverse_sqrt_n():
    m = random_layered(4, 2, 2, seed=1)
    errs = []
    for n in (100, 1600, 25600):
        out = run(UniformExplorer(), m, n, 1, seed=2)
        errs.append(np.abs(out.P_hat - m.P).sum(-1).mean())
    slope = np.polyfit(np.log([100, 1600, 25600]), np.log(errs), 1)[0]
    assert -0.6 < slope < -0.4
    c = np.zeros((1, 2, 1, 2))
    assert np.allclose(empirical_model(c), 0.5)
    assert np.allclose(empirical_model(c, "self_loop")[0, :, 0], np.eye(2))


def test_layerwise_explorer_learns_the_noisy_lock():
    m = noisy_lock(5, 3, seed=2)
    e = [certificate(m, run(LayerwiseExplorer(), m, n, m.H, seed=3).P_hat) for n in (100, 1600)]
    assert e[1] < e[0] / 2.5  # ~ N^-1/2: 16x the agents, ~4x smaller certificate
    one = certificate(m, run(UniformExplorer(), m, 1600 * m.H, 1, seed=3).P_hat)
    assert e[1] < one  # uniform exploration with the same trajectory count rarely opens the lock


def test_lock_closed_form_matches_simulation_for_one_block():
    lock = combination_lock(6, 2, seed=0, deterministic=True)
    for n in (64, 128):
        sim = np.mean([certificate(lock, run(BlockExplorer(1), lock, n, 1, seed=s).P_hat) < 1e-9
                       for s in range(300)])  # fmt: skip
        p = lock_success_probability(6, 2, 1, n)
        assert sim == pytest.approx(p, abs=3 * math.sqrt(p * (1 - p) / 300) + 0.01)


def test_enumerating_agents_open_the_lock_iff_the_block_fits():
    lock = combination_lock(12, 2, seed=1, deterministic=True)
    for rho in (1, 2, 3, 4, 6, 12):
        m = math.ceil(12 / rho)
        out = run(BlockExplorer(rho, inner="enumerate"), lock, 64, rho, seed=0)
        assert (certificate(lock, out.P_hat) < 1e-9) == (m <= 6)
        assert lock_success_probability(12, 2, rho, 64, "enumerate") == float(m <= 6)
    assert minimal_agents(12, 2, 6) < minimal_agents(12, 2, 3) < minimal_agents(12, 2, 2)


def test_bad_input():
    with pytest.raises(ValueError, match="sum to 1"):
        TabularMDP(np.full((2, 2, 2, 2), 0.4), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="H must be >= 1"):
        TabularMDP(np.zeros((0, 2, 2, 2)), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="n_agents >= 1"):
        run(UniformExplorer(), combination_lock(3, 2), -1, 1)
    with pytest.raises(ValueError, match="integer actions"):
        combination_lock(3, 2).rollout(np.full((2, 3, 3), 5))


def test_gymnasium_wrapper_passes_check_env():
    from gymnasium.utils.env_checker import check_env

    from phased_explore.env import TabularMDPEnv

    env = TabularMDPEnv(noisy_lock(3, 2, seed=0))
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    done, steps = False, 0
    while not done:
        obs, r, done, _, _info = env.step(0)
        steps += 1
    assert steps == 3
    assert r == 0.0
    assert obs // env.mdp.S == 3
