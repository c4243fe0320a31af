"""Exact finite-horizon planning on any model, the simulation-lemma certificate and the planning gap.

Values are sums over the ``H`` steps (plus the terminal reward), with rewards in ``[0, 1]``;
report them divided by ``H``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .mdp import TabularMDP, _as_stochastic

TIE_RTOL = 1e-12
"""Action values within ``TIE_RTOL * max(1, |best|)`` of the best are ties: equal values computed
along different paths (a BLAS kernel's main block and its tail) differ in the last bits, and which
one comes out larger depends on the CPU and the library build."""


def first_max(values: np.ndarray, axis: int = -1, rtol: float = TIE_RTOL) -> np.ndarray:
    """The greedy action with an explicit tie rule: the lowest index among the entries within
    ``rtol * max(1, |max|)`` of the maximum along ``axis`` (``np.argmax`` of exact values picks the
    first too, but lets rounding noise decide between equal ones)."""
    v = np.asarray(values, dtype=float)
    return near_max(v, axis, rtol).argmax(axis=axis)


def near_max(values: np.ndarray, axis: int = -1, rtol: float = TIE_RTOL) -> np.ndarray:
    """Boolean mask of the entries within ``rtol * max(1, |max|)`` of the maximum along ``axis``
    (an infinite maximum ties only with itself; NaN raises ``ValueError``)."""
    v = np.asarray(values, dtype=float)
    if np.isnan(v).any():
        raise ValueError("values contain NaN: no maximum to act greedily on")
    top = v.max(axis=axis, keepdims=True)
    with np.errstate(invalid="ignore"):  # inf - inf where the maximum is infinite
        return (v == top) | (v >= top - rtol * np.maximum(1.0, np.abs(top)))


@dataclass(frozen=True)
class Plan:
    Q: np.ndarray  # (H, S, A)
    V: np.ndarray  # (H + 1, S)
    policy: np.ndarray  # (H, S) greedy actions, ties to the lowest index (see first_max)


def _check_reward(
    P: np.ndarray, r: np.ndarray, r_term: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    H, S, A, _ = P.shape
    r = np.asarray(r, dtype=float)
    if r.shape != (H, S, A):
        raise ValueError(f"reward must be (H, S, A) = {(H, S, A)}, got {r.shape}")
    rt = np.zeros(S) if r_term is None else np.asarray(r_term, dtype=float)
    if rt.shape != (S,):
        raise ValueError(f"terminal reward must be ({S},)")
    if not (np.isfinite(r).all() and np.isfinite(rt).all()):
        raise ValueError("rewards must be finite (no NaN or inf)")
    return r, rt


def value_iteration(P: np.ndarray, r: np.ndarray, r_term: np.ndarray | None = None) -> Plan:
    """Backward induction for reward ``r`` on dynamics ``P`` ``(H, S, A, S)``."""
    r, rt = _check_reward(P, r, r_term)
    H = P.shape[0]
    V = np.empty((H + 1, P.shape[1]))
    Q = np.empty_like(r)
    V[H] = rt
    for h in range(H - 1, -1, -1):
        Q[h] = r[h] + P[h] @ V[h + 1]
        V[h] = Q[h].max(1)
    return Plan(Q, V, first_max(Q, axis=2))


def policy_value(mdp: TabularMDP, policy: np.ndarray, r: np.ndarray,
                 r_term: np.ndarray | None = None) -> float:  # fmt: skip
    """Exact expected return of ``policy`` ``(H, S)`` or ``(H, S, A)`` from ``mdp.init``."""
    r, rt = _check_reward(mdp.P, r, r_term)
    pi = _as_stochastic(np.asarray(policy)[None], mdp.A)[0]
    V = rt.copy()
    for h in range(mdp.H - 1, -1, -1):
        V = (pi[h] * (r[h] + mdp.P[h] @ V)).sum(1)
    return float(mdp.init @ V)


def _check_model(true: TabularMDP, P_hat: np.ndarray) -> np.ndarray:
    P = np.asarray(P_hat, dtype=float)
    if P.shape != true.P.shape:
        raise ValueError(f"P_hat must have the true model's shape {true.P.shape}, got {P.shape}")
    return P


def certificate(true: TabularMDP, P_hat: np.ndarray) -> float:
    """``max_pi E_true sum_h ||P_hat_h(.|s,a) - P_h(.|s,a)||_1``; by the simulation lemma every
    reward's planning gap on ``P_hat`` is at most ``2 H`` times this (values summed over steps)."""
    err = np.abs(_check_model(true, P_hat) - true.P).sum(-1)  # (H, S, A)
    plan = value_iteration(true.P, err)
    return float(true.init @ plan.V[0])


def reward_battery(H: int, S: int, A: int, n_random: int = 50, n_sparse: int = 20,
                   seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:  # fmt: skip
    """All state indicators of layers 1..H, all ``(h, s, a)`` indicators, ``n_random`` uniform
    random rewards and ``n_sparse`` sparse ones (5% of entries set to 1)."""
    rng = np.random.default_rng(seed)
    out: list[tuple[np.ndarray, np.ndarray]] = []
    zero, zt = np.zeros((H, S, A)), np.zeros(S)
    for h in range(1, H + 1):  # state indicators at layer h (the terminal one is r_term)
        for s in range(S):
            if h == H:
                t = zt.copy()
                t[s] = 1.0
                out.append((zero, t))
            else:
                r = zero.copy()
                r[h, s, :] = 1.0
                out.append((r, zt))
    for idx in np.ndindex(H, S, A):
        r = zero.copy()
        r[idx] = 1.0
        out.append((r, zt))
    out += [(rng.random((H, S, A)), zt) for _ in range(n_random)]
    out += [((rng.random((H, S, A)) < 0.05).astype(float), zt) for _ in range(n_sparse)]
    return out


def planning_gap(true: TabularMDP, P_hat: np.ndarray,
                 battery: list[tuple[np.ndarray, np.ndarray]]) -> float:  # fmt: skip
    """``max_r V*(r) - V^{pi_hat_r}(r)`` over the battery, ``pi_hat_r`` optimal on ``P_hat``."""
    P_hat = _check_model(true, P_hat)
    gaps = []
    for r, rt in battery:
        best = float(true.init @ value_iteration(true.P, r, rt).V[0])
        pi_hat = value_iteration(np.asarray(P_hat), r, rt).policy
        gaps.append(best - policy_value(true, pi_hat, r, rt))
    return float(max(gaps))
