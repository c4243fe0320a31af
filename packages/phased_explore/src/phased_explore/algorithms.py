"""Explorers under the phased protocol (inferred from prior work; see ``seeds/phased_explore.md``).

- ``LayerwiseExplorer``: the H-phase algorithm. Phase ``h`` learns layer ``h``: for each state of
  layer ``h`` a policy that reaches it with maximal *estimated* probability (DP on the layers learnt
  so far, indicator reward); states whose estimated reach is below ``threshold`` are dropped; agents
  are split over the remaining ``(s, a)`` pairs, each following its reaching policy and then
  playing ``a``. ``BlockExplorer`` is its rho-phase generalisation: blocks of ``m = ceil(H / rho)``
  layers; in block ``k`` agents reach the block's first layer, then play uniformly at random or
  enumerate the ``A^m`` open-loop action sequences inside the block.
- Baselines: ``UniformExplorer`` (non-adaptive: uniform actions in every phase), ``RFUCRL`` and
  ``RFExpress`` (:mod:`phased_explore.reward_free`, as published, sequential or batched),
  ``OracleExplorer`` (reaches states with the true P).

Every explorer needs its number of phases (H for the layerwise explorer, the number of blocks for
the block explorer) and raises ``ValueError`` in the first phase when the run has fewer: a model
learnt on part of the layers is never returned silently.
"""

from __future__ import annotations

import math

import numpy as np

from .mdp import TabularMDP
from .planning import first_max
from .protocol import History
from .reward_free import RFUCRL, RFExpress, least_visited_max

__all__ = [
    "RFUCRL",
    "BlockExplorer",
    "LayerwiseExplorer",
    "OracleExplorer",
    "RFExpress",
    "UniformExplorer",
    "least_visited_max",
    "reach_policies",
]


def reach_policies(P_hat: np.ndarray, init: np.ndarray, h: int) -> tuple[np.ndarray, np.ndarray]:
    """For every state ``s``, the policy ``(H, S)`` maximising the estimated probability of being in
    ``s`` at step ``h`` and that probability: ``(S, H, S)`` policies and ``(S,)`` reach values.
    Actions that reach equally well (within a relative 1e-12) go to the lowest index."""
    H, S, _A, _ = P_hat.shape
    if not 0 <= h <= H:
        raise ValueError(f"h must lie in [0, H={H}], got {h}")
    V = np.eye(S)  # V[target, state] at step h
    pols = np.zeros((S, H, S), dtype=np.int64)
    for k in range(h - 1, -1, -1):
        Q = np.einsum("sat,gt->gsa", P_hat[k], V)  # (target, s, a)
        pols[:, k] = first_max(Q, axis=2)
        V = Q.max(2)
    return pols, V @ init


def _uniform(n: int, H: int, S: int, A: int) -> np.ndarray:
    return np.full((n, H, S, A), 1.0 / A)


class LayerwiseExplorer:
    """The H-phase explorer (one phase per layer); ``split`` = ``"equal"`` or ``"inverse_reach"``."""

    name = "layerwise (rho = H)"

    def __init__(self, threshold: float = 0.0, split: str = "equal") -> None:
        if split not in ("equal", "inverse_reach"):
            raise ValueError(f"split must be 'equal' or 'inverse_reach', got {split!r}")
        if not 0.0 <= threshold <= 1.0:  # also rejects NaN
            raise ValueError(
                f"threshold (a reach probability) must lie in [0, 1], got {threshold!r}"
            )
        self.threshold, self.split = threshold, split
        self.init_hat: np.ndarray | None = None

    def _init(self, history: History) -> np.ndarray:
        if not history.phases:
            return np.full(history.S, 1.0 / history.S)
        s0 = np.concatenate([tr.states[:, 0] for tr in history.phases])
        return np.bincount(s0, minlength=history.S) / len(s0)

    def _targets(self, h: int, history: History, P_hat: np.ndarray):  # type: ignore[no-untyped-def]
        init = self._init(history)
        pols, reach = reach_policies(P_hat, init, h)
        if h == 0:
            reach = init if history.phases else np.ones(history.S)
        keep = np.flatnonzero(reach >= max(self.threshold, 1e-12))
        return pols, reach, keep

    def phases_needed(self, H: int) -> int:
        """Phases the explorer needs to learn every layer of a horizon-``H`` MDP."""
        return H

    def _check_phases(self, history: History) -> None:
        need = self.phases_needed(history.H)
        if history.n_phases < need:
            raise ValueError(
                f"{self.name} learns the H={history.H} layers in {need} phases; the run has "
                f"n_phases={history.n_phases}, so layers would stay unexplored (use n_phases >= "
                f"{need}, or fewer blocks with BlockExplorer(rho=n_phases))"
            )

    def policies(self, phase: int, history: History) -> np.ndarray:
        H, S, A, N = history.H, history.S, history.A, history.n_agents
        self._check_phases(history)
        if phase >= H:
            return np.zeros((0, H, S), dtype=np.int64)
        P_hat = history.estimate()
        pols, reach, keep = self._targets(phase, history, P_hat)
        if len(keep) == 0:
            keep = np.arange(S)
        pairs = np.array([(s, a) for s in keep for a in range(A)])
        w = (
            np.ones(len(pairs))
            if self.split == "equal"
            else 1.0 / np.maximum(reach[pairs[:, 0]], 1e-3)
        )
        cum = np.cumsum(w) / w.sum()
        assign = np.searchsorted(cum, (np.arange(N) + 0.5) / N)
        s_of, a_of = pairs[assign, 0], pairs[assign, 1]
        pol = pols[s_of].copy()  # (N, H, S) reaching policies
        pol[np.arange(N), phase, :] = a_of[:, None]  # play a at step h wherever the agent is
        if phase + 1 < H:  # after the probe: uniform, to spread information
            out = np.eye(A)[pol]
            out[:, phase + 1 :] = 1.0 / A
            return out
        return pol

    def model(self, history: History) -> np.ndarray:
        return history.estimate()


class BlockExplorer(LayerwiseExplorer):
    """The rho-phase explorer: blocks of ``m = ceil(H / rho)`` layers, one block per phase. Agents
    reach the block's first layer (split over its significant states) and then, inside the block,
    play uniformly at random (``inner="uniform"``) or open-loop action sequences enumerated in
    order (``inner="enumerate"``: agent ``i`` plays sequence ``i mod A^m``)."""

    def __init__(self, rho: int, inner: str = "uniform", threshold: float = 0.0) -> None:
        super().__init__(threshold)
        if not isinstance(rho, int | np.integer) or rho < 1:
            raise ValueError(f"rho must be an integer >= 1, got {rho!r}")
        if inner not in ("uniform", "enumerate"):
            raise ValueError(f"inner must be 'uniform' or 'enumerate', got {inner!r}")
        self.rho, self.inner = rho, inner
        self.name = f"block (rho = {rho}, {inner})"

    def blocks(self, H: int) -> list[tuple[int, int]]:
        m = math.ceil(H / self.rho)
        return [(b, min(b + m, H)) for b in range(0, H, m)]

    def phases_needed(self, H: int) -> int:
        return len(self.blocks(H))

    def policies(self, phase: int, history: History) -> np.ndarray:
        H, S, A, N = history.H, history.S, history.A, history.n_agents
        self._check_phases(history)
        blocks = self.blocks(H)
        if phase >= len(blocks):
            return np.zeros((0, H, S, A))
        lo, hi = blocks[phase]
        out = _uniform(N, H, S, A)
        keep = np.arange(S)
        if lo > 0:
            pols, _reach, keep = self._targets(lo, history, history.estimate())
            # the frontier: significant states of layer lo that still have an action never tried
            # at some layer of this block (states earlier agents already explored, e.g.
            # absorbing ones, are skipped)
            untried = (history.counts()[lo:hi].sum(-1) == 0).any(-1).any(0)
            frontier = keep[untried[keep]]
            keep = frontier if len(frontier) else (keep if len(keep) else np.arange(S))
            target = keep[np.arange(N) % len(keep)]
            out[:, :lo] = np.eye(A)[pols[target, :lo]]
        if self.inner == "enumerate":
            m = hi - lo
            rank = np.arange(N) // (len(keep) if lo > 0 else 1)  # sequence index per target
            seq = (rank[:, None] // A ** np.arange(m)[None]) % A  # base-A digits
            out[:, lo:hi] = np.eye(A)[seq][:, :, None, :]
        return out


class UniformExplorer:
    """Every agent plays uniformly at random in each of ``n_phases`` phases (default one: rho = 1).
    Nothing depends on earlier phases, so ``n_phases`` phases of ``N`` agents are identical in law
    to one phase of ``n_phases * N``: the phased protocol with adaptation switched off."""

    def __init__(self, n_phases: int = 1) -> None:
        if not isinstance(n_phases, int | np.integer) or n_phases < 1:
            raise ValueError(f"n_phases must be an integer >= 1, got {n_phases!r}")
        self.n_phases = n_phases
        self.name = f"uniform (rho = {n_phases})" if n_phases > 1 else "uniform (rho = 1)"

    def policies(self, phase: int, history: History) -> np.ndarray:
        if phase >= self.n_phases:
            return np.zeros((0, history.H, history.S, history.A))
        return _uniform(history.n_agents, history.H, history.S, history.A)

    def model(self, history: History) -> np.ndarray:
        return history.estimate()


class OracleExplorer(LayerwiseExplorer):
    """The layerwise explorer with reaching policies computed on the true dynamics (a ceiling that
    breaks the reward-free rules on purpose: it is told P)."""

    name = "oracle reach (rho = H)"

    def __init__(self, mdp: TabularMDP) -> None:
        super().__init__(0.0)
        self._mdp = mdp

    def _targets(self, h: int, history: History, P_hat: np.ndarray):  # type: ignore[no-untyped-def]
        pols, reach = reach_policies(self._mdp.P, self._mdp.init, h)
        if h == 0:
            reach = self._mdp.init
        return pols, reach, np.flatnonzero(reach > 1e-12)
