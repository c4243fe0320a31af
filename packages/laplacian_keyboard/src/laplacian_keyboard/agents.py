"""The Laplacian Keyboard agent and the tabular learner its meta-policy uses.

:class:`LaplacianKeyboard` pre-trains without reward (Laplacian eigenvectors + behaviour library)
and then, per task, either acts zero-shot (project the reward, act greedily on ``psi @ w``) or
learns a meta-policy that presses a key (a weight vector, executed by GPI over the library) every
``k`` steps. :class:`SMDPQLearning` is that meta-learner; with one-step primitive behaviours it is
plain Q-learning, the flat baseline.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from tqdm.auto import tqdm

from laplacian_keyboard.envs import transition_model
from laplacian_keyboard.keyboard import BehaviourLibrary, Behaviours, build_library, project_reward
from laplacian_keyboard.laplacian import laplacian_eigenvectors

__all__ = [
    "LaplacianKeyboard",
    "LearningCurve",
    "SMDPQLearning",
    "StationaryPolicy",
    "check_schedule",
    "evaluate",
    "key_combinations",
]

KINDS = ("transition", "combinatorial", "normalized", "random_walk")


@dataclass(frozen=True)
class LearningCurve:
    """Evaluation return after ``steps`` environment steps of training."""

    steps: np.ndarray
    returns: np.ndarray
    label: str = ""

    def steps_to(self, threshold: float) -> float:
        """First evaluated step count with ``return >= threshold`` (``inf`` if never)."""
        hit = np.flatnonzero(self.returns >= threshold)
        return float(self.steps[hit[0]]) if hit.size else float("inf")


class StationaryPolicy:
    """A deterministic tabular policy ``(S,)`` as a callable controller."""

    def __init__(self, policy: np.ndarray) -> None:
        self.policy = np.asarray(policy, dtype=int)

    def reset(self) -> None:
        pass

    def __call__(self, obs: int) -> int:
        return int(self.policy[int(obs)])


def evaluate(
    env: gym.Env,
    controller: Callable[[object], int],
    gamma: float,
    n_episodes: int = 1,
    seed: int = 0,
) -> float:
    """Mean discounted return of ``controller`` over ``n_episodes`` episodes (to termination or the
    environment's time limit). ``controller`` may have a ``reset()`` called at each episode start."""
    if (
        isinstance(n_episodes, bool)
        or not isinstance(n_episodes, int | np.integer)
        or n_episodes < 1
    ):
        raise ValueError(f"n_episodes must be an int >= 1; got {n_episodes!r}")
    total = 0.0
    for ep in range(n_episodes):
        obs, _ = env.reset(seed=seed + ep)
        if hasattr(controller, "reset"):
            controller.reset()
        disc, done = 1.0, False
        while not done:
            obs, r, term, trunc, _ = env.step(controller(obs))
            total += disc * r
            disc *= gamma
            done = term or trunc
    return total / n_episodes


def check_schedule(total_steps: int, eval_every: int, eval_episodes: int = 1) -> None:
    """Validate a ``learn`` call's step budget and evaluation schedule (``ValueError`` naming the
    field, its value and the allowed range)."""
    for name, value in (
        ("total_steps", total_steps),
        ("eval_every", eval_every),
        ("eval_episodes", eval_episodes),
    ):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{name} must be an int >= 1; got {value!r}")


def _argmax_random(q: np.ndarray, rng: np.random.Generator) -> int:
    best = np.flatnonzero(q >= q.max() - 1e-12)
    return int(best[0] if best.size == 1 else rng.choice(best))


class _HierarchicalController:
    """Greedy meta-policy: choose a behaviour, follow it for ``k`` steps or until it terminates."""

    def __init__(self, learner: SMDPQLearning) -> None:
        self.learner, self.key, self.left = learner, -1, 0

    def reset(self) -> None:
        self.key, self.left = -1, 0

    def __call__(self, obs: object) -> int:
        s = int(obs)
        b = self.learner.behaviours
        if self.left <= 0 or (
            self.key >= 0 and b.terminate[self.key, s] and self.left < self.learner.k
        ):
            self.key, self.left = int(np.argmax(self.learner.Q[s])), self.learner.k
        self.left -= 1
        return int(b.actions[self.key, s])


class SMDPQLearning:
    """SMDP Q-learning over behaviours (Sutton, Precup & Singh 1999) on a ``Discrete`` observation.

    At a decision point the agent picks behaviour ``j`` epsilon-greedily from ``Q[s]``, follows it for
    ``k`` steps (or until it terminates or the episode ends) and updates
    ``Q[s, j] += alpha (R + gamma^tau max_j' Q[s', j'] - Q[s, j])`` with ``R`` the discounted reward
    of the ``tau`` steps (no bootstrap on termination; time-limit truncation bootstraps).
    """

    def __init__(
        self,
        behaviours: Behaviours,
        k: int = 5,
        alpha: float = 0.1,
        epsilon: float = 0.1,
        gamma: float = 0.95,
        seed: int = 0,
    ) -> None:
        if k < 1:
            raise ValueError(f"k (steps per key press) must be >= 1; got {k}")
        if not 0 < alpha <= 1 or not 0 <= epsilon <= 1 or not 0 <= gamma < 1:
            raise ValueError(
                f"need 0 < alpha <= 1, 0 <= epsilon <= 1, 0 <= gamma < 1; got {alpha}, {epsilon}, {gamma}"
            )
        self.behaviours, self.k, self.alpha, self.epsilon, self.gamma = (
            behaviours,
            int(k),
            alpha,
            epsilon,
            gamma,
        )
        self.rng = np.random.default_rng(seed)
        self.Q = np.zeros((behaviours.actions.shape[1], len(behaviours)))

    def controller(self) -> _HierarchicalController:
        """The greedy hierarchical policy, for :func:`evaluate`."""
        return _HierarchicalController(self)

    def learn(
        self,
        env: gym.Env,
        total_steps: int,
        eval_every: int = 1000,
        eval_env: gym.Env | None = None,
        eval_episodes: int = 1,
        seed: int = 0,
        progress: bool = False,
        label: str = "",
    ) -> LearningCurve:
        """Train for ``total_steps`` environment steps; evaluate the greedy policy every ``eval_every``."""
        check_schedule(total_steps, eval_every, eval_episodes)
        if not isinstance(env.observation_space, gym.spaces.Discrete):
            raise TypeError(
                f"SMDPQLearning needs a Discrete observation space; got {env.observation_space}"
            )
        if env.observation_space.n != self.Q.shape[0]:
            raise ValueError(
                f"behaviours cover {self.Q.shape[0]} states but the env has {env.observation_space.n}"
            )
        eval_env = copy.deepcopy(env) if eval_env is None else eval_env
        b, Q, rng = self.behaviours, self.Q, self.rng
        steps_log, returns_log = [], []
        obs, _ = env.reset(seed=seed)
        s, steps, episode = int(obs), 0, 0
        bar = tqdm(total=total_steps, desc=label or "smdp-q", disable=not progress, leave=False)
        while steps < total_steps:
            j = (
                int(rng.integers(len(b)))
                if rng.random() < self.epsilon
                else _argmax_random(Q[s], rng)
            )
            s0, R, disc, term, trunc = s, 0.0, 1.0, False, False
            for _ in range(self.k):
                obs, r, term, trunc, _ = env.step(int(b.actions[j, s]))
                s = int(obs)
                R += disc * r
                disc *= self.gamma
                steps += 1
                if steps % eval_every == 0:
                    steps_log.append(steps)
                    returns_log.append(
                        evaluate(
                            eval_env, self.controller(), self.gamma, eval_episodes, seed=10_000
                        )
                    )
                if term or trunc or b.terminate[j, s] or steps >= total_steps:
                    break
            target = R if term else R + disc * Q[s].max()
            Q[s0, j] += self.alpha * (target - Q[s0, j])
            if term or trunc:
                episode += 1
                obs, _ = env.reset(seed=seed + episode)
                s = int(obs)
            bar.update(min(steps, total_steps) - bar.n)
        bar.close()
        return LearningCurve(np.asarray(steps_log), np.asarray(returns_log), label)


def key_combinations(d: int, values: tuple[float, ...] = (-1.0, 0.0, 1.0)) -> np.ndarray:
    """The Option Keyboard's keys: every ``w`` in ``values^d`` except 0, scaled to unit norm."""
    keys = np.array([w for w in itertools.product(values, repeat=d) if any(w)], dtype=float)
    return keys / np.linalg.norm(keys, axis=1, keepdims=True)


class LaplacianKeyboard:
    """Laplacian eigenvectors as cumulants, a behaviour library over their span, a meta-policy on top.

    Args:
        d: number of eigenvectors (the constant first one is skipped: it is the same for every policy).
        kind: Laplacian (see :func:`~laplacian_keyboard.laplacian.laplacian_matrix`).
        gamma: discount of the library and the meta-policy.
        k: environment steps per key press.
        keys: ``"combinations"`` (``{-1, 0, 1}^d`` minus 0), ``"library"`` (one key per library
            policy) or an explicit ``(K, d)`` array.
        alpha, epsilon: the meta-policy's SMDP Q-learning step size and exploration.
        start: distribution the library is optimal for (``"start"``: the env's start state,
            ``"uniform"``: every state).
        max_policies: cap on the library's size (see :func:`~laplacian_keyboard.keyboard.build_library`
            for the selection rule); a capped library has ``complete = False``.
        seed: the run's seed. Each :meth:`meta_learner` (one per task) gets its own seed, spawned
            from it with ``numpy.random.SeedSequence``: tasks never share a random stream, and the
            n-th task's seed is a function of ``seed`` and ``n`` alone.
    """

    def __init__(
        self,
        d: int = 3,
        kind: str = "transition",
        gamma: float = 0.95,
        k: int = 5,
        keys: str | np.ndarray = "combinations",
        alpha: float = 0.1,
        epsilon: float = 0.1,
        start: str = "start",
        max_policies: int = 1000,
        seed: int = 0,
    ) -> None:
        if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
            raise ValueError(f"d must be an int >= 1; got {d!r}")
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
        if not 0 <= gamma < 1:
            raise ValueError(f"gamma must be in [0, 1); got {gamma}")
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
            raise ValueError(f"k (steps per key press) must be an int >= 1; got {k!r}")
        if not 0 < alpha <= 1:
            raise ValueError(f"alpha must be in (0, 1]; got {alpha}")
        if not 0 <= epsilon <= 1:
            raise ValueError(f"epsilon must be in [0, 1]; got {epsilon}")
        if start not in ("start", "uniform"):
            raise ValueError(f"start must be 'start' or 'uniform'; got {start!r}")
        if isinstance(max_policies, bool) or not isinstance(max_policies, int) or max_policies < 1:
            raise ValueError(f"max_policies must be an int >= 1; got {max_policies!r}")
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed must be a non-negative int; got {seed!r}")
        self.d, self.kind, self.gamma, self.k, self.keys = d, kind, gamma, k, keys
        self.alpha, self.epsilon, self.start, self.seed = alpha, epsilon, start, seed
        self.max_policies = max_policies
        self._task_seeds = np.random.SeedSequence(int(seed))
        self.library: BehaviourLibrary | None = None

    def pretrain(self, env: gym.Env, P: np.ndarray | None = None) -> LaplacianKeyboard:
        """Reward-free phase: eigenvectors of the state graph and the behaviour library."""
        P = transition_model(env) if P is None else P
        self.eigenvalues, self.phi = laplacian_eigenvectors(
            P, self.d, kind=self.kind, drop_first=True
        )
        mu = None
        if self.start == "start":
            start = getattr(env.unwrapped, "start", None)
            if isinstance(start, int | np.integer):
                mu = np.zeros(P.shape[0])
                mu[int(start)] = 1.0
        self.library = build_library(P, self.phi, self.gamma, mu=mu, max_policies=self.max_policies)
        return self

    def _lib(self) -> BehaviourLibrary:
        if self.library is None:
            raise RuntimeError("call pretrain(env) first")
        return self.library

    def zero_shot(self, reward: np.ndarray) -> np.ndarray:
        """Project ``reward (S,)`` on the eigenvectors and act greedily on ``psi @ w`` (GPI)."""
        lib = self._lib()
        return lib.gpi(project_reward(lib.phi, reward).w)

    def behaviours(self) -> Behaviours:
        lib = self._lib()
        if isinstance(self.keys, str):
            if self.keys == "combinations":
                return Behaviours.keyboard(lib, key_combinations(self.d))
            if self.keys == "library":
                return Behaviours.keyboard(lib)
            raise ValueError(
                f"keys must be 'combinations', 'library' or a (K, d) array; got {self.keys!r}"
            )
        return Behaviours.keyboard(lib, self.keys)

    def task_seed(self) -> int:
        """The next task's seed: a fresh child of the keyboard's ``SeedSequence``."""
        (child,) = self._task_seeds.spawn(1)
        return int(child.generate_state(1)[0])

    def meta_learner(self, seed: int | None = None) -> SMDPQLearning:
        """A fresh meta-learner for one task; ``seed=None`` takes :meth:`task_seed`."""
        return SMDPQLearning(
            self.behaviours(),
            self.k,
            self.alpha,
            self.epsilon,
            self.gamma,
            self.task_seed() if seed is None else seed,
        )

    def learn(
        self, env: gym.Env, total_steps: int, seed: int | None = None, **kwargs: object
    ) -> tuple[SMDPQLearning, LearningCurve]:
        """Train a fresh meta-policy on ``env`` (its reward is the task); returns it and its curve.
        ``seed=None``: the task's own seed (:meth:`task_seed`) for the learner and the episodes."""
        seed = self.task_seed() if seed is None else seed
        learner = self.meta_learner(seed)
        kwargs.setdefault("seed", seed)
        return learner, learner.learn(env, total_steps, label="LK", **kwargs)
