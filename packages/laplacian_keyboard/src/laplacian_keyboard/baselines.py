"""The methods the Laplacian Keyboard is compared against, behind the same interfaces.

* zero-shot projection and GPI over the library: :meth:`LaplacianKeyboard.zero_shot` and
  :func:`gpi_over_policies` (members evaluated exactly on the true reward);
* eigenoptions (Machado, Bellemare & Bowling 2017): :func:`eigenoptions`, usable as GPI members or as
  options next to primitive actions in :class:`~laplacian_keyboard.agents.SMDPQLearning`;
* the Option Keyboard (Barreto et al. 2019) with privileged one-hot state features:
  :func:`cumulant_library` + :meth:`Behaviours.keyboard`;
* flat RL from scratch: :func:`q_learning` (tabular) and :class:`DQN` (an MLP on observation features).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from laplacian_keyboard.agents import LearningCurve, SMDPQLearning, check_schedule, evaluate
from laplacian_keyboard.allo import mlp, seeded
from laplacian_keyboard.keyboard import BehaviourLibrary, Behaviours
from laplacian_keyboard.mdp import (
    check_model,
    gpi_policy,
    greedy,
    optimal_policy,
    policy_evaluation,
    q_from_v,
    state_successor_features,
    successor_features,
)

__all__ = [
    "DQN",
    "cumulant_library",
    "eigenoptions",
    "gpi_over_policies",
    "q_learning",
]


def q_learning(
    n_states: int,
    n_actions: int,
    alpha: float = 0.1,
    epsilon: float = 0.1,
    gamma: float = 0.95,
    seed: int = 0,
) -> SMDPQLearning:
    """Flat tabular Q-learning: SMDP Q-learning over one-step primitive behaviours."""
    return SMDPQLearning(Behaviours.primitives(n_states, n_actions), 1, alpha, epsilon, gamma, seed)


def gpi_over_policies(
    P: np.ndarray,
    r: np.ndarray,
    policies: np.ndarray,
    gamma: float,
    terminal: np.ndarray | None = None,
) -> np.ndarray:
    """GPI policy ``(S,)`` over deterministic ``policies (n, S)``, each evaluated exactly on ``r``."""
    qs = np.stack(
        [
            q_from_v(P, r, policy_evaluation(P, r, pi, gamma, terminal), gamma, terminal)
            for pi in policies
        ]
    )
    return gpi_policy(qs)


def eigenoptions(
    P: np.ndarray, phi: np.ndarray, gamma: float = 0.95, both_signs: bool = True, tol: float = 1e-8
) -> Behaviours:
    """One option per eigenvector (and its negation): the policy maximising the intrinsic reward
    ``e(s') - e(s)`` with a stop action worth 0; it terminates where no action has positive value.

    Args:
        P: ``(S, A, S)``; phi: ``(S, d)`` eigenvectors (columns); gamma: the options' discount.
    """
    P = check_model(P, gamma)
    phi = np.asarray(phi, float)
    if phi.ndim != 2 or phi.shape[0] != P.shape[0]:
        raise ValueError(f"phi must have shape ({P.shape[0]}, d); got {phi.shape}")
    columns = [phi[:, i] for i in range(phi.shape[1])]
    if both_signs:
        columns += [-c for c in columns]
    actions, stops, names = [], [], []
    for i, e in enumerate(columns):
        V = np.zeros(P.shape[0])
        for _ in range(100_000):
            Q = P @ (e + gamma * V) - e[:, None]
            V_new = np.maximum(Q.max(axis=1), 0.0)
            if np.max(np.abs(V_new - V)) < 1e-12:
                break
            V = V_new
        actions.append(greedy(Q, axis=1))
        stops.append(Q.max(axis=1) <= tol)
        sign = "+" if i < phi.shape[1] else "-"
        names.append(f"eig{sign}{i % phi.shape[1] + 1}")
    return Behaviours(np.asarray(actions), np.asarray(stops), tuple(names))


def cumulant_library(P: np.ndarray, phi: np.ndarray, gamma: float = 0.95) -> BehaviourLibrary:
    """The Option Keyboard's basis: one optimal policy per cumulant (column of ``phi``) and its SFs.

    With ``phi = np.eye(S)`` (one-hot, privileged state features) each basis policy goes to one state.
    """
    P = check_model(P, gamma)
    phi = np.asarray(phi, float)
    S, d = phi.shape
    pols = np.stack([optimal_policy(P, phi[:, i], gamma)[0] for i in range(d)])
    psi = np.stack([successor_features(P, phi, pi, gamma) for pi in pols])
    mu = np.full(S, 1.0 / S)
    points = np.stack([mu @ state_successor_features(P, phi, pi, gamma) for pi in pols])
    return BehaviourLibrary(
        P, phi, gamma, pols, psi, np.eye(d), points, mu, n_queries=d, affine_dim=d
    )


class DQN:
    """Deep Q-network (Mnih et al. 2015) with replay, a target network and Huber loss, for small envs.

    Args:
        features: maps an observation to a float vector (e.g. a gridworld's cell coordinates).
        n_features, n_actions: input and output sizes.
        epsilon decays linearly from 1 to ``epsilon_final`` over ``explore_fraction`` of training.
    """

    def __init__(
        self,
        features: Callable[[object], np.ndarray],
        n_features: int,
        n_actions: int,
        gamma: float = 0.95,
        hidden: int = 64,
        lr: float = 1e-3,
        buffer_size: int = 20_000,
        batch_size: int = 64,
        learning_starts: int = 500,
        train_every: int = 2,
        target_every: int = 250,
        epsilon_final: float = 0.05,
        explore_fraction: float = 0.3,
        seed: int = 0,
    ) -> None:
        self.features, self.n_features, self.n_actions, self.gamma = (
            features,
            n_features,
            n_actions,
            gamma,
        )
        self.batch_size, self.learning_starts, self.train_every = (
            batch_size,
            learning_starts,
            train_every,
        )
        self.target_every, self.epsilon_final, self.explore_fraction = (
            target_every,
            epsilon_final,
            explore_fraction,
        )
        for name, v in (
            ("n_features", n_features),
            ("n_actions", n_actions),
            ("hidden", hidden),
            ("buffer_size", buffer_size),
            ("batch_size", batch_size),
            ("train_every", train_every),
            ("target_every", target_every),
        ):
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
                raise ValueError(f"DQN {name} must be an int >= 1; got {v!r}")
        if (
            isinstance(learning_starts, bool)
            or not isinstance(learning_starts, int)
            or learning_starts < 0
        ):
            raise ValueError(f"DQN learning_starts must be an int >= 0; got {learning_starts!r}")
        if not 0 <= gamma < 1:
            raise ValueError(f"DQN gamma must be in [0, 1); got {gamma}")
        if not lr > 0:
            raise ValueError(f"DQN lr must be > 0; got {lr}")
        if not 0 <= epsilon_final <= 1:
            raise ValueError(f"DQN epsilon_final must be in [0, 1]; got {epsilon_final}")
        if not 0 < explore_fraction <= 1:
            raise ValueError(f"DQN explore_fraction must be in (0, 1]; got {explore_fraction}")
        self.buffer_size = buffer_size
        self.rng = np.random.default_rng(seed)
        with seeded(seed):
            self.q = mlp(n_features, n_actions, hidden)
        self.target = copy.deepcopy(self.q)
        self.opt = torch.optim.Adam(self.q.parameters(), lr=lr)

    def act(self, obs: object) -> int:
        with torch.no_grad():
            x = torch.as_tensor(self.features(obs), dtype=torch.float32)[None]
            return int(self.q(x).argmax(dim=1).item())

    def controller(self) -> Callable[[object], int]:
        return self.act

    def learn(
        self,
        env: gym.Env,
        total_steps: int,
        eval_every: int = 1000,
        eval_env: gym.Env | None = None,
        eval_episodes: int = 1,
        seed: int = 0,
        progress: bool = False,
        label: str = "DQN",
    ) -> LearningCurve:
        check_schedule(total_steps, eval_every, eval_episodes)
        eval_env = copy.deepcopy(env) if eval_env is None else eval_env
        n = self.buffer_size
        X = np.zeros((n, self.n_features), np.float32)
        X2 = np.zeros_like(X)
        A = np.zeros(n, np.int64)
        R = np.zeros(n, np.float32)
        D = np.zeros(n, np.float32)
        size = ptr = 0
        obs, _ = env.reset(seed=seed)
        x = self.features(obs)
        episode = 0
        steps_log, returns_log = [], []
        bar = tqdm(total=total_steps, desc=label, disable=not progress, leave=False)
        for t in range(1, total_steps + 1):
            eps = max(
                self.epsilon_final,
                1 - (1 - self.epsilon_final) * t / (self.explore_fraction * total_steps),
            )
            a = int(self.rng.integers(self.n_actions)) if self.rng.random() < eps else self.act(obs)
            obs, r, term, trunc, _ = env.step(a)
            x2 = self.features(obs)
            X[ptr], X2[ptr], A[ptr], R[ptr], D[ptr] = x, x2, a, r, float(term)
            ptr, size = (ptr + 1) % n, min(size + 1, n)
            x = x2
            if term or trunc:
                episode += 1
                obs, _ = env.reset(seed=seed + episode)
                x = self.features(obs)
            if t >= self.learning_starts and t % self.train_every == 0:
                idx = self.rng.integers(size, size=self.batch_size)
                xb, x2b = torch.from_numpy(X[idx]), torch.from_numpy(X2[idx])
                with torch.no_grad():
                    target = (
                        torch.from_numpy(R[idx])
                        + self.gamma
                        * (1 - torch.from_numpy(D[idx]))
                        * self.target(x2b).max(dim=1).values
                    )
                q = self.q(xb).gather(1, torch.from_numpy(A[idx])[:, None]).squeeze(1)
                loss = nn.functional.smooth_l1_loss(q, target)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
            if t % self.target_every == 0:
                self.target.load_state_dict(self.q.state_dict())
            if t % eval_every == 0:
                steps_log.append(t)
                returns_log.append(
                    evaluate(eval_env, self.act, self.gamma, eval_episodes, seed=10_000)
                )
            bar.update(1)
        bar.close()
        return LearningCurve(np.asarray(steps_log), np.asarray(returns_log), label)
