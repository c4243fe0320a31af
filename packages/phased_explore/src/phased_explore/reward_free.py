"""RF-UCRL (Kaufmann et al., ALT 2021) and RF-Express (Ménard et al., ICML 2021) as published, run
under the phased protocol, with a batched variant that spreads a phase's agents.

Both keep an upper bound ``B_h(s, a)`` on the estimation error of the empirical model, built by
backward induction from a bonus in the visit count ``n = n_h(s, a)`` (``B_H = 0``; an unvisited pair
gets the cap):

- **RF-UCRL**: ``E_h(s,a) = min(H - h, (H - h) sqrt(2 beta(n) / n) + P_hat_h(s,a) . max_b
  E_{h+1}(., b))`` with ``beta(n) = log(2 S A H / delta) + (S - 1) log(e (1 + n / (S - 1)))``.
  ``H - h`` is the range of the value that follows step ``h`` (our steps run ``h = 0 .. H-1`` and
  values include a terminal reward; the paper's ``gamma sigma_{H-h}`` with ``gamma = 1``). Stop when
  ``max_a E_0(s_0, a) <= eps / 2``.
- **RF-Express**: ``W_h(s,a) = min(H, 15 H^2 beta(n) / n + (1 + 1/H) P_hat_h(s,a) . max_b
  W_{h+1}(., b))`` with ``beta(n) = log(3 S A H / delta) + S log(8 e (n + 1))``. Stop when
  ``3 e sqrt(max_a W_0(s_0, a)) + max_a W_0(s_0, a) <= eps / 2``.

``constants="practical"`` (ours, see ``seeds/phased_explore.md``) keeps the shapes and replaces the
thresholds by ``beta(n) = log(1 / delta) + log(1 + n)`` and RF-Express's 15 by 1.

Sampling rule (both papers): every agent follows the greedy policy ``argmax_a B_h(s, a)`` of the
current bound. Equal bounds (within a relative 1e-12; clipped bounds tie often) go to the fewest
visits, then the lowest index (:func:`least_visited_max`; the papers leave ties open). The papers'
start state is fixed; ours may be random, so the stopping rule uses the worst start state seen so
far (every state before any episode).

Phases with ``N`` agents (``batch``): ``"hallucinate"`` (ours, the default) hands out the agents one
at a time, each on the greedy policy of the bound recomputed with the counts increased by the
*expected* visits of the agents already assigned in this phase (under ``P_hat`` and the estimated
start distribution; ``P_hat`` itself is not changed), so the phase's agents spread over the
policies the sequential algorithm would try next. ``"same"`` puts every agent on one greedy policy
(the naive parallelisation, kept as an ablation). With one agent per phase both are the published
sequential algorithm.
"""

from __future__ import annotations

import math

import numpy as np

from .planning import TIE_RTOL, near_max
from .protocol import History, empirical_model

KINDS = ("rf_ucrl", "rf_express")
CONSTANTS = ("paper", "practical")
BATCH = ("hallucinate", "same")


def least_visited_max(E: np.ndarray, visits: np.ndarray, rtol: float = TIE_RTOL) -> np.ndarray:
    """Greedy actions ``(S,)`` on bounds ``E`` ``(S, A)``: among the actions within
    ``rtol * max(1, |max|)`` of each row's maximum, the one with the fewest ``visits`` ``(S, A)``,
    then the lowest index. An explicit rule: equal bounds never go to whichever rounding came out
    larger."""
    near = near_max(np.asarray(E, dtype=float), axis=1, rtol=rtol)
    return np.where(near, np.asarray(visits, dtype=float), np.inf).argmin(axis=1)


def _check(kind: str, constants: str, delta: float) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if constants not in CONSTANTS:
        raise ValueError(f"constants must be one of {CONSTANTS}, got {constants!r}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")


def rf_beta(n: np.ndarray, S: int, A: int, H: int, delta: float, kind: str = "rf_express",
            constants: str = "paper") -> np.ndarray:  # fmt: skip
    """The threshold ``beta(n, delta)`` of ``kind`` (see the module docstring)."""
    _check(kind, constants, delta)
    n = np.asarray(n, dtype=float)
    if constants == "practical":
        return math.log(1.0 / delta) + np.log1p(n)
    if kind == "rf_ucrl":
        extra = (S - 1) * np.log(math.e * (1.0 + n / (S - 1))) if S > 1 else np.zeros_like(n)
        return math.log(2 * S * A * H / delta) + extra
    return math.log(3 * S * A * H / delta) + S * np.log(8 * math.e * (n + 1.0))


def rf_error_bound(counts: np.ndarray, kind: str = "rf_express", delta: float = 0.1,
                   constants: str = "paper", n: np.ndarray | None = None,
                   P_hat: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """The error upper bound ``(H, S, A)`` of ``kind`` from transition counts ``(H, S, A, S)``.

    ``n`` (``(H, S, A)``, default the visits in ``counts``) replaces the visit counts in the bonus
    (the batched variant's expected visits); ``P_hat`` defaults to the empirical model."""
    _check(kind, constants, delta)
    counts = np.asarray(counts, dtype=float)
    H, S, A, _ = counts.shape
    n = counts.sum(-1) if n is None else np.asarray(n, dtype=float)
    P = empirical_model(counts) if P_hat is None else P_hat
    beta = rf_beta(n, S, A, H, delta, kind, constants)
    safe = np.maximum(n, 1e-300)
    if kind == "rf_ucrl":
        unit = np.where(n > 0, np.sqrt(2.0 * beta / safe), np.inf)
    else:
        c = 15.0 if constants == "paper" else 1.0
        unit = np.where(n > 0, c * H**2 * beta / safe, np.inf)
    out = np.empty((H, S, A))
    nxt = np.zeros(S)
    for h in range(H - 1, -1, -1):
        if kind == "rf_ucrl":
            cap = float(H - h)
            out[h] = np.minimum(cap, cap * unit[h] + P[h] @ nxt)
        else:
            out[h] = np.minimum(float(H), unit[h] + (1.0 + 1.0 / H) * (P[h] @ nxt))
        nxt = out[h].max(axis=1)
    return out


def _greedy(B: np.ndarray, n: np.ndarray) -> np.ndarray:
    H, S, A = B.shape
    return least_visited_max(B.reshape(H * S, A), n.reshape(H * S, A)).reshape(H, S)


def _expected_visits(P_hat: np.ndarray, init: np.ndarray, pol: np.ndarray) -> np.ndarray:
    """Expected visits ``(H, S, A)`` of one episode of the deterministic policy ``pol`` ``(H, S)``
    under ``P_hat`` from ``init``."""
    H, S, A, _ = P_hat.shape
    out = np.zeros((H, S, A))
    d = init
    idx = np.arange(S)
    for h in range(H):
        out[h, idx, pol[h]] = d
        d = d @ P_hat[h, idx, pol[h]]
    return out


class _RFExplorer:
    kind = "rf_express"
    label = "RF-Express"

    def __init__(self, delta: float = 0.1, constants: str = "paper", batch: str = "hallucinate",
                 epsilon: float | None = None) -> None:  # fmt: skip
        _check(self.kind, constants, delta)
        if batch not in BATCH:
            raise ValueError(f"batch must be one of {BATCH}, got {batch!r}")
        if epsilon is not None and not epsilon > 0:
            raise ValueError(f"epsilon must be > 0 (or None: never stop), got {epsilon!r}")
        self.delta, self.constants, self.batch, self.epsilon = delta, constants, batch, epsilon
        self.name = f"{self.label} ({constants} constants, batch={batch})"

    def bound(self, history: History) -> np.ndarray:
        """The current error upper bound ``(H, S, A)``."""
        return rf_error_bound(history.counts(), self.kind, self.delta, self.constants)

    def greedy(self, history: History) -> np.ndarray:
        """The sampling rule's policy ``(H, S)`` on the current bound."""
        return _greedy(self.bound(history), history.counts().sum(-1))

    def stopping_statistic(self, B: np.ndarray, history: History) -> float:
        """The published stopping statistic at the worst start state seen so far (every state
        before the first episode); the algorithm stops when it is ``<= epsilon / 2``."""
        starts = history.first_states()
        cand = np.flatnonzero(starts) if starts.sum() > 0 else np.arange(history.S)
        w = float(B[0, cand].max())
        return 3.0 * math.e * math.sqrt(w) + w if self.kind == "rf_express" else w

    def stopped(self, history: History) -> bool:
        if self.epsilon is None:
            return False
        return self.stopping_statistic(self.bound(history), history) <= self.epsilon / 2

    def policies(self, phase: int, history: History) -> np.ndarray:
        H, S, N = history.H, history.S, history.n_agents
        if self.stopped(history):
            return np.zeros((0, H, S), dtype=np.int64)
        counts = history.counts()
        n = counts.sum(-1)
        P_hat = empirical_model(counts)
        if self.batch == "same":
            pol = _greedy(rf_error_bound(counts, self.kind, self.delta, self.constants,
                                         P_hat=P_hat), n)  # fmt: skip
            return np.broadcast_to(pol, (N, H, S)).copy()
        starts = history.first_states()
        init = starts / starts.sum() if starts.sum() > 0 else np.full(S, 1.0 / S)
        out = np.empty((N, H, S), dtype=np.int64)
        n_h = n.copy()
        for i in range(N):
            B = rf_error_bound(counts, self.kind, self.delta, self.constants, n=n_h, P_hat=P_hat)
            out[i] = _greedy(B, n_h)
            if i + 1 < N:
                n_h += _expected_visits(P_hat, init, out[i])
        return out

    def model(self, history: History) -> np.ndarray:
        return history.estimate()


class RFUCRL(_RFExplorer):
    """Reward-free UCRL (Kaufmann et al. 2021) in phases; see the module docstring."""

    kind = "rf_ucrl"
    label = "RF-UCRL"


class RFExpress(_RFExplorer):
    """RF-Express (Ménard et al. 2021) in phases; see the module docstring."""

    kind = "rf_express"
    label = "RF-Express"
