"""The phased protocol: agents get policies that depend only on earlier phases, run one episode
each, and report trajectories; the algorithm never sees rewards or the dynamics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .mdp import TabularMDP, Trajectories


class History:
    """What an algorithm may see: the trajectories of the finished phases, and the sizes."""

    def __init__(self, S: int, A: int, H: int, n_agents: int, n_phases: int) -> None:
        self.S, self.A, self.H = S, A, H
        self.n_agents, self.n_phases = n_agents, n_phases
        self.phases: list[Trajectories] = []
        self._counts = np.zeros((H, S, A, S))
        self._first = np.zeros(S)

    def add(self, tr: Trajectories) -> None:
        """Append one phase's trajectories (the protocol does this; counts update in place)."""
        h = np.broadcast_to(np.arange(self.H), tr.actions.shape)
        np.add.at(self._counts, (h, tr.states[:, :-1], tr.actions, tr.states[:, 1:]), 1.0)
        self._first += np.bincount(tr.states[:, 0], minlength=self.S)
        self.phases.append(tr)

    @property
    def rewards(self) -> None:
        raise PermissionError("reward-free exploration: the protocol never reveals rewards")

    @property
    def P(self) -> None:
        raise PermissionError(
            "the dynamics are unknown to the algorithm; estimate them from trajectories"
        )

    def first_states(self) -> np.ndarray:
        """How often each state started an episode so far ``(S,)``."""
        return self._first.copy()

    def counts(self) -> np.ndarray:
        """Transition counts ``(H, S, A, S)`` over every trajectory so far."""
        return self._counts.copy()

    def estimate(self, unvisited: str = "uniform") -> np.ndarray:
        """Empirical ``P_hat`` ``(H, S, A, S)``; unvisited pairs uniform or a self-loop."""
        return empirical_model(self.counts(), unvisited)


def empirical_model(counts: np.ndarray, unvisited: str = "uniform") -> np.ndarray:
    if unvisited not in ("uniform", "self_loop"):
        raise ValueError("unvisited must be 'uniform' or 'self_loop'")
    n = counts.sum(-1, keepdims=True)
    S = counts.shape[-1]
    if unvisited == "uniform":
        fill = np.full(counts.shape, 1.0 / S)
    else:
        fill = np.broadcast_to(np.eye(S)[None, :, None, :], counts.shape)
    return np.where(n > 0, counts / np.maximum(n, 1), fill)


class Explorer(Protocol):
    """An exploration algorithm: ``policies(phase, history)`` for the coming phase (at most
    ``history.n_agents`` of them), ``model(history)`` at the end."""

    name: str

    def policies(self, phase: int, history: History) -> np.ndarray: ...

    def model(self, history: History) -> np.ndarray: ...


@dataclass
class Run:
    """The outcome: the estimate, the history, and exact counts of agents and phases used."""

    P_hat: np.ndarray
    history: History
    trajectories: int = 0
    phases_used: int = 0
    agents_per_phase: list[int] = field(default_factory=list)


def run(algorithm: Explorer, mdp: TabularMDP, n_agents: int, n_phases: int,
        seed: int | None = 0) -> Run:  # fmt: skip
    """Run ``algorithm`` for ``n_phases`` phases of at most ``n_agents`` agents on ``mdp``."""
    for field_, v in (("n_agents", n_agents), ("n_phases", n_phases)):
        if not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"need an integer {field_} >= 1, got {v!r}")
    rng = np.random.default_rng(seed)
    hist = History(mdp.S, mdp.A, mdp.H, n_agents, n_phases)
    out = Run(np.empty(0), hist)
    for k in range(n_phases):
        pol = np.asarray(algorithm.policies(k, hist))
        if pol.shape[0] > n_agents:
            raise ValueError(f"{algorithm.name} asked for {pol.shape[0]} agents in phase {k}; "
                             f"only {n_agents} are allowed")  # fmt: skip
        if pol.shape[0] == 0:
            break
        hist.add(mdp.rollout(pol, rng))
        out.trajectories += pol.shape[0]
        out.phases_used += 1
        out.agents_per_phase.append(int(pol.shape[0]))
    out.P_hat = algorithm.model(hist)
    return out
