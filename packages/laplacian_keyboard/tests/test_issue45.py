"""Issue 45: validated learner settings, per-task seeds, a bounded behaviour library."""

import gymnasium as gym
import numpy as np
import pytest

from laplacian_keyboard import (
    DQN,
    GridWorld,
    LaplacianKeyboard,
    build_library,
    laplacian_eigenvectors,
    q_learning,
)


def _env():
    return gym.wrappers.TimeLimit(GridWorld("open_room"), 20)


@pytest.mark.parametrize("bad", [0, -5])
def test_eval_every_must_be_positive(bad):
    env = _env()
    with pytest.raises(ValueError, match="eval_every"):
        q_learning(env.unwrapped.n_states, 4).learn(env, 10, eval_every=bad)
    dqn = DQN(lambda o: np.array([float(o)]), 1, 4)
    with pytest.raises(ValueError, match="eval_every"):
        dqn.learn(env, 10, eval_every=bad)


@pytest.mark.parametrize(
    ("field", "value"),
    [("k", 0), ("gamma", 1.0), ("alpha", 0.0), ("epsilon", 1.5), ("kind", "nope"), ("d", 0)],
)
def test_keyboard_fields_are_validated(field, value):
    with pytest.raises(ValueError, match=field):
        LaplacianKeyboard(**{field: value})


def test_each_task_gets_its_own_seed():
    env = _env()
    lk = LaplacianKeyboard(d=2, seed=7).pretrain(env)
    a, b = lk.meta_learner(), lk.meta_learner()
    assert a.rng.integers(1 << 30) != b.rng.integers(1 << 30)  # tasks no longer share one stream
    # ... and the sequence of task seeds is a function of the keyboard's seed
    lk2 = LaplacianKeyboard(d=2, seed=7).pretrain(env)
    a2, b2 = lk2.meta_learner(), lk2.meta_learner()
    assert a2.rng.integers(1 << 30) == LaplacianKeyboard(d=2, seed=7).pretrain(
        env
    ).meta_learner().rng.integers(1 << 30)
    assert b2.rng.integers(1 << 30) != a2.rng.integers(1 << 30)
    # an explicit seed still pins one learner
    assert lk.meta_learner(seed=3).rng.integers(1 << 30) == lk.meta_learner(seed=3).rng.integers(
        1 << 30
    )


def test_library_is_bounded_deterministically():
    env = GridWorld("open_room")
    P = env.transition_matrix()
    _, phi = laplacian_eigenvectors(P, 2, drop_first=True)
    full = build_library(P, phi, 0.95)  # uniform mu: many policies
    assert full.complete
    cap = len(full) // 3
    small = build_library(P, phi, 0.95, max_policies=cap)
    assert len(small) == cap
    assert not small.complete
    again = build_library(P, phi, 0.95, max_policies=cap)
    np.testing.assert_array_equal(small.policies, again.policies)
    # the capped library is a subset of the complete one, found in the same order up to the cap
    full_set = {p.tobytes() for p in full.policies}
    assert all(p.tobytes() in full_set for p in small.policies)
    with pytest.raises(ValueError, match="max_policies"):
        build_library(P, phi, 0.95, max_policies=0)


# ---- continuous control: TD3, the USFA low level, the meta-policy over w


def test_td3_config_is_validated():
    from laplacian_keyboard.control import TD3Config

    for field, value in (("gamma", 1.0), ("tau", 0.0), ("policy_freq", 0), ("start_steps", -1)):
        with pytest.raises(ValueError, match=field):
            TD3Config(**{field: value})


def test_td3_delays_the_actor_and_smooths_the_target():
    import torch

    from laplacian_keyboard.control import TD3, TD3Config

    agent = TD3(3, 2, 2.0, TD3Config(hidden=16, policy_freq=3, batch_size=8), seed=0)
    rng = np.random.default_rng(0)
    batch = tuple(
        torch.as_tensor(x, dtype=torch.float32)
        for x in (
            rng.normal(size=(8, 3)),
            rng.uniform(-2, 2, (8, 2)),
            rng.normal(size=8),
            np.full(8, 0.99),
            rng.normal(size=(8, 3)),
        )
    )
    actor0 = [p.detach().clone() for p in agent.actor.parameters()]
    target0 = [p.detach().clone() for p in agent.q1_t.parameters()]
    for _ in range(2):
        agent.update(batch)
    assert all(torch.equal(a, b) for a, b in zip(actor0, agent.actor.parameters(), strict=True))
    assert all(torch.equal(a, b) for a, b in zip(target0, agent.q1_t.parameters(), strict=True))
    agent.update(batch)  # the third update moves the actor and (softly) the targets
    assert not all(torch.equal(a, b) for a, b in zip(actor0, agent.actor.parameters(), strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(target0, agent.q1_t.parameters(), strict=True))
    a = agent.act(np.zeros(3))
    assert a.shape == (2,)
    assert np.all(np.abs(a) <= 2.0)


def test_fixed_target_reacher_and_exploration_data():
    from laplacian_keyboard.control import FixedTargetReacher, collect_exploration

    env = FixedTargetReacher(target=(-0.1, 0.1))
    obs, _ = env.reset(seed=3)
    np.testing.assert_allclose(obs[4:6], [-0.1, 0.1])  # the target's coordinates
    data = collect_exploration(env, 120, seed=1)
    assert data.obs.shape == (120, 10)
    assert data.actions.shape == (120, 2)
    np.testing.assert_allclose(data.obs[:, 4:6], np.tile([-0.1, 0.1], (120, 1)), atol=1e-6)
    again = collect_exploration(FixedTargetReacher(target=(-0.1, 0.1)), 120, seed=1)
    np.testing.assert_array_equal(data.actions, again.actions)
    np.testing.assert_array_equal(data.next_obs, again.next_obs)
    with pytest.raises(ValueError, match="target"):
        FixedTargetReacher(target=(0.5, 0.5))
    from laplacian_keyboard.control import TD3

    agent = TD3(10, 2)
    with pytest.raises(ValueError, match="eval_every"):
        agent.learn(env, 10, eval_every=0)


def test_usfa_and_keyboard_run_end_to_end():
    from laplacian_keyboard.allo import ALLOConfig
    from laplacian_keyboard.control import (
        FixedTargetReacher,
        KeyboardTD3,
        TD3Config,
        collect_exploration,
        laplacian_features,
        random_features,
        train_usfa_td3,
        usfa_policy,
        zero_shot_w,
    )

    data = collect_exploration(FixedTargetReacher(), 300, seed=0)
    lap = laplacian_features(data, 3, ALLOConfig(d=4, steps=20, hidden=16), seed=0)
    rand = random_features(data, 3, 16, seed=0)
    for basis_of in (lap, rand):
        basis = basis_of(2)
        phi = basis.embed(data.next_obs)
        assert phi.shape == (300, 2)
        np.testing.assert_allclose(phi.std(0, ddof=1), 1.0, rtol=1e-4)  # unit-scale cumulants
        cfg = TD3Config(hidden=16, batch_size=32, start_steps=20)
        usfa = train_usfa_td3(data, basis, 2, np.ones(2), 10, cfg, seed=0)
        w = zero_shot_w(data, basis)
        assert w.shape == (2,)
        assert np.all(np.abs(usfa_policy(usfa, w, np.ones(2))(data.obs[0])) <= 1.0)
        curve = KeyboardTD3(usfa, 10, np.ones(2), 5, cfg, seed=0).learn(
            FixedTargetReacher(), 60, 30, FixedTargetReacher(), 1, seed=0
        )
        np.testing.assert_array_equal(curve.steps, [30, 60])
    with pytest.raises(ValueError, match="d must be"):
        lap(4)


@pytest.mark.parametrize(
    ("field", "value"),
    [("gamma", 1.0), ("lr", 0.0), ("batch_size", 0), ("explore_fraction", 0.0), ("train_every", 0)],
)
def test_dqn_fields_are_validated(field, value):
    with pytest.raises(ValueError, match=field):
        DQN(lambda o: np.array([float(o)]), 1, 4, **{field: value})


def test_evaluate_needs_an_episode():
    from laplacian_keyboard import StationaryPolicy, evaluate

    env = _env()
    with pytest.raises(ValueError, match="n_episodes"):
        evaluate(env, StationaryPolicy(np.zeros(env.unwrapped.n_states, int)), 0.9, 0)


def test_network_seeds_leave_the_global_torch_rng_alone():
    import torch

    from laplacian_keyboard.control import TD3

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    TD3(4, 2, seed=5)
    DQN(lambda o: np.array([float(o)]), 1, 4, seed=5)
    np.testing.assert_array_equal(torch.rand(3).numpy(), expected.numpy())
    a, b = TD3(4, 2, seed=5), TD3(4, 2, seed=5)  # ... while the seed still pins the networks
    assert all(
        torch.equal(p, q) for p, q in zip(a.actor.parameters(), b.actor.parameters(), strict=True)
    )


def test_zero_shot_w_ignores_a_constant_reward_offset():
    """The basis drops the constant eigenvector, so the projection must fit it (an intercept) and
    discard it: a reward ``phi(s') @ w + c`` projects to ``w`` for every offset ``c``. Fitting
    without the intercept let the reward's mean leak into ``w`` through the learned features'
    non-zero means (on Reacher's data, cosine 0.75 between the two fits)."""
    from dataclasses import replace

    from laplacian_keyboard.control import (
        FixedTargetReacher,
        collect_exploration,
        random_features,
        zero_shot_w,
    )

    data = collect_exploration(FixedTargetReacher(), 400, seed=2)
    basis = random_features(data, 3, 16, seed=1)(3)
    phi = basis.embed(data.next_obs)
    assert np.abs(phi.mean(0)).max() > 0.05  # the features are not centred on the data
    w_true = np.array([0.5, -1.0, 0.25])
    for c in (0.0, -0.9, 3.0):
        planted = replace(data, rewards=(phi @ w_true + c).astype(np.float32))
        np.testing.assert_allclose(zero_shot_w(planted, basis), w_true, atol=1e-4)


def test_control_diagnosis_separates_the_state_and_action_parts_of_the_reward():
    """The continuous claim's diagnosis: R^2 of the reward on ``[1, phi(s')]``, of its distance
    term (the control cost ``-|a|^2`` removed), and the behaviour's torque cost per step."""
    from dataclasses import replace

    from laplacian_keyboard.control import FixedTargetReacher, collect_exploration, random_features
    from laplacian_keyboard.reproduce.claims import control_claim
    from laplacian_keyboard.reproduce.run import _diagnose

    data = collect_exploration(FixedTargetReacher(), 400, seed=3)
    basis = random_features(data, 2, 16, seed=0)(2)
    phi = basis.embed(data.next_obs)
    ctrl = (data.actions.astype(float) ** 2).sum(1)
    planted = replace(data, rewards=(phi @ np.array([0.2, -0.1]) - 0.3 - ctrl).astype(np.float32))
    diag = _diagnose(planted, basis, lambda o: np.array([0.5, -0.5]))
    assert diag["distance-term R^2 on basis"] > 1 - 1e-6  # the state part is in the span
    assert diag["reward R^2 on basis"] < 0.5  # the torque cost (most of the variance) is not
    assert diag["zero-shot |a|^2 per step"] == pytest.approx(0.5)
    rows = [{**r, **diag} for r in _rows_for_note()]
    assert "pays |a|^2 = 0.50 per step" in control_claim(rows, 2).note


def _rows_for_note():
    return [
        {
            "LK mean over curve": 0.1 + 0.01 * i,
            "TD3 mean over curve": 0.5,
            "random-basis LK mean over curve": 0.1,
            "LK final": 0.1,
            "TD3 final": 0.8 + 0.01 * i,
        }
        for i in range(3)
    ]


def test_reacher_control_weight_is_a_validated_option_and_zero_gives_minus_distance():
    """The continuous claim's testbed (ours): a state-based reward, as the paper's DMC-style tasks.
    With the control-cost weight 0 the reward is exactly -|fingertip - target| of the state the
    step lands in (the observation's last two entries); with weight 1, Gymnasium's -|a|^2 too."""
    from laplacian_keyboard.control import FixedTargetReacher

    actions = np.random.default_rng(0).uniform(-1, 1, (30, 2))
    for weight in (0.0, 1.0):
        env = FixedTargetReacher(control_weight=weight)
        assert env.control_weight == weight
        env.reset(seed=4)
        for a in actions:
            obs, r, *_ = env.step(a)
            dist = np.linalg.norm(obs[-2:])  # fingertip - target (x, y); both at one height
            assert dist > 0
            expected = -dist - weight * float((a**2).sum())
            if weight == 0.0:
                assert r == -dist  # known answer, exactly
            else:
                assert r == pytest.approx(expected, rel=1e-12)
    for bad in (-0.1, float("nan"), float("inf"), "1"):
        with pytest.raises(ValueError, match="control_weight"):
            FixedTargetReacher(control_weight=bad)
    with pytest.raises(ValueError, match="reward_control_weight"):
        FixedTargetReacher(reward_control_weight=0.0)


def test_scale_control_weights_are_validated_and_the_claim_is_state_based():
    from dataclasses import replace

    from laplacian_keyboard.reproduce.scales import SCALES

    for name, s in SCALES.items():
        assert s.control_weight == 0.0, name  # the claim's testbed: a state-based reward
    assert 1.0 in SCALES["full"].limitation_weights  # the torque-cost Reacher, reported
    with pytest.raises(ValueError, match="control_weight"):
        replace(SCALES["smoke"], control_weight=-1.0)
    with pytest.raises(ValueError, match="limitation_weights"):
        replace(SCALES["smoke"], limitation_weights=(float("nan"),))


def test_control_diagnosis_removes_the_control_cost_at_its_weight():
    """``_diagnose`` removes ``control_weight |a|^2``: at weight 0 the reward is its distance term."""
    from dataclasses import replace

    from laplacian_keyboard.control import FixedTargetReacher, collect_exploration, random_features
    from laplacian_keyboard.reproduce.run import _diagnose

    data = collect_exploration(FixedTargetReacher(control_weight=0.0), 300, seed=5)
    basis = random_features(data, 2, 16, seed=0)(2)
    phi = basis.embed(data.next_obs)
    ctrl = (data.actions.astype(float) ** 2).sum(1)
    state_part = phi @ np.array([0.3, 0.1]) + 0.2
    for w in (0.0, 0.5):
        planted = replace(data, rewards=(state_part - w * ctrl).astype(np.float32))
        diag = _diagnose(planted, basis, lambda o: np.zeros(2), control_weight=w)
        assert diag["distance-term R^2 on basis"] > 1 - 1e-6
    assert diag["reward R^2 on basis"] < 0.9  # at w = 0.5 the torque cost is outside the span
