"""The combination-lock lower bound in closed form.

On ``combination_lock(H, A)``, a rho-phase explorer learns nothing about block ``k + 1`` until an
agent has survived block ``k``. With ``N`` agents playing independent uniform action sequences
inside a block of ``m`` layers, each survives it with probability ``A^-m``, so of order ``A^m``
agents are needed per block; with enumerated sequences exactly ``A^m``. The explorer succeeds when
every block is learned (see ``lock_success_probability``).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.stats import binom


def block_sizes(H: int, rho: int) -> list[int]:
    if H < 1 or rho < 1:
        raise ValueError("need H >= 1 and rho >= 1")
    m = math.ceil(H / rho)
    return [min(m, H - b) for b in range(0, H, m)]


def _cover(n: np.ndarray, A: int) -> np.ndarray:
    """P(n uniform draws over A categories hit every category), inclusion-exclusion."""
    i = np.arange(A + 1)
    terms = ((-1.0) ** i * np.array([math.comb(A, k) for k in i]))[None] * (
        np.clip(1 - i[None] / A, 0, None) ** n[:, None]
    )
    return terms.sum(1)


@lru_cache(maxsize=4096)
def _block_probability(m: int, A: int, n_agents: int) -> float:
    """Exact probability that ``n_agents`` alive agents with uniform actions learn a block of
    ``m`` lock layers: at every layer the survivors try all ``A`` actions."""
    alive = np.zeros(n_agents + 1)
    alive[n_agents] = 1.0  # distribution of the number alive at the block's current layer
    for _ in range(m):
        nxt = np.zeros_like(alive)
        for n in np.flatnonzero(alive > 1e-15):
            k = np.arange(1, n + 1)  # agents on the secret action (>= 1 needed)
            pk = binom.pmf(k, n, 1.0 / A)
            # the other n - k must cover the A - 1 wrong actions (uniform among them)
            cover = _cover(n - k, A - 1) if A > 1 else np.ones_like(k, dtype=float)
            nxt[k] += alive[n] * pk * cover
        alive = nxt
    return float(alive.sum())


def lock_success_probability(H: int, A: int, rho: int, n_agents: int,
                             inner: str = "uniform") -> float:  # fmt: skip
    """Probability that the rho-phase explorer learns the deterministic lock exactly.

    In each block of ``m`` layers all agents start alive (the frontier rule sends them to the live
    state); the block is learned when, at each of its layers, the agents still alive try all ``A``
    actions (the secret one keeps them alive, the others are learned from the agents they kill).
    With uniform actions this is computed exactly by a recursion on the number of survivors
    (binomial on the secret action, inclusion-exclusion for covering the others); enumerated
    sequences learn the block iff ``N >= A^m``. With one block (rho = 1) this is exact; with more,
    agents that survive a block keep playing uniformly into the next one and add information, so
    it is a lower bound on the explorer's success.
    """
    if n_agents < 0:
        raise ValueError("n_agents must be >= 0")
    if inner not in ("uniform", "enumerate"):
        raise ValueError("inner must be 'uniform' or 'enumerate'")
    p = 1.0
    for m in block_sizes(H, rho):
        p *= float(n_agents >= A**m) if inner == "enumerate" else _block_probability(m, A, n_agents)
    return p


def minimal_agents(H: int, A: int, rho: int, target: float = 0.9, inner: str = "uniform") -> int:
    """Smallest ``N`` with ``lock_success_probability >= target`` (bisection on N)."""
    lo, hi = 1, 1
    while lock_success_probability(H, A, rho, hi, inner) < target:
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        if lock_success_probability(H, A, rho, mid, inner) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo
