"""The keyboard on continuous control (Gymnasium MuJoCo), and the flat TD3 baseline.

The pipeline (the paper's recipe as we read it: a basis learned from offline exploration data, a
USFA low level, a meta-policy over ``w``, TD3 as the flat learner):

1. :func:`collect_exploration`: reward-free transitions under a uniform random policy (the task's
   reward is stored only to project it on the basis, as relabelled offline datasets do);
2. :func:`laplacian_features`: an ALLO encoder (:func:`~laplacian_keyboard.allo.train_allo`) on the
   standardised observations, its constant first output dropped; ALLO orders its outputs, so the
   first ``d`` columns of one encoder are the basis of size ``d`` (:func:`random_features` is the
   same network untrained: the basis with the Laplacian switched off);
3. :func:`train_usfa_td3`: a continuous-action USFA, ``psi(s, a, w) (d,)`` and ``pi(s, w)``, fitted
   offline on the exploration data by TD3's rules (twin critics, target smoothing, delayed actor)
   for ``w`` uniform on the unit sphere; :func:`zero_shot_w` projects a reward on the basis;
4. :class:`KeyboardTD3`: the meta-policy, a TD3 agent whose action is ``w`` (re-chosen every ``k``
   steps, executed by ``pi(s, w / |w|)``), trained on SMDP transitions;
5. :class:`TD3`: Fujimoto, van Hoof & Meger (2018), with its published defaults.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from laplacian_keyboard.agents import LearningCurve, check_schedule, evaluate
from laplacian_keyboard.allo import ALLOConfig, mlp, seeded, train_allo

__all__ = [
    "TD3",
    "ContinuousUSFA",
    "ControlData",
    "FixedTargetReacher",
    "KeyboardTD3",
    "TD3Config",
    "collect_exploration",
    "laplacian_features",
    "random_features",
    "train_usfa_td3",
    "usfa_policy",
    "zero_shot_w",
]


@dataclass(frozen=True)
class TD3Config:
    """TD3's hyper-parameters; the defaults are Fujimoto et al.'s (``start_steps`` is the paper's
    1,000 for Reacher and the pendulums; its repository uses 25,000 for the larger tasks)."""

    hidden: int = 256
    lr: float = 3e-4
    batch_size: int = 256
    gamma: float = 0.99
    tau: float = 0.005
    policy_noise: float = 0.2
    noise_clip: float = 0.5
    policy_freq: int = 2
    expl_noise: float = 0.1
    start_steps: int = 1000
    buffer_size: int = 1_000_000

    def __post_init__(self) -> None:
        for name in ("hidden", "batch_size", "policy_freq", "buffer_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"TD3Config.{name} must be an int >= 1; got {v!r}")
        if isinstance(self.start_steps, bool) or not isinstance(self.start_steps, int):
            raise ValueError(f"TD3Config.start_steps must be an int >= 0; got {self.start_steps!r}")
        if self.start_steps < 0:
            raise ValueError(f"TD3Config.start_steps must be an int >= 0; got {self.start_steps}")
        if not self.lr > 0:
            raise ValueError(f"TD3Config.lr must be > 0; got {self.lr}")
        if not 0 <= self.gamma < 1:
            raise ValueError(f"TD3Config.gamma must be in [0, 1); got {self.gamma}")
        if not 0 < self.tau <= 1:
            raise ValueError(f"TD3Config.tau must be in (0, 1]; got {self.tau}")
        for name in ("policy_noise", "noise_clip", "expl_noise"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"TD3Config.{name} must be >= 0; got {getattr(self, name)}")


def _box(env: gym.Env) -> tuple[int, int, np.ndarray]:
    if not isinstance(env.observation_space, gym.spaces.Box) or not isinstance(
        env.action_space, gym.spaces.Box
    ):
        raise TypeError(
            f"need Box observations and actions; got {env.observation_space}, {env.action_space}"
        )
    high = np.asarray(env.action_space.high, np.float32)
    if not np.allclose(env.action_space.low, -high) or not np.all(np.isfinite(high)):
        raise ValueError(f"need a finite action box symmetric about 0; got {env.action_space}")
    return int(np.prod(env.observation_space.shape)), int(np.prod(env.action_space.shape)), high


def _soft(target: nn.Module, net: nn.Module, tau: float) -> None:
    with torch.no_grad():
        for pt, p in zip(target.parameters(), net.parameters(), strict=True):
            pt.mul_(1 - tau).add_(tau * p)


class _Replay:
    """A ring buffer of ``(obs, action, reward, discount, next_obs)``; ``discount`` is
    ``gamma^tau (1 - terminated)`` (0 at a true end, bootstraps on truncation)."""

    def __init__(self, n_obs: int, n_act: int, size: int) -> None:
        self.o = np.zeros((size, n_obs), np.float32)
        self.a = np.zeros((size, n_act), np.float32)
        self.r = np.zeros(size, np.float32)
        self.g = np.zeros(size, np.float32)
        self.o2 = np.zeros((size, n_obs), np.float32)
        self.size, self.ptr = 0, 0

    def add(self, o: np.ndarray, a: np.ndarray, r: float, g: float, o2: np.ndarray) -> None:
        i = self.ptr
        self.o[i], self.a[i], self.r[i], self.g[i], self.o2[i] = o, a, r, g, o2
        self.ptr = (i + 1) % len(self.o)
        self.size = min(self.size + 1, len(self.o))

    def sample(self, n: int, rng: np.random.Generator) -> tuple[torch.Tensor, ...]:
        i = rng.integers(self.size, size=n)
        return tuple(torch.from_numpy(x[i]) for x in (self.o, self.a, self.r, self.g, self.o2))


class TD3:
    """Twin Delayed DDPG on a ``Box``-action environment (actions scaled to the env's box).

    Args:
        n_obs, n_act: observation and action sizes; ``max_action``: the box's half-widths.
        config: :class:`TD3Config`; ``seed``: network initialisation, noise and replay sampling.
    """

    def __init__(
        self,
        n_obs: int,
        n_act: int,
        max_action: float | np.ndarray = 1.0,
        config: TD3Config = TD3Config(),
        seed: int = 0,
    ) -> None:
        if n_obs < 1 or n_act < 1:
            raise ValueError(f"n_obs and n_act must be >= 1; got {n_obs}, {n_act}")
        self.cfg, self.n_act = config, n_act
        self.max_action = np.broadcast_to(np.asarray(max_action, np.float32), (n_act,)).copy()
        h = config.hidden
        with seeded(seed):
            self.actor = nn.Sequential(mlp(n_obs, n_act, h), nn.Tanh())
            self.q1, self.q2 = mlp(n_obs + n_act, 1, h), mlp(n_obs + n_act, 1, h)
        self.actor_t = copy.deepcopy(self.actor)
        self.q1_t, self.q2_t = copy.deepcopy(self.q1), copy.deepcopy(self.q2)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=config.lr)
        self.critic_opt = torch.optim.Adam(
            [*self.q1.parameters(), *self.q2.parameters()], lr=config.lr
        )
        self.rng = np.random.default_rng(seed)
        self.gen = torch.Generator().manual_seed(seed)
        self.updates = 0

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic action in the env's units, ``(n_act,)``."""
        with torch.no_grad():
            u = self.actor(torch.as_tensor(np.asarray(obs, np.float32))[None])[0].numpy()
        return u * self.max_action

    def explore(self, obs: np.ndarray) -> np.ndarray:
        """``act(obs)`` plus Gaussian noise of ``expl_noise`` box half-widths, clipped to the box."""
        noise = self.rng.normal(0.0, self.cfg.expl_noise, self.n_act) * self.max_action
        return np.clip(self.act(obs) + noise, -self.max_action, self.max_action)

    def random_action(self) -> np.ndarray:
        return self.rng.uniform(-self.max_action, self.max_action).astype(np.float32)

    def update(self, batch: tuple[torch.Tensor, ...]) -> None:
        """One critic step (and, every ``policy_freq``, one actor step and the target updates) on
        ``(obs, action in env units, reward, discount, next_obs)``."""
        c = self.cfg
        o, a, r, g, o2 = batch
        scale = torch.from_numpy(self.max_action)
        a = a / scale
        with torch.no_grad():
            noise = (torch.randn(a.shape, generator=self.gen) * c.policy_noise).clamp(
                -c.noise_clip, c.noise_clip
            )
            a2 = (self.actor_t(o2) + noise).clamp(-1.0, 1.0)
            x2 = torch.cat([o2, a2], 1)
            q_next = torch.min(self.q1_t(x2), self.q2_t(x2)).squeeze(1)
            y = r + g * q_next
        x = torch.cat([o, a], 1)
        loss = ((self.q1(x).squeeze(1) - y) ** 2).mean() + ((self.q2(x).squeeze(1) - y) ** 2).mean()
        self.critic_opt.zero_grad()
        loss.backward()
        self.critic_opt.step()
        self.updates += 1
        if self.updates % c.policy_freq == 0:
            actor_loss = -self.q1(torch.cat([o, self.actor(o)], 1)).mean()
            self.actor_opt.zero_grad()
            actor_loss.backward()
            self.actor_opt.step()
            for t, n in ((self.actor_t, self.actor), (self.q1_t, self.q1), (self.q2_t, self.q2)):
                _soft(t, n, c.tau)

    def learn(
        self,
        env: gym.Env,
        total_steps: int,
        eval_every: int = 5000,
        eval_env: gym.Env | None = None,
        eval_episodes: int = 5,
        seed: int = 0,
        label: str = "TD3",
    ) -> LearningCurve:
        """Train for ``total_steps`` env steps (uniform random actions for the first
        ``start_steps``, one update per step after); every ``eval_every`` steps the deterministic
        policy's mean undiscounted return over ``eval_episodes`` episodes."""
        check_schedule(total_steps, eval_every, eval_episodes)
        _box(env)
        eval_env = copy.deepcopy(env) if eval_env is None else eval_env
        buf = _Replay(self.actor[0][0].in_features, self.n_act, self.cfg.buffer_size)
        obs, _ = env.reset(seed=seed)
        episode, steps_log, returns_log = 0, [], []
        for t in range(1, total_steps + 1):
            a = self.random_action() if t <= self.cfg.start_steps else self.explore(obs)
            obs2, r, term, trunc, _ = env.step(a)
            buf.add(obs, a, float(r), self.cfg.gamma * (1.0 - float(term)), obs2)
            obs = obs2
            if term or trunc:
                episode += 1
                obs, _ = env.reset(seed=seed + episode)
            if t > self.cfg.start_steps:
                self.update(buf.sample(self.cfg.batch_size, self.rng))
            if t % eval_every == 0:
                steps_log.append(t)
                returns_log.append(evaluate(eval_env, self.act, 1.0, eval_episodes, seed=10_000))
        return LearningCurve(np.asarray(steps_log), np.asarray(returns_log), label)


@dataclass(frozen=True)
class ControlData:
    """Exploration transitions: ``obs (n, o)``, ``actions (n, a)``, ``rewards (n,)`` (the task's,
    used only to project it), ``next_obs (n, o)``, ``terminated (n,)``."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray


def collect_exploration(env: gym.Env, n: int, seed: int = 0) -> ControlData:
    """``n`` transitions under the uniform random policy (episodes to the env's time limit)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1; got {n!r}")
    _box(env)
    env.action_space.seed(seed)
    obs_l, act_l, rew_l, nxt_l, term_l = [], [], [], [], []
    obs, _ = env.reset(seed=seed)
    episode = 0
    for _ in range(n):
        a = env.action_space.sample()
        obs2, r, term, trunc, _ = env.step(a)
        obs_l.append(obs)
        act_l.append(a)
        rew_l.append(r)
        nxt_l.append(obs2)
        term_l.append(term)
        obs = obs2
        if term or trunc:
            episode += 1
            obs, _ = env.reset(seed=seed + episode)
    return ControlData(
        np.asarray(obs_l, np.float32),
        np.asarray(act_l, np.float32),
        np.asarray(rew_l, np.float32),
        np.asarray(nxt_l, np.float32),
        np.asarray(term_l, bool),
    )


class _Basis(nn.Module):
    """``obs -> (batch, d)``: standardise, encode, drop the constant first output, keep ``d``,
    divide by each feature's spread on the data (unit-scale cumulants)."""

    def __init__(self, encoder: nn.Module, mean: np.ndarray, std: np.ndarray, d: int) -> None:
        super().__init__()
        self.encoder, self.d = encoder, d
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.as_tensor(std, dtype=torch.float32))
        self.register_buffer("scale", torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder((x - self.mean) / self.std)[:, 1 : self.d + 1] / self.scale

    def fit_scale(self, x: np.ndarray) -> _Basis:
        with torch.no_grad():
            self.scale.copy_(self(torch.as_tensor(x)).std(0).clamp_min(1e-6) * self.scale)
        return self

    def embed(self, x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return self(torch.as_tensor(np.asarray(x, np.float32))).numpy().astype(float)


def _standardise(data: ControlData) -> tuple[np.ndarray, np.ndarray]:
    return data.obs.mean(0), data.obs.std(0).clip(1e-6, None)


def laplacian_features(
    data: ControlData, d_max: int, config: ALLOConfig, seed: int = 0
) -> Callable[[int], _Basis]:
    """Train one ALLO encoder with ``d_max + 1`` outputs on ``data``; returns ``basis(d)``, the
    first ``d <= d_max`` non-constant eigenvector features as a module ``(batch, o) -> (batch, d)``."""
    if config.d != d_max + 1:
        raise ValueError(f"config.d must be d_max + 1 = {d_max + 1}; got {config.d}")
    mean, std = _standardise(data)
    enc, _ = train_allo((data.obs - mean) / std, (data.next_obs - mean) / std, config, seed=seed)
    return _prefixes(enc, mean, std, d_max, data)


def random_features(
    data: ControlData, d_max: int, hidden: int, seed: int = 0
) -> Callable[[int], _Basis]:
    """The same encoder untrained (seeded initialisation): a basis with the Laplacian switched off."""
    with seeded(seed):
        enc = mlp(data.obs.shape[1], d_max + 1, hidden)
    mean, std = _standardise(data)
    return _prefixes(enc, mean, std, d_max, data)


def _prefixes(
    enc: nn.Module, mean: np.ndarray, std: np.ndarray, d_max: int, data: ControlData
) -> Callable[[int], _Basis]:
    def basis(d: int) -> _Basis:
        if not 1 <= d <= d_max:
            raise ValueError(f"d must be in [1, {d_max}]; got {d}")
        return _Basis(enc, mean, std, d).fit_scale(data.next_obs).eval()

    return basis


def _unit(w: torch.Tensor) -> torch.Tensor:
    return w / w.norm(dim=-1, keepdim=True).clamp_min(1e-8)


class ContinuousUSFA(nn.Module):
    """A continuous-action USFA: actor ``pi(s, w) -> a in [-1, 1]^n_act`` and twin successor-feature
    critics ``psi_j(s, a, w) -> (d,)``; ``Q_w = psi @ w``."""

    def __init__(self, n_obs: int, n_act: int, d: int, hidden: int = 256) -> None:
        super().__init__()
        self.d, self.n_act = d, n_act
        self.actor = nn.Sequential(mlp(n_obs + d, n_act, hidden), nn.Tanh())
        self.psi1 = mlp(n_obs + n_act + d, d, hidden)
        self.psi2 = mlp(n_obs + n_act + d, d, hidden)

    def pi(self, obs: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return self.actor(torch.cat([obs, _unit(w)], -1))

    def psi(self, obs: torch.Tensor, a: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x = torch.cat([obs, a, _unit(w)], -1)
        return self.psi1(x), self.psi2(x)


def train_usfa_td3(
    data: ControlData,
    basis: nn.Module,
    d: int,
    max_action: np.ndarray,
    steps: int,
    config: TD3Config = TD3Config(),
    seed: int = 0,
) -> ContinuousUSFA:
    """Fit a :class:`ContinuousUSFA` offline on ``data`` with cumulants ``basis(s')``, TD3's rules:
    target ``phi(s') + gamma (1 - term) psi_j*(s', a~, w)`` with ``a~`` the target actor's action
    plus clipped noise and ``j*`` the critic with the smaller ``psi @ w``; actor step every
    ``policy_freq`` updates, maximising ``psi_1(s, pi(s, w), w) @ w``; ``w`` uniform on the sphere."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an int >= 1; got {steps!r}")
    c = config
    gen = torch.Generator().manual_seed(seed)
    o = torch.as_tensor(data.obs)
    o2 = torch.as_tensor(data.next_obs)
    a = torch.as_tensor(data.actions / np.asarray(max_action, np.float32))
    g = torch.as_tensor(c.gamma * (1.0 - data.terminated.astype(np.float32)))
    with torch.no_grad():
        phi2 = basis(o2)
    with seeded(seed):
        net = ContinuousUSFA(o.shape[1], a.shape[1], d, c.hidden)
    tgt = copy.deepcopy(net)
    opt_c = torch.optim.Adam([*net.psi1.parameters(), *net.psi2.parameters()], lr=c.lr)
    opt_a = torch.optim.Adam(net.actor.parameters(), lr=c.lr)
    n, B = len(o), c.batch_size
    for step in range(1, steps + 1):
        i = torch.randint(n, (B,), generator=gen)
        w = _unit(torch.randn(B, d, generator=gen))
        with torch.no_grad():
            noise = (torch.randn(B, a.shape[1], generator=gen) * c.policy_noise).clamp(
                -c.noise_clip, c.noise_clip
            )
            a2 = (tgt.pi(o2[i], w) + noise).clamp(-1.0, 1.0)
            p1, p2 = tgt.psi(o2[i], a2, w)
            pick = ((p1 * w).sum(-1) <= (p2 * w).sum(-1))[:, None]
            y = phi2[i] + g[i, None] * torch.where(pick, p1, p2)
        c1, c2 = net.psi(o[i], a[i], w)
        loss = ((c1 - y) ** 2).sum(-1).mean() + ((c2 - y) ** 2).sum(-1).mean()
        opt_c.zero_grad()
        loss.backward()
        opt_c.step()
        if step % c.policy_freq == 0:
            q = (net.psi(o[i], net.pi(o[i], w), w)[0] * w).sum(-1)
            opt_a.zero_grad()
            (-q.mean()).backward()
            opt_a.step()
            _soft(tgt, net, c.tau)
    return net.eval()


def zero_shot_w(data: ControlData, basis: nn.Module) -> np.ndarray:
    """Least-squares ``w (d,)`` with ``b + basis(s') @ w`` closest to the task's rewards on
    ``data``. The intercept ``b`` is the coefficient of the constant eigenvector that the basis
    drops; it is fitted and discarded, so the reward's mean does not leak into ``w`` through the
    learned features' non-zero means (a constant changes no policy on a task without termination,
    and the USFA's cumulants cannot carry it)."""
    with torch.no_grad():
        phi = basis(torch.as_tensor(data.next_obs)).numpy().astype(float)
    x = np.hstack([np.ones((len(phi), 1)), phi])
    coef, *_ = np.linalg.lstsq(x, data.rewards.astype(float), rcond=None)
    return coef[1:]


def usfa_policy(usfa: ContinuousUSFA, w: np.ndarray, max_action: np.ndarray):
    """The low level for a fixed ``w``: ``obs -> pi(obs, w / |w|)`` in the env's units."""
    wt = torch.as_tensor(np.asarray(w, np.float32))[None]

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return usfa.pi(torch.as_tensor(np.asarray(obs, np.float32))[None], wt)[0].numpy() * (
                max_action
            )

    return act


class KeyboardTD3:
    """The meta-policy over continuous ``w``: a :class:`TD3` agent whose action is ``w in [-1, 1]^d``,
    chosen every ``k`` env steps and executed by the USFA's ``pi(s, w / |w|)``; trained on SMDP
    transitions ``(s, w, sum_t gamma^t r_t, gamma^tau (1 - term), s')``. Its first
    ``start_steps`` env steps press uniformly random keys."""

    def __init__(
        self,
        usfa: ContinuousUSFA,
        n_obs: int,
        max_action: np.ndarray,
        k: int = 5,
        config: TD3Config = TD3Config(),
        seed: int = 0,
    ) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k (steps per key press) must be an int >= 1; got {k!r}")
        self.usfa, self.k, self.cfg = usfa, k, config
        self.max_action = np.asarray(max_action, np.float32)
        self.meta = TD3(n_obs, usfa.d, 1.0, config, seed)

    def _low(self, obs: np.ndarray, w: np.ndarray) -> np.ndarray:
        return usfa_policy(self.usfa, w, self.max_action)(obs)

    def controller(self):
        """The greedy hierarchical policy for :func:`~laplacian_keyboard.agents.evaluate`."""
        state = {"left": 0, "w": None}

        def act(obs: np.ndarray) -> np.ndarray:
            if state["left"] <= 0:
                state["w"], state["left"] = self.meta.act(obs), self.k
            state["left"] -= 1
            return self._low(obs, state["w"])

        act.reset = lambda: state.update(left=0)  # type: ignore[attr-defined]
        return act

    def learn(
        self,
        env: gym.Env,
        total_steps: int,
        eval_every: int = 5000,
        eval_env: gym.Env | None = None,
        eval_episodes: int = 5,
        seed: int = 0,
        label: str = "LK",
    ) -> LearningCurve:
        """Train for ``total_steps`` env steps; evaluation as :meth:`TD3.learn`."""
        check_schedule(total_steps, eval_every, eval_episodes)
        _box(env)
        eval_env = copy.deepcopy(env) if eval_env is None else eval_env
        n_obs = int(np.prod(env.observation_space.shape))
        buf = _Replay(n_obs, self.usfa.d, self.cfg.buffer_size)
        gamma = self.cfg.gamma
        obs, _ = env.reset(seed=seed)
        steps, episode, next_eval = 0, 0, eval_every
        steps_log, returns_log = [], []
        while steps < total_steps:
            o0 = obs
            w = (
                self.meta.random_action()
                if steps < self.cfg.start_steps
                else self.meta.explore(obs)
            )
            R, disc, term, trunc = 0.0, 1.0, False, False
            for _ in range(self.k):
                obs, r, term, trunc, _ = env.step(self._low(obs, w))
                R += disc * float(r)
                disc *= gamma
                steps += 1
                if steps >= next_eval:
                    steps_log.append(steps)
                    returns_log.append(
                        evaluate(eval_env, self.controller(), 1.0, eval_episodes, seed=10_000)
                    )
                    next_eval += eval_every
                if term or trunc or steps >= total_steps:
                    break
            buf.add(o0, w, R, 0.0 if term else disc, obs)
            if term or trunc:
                episode += 1
                obs, _ = env.reset(seed=seed + episode)
            if steps > self.cfg.start_steps:
                self.meta.update(buf.sample(self.cfg.batch_size, self.meta.rng))
        return LearningCurve(np.asarray(steps_log), np.asarray(returns_log), label)


class FixedTargetReacher(gym.Wrapper):
    """Gymnasium's ``Reacher-v5`` with the target held at one point (ours).

    Reacher draws a new target each episode and never moves it within one, so no transition links
    two targets: the state graph splits into one component per target, and its smallest Laplacian
    eigenvectors are functions of the target alone, useless for reaching it. With the target held
    fixed the distance term ``-|fingertip - target|`` is one function of the arm's state, as the
    paper's DeepMind-Control tasks' rewards are of theirs.

    ``control_weight`` scales Gymnasium's control cost ``-|a|^2`` (Gymnasium's default 1). At 0
    the reward is the distance term alone, a function of the state the step lands in, as DMC's
    rewards are (DMC's reacher: a tolerance on the same distance, no control cost); the continuous
    claim runs there (ours). With a control cost no state basis ``phi(s)`` can express the reward.
    """

    def __init__(
        self,
        target: tuple[float, float] = (-0.1, 0.1),
        control_weight: float = 1.0,
        **kwargs: object,
    ) -> None:
        if "reward_control_weight" in kwargs:
            raise ValueError("pass control_weight, not reward_control_weight")
        if (
            isinstance(control_weight, bool)
            or not isinstance(control_weight, (int, float))
            or not (np.isfinite(control_weight) and control_weight >= 0)
        ):
            raise ValueError(f"control_weight must be a finite number >= 0; got {control_weight!r}")
        t = np.asarray(target, float)
        if t.shape != (2,) or not np.linalg.norm(t) < 0.2:
            raise ValueError(f"target must be a point (x, y) within 0.2 of the base; got {target}")
        super().__init__(
            gym.make("Reacher-v5", reward_control_weight=float(control_weight), **kwargs)
        )
        self.target = t
        self.control_weight = float(control_weight)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        _, info = self.env.reset(seed=seed, options=options)
        u = self.env.unwrapped
        qpos, qvel = u.data.qpos.copy(), u.data.qvel.copy()
        qpos[-2:] = self.target
        u.set_state(qpos, qvel)
        return u._get_obs().astype(np.float64), info
