"""Exact tabular dynamic programming on ``P[s, a, s']`` with arrival rewards ``r[s']``.

Shapes: ``P (S, A, S)``, ``r (S,)``, features ``phi (S, d)``, a deterministic policy ``(S,)`` of
action indices or a stochastic one ``(S, A)``. Values are discounted sums
``Q(s, a) = sum_s' P(s'|s, a) (r(s') + gamma * c(s') V(s'))`` with ``c = 0`` on terminal states.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "TIE_RTOL",
    "check_model",
    "gpi_policy",
    "greedy",
    "optimal_policy",
    "policy_evaluation",
    "policy_matrix",
    "q_from_v",
    "state_successor_features",
    "successor_features",
    "value_iteration",
]


TIE_RTOL = 1e-12
"""Action values within ``TIE_RTOL * max(1, |best|)`` of the best are ties. Equal values reached
along different floating-point paths (BLAS kernels, summation orders) differ in their last bits,
and which comes out larger depends on the CPU and the library build; a tie goes to the lowest
action index instead."""


def greedy(q: np.ndarray, axis: int = -1, atol: float | None = None) -> np.ndarray:
    """``argmax`` along ``axis`` with an explicit tie rule: the lowest index among the entries within
    ``atol`` of the maximum (default ``TIE_RTOL * max(1, |max|)``, per slice)."""
    v = np.asarray(q, dtype=float)
    top = v.max(axis=axis, keepdims=True)
    slack = TIE_RTOL * np.maximum(1.0, np.abs(top)) if atol is None else atol
    return (v >= top - slack).argmax(axis=axis)


def check_model(P: np.ndarray, gamma: float | None = None) -> np.ndarray:
    """Validate a transition tensor (and a discount); returns ``P`` as float."""
    P = np.asarray(P, dtype=float)
    if P.ndim != 3 or P.shape[0] != P.shape[2]:
        raise ValueError(f"P must have shape (S, A, S); got {P.shape}")
    if np.any(P < -1e-12) or not np.allclose(P.sum(axis=2), 1.0, atol=1e-8):
        raise ValueError(
            "P[s, a, :] must be probability distributions (non-negative, summing to 1)"
        )
    if gamma is not None and not 0.0 <= gamma < 1.0:
        raise ValueError(f"gamma must be in [0, 1); got {gamma}")
    return P


def _vector(x: np.ndarray, n: int, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) (one value per state); got {x.shape}")
    return x


def _continuation(terminal: np.ndarray | None, n: int) -> np.ndarray:
    if terminal is None:
        return np.ones(n)
    t = np.asarray(terminal, dtype=bool)
    if t.shape != (n,):
        raise ValueError(f"terminal must have shape ({n},); got {t.shape}")
    return (~t).astype(float)


def policy_matrix(policy: np.ndarray, n_actions: int) -> np.ndarray:
    """``(S, A)`` action probabilities of a deterministic ``(S,)`` or stochastic ``(S, A)`` policy."""
    policy = np.asarray(policy)
    if policy.ndim == 1:
        if policy.min() < 0 or policy.max() >= n_actions:
            raise ValueError(
                f"policy actions must be in [0, {n_actions}); got range [{policy.min()}, {policy.max()}]"
            )
        return np.eye(n_actions)[policy.astype(int)]
    if policy.ndim != 2 or policy.shape[1] != n_actions:
        raise ValueError(f"stochastic policy must have shape (S, {n_actions}); got {policy.shape}")
    return policy.astype(float)


def q_from_v(
    P: np.ndarray, r: np.ndarray, V: np.ndarray, gamma: float, terminal: np.ndarray | None = None
) -> np.ndarray:
    """One Bellman backup: ``(S, A)`` action values from state values ``V (S,)``."""
    c = _continuation(terminal, P.shape[0])
    return P @ (r + gamma * c * V)


def value_iteration(
    P: np.ndarray,
    r: np.ndarray,
    gamma: float,
    terminal: np.ndarray | None = None,
    tol: float = 1e-10,
    max_iter: int = 100_000,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Optimal ``V (S,)``, ``Q (S, A)`` and a greedy policy ``(S,)`` (ties to the lowest action,
    see :func:`greedy`), to sup-norm error ``tol``."""
    P = check_model(P, gamma)
    r = _vector(r, P.shape[0], "r")
    V = np.zeros(P.shape[0])
    stop = tol * (1 - gamma) / max(2 * gamma, 1e-12)
    for _ in range(max_iter):
        Q = q_from_v(P, r, V, gamma, terminal)
        V_new = Q.max(axis=1)
        if np.max(np.abs(V_new - V)) < stop:
            V = V_new
            break
        V = V_new
    Q = q_from_v(P, r, V, gamma, terminal)
    return Q.max(axis=1), Q, greedy(Q, axis=1)


def policy_evaluation(
    P: np.ndarray,
    r: np.ndarray,
    policy: np.ndarray,
    gamma: float,
    terminal: np.ndarray | None = None,
) -> np.ndarray:
    """Exact ``V^pi (S,)`` by one linear solve ``(I - gamma P_pi C) V = P_pi r``."""
    P = check_model(P, gamma)
    S, A, _ = P.shape
    r = _vector(r, S, "r")
    pi = policy_matrix(policy, A)
    P_pi = np.einsum("sa,sat->st", pi, P)
    c = _continuation(terminal, S)
    return np.linalg.solve(np.eye(S) - gamma * P_pi * c[None, :], P_pi @ r)


def optimal_policy(
    P: np.ndarray,
    r: np.ndarray,
    gamma: float,
    terminal: np.ndarray | None = None,
    tol: float = 1e-12,
    init: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact optimal ``(policy (S,), V (S,))`` by policy iteration.

    Starts from ``init`` (a deterministic policy, e.g. the solution of a nearby reward) or, without
    one, from a coarse value iteration. The policy only switches action when the improvement
    exceeds ``tol`` relative to the value scale, so it terminates on ties; the returned ``V`` is the
    exact value of the returned policy. In every state the returned action is the lowest-index one
    whose exact value is within that tolerance of the best, so equally optimal actions are decided
    by a rule, not by ``init`` or by rounding noise.
    """
    P = check_model(P, gamma)
    if init is None:
        pi = value_iteration(P, r, gamma, terminal, tol=1e-6 * (1 + np.abs(r).max()) / (1 - gamma))[
            2
        ]
    else:
        pi = np.asarray(init, dtype=int).copy()
    for _ in range(1000):
        V = policy_evaluation(P, r, pi, gamma, terminal)
        Q = q_from_v(P, r, V, gamma, terminal)
        current = Q[np.arange(len(pi)), pi]
        slack = tol * (1 + np.abs(V).max())
        better = Q.max(axis=1) > current + slack
        if not better.any():
            # optimal: among the actions tied with the best (within slack), take the lowest index
            canon = greedy(Q, axis=1, atol=slack)
            if np.array_equal(canon, pi):
                return pi, V
            return canon, policy_evaluation(P, r, canon, gamma, terminal)
        pi = np.where(better, greedy(Q, axis=1), pi)
    raise RuntimeError("policy iteration did not converge in 1000 iterations")


def state_successor_features(
    P: np.ndarray,
    phi: np.ndarray,
    policy: np.ndarray,
    gamma: float,
    terminal: np.ndarray | None = None,
) -> np.ndarray:
    """``Psi^pi (S, d)``: expected discounted sum of ``phi(s_{t+1})`` following ``pi`` from ``s``."""
    P = check_model(P, gamma)
    S, A, _ = P.shape
    phi = np.asarray(phi, dtype=float)
    if phi.ndim != 2 or phi.shape[0] != S:
        raise ValueError(f"phi must have shape ({S}, d); got {phi.shape}")
    P_pi = np.einsum("sa,sat->st", policy_matrix(policy, A), P)
    c = _continuation(terminal, S)
    return np.linalg.solve(np.eye(S) - gamma * P_pi * c[None, :], P_pi @ phi)


def successor_features(
    P: np.ndarray,
    phi: np.ndarray,
    policy: np.ndarray,
    gamma: float,
    terminal: np.ndarray | None = None,
) -> np.ndarray:
    """``psi^pi (S, A, d)`` with ``Q^pi_w = psi^pi @ w`` for the reward ``phi @ w`` (exact solve)."""
    Psi = state_successor_features(P, phi, policy, gamma, terminal)
    c = _continuation(terminal, P.shape[0])
    return np.einsum("sat,td->sad", P, phi + gamma * c[:, None] * Psi)


def gpi_policy(q_values: np.ndarray) -> np.ndarray:
    """Generalised policy improvement: ``argmax_a max_i Q_i(s, a)`` over ``q_values (n, S, A)``,
    ties to the lowest action (see :func:`greedy`)."""
    q = np.asarray(q_values, dtype=float)
    if q.ndim != 3 or q.shape[0] == 0:
        raise ValueError(f"q_values must have shape (n_policies >= 1, S, A); got {q.shape}")
    return greedy(q.max(axis=0), axis=1)
