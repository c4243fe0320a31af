"""Tabular finite-horizon MDPs with batched rollouts of many agents, and the hard instances.

``TabularMDP`` holds time-inhomogeneous dynamics ``P[h, s, a, s']`` for ``h = 0 .. H-1`` and an
initial distribution. A policy for ``N`` agents is either deterministic, an integer array
``(N, H, S)`` (action at step ``h`` in state ``s``), or stochastic, ``(N, H, S, A)``. ``rollout``
simulates all agents of a phase at once: one vectorised draw per step, no loop over agents.
Rewards are ``r[h, s, a]`` for ``h < H`` plus an optional terminal ``r_H[s]`` on the last state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Trajectories:
    """States ``(N, H + 1)`` and actions ``(N, H)`` of ``N`` episodes; never rewards."""

    states: np.ndarray
    actions: np.ndarray

    def __len__(self) -> int:
        return int(self.states.shape[0])


def _categorical(cum: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row of the cumulative probabilities ``cum`` ``(N, K)``."""
    u = rng.random(cum.shape[0])[:, None]
    return np.minimum((u > cum).sum(1), cum.shape[1] - 1)


@dataclass(frozen=True)
class TabularMDP:
    """``P`` ``(H, S, A, S)`` and ``init`` ``(S,)``; checked to be probability distributions."""

    P: np.ndarray
    init: np.ndarray

    def __post_init__(self) -> None:
        P = np.asarray(self.P, dtype=float)
        init = np.asarray(self.init, dtype=float)
        if P.ndim != 4 or P.shape[1] != P.shape[3]:
            raise ValueError(f"P must be (H, S, A, S), got shape {P.shape}")
        if P.shape[0] < 1:
            raise ValueError("the horizon H must be >= 1")
        if (P < 0).any() or not np.allclose(P.sum(-1), 1.0, atol=1e-8):
            raise ValueError("every P[h, s, a, :] must be a probability distribution (sum to 1)")
        if init.shape != (P.shape[1],) or (init < 0).any() or not np.isclose(init.sum(), 1.0):
            raise ValueError(f"init must be a distribution over the {P.shape[1]} states")
        object.__setattr__(self, "P", P)
        object.__setattr__(self, "init", init)

    @property
    def H(self) -> int:
        return int(self.P.shape[0])

    @property
    def S(self) -> int:
        return int(self.P.shape[1])

    @property
    def A(self) -> int:
        return int(self.P.shape[2])

    def check_policy(self, policy: np.ndarray) -> np.ndarray:
        pol = np.asarray(policy)
        H, S, A = self.H, self.S, self.A
        if pol.ndim == 3 and pol.shape[1:] == (H, S):
            if not np.issubdtype(pol.dtype, np.integer) or pol.min() < 0 or pol.max() >= A:
                raise ValueError(f"deterministic policies must hold integer actions in [0, {A})")
            return pol
        if pol.ndim == 4 and pol.shape[1:] == (H, S, A):
            if (pol < 0).any() or not np.allclose(pol.sum(-1), 1.0, atol=1e-8):
                raise ValueError("stochastic policies must be distributions over actions")
            return pol
        raise ValueError(f"policies must be (N, {H}, {S}) integers or (N, {H}, {S}, {A}) floats; "
                         f"got shape {pol.shape}")  # fmt: skip

    def rollout(
        self, policy: np.ndarray, rng: np.random.Generator | int | None = None
    ) -> Trajectories:
        """One episode for each of the ``N`` agents of ``policy``, simulated together."""
        pol = self.check_policy(policy)
        rng = np.random.default_rng(rng)
        n = pol.shape[0]
        states = np.empty((n, self.H + 1), dtype=np.int64)
        actions = np.empty((n, self.H), dtype=np.int64)
        states[:, 0] = _categorical(np.broadcast_to(np.cumsum(self.init), (n, self.S)), rng)
        idx = np.arange(n)
        cumP = np.cumsum(self.P, axis=-1)
        stoch = pol.ndim == 4
        for h in range(self.H):
            s = states[:, h]
            a = _categorical(np.cumsum(pol[idx, h, s], axis=-1), rng) if stoch else pol[idx, h, s]
            actions[:, h] = a
            states[:, h + 1] = _categorical(cumP[h, s, a], rng)
        return Trajectories(states, actions)

    def occupancy(self, policy: np.ndarray) -> np.ndarray:
        """Exact state-visit distribution ``(H + 1, S)`` of one policy ``(H, S)`` or ``(H, S, A)``."""
        pi = _as_stochastic(np.asarray(policy)[None], self.A)[0]
        d = np.empty((self.H + 1, self.S))
        d[0] = self.init
        for h in range(self.H):
            d[h + 1] = np.einsum("s,sa,sat->t", d[h], pi[h], self.P[h])
        return d


def _as_stochastic(pol: np.ndarray, A: int) -> np.ndarray:
    if pol.ndim == 4:
        return pol.astype(float)
    return np.eye(A)[pol]


def combination_lock(H: int, A: int, seed: int = 0, deterministic: bool = False) -> TabularMDP:
    """The lower-bound instance: live state 0, dead state 1 (absorbing), prize state 2 (absorbing).

    At steps ``h < H - 1`` the secret action ``a*_h`` keeps the agent alive, any other kills it. At
    the last step every action from the live state leads to the prize with its own probability
    ``q_a`` (drawn from the seed; in ``{0, 1}`` when ``deterministic``) and otherwise to death, so
    the last layer's dynamics must be learned as well. ``secret`` is recoverable from ``P``.
    """
    if H < 1 or A < 2:
        raise ValueError("need H >= 1 and A >= 2")
    rng = np.random.default_rng(seed)
    P = np.zeros((H, 3, A, 3))
    P[:, 1, :, 1] = 1.0
    P[:, 2, :, 2] = 1.0
    secret = rng.integers(A, size=H)
    P[: H - 1, 0, :, 1] = 1.0
    P[np.arange(H - 1), 0, secret[: H - 1], 1] = 0.0
    P[np.arange(H - 1), 0, secret[: H - 1], 0] = 1.0
    q = (np.arange(A) == secret[-1]).astype(float) if deterministic else rng.uniform(0.1, 0.9, A)
    P[H - 1, 0, :, 2] = q
    P[H - 1, 0, :, 1] = 1 - q
    return TabularMDP(P, np.array([1.0, 0.0, 0.0]))


def noisy_lock(H: int, A: int, seed: int = 0, stay: float = 0.7) -> TabularMDP:
    """Two live states per layer (0, 1), dead 2, prize 3. Each live state has its own secret action;
    the right action moves to live state ``s`` w.p. ``stay`` and to the other w.p. ``1 - stay``."""
    if H < 1 or A < 2 or not 0 <= stay <= 1:
        raise ValueError("need H >= 1, A >= 2 and 0 <= stay <= 1")
    rng = np.random.default_rng(seed)
    P = np.zeros((H, 4, A, 4))
    P[:, 2, :, 2] = 1.0
    P[:, 3, :, 3] = 1.0
    secret = rng.integers(A, size=(H, 2))
    for s in (0, 1):
        P[: H - 1, s, :, 2] = 1.0
        hs = np.arange(H - 1)
        P[hs, s, secret[: H - 1, s], 2] = 0.0
        P[hs, s, secret[: H - 1, s], s] = stay
        P[hs, s, secret[: H - 1, s], 1 - s] = 1 - stay
        q = rng.uniform(0.1, 0.9, A)
        P[H - 1, s, :, 3] = q
        P[H - 1, s, :, 2] = 1 - q
    return TabularMDP(P, np.array([0.5, 0.5, 0.0, 0.0]))


def double_chain(n_states: int, H: int, slip: float = 0.1) -> TabularMDP:
    """A chain of ``n_states`` started in the middle; action 0 moves left, 1 right, each slipping
    to the opposite direction w.p. ``slip``; the ends reflect. Time-homogeneous."""
    if n_states < 2 or H < 1 or not 0 <= slip <= 1:
        raise ValueError("need n_states >= 2, H >= 1 and 0 <= slip <= 1")
    s = np.arange(n_states)
    left, right = np.maximum(s - 1, 0), np.minimum(s + 1, n_states - 1)
    P1 = np.zeros((n_states, 2, n_states))
    P1[s, 0, left] += 1 - slip
    P1[s, 0, right] += slip
    P1[s, 1, right] += 1 - slip
    P1[s, 1, left] += slip
    init = np.zeros(n_states)
    init[n_states // 2] = 1.0
    return TabularMDP(np.broadcast_to(P1, (H, *P1.shape)).copy(), init)


def random_layered(S: int, A: int, H: int, alpha: float = 1.0, seed: int = 0) -> TabularMDP:
    """Dirichlet(alpha) transitions for every ``(h, s, a)``, uniform start (a sanity case only)."""
    if min(S, A, H) < 1 or alpha <= 0:
        raise ValueError("need S, A, H >= 1 and alpha > 0")
    rng = np.random.default_rng(seed)
    return TabularMDP(rng.dirichlet(np.full(S, alpha), size=(H, S, A)), np.full(S, 1.0 / S))
