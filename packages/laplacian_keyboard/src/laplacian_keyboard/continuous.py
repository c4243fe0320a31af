"""The keyboard beyond tabular states: learned Laplacian cumulants, a USFA and a meta-policy over
continuous weight vectors.

Pipeline on any environment with a ``Box`` observation and ``Discrete`` actions (e.g.
:class:`~laplacian_keyboard.envs.PointMaze`):

1. :func:`sample_transitions` collects reward-free transitions under a uniform random policy;
2. :func:`~laplacian_keyboard.allo.train_allo` learns the eigenvector encoder ``phi``;
3. :func:`train_usfa` fits a universal successor feature approximator ``psi(s, w) (A, d)`` for the
   cumulants ``phi(s')`` and any unit ``w`` (Borsa et al. 2019), off-policy from the same data;
4. :class:`PPOKeyboard` learns a Gaussian meta-policy over ``w`` that is re-drawn every ``k`` steps;
   the low level acts greedily on ``psi(s, w) @ w``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from laplacian_keyboard.agents import LearningCurve, check_schedule, evaluate
from laplacian_keyboard.allo import LaplacianEncoder, mlp, seeded
from laplacian_keyboard.envs import PointMaze

__all__ = [
    "USFA",
    "PPOKeyboard",
    "Transitions",
    "discretise",
    "sample_transitions",
    "train_usfa",
    "usfa_controller",
]


@dataclass(frozen=True)
class Transitions:
    """Reward-free transitions: ``obs (n, k)``, ``actions (n,)``, ``next_obs (n, k)``."""

    obs: np.ndarray
    actions: np.ndarray
    next_obs: np.ndarray


def sample_transitions(
    env: gym.Env, n: int, episode_length: int = 50, seed: int = 0
) -> Transitions:
    """``n`` transitions under the uniform random policy, episodes of ``episode_length`` steps from
    uniformly random starts (``reset(options={"start": "random"})``) so the data covers the space."""
    if n < 1 or episode_length < 1:
        raise ValueError(f"n and episode_length must be >= 1; got {n}, {episode_length}")
    rng = np.random.default_rng(seed)
    obs, acts, nxt = [], [], []
    ep = 0
    while len(obs) < n:
        o, _ = env.reset(seed=seed * 100_003 + ep, options={"start": "random"})
        ep += 1
        for _ in range(episode_length):
            a = int(rng.integers(env.action_space.n))
            o2, _, term, trunc, _ = env.step(a)
            obs.append(np.asarray(o, float))
            acts.append(a)
            nxt.append(np.asarray(o2, float))
            o = o2
            if term or trunc or len(obs) >= n:
                break
    return Transitions(np.asarray(obs), np.asarray(acts), np.asarray(nxt))


class USFA(nn.Module):
    """``psi(s, w)``: ``(batch, n_obs) x (batch, d) -> (batch, n_actions, d)``."""

    def __init__(self, n_obs: int, d: int, n_actions: int, hidden: int = 256) -> None:
        super().__init__()
        self.d, self.n_actions = d, n_actions
        self.net = mlp(n_obs + d, n_actions * d, hidden)

    def forward(self, obs: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, w], dim=-1)).view(-1, self.n_actions, self.d)

    def q(self, obs: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """``(batch, n_actions)`` action values ``psi(s, w) @ w``."""
        return (self(obs, w) * w[:, None, :]).sum(-1)


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-8)


def train_usfa(
    data: Transitions,
    encoder: LaplacianEncoder,
    n_actions: int,
    gamma: float = 0.95,
    steps: int = 4000,
    batch_size: int = 256,
    lr: float = 3e-4,
    hidden: int = 256,
    tau: float = 0.01,
    seed: int = 0,
    progress: bool = False,
) -> tuple[USFA, np.ndarray]:
    """Fit a :class:`USFA` by TD on ``data`` with cumulants ``encoder(s')`` standardised to unit scale.

    Target: ``phi(s') + gamma psi_target(s', a*, w)`` with ``a* = argmax_a psi(s', a, w) @ w`` and
    ``w`` uniform on the unit sphere. Returns the network and the ``(d,)`` cumulant scale used
    (rewards to project must use the same scaled features).
    """
    gen = torch.Generator().manual_seed(seed)
    obs = torch.as_tensor(data.obs, dtype=torch.float32)
    nxt = torch.as_tensor(data.next_obs, dtype=torch.float32)
    act = torch.as_tensor(data.actions, dtype=torch.int64)
    with torch.no_grad():
        phi_next = encoder(nxt)
        scale = phi_next.std(dim=0).clamp_min(1e-8)
        phi_next = phi_next / scale
    d = phi_next.shape[1]
    with seeded(seed):
        net = USFA(obs.shape[1], d, n_actions, hidden)
    target = copy.deepcopy(net)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    n = len(obs)
    for _ in tqdm(range(steps), desc="USFA", disable=not progress, leave=False):
        i = torch.randint(n, (batch_size,), generator=gen)
        w = _unit(torch.randn(batch_size, d, generator=gen))
        with torch.no_grad():
            a_star = net.q(nxt[i], w).argmax(dim=1)
            psi_next = target(nxt[i], w)[torch.arange(batch_size), a_star]
            y = phi_next[i] + gamma * psi_next
        pred = net(obs[i], w)[torch.arange(batch_size), act[i]]
        loss = ((pred - y) ** 2).sum(dim=1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for p, pt in zip(net.parameters(), target.parameters(), strict=True):
                pt.mul_(1 - tau).add_(tau * p)
    net.eval()
    return net, scale.numpy().astype(float)


def usfa_controller(usfa: USFA, w: np.ndarray):
    """Greedy low-level policy ``obs -> argmax_a psi(obs, w) @ w`` for a fixed ``w``."""
    wt = _unit(torch.as_tensor(np.asarray(w), dtype=torch.float32)[None])

    def act(obs: object) -> int:
        with torch.no_grad():
            return int(
                usfa.q(torch.as_tensor(np.asarray(obs), dtype=torch.float32)[None], wt)
                .argmax()
                .item()
            )

    return act


class _Actor(nn.Module):
    def __init__(self, n_obs: int, d: int, hidden: int) -> None:
        super().__init__()
        self.mean = nn.Sequential(
            nn.Linear(n_obs, hidden),
            nn.Tanh(),
            nn.Linear(hidden, hidden),
            nn.Tanh(),
            nn.Linear(hidden, d),
        )
        self.log_std = nn.Parameter(torch.zeros(d))
        self.value = nn.Sequential(
            nn.Linear(n_obs, hidden),
            nn.Tanh(),
            nn.Linear(hidden, hidden),
            nn.Tanh(),
            nn.Linear(hidden, 1),
        )

    def dist(self, obs: torch.Tensor) -> torch.distributions.Normal:
        return torch.distributions.Normal(self.mean(obs), self.log_std.exp())


class PPOKeyboard:
    """Meta-policy over continuous weight vectors, trained with clipped PPO (Schulman et al. 2017).

    Every ``k`` steps the meta-policy draws ``w ~ N(mu(s), sigma)``; the low level follows
    ``argmax_a psi(s, a, w/|w|) @ (w/|w|)`` until the next draw. The meta-transition's reward is the
    discounted sum over those steps and its discount ``gamma^tau``.
    """

    def __init__(
        self,
        usfa: USFA,
        n_obs: int,
        k: int = 5,
        gamma: float = 0.95,
        lam: float = 0.95,
        lr: float = 3e-4,
        rollout: int = 128,
        epochs: int = 4,
        minibatch: int = 32,
        clip: float = 0.2,
        hidden: int = 64,
        seed: int = 0,
    ) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1; got {k}")
        self.usfa, self.k, self.gamma, self.lam = usfa, int(k), gamma, lam
        self.rollout, self.epochs, self.minibatch, self.clip = rollout, epochs, minibatch, clip
        with seeded(seed):
            self.actor = _Actor(n_obs, usfa.d, hidden)
        self.opt = torch.optim.Adam(self.actor.parameters(), lr=lr)
        self.gen = torch.Generator().manual_seed(seed)

    def _value(self, obs: object) -> float:
        with torch.no_grad():
            return float(self.actor.value(torch.as_tensor(np.asarray(obs, np.float32))[None])[0, 0])

    def _low_action(self, obs: np.ndarray, w: torch.Tensor) -> int:
        with torch.no_grad():
            return int(
                self.usfa.q(torch.as_tensor(obs, dtype=torch.float32)[None], _unit(w[None]))
                .argmax()
                .item()
            )

    def controller(self):
        """Greedy (mean ``w``) hierarchical policy for :func:`evaluate`."""
        state = {"left": 0, "w": None}

        def act(obs: object) -> int:
            o = np.asarray(obs, dtype=np.float32)
            if state["left"] <= 0:
                with torch.no_grad():
                    state["w"] = self.actor.mean(torch.as_tensor(o)[None])[0]
                state["left"] = self.k
            state["left"] -= 1
            return self._low_action(o, state["w"])

        act.reset = lambda: state.update(left=0)  # type: ignore[attr-defined]
        return act

    def learn(
        self,
        env: gym.Env,
        total_steps: int,
        eval_every: int = 2000,
        eval_env: gym.Env | None = None,
        eval_episodes: int = 3,
        seed: int = 0,
        progress: bool = False,
        label: str = "LK (PPO over w)",
    ) -> LearningCurve:
        check_schedule(total_steps, eval_every, eval_episodes)
        eval_env = copy.deepcopy(env) if eval_env is None else eval_env
        obs, _ = env.reset(seed=seed)
        steps, episode, next_eval = 0, 0, eval_every
        steps_log, returns_log = [], []
        bar = tqdm(total=total_steps, desc=label, disable=not progress, leave=False)
        while steps < total_steps:
            OBS, W, LP, R, G, V, END, TAIL = [], [], [], [], [], [], [], []
            for _ in range(self.rollout):
                o = torch.as_tensor(np.asarray(obs, dtype=np.float32))
                with torch.no_grad():
                    dist = self.actor.dist(o[None])
                    w = dist.mean[0] + dist.stddev[0] * torch.randn(self.usfa.d, generator=self.gen)
                    lp = dist.log_prob(w[None]).sum()
                    v = float(self.actor.value(o[None])[0, 0])
                ret, disc, term, trunc = 0.0, 1.0, False, False
                for _ in range(self.k):
                    obs, r, term, trunc, _ = env.step(
                        self._low_action(np.asarray(obs, np.float32), w)
                    )
                    ret += disc * r
                    disc *= self.gamma
                    steps += 1
                    if steps >= next_eval:
                        steps_log.append(steps)
                        returns_log.append(
                            evaluate(eval_env, self.controller(), self.gamma, eval_episodes, 10_000)
                        )
                        next_eval += eval_every
                    if term or trunc:
                        break
                OBS.append(o)
                W.append(w)
                LP.append(lp)
                R.append(ret)
                G.append(disc)
                V.append(v)
                END.append(term or trunc)
                TAIL.append(0.0 if term else self._value(obs))  # truncation bootstraps
                if term or trunc:
                    episode += 1
                    obs, _ = env.reset(seed=seed + episode)
                if steps >= total_steps:
                    break
            adv = np.zeros(len(R))
            gae = 0.0
            for t in reversed(range(len(R))):
                nv = TAIL[t] if END[t] or t == len(R) - 1 else V[t + 1]
                delta = R[t] + G[t] * nv - V[t]
                gae = delta + (0.0 if END[t] else G[t] * self.lam * gae)
                adv[t] = gae
            returns = torch.as_tensor(adv + np.asarray(V), dtype=torch.float32)
            adv_t = torch.as_tensor((adv - adv.mean()) / (adv.std() + 1e-8), dtype=torch.float32)
            O_t, W_t, LP_t = torch.stack(OBS), torch.stack(W), torch.stack(LP)
            for _ in range(self.epochs):
                perm = torch.randperm(len(R), generator=self.gen)
                for start in range(0, len(R), self.minibatch):
                    idx = perm[start : start + self.minibatch]
                    dist = self.actor.dist(O_t[idx])
                    ratio = (dist.log_prob(W_t[idx]).sum(-1) - LP_t[idx]).exp()
                    pg = -torch.min(
                        ratio * adv_t[idx], ratio.clamp(1 - self.clip, 1 + self.clip) * adv_t[idx]
                    ).mean()
                    vf = ((self.actor.value(O_t[idx]).squeeze(-1) - returns[idx]) ** 2).mean()
                    self.opt.zero_grad()
                    (pg + 0.5 * vf).backward()
                    self.opt.step()
            bar.update(min(steps, total_steps) - bar.n)
        bar.close()
        return LearningCurve(np.asarray(steps_log), np.asarray(returns_log), label)


def discretise(env: PointMaze, cells: int = 20) -> str:
    """A :class:`~laplacian_keyboard.envs.GridWorld` layout approximating ``env`` on a ``cells x cells``
    grid (a cell is a wall if its centre is blocked), to compare learned eigenvectors with exact ones.
    Row 0 is the top (y = 1)."""
    centres = (np.arange(cells) + 0.5) / cells
    xs, ys = np.meshgrid(centres, centres[::-1])
    blocked = env.blocked(np.stack([xs.ravel(), ys.ravel()], 1)).reshape(cells, cells)
    rows = ["#" * (cells + 2)] + [
        "#" + "".join("#" if b else "." for b in row) + "#" for row in blocked
    ]
    return "\n".join([*rows, "#" * (cells + 2)])
