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
    ``m`` lock layers: at every layer the survivors try all ``A`` actions.

    Survivor counts below ``1e-15`` of mass are dropped, and for ``n`` alive agents only the
    counts ``k`` on the secret action within ``10 sd + 30`` of ``n / A`` are kept (the binomial
    mass outside is below ``e^-50``, Bernstein): a layer then costs ``O(N)`` instead of
    ``O(N^2)``, vectorised over ``(n, k)`` in chunks."""
    p = 1.0 / A
    alive = np.zeros(n_agents + 1)
    alive[n_agents] = 1.0  # distribution of the number alive at the block's current layer
    wrong = np.arange(A)  # inclusion-exclusion over the A - 1 wrong actions
    signs = (-1.0) ** wrong * np.array([math.comb(A - 1, i) for i in wrong])
    miss = 1.0 - wrong / (A - 1)  # chance that one wrong-action agent avoids i given ones
    for _ in range(m):
        nxt = np.zeros_like(alive)
        ns = np.flatnonzero(alive > 1e-15)
        if ns.size == 0:  # no agent left alive: the block cannot be learned
            return 0.0
        half = math.ceil(10.0 * math.sqrt(ns.max() * p * (1.0 - p)) + 30.0)
        offsets = np.arange(-half, half + 1)
        step = max(1, 2_000_000 // (len(offsets) * A))
        for c in range(0, len(ns), step):
            n = ns[c : c + step, None]
            k = np.round(n * p).astype(np.int64) + offsets[None]  # agents on the secret action
            ok = (k >= 1) & (k <= n)
            kk = np.where(ok, k, 1)
            rest = (n - kk)[..., None]  # the others must cover the A - 1 wrong actions
            cover = (signs * miss**rest).sum(-1)
            w = np.where(ok, alive[n] * binom.pmf(kk, n, p) * cover, 0.0)
            np.add.at(nxt, kk[ok], w[ok])
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
        raise ValueError(f"n_agents must be >= 0, got {n_agents}")
    if A < 2:
        raise ValueError(f"the lock needs A >= 2 actions, got A={A}")
    if inner not in ("uniform", "enumerate"):
        raise ValueError("inner must be 'uniform' or 'enumerate'")
    p = 1.0
    for m in block_sizes(H, rho):
        p *= float(n_agents >= A**m) if inner == "enumerate" else _block_probability(m, A, n_agents)
    return p


def _necessary_agents(H: int, A: int, rho: int, target: float, inner: str) -> int:
    """A lower bound on ``minimal_agents``. Enumeration: exactly ``A^m`` for the longest block
    (``m`` layers). Uniform actions: the lock is learned only if some agent survives the first
    ``m - 1`` layers of the longest block, which ``N`` agents do with probability
    ``1 - (1 - A^-(m-1))^N``, and all ``A`` actions are tried at its first layer."""
    m = max(block_sizes(H, rho))
    if inner == "enumerate":
        return int(min(A**m, 2**62))
    if m == 1:
        return A
    x = math.log1p(-target) / math.log1p(-(float(A) ** -(m - 1))) if target < 1 else math.inf
    return max(A, math.floor(min(x, 2.0**62)))


def minimal_agents(H: int, A: int, rho: int, target: float = 0.9, inner: str = "uniform",
                   max_agents: int = 1_000_000) -> int:  # fmt: skip
    """Smallest ``N`` with ``lock_success_probability >= target`` (doubling, then bisection on N).

    With uniform inner actions the success probability is below 1 for every finite ``N``, so the
    target must lie in ``(0, 1)``; enumeration succeeds with probability exactly 1 from ``A^m``
    agents on, so ``target = 1`` is allowed there. The search never looks beyond ``max_agents``
    and starts at a necessary number of agents (some agent must survive all but the last layer
    of the longest block); a lock that needs more than ``max_agents`` raises ``ValueError``, at
    once where the necessary number already exceeds it.
    """
    if inner not in ("uniform", "enumerate"):
        raise ValueError(f"inner must be 'uniform' or 'enumerate', got {inner!r}")
    top = 1.0 if inner == "enumerate" else math.nextafter(1.0, 0.0)
    if not (0.0 < target <= top):  # also rejects NaN
        allowed = "(0, 1]" if inner == "enumerate" else "(0, 1) (uniform never reaches 1)"
        raise ValueError(f"target must lie in {allowed}, got {target!r}")
    if not isinstance(max_agents, int | np.integer) or max_agents < 1:
        raise ValueError(f"max_agents must be an integer >= 1, got {max_agents!r}")
    lo = max(1, _necessary_agents(H, A, rho, target, inner) - 1)
    if lo > max_agents:
        raise ValueError(
            f"the lock (H={H}, A={A}, rho={rho}, inner={inner!r}) needs at least {lo} > "
            f"max_agents={max_agents} agents for success {target}; raise max_agents"
        )
    hi = lo
    while lock_success_probability(H, A, rho, hi, inner) < target:
        if hi >= max_agents:
            raise ValueError(
                f"the lock (H={H}, A={A}, rho={rho}, inner={inner!r}) needs more than "
                f"max_agents={max_agents} agents for success {target}; raise max_agents"
            )
        hi = min(2 * hi, max_agents)
    while lo < hi:
        mid = (lo + hi) // 2
        if lock_success_probability(H, A, rho, mid, inner) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo
