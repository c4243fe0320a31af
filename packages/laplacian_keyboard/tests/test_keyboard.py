import numpy as np
import pytest

from laplacian_keyboard import (
    Behaviours,
    GridWorld,
    build_library,
    gpi_policy,
    laplacian_eigenvectors,
    optimal_policy,
    policy_evaluation,
    project_reward,
    successor_features,
    value_gap,
    value_iteration,
    zero_shot_bounds,
)
from laplacian_keyboard.mdp import policy_matrix, q_from_v

GAMMA = 0.9


@pytest.fixture(scope="module")
def room():
    env = GridWorld("open_room", slip=0.1)
    P = env.transition_matrix()
    _, phi = laplacian_eigenvectors(P, 3, drop_first=True)
    return env, P, phi


def test_value_iteration_matches_linear_solve_and_bellman(room):
    _, P, _ = room
    rng = np.random.default_rng(0)
    r = rng.normal(size=P.shape[0])
    terminal = np.zeros(P.shape[0], bool)
    terminal[5] = True
    for term in (None, terminal):
        V, Q = value_iteration(P, r, GAMMA, term)[:2]
        pi = Q.argmax(axis=1)
        np.testing.assert_allclose(policy_evaluation(P, r, pi, GAMMA, term), V, atol=1e-8)
        np.testing.assert_allclose(q_from_v(P, r, V, GAMMA, term).max(axis=1), V, atol=1e-8)
        _pi_opt, V_opt = optimal_policy(P, r, GAMMA, term)[:2]
        np.testing.assert_allclose(V_opt, V, atol=1e-8)
    # a stochastic policy: V = (I - gamma P_pi)^-1 P_pi r with a dense inverse
    pi = rng.dirichlet(np.ones(4), size=P.shape[0])
    P_pi = np.einsum("sa,sat->st", pi, P)
    expected = np.linalg.solve(np.eye(len(r)) - GAMMA * P_pi, P_pi @ r)
    np.testing.assert_allclose(policy_evaluation(P, r, pi, GAMMA), expected, atol=1e-10)


def test_successor_features_give_action_values(room):
    _, P, phi = room
    rng = np.random.default_rng(1)
    pi = rng.integers(4, size=P.shape[0])
    w = rng.normal(size=phi.shape[1])
    psi = successor_features(P, phi, pi, GAMMA)
    r = phi @ w
    Q = q_from_v(P, r, policy_evaluation(P, r, pi, GAMMA), GAMMA)
    np.testing.assert_allclose(psi @ w, Q, atol=1e-10)
    assert psi.shape == (P.shape[0], 4, phi.shape[1])


def test_projection_is_exact_in_span_and_least_squares_outside(room):
    _, P, phi = room
    w = np.array([0.3, -1.2, 0.5])
    proj = project_reward(phi, phi @ w)
    np.testing.assert_allclose(proj.w, w, atol=1e-12)
    assert proj.relative_error < 1e-12
    r = np.zeros(P.shape[0])
    r[-1] = 1.0
    proj = project_reward(phi, r)
    # the residual is orthogonal to the span (normal equations)
    np.testing.assert_allclose(phi.T @ proj.residual, 0.0, atol=1e-12)
    assert 0.5 < proj.relative_error < 1.0
    with pytest.raises(ValueError, match="reward must have shape"):
        project_reward(phi, r[:-1])
    with pytest.raises(ValueError, match="phi must have shape"):
        project_reward(phi[:, 0], r)


def test_gpi_is_never_worse_than_its_best_member(room):
    _, P, _ = room
    rng = np.random.default_rng(2)
    r = rng.normal(size=P.shape[0])
    policies = rng.integers(4, size=(6, P.shape[0]))
    vals = np.stack([policy_evaluation(P, r, pi, GAMMA) for pi in policies])
    qs = np.stack([q_from_v(P, r, v, GAMMA) for v in vals])
    V_gpi = policy_evaluation(P, r, gpi_policy(qs), GAMMA)
    assert np.all(V_gpi >= vals.max(axis=0) - 1e-9)
    assert np.any(
        V_gpi > vals.max(axis=0) + 1e-6
    )  # random policies: GPI strictly improves somewhere
    with pytest.raises(ValueError, match="q_values"):
        gpi_policy(np.zeros((0, 3, 4)))


def test_library_contains_the_optimum_of_random_in_span_rewards():
    env = GridWorld("four_rooms")
    P = env.transition_matrix()
    _, phi = laplacian_eigenvectors(P, 2, drop_first=True)
    mu = np.zeros(P.shape[0])
    mu[env.start] = 1.0
    lib = build_library(P, phi, 0.95, mu=mu)
    assert len(lib) > 2 * phi.shape[1]  # more than the 2d axis-aligned queries
    rng = np.random.default_rng(123)  # rewards the construction never queried
    gaps, gpi_gaps = [], []
    for _ in range(25):
        w = rng.normal(size=2) * rng.exponential()
        r = phi @ w
        V_star = optimal_policy(P, r, 0.95)[1][env.start]
        best = max(policy_evaluation(P, r, pi, 0.95)[env.start] for pi in lib.policies)
        gaps.append(V_star - best)
        gpi_gaps.append(V_star - policy_evaluation(P, r, lib.gpi(w), 0.95)[env.start])
        # best() picks the member from the stored start-state successor features alone
        assert np.isclose(
            policy_evaluation(P, r, lib.policies[lib.best(w)], 0.95)[env.start], best, atol=1e-9
        )
    assert max(gaps) < 1e-6
    assert max(gpi_gaps) < 1e-6
    # library values: psi @ w equals exact evaluation of every member
    r = phi @ np.array([0.4, -0.7])
    np.testing.assert_allclose(lib.q(np.array([0.4, -0.7])), lib.evaluate(r), atol=1e-9)
    # a goal reward outside the span (state 17, in the first room) is not solved by any member
    r = np.eye(P.shape[0])[17]
    V_goal = optimal_policy(P, r, 0.95)[1][env.start]
    assert V_goal - lib.evaluate(r)[:, env.start].max() > 0.5 * V_goal


def test_library_with_uniform_mu_is_optimal_everywhere():
    P = GridWorld("open_room").transition_matrix()
    _, phi = laplacian_eigenvectors(P, 2, drop_first=True)
    lib = build_library(P, phi, GAMMA)
    rng = np.random.default_rng(7)
    for _ in range(10):
        w = rng.normal(size=2)
        V_star = optimal_policy(P, phi @ w, GAMMA)[1]
        V_gpi = policy_evaluation(P, phi @ w, lib.gpi(w), GAMMA)
        assert np.max(V_star - V_gpi) < 1e-6


def test_bounds_hold_and_are_ordered(room):
    _, P, phi = room
    rng = np.random.default_rng(3)
    for _ in range(5):
        r = (rng.random(P.shape[0]) < 0.1).astype(float) - 0.3 * (rng.random(P.shape[0]) < 0.1)
        proj = project_reward(phi, r)
        pi_w = optimal_policy(P, proj.reward, GAMMA)[0]
        gap = value_gap(P, r, pi_w, GAMMA).max()
        b = zero_shot_bounds(P, r, proj.reward, GAMMA)
        assert gap >= -1e-9
        assert gap <= b["residual_value"] + 1e-9 <= b["span"] + 2e-9 <= b["standard"] + 3e-9
    # in span: every bound collapses to 0
    b = zero_shot_bounds(P, phi @ np.ones(3), phi @ np.ones(3), GAMMA)
    assert max(b.values()) < 1e-9


def test_behaviours_from_library_follow_gpi(room):
    _, P, phi = room
    lib = build_library(P, phi[:, :2], GAMMA)
    keys = np.array([[1.0, 0.0], [0.0, -1.0]])
    b = Behaviours.keyboard(lib, keys)
    assert len(b) == 2
    assert not b.terminate.any()
    np.testing.assert_array_equal(b.actions[1], lib.gpi(keys[1]))
    both = b + Behaviours.primitives(P.shape[0], 4)
    assert len(both) == 6
    assert both.terminate[2:].all()
    with pytest.raises(ValueError, match="keys must have shape"):
        Behaviours.keyboard(lib, np.ones((2, 3)))


def test_mdp_bad_inputs():
    P = GridWorld("open_room").transition_matrix()
    S = P.shape[0]
    with pytest.raises(ValueError, match="one value per state"):
        value_iteration(P, np.zeros(S + 1), GAMMA)
    with pytest.raises(ValueError, match="shape"):
        value_iteration(P[:, :, :-1], np.zeros(S), GAMMA)
    with pytest.raises(ValueError, match="gamma"):
        policy_evaluation(P, np.zeros(S), np.zeros(S, int), 1.0)
    with pytest.raises(ValueError, match="actions must be in"):
        policy_matrix(np.full(S, 4), 4)
    with pytest.raises(ValueError, match="mu must be a distribution"):
        build_library(P, np.ones((S, 1)), GAMMA, mu=np.ones(S))
    with pytest.raises(ValueError, match="rows"):
        build_library(P, np.ones((S - 1, 1)), GAMMA)
