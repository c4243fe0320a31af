"""Zero-shot control in the span of a feature basis, the behaviour library, and the keyboard.

* :func:`project_reward` writes a reward as ``phi @ w`` (least squares) and :func:`zero_shot_bounds`
  bounds what the projection costs.
* :func:`build_library` is the task-agnostic behaviour basis: it finds every policy that is optimal
  for some reward ``phi @ w``, ``w`` anywhere in ``R^d``, so the library contains an optimal policy
  for every reward in the span (tested on random ``w``).
* :class:`Behaviours` are the keys a meta-policy presses: each key is a weight vector executed as
  the GPI policy ``argmax_a max_i psi_i(s, a) @ w`` over the library (the Option Keyboard's
  execution rule), or any other table of option policies with termination.

How the library is built (our construction of the paper's guarantee). For a start distribution
``mu`` with full support, let ``x(pi) = mu @ Psi^pi`` be the expected successor features of a policy.
The set of achievable ``x`` is a convex polytope (a linear image of the discounted occupancy
polytope) and ``max_pi mu @ V^pi_w = max_x w @ x`` is attained at a vertex. We recover all vertices
with a support-function oracle (exact policy iteration for ``phi @ w``): start from ``+-e_i``, find the
polytope's affine hull, then repeatedly query the outward normal of every facet of the current
convex hull (``scipy.spatial.ConvexHull``) and add the returned point when it lies beyond the facet.
When no facet can be pushed out, the hull is the polytope (optimistic linear support, Roijers 2015,
run on the whole of ``R^d`` instead of a simplex). A policy maximising ``mu @ V_w`` with ``mu > 0``
is optimal in every state ``mu`` covers, so for every ``w`` some library member is optimal there.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial import ConvexHull, QhullError
from tqdm.auto import tqdm

from laplacian_keyboard.mdp import (
    check_model,
    gpi_policy,
    greedy,
    optimal_policy,
    policy_evaluation,
    q_from_v,
    state_successor_features,
    successor_features,
    value_iteration,
)

__all__ = [
    "BehaviourLibrary",
    "Behaviours",
    "Projection",
    "build_library",
    "project_reward",
    "value_gap",
    "zero_shot_bounds",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Projection:
    """A reward written in a feature basis: ``reward = phi @ w``, ``residual = r - reward``."""

    w: np.ndarray
    reward: np.ndarray
    residual: np.ndarray

    @property
    def relative_error(self) -> float:
        """``||r - phi w|| / ||r||`` (0 for a reward in the span)."""
        total = np.linalg.norm(self.reward + self.residual)
        return float(np.linalg.norm(self.residual) / total) if total > 0 else 0.0


def _features(phi: np.ndarray) -> np.ndarray:
    phi = np.asarray(phi, dtype=float)
    if phi.ndim != 2 or phi.shape[1] < 1:
        raise ValueError(f"phi must have shape (n_states, d) with d >= 1; got {phi.shape}")
    return phi


def project_reward(phi: np.ndarray, r: np.ndarray) -> Projection:
    """Least-squares weights ``w (d,)`` with ``phi (S, d) @ w`` closest to the reward ``r (S,)``."""
    phi = _features(phi)
    r = np.asarray(r, dtype=float)
    if r.shape != (phi.shape[0],):
        raise ValueError(
            f"reward must have shape ({phi.shape[0]},) to match phi {phi.shape}; got {r.shape}"
        )
    w, *_ = np.linalg.lstsq(phi, r, rcond=None)
    r_w = phi @ w
    return Projection(w, r_w, r - r_w)


def value_gap(
    P: np.ndarray,
    r: np.ndarray,
    policy: np.ndarray,
    gamma: float,
    terminal: np.ndarray | None = None,
) -> np.ndarray:
    """``V*_r - V^pi_r`` per state ``(S,)``, exact (non-negative up to round-off)."""
    V_star = optimal_policy(P, r, gamma, terminal)[1]
    return V_star - policy_evaluation(P, r, policy, gamma, terminal)


def zero_shot_bounds(
    P: np.ndarray, r: np.ndarray, r_w: np.ndarray, gamma: float, terminal: np.ndarray | None = None
) -> dict[str, float]:
    """Upper bounds on ``max_s V*_r(s) - V^{pi_w}_r(s)`` for ``pi_w`` optimal for ``r_w``.

    With ``e = r - r_w``:

    * ``"standard"``: ``2 ||e||_inf / (1 - gamma)`` (Singh & Yee 1994 style);
    * ``"span"``: ``(max e - min e) / (1 - gamma)``, never larger than the standard bound;
    * ``"residual_value"``: ``max_s V*_e(s) + V*_{-e}(s)``, the tightest: the gap is
      ``(V^{pi*}_e - V^{pi_w}_e) + (V^{pi*}_{r_w} - V^{pi_w}_{r_w})`` and the second term is <= 0.

    The last two are derived here; they are not taken from the paper.
    """
    e = np.asarray(r, float) - np.asarray(r_w, float)
    hi = value_iteration(P, e, gamma, terminal)[0]
    lo = value_iteration(P, -e, gamma, terminal)[0]
    return {
        "standard": float(2 * np.abs(e).max() / (1 - gamma)),
        "span": float((e.max() - e.min()) / (1 - gamma)),
        "residual_value": float(np.max(hi + lo)),
    }


@dataclass
class BehaviourLibrary:
    """Policies with their successor features; see :func:`build_library`.

    Attributes:
        policies: ``(L, S)`` deterministic policies.
        psi: ``(L, S, A, d)`` successor features, ``Q^{pi_i}_w = psi[i] @ w``.
        weights: ``(L, d)`` unit weight vectors for which each policy was found optimal (its key).
        points: ``(L, d)`` expected successor features ``mu @ Psi^{pi_i}``.
        complete: False when the build stopped at ``max_policies``: the guarantee (an optimal
            member for every ``w``) then no longer holds.
    """

    P: np.ndarray
    phi: np.ndarray
    gamma: float
    policies: np.ndarray
    psi: np.ndarray
    weights: np.ndarray
    points: np.ndarray
    mu: np.ndarray
    n_queries: int = 0
    affine_dim: int = 0
    complete: bool = True
    terminal: np.ndarray | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.policies)

    def _w(self, w: np.ndarray) -> np.ndarray:
        w = np.asarray(w, dtype=float)
        if w.shape != (self.phi.shape[1],):
            raise ValueError(f"w must have shape ({self.phi.shape[1]},); got {w.shape}")
        return w

    def q(self, w: np.ndarray) -> np.ndarray:
        """``(L, S, A)`` action values of every member for the reward ``phi @ w``."""
        return self.psi @ self._w(w)

    def gpi(self, w: np.ndarray) -> np.ndarray:
        """The GPI policy ``(S,)`` over the library for the reward ``phi @ w``."""
        return gpi_policy(self.q(w))

    def best(self, w: np.ndarray) -> int:
        """Index of the member with the highest ``mu @ V_w`` (ties to the lowest index)."""
        return int(greedy(self.points @ self._w(w)))

    def evaluate(self, r: np.ndarray) -> np.ndarray:
        """``(L, S, A)`` exact action values of every member on an arbitrary reward ``r (S,)``."""
        out = np.empty(self.psi.shape[:3])
        for i, pi in enumerate(self.policies):
            V = policy_evaluation(self.P, r, pi, self.gamma, self.terminal)
            out[i] = q_from_v(self.P, r, V, self.gamma, self.terminal)
        return out


def build_library(
    P: np.ndarray,
    phi: np.ndarray,
    gamma: float,
    mu: np.ndarray | None = None,
    tol: float = 1e-9,
    max_policies: int = 1000,
    terminal: np.ndarray | None = None,
    progress: bool = False,
) -> BehaviourLibrary:
    """Every policy optimal for some reward ``phi @ w`` (see the module docstring).

    Args:
        P: ``(S, A, S)`` transition model; ``phi``: ``(S, d)`` features; ``gamma`` in [0, 1).
        mu: start distribution (default uniform). The guarantee holds in every state ``mu``
            covers: uniform gives policies optimal everywhere (many more of them), a point mass on
            the start state gives the smaller set optimal from the start.
        tol: a query that improves a facet by less than ``tol`` (relative to the value scale)
            confirms the facet.
        max_policies: the library's size cap. Selection rule (deterministic): the queries run in
            a fixed order (the ``+-e_i`` axes, the affine hull's directions, then rounds over the
            current hull's unconfirmed facets, **largest facet first**, ties by qhull's facet
            index) and the library keeps the first ``max_policies`` distinct policies they find,
            then stops querying, with ``complete=False`` and a warning. Each round refines the
            whole hull before the next starts, and the largest facets are where the outer
            approximation can be furthest from the polytope, so a capped library is a coarse,
            evenly spread cover of the policy polytope rather than a detailed corner of it.
    """
    if isinstance(max_policies, bool) or not isinstance(max_policies, int) or max_policies < 1:
        raise ValueError(f"max_policies must be an int >= 1; got {max_policies!r}")
    P = check_model(P, gamma)
    phi = _features(phi)
    S, _A, _ = P.shape
    d = phi.shape[1]
    if phi.shape[0] != S:
        raise ValueError(f"phi has {phi.shape[0]} rows but P has {S} states")
    mu = np.full(S, 1.0 / S) if mu is None else np.asarray(mu, float)
    if mu.shape != (S,) or np.any(mu < 0) or not np.isclose(mu.sum(), 1):
        raise ValueError(
            f"mu must be a distribution over the {S} states (non-negative, summing to 1)"
        )

    policies: list[np.ndarray] = []
    points: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    scale = np.abs(phi).max() / (1 - gamma) + 1e-300
    eps = tol * scale
    queries = 0

    refused = False

    def query(w: np.ndarray) -> np.ndarray | None:
        nonlocal queries, refused
        if len(policies) >= max_policies:
            refused = True
            return None
        queries += 1
        w = w / np.linalg.norm(w)
        init = policies[int(np.argmax(np.asarray(points) @ w))] if policies else None
        pi, _ = optimal_policy(P, phi @ w, gamma, terminal, init=init)
        x = mu @ state_successor_features(P, phi, pi, gamma, terminal)
        if not points or np.min(np.linalg.norm(np.asarray(points) - x, axis=1)) > eps:
            policies.append(pi)
            points.append(x)
            weights.append(w)
        return x

    bar = tqdm(desc="library", unit="query", disable=not progress, leave=False)
    for i in range(d):
        for sign in (1.0, -1.0):
            query(sign * np.eye(d)[i])
    # the affine hull of the achievable successor features (the constant eigenvector, for one, is flat)
    while True:
        X = np.asarray(points)
        centre = X.mean(axis=0)
        _, sv, Vt = np.linalg.svd(X - centre, full_matrices=True)
        k = int(np.sum(sv > eps * np.sqrt(len(X))))
        before = len(points)
        for u in Vt[k:]:
            query(u)
            query(-u)
        X = np.asarray(points)
        k_new = int(np.sum(np.linalg.svd(X - X.mean(0), compute_uv=False) > eps * np.sqrt(len(X))))
        if k_new == k or len(points) == before:
            break
    basis = Vt[:k]

    complete = True
    if k >= 2:
        confirmed: set[tuple[float, ...]] = set()
        while complete:
            Y = (np.asarray(points) - centre) @ basis.T
            try:
                hull = ConvexHull(Y, qhull_options="QJ")
            except QhullError as err:  # pragma: no cover - degenerate input already reduced above
                raise RuntimeError(
                    f"qhull failed on {len(Y)} points in {k} dimensions: {err}"
                ) from err
            todo = [
                i for i, eq in enumerate(hull.equations) if tuple(np.round(eq, 7)) not in confirmed
            ]
            if not todo:
                break
            area = _facet_areas(Y[hull.simplices[todo]])
            for i in np.asarray(todo)[np.argsort(-area, kind="stable")]:
                eq = hull.equations[i]
                normal, offset = eq[:-1], eq[-1]
                x = query(basis.T @ normal)
                if x is None:  # the cap: stop querying
                    complete = False
                    break
                if normal @ ((x - centre) @ basis.T) + offset <= eps:
                    confirmed.add(tuple(np.round(eq, 7)))
            bar.update(len(todo))
    if refused:
        complete = False
        log.warning(
            "build_library stopped at max_policies=%d; the library may be incomplete",
            max_policies,
        )
    bar.close()
    pol = np.asarray(policies)
    psi = np.stack([successor_features(P, phi, pi, gamma, terminal) for pi in pol])
    return BehaviourLibrary(
        P=P,
        phi=phi,
        gamma=gamma,
        policies=pol,
        psi=psi,
        weights=np.asarray(weights),
        points=np.asarray(points),
        mu=mu,
        n_queries=queries,
        affine_dim=k,
        complete=complete,
        terminal=terminal,
    )


def _facet_areas(vertices: np.ndarray) -> np.ndarray:
    """``(F,)`` (k-1)-volumes (up to the common 1/(k-1)! factor) of facets ``(F, k, k)``."""
    edges = vertices[:, 1:] - vertices[:, :1]
    gram = edges @ np.swapaxes(edges, 1, 2)
    return np.sqrt(np.clip(np.linalg.det(gram), 0.0, None))


@dataclass(frozen=True)
class Behaviours:
    """A table of temporally extended behaviours a meta-policy selects from.

    Attributes:
        actions: ``(K, S)`` the action each behaviour takes in each state.
        terminate: ``(K, S)`` True where a behaviour stops after arriving (primitive actions stop
            everywhere); a meta-policy also re-decides every ``k`` steps.
        names: one label per behaviour.
    """

    actions: np.ndarray
    terminate: np.ndarray
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.actions.ndim != 2 or self.terminate.shape != self.actions.shape:
            raise ValueError(
                f"actions and terminate must both be (K, S); got {self.actions.shape} and {self.terminate.shape}"
            )
        if len(self.names) != len(self.actions):
            raise ValueError(
                f"need one name per behaviour: {len(self.names)} names, {len(self.actions)} behaviours"
            )

    def __len__(self) -> int:
        return len(self.actions)

    @classmethod
    def keyboard(cls, library: BehaviourLibrary, keys: np.ndarray | None = None) -> Behaviours:
        """Keys = weight vectors ``(K, d)`` executed by GPI over ``library`` (default: its own keys)."""
        keys = library.weights if keys is None else np.asarray(keys, float)
        if keys.ndim != 2 or keys.shape[1] != library.phi.shape[1]:
            raise ValueError(f"keys must have shape (K, {library.phi.shape[1]}); got {keys.shape}")
        actions = greedy((library.psi @ keys.T).max(axis=0), axis=1).T  # (K, S), ties: lowest
        return cls(
            actions, np.zeros_like(actions, dtype=bool), tuple(f"w{j}" for j in range(len(keys)))
        )

    @classmethod
    def primitives(cls, n_states: int, n_actions: int) -> Behaviours:
        """One-step behaviours, one per action (flat RL as a special case)."""
        actions = np.repeat(np.arange(n_actions)[:, None], n_states, axis=1)
        return cls(
            actions, np.ones_like(actions, dtype=bool), tuple(f"a{a}" for a in range(n_actions))
        )

    def __add__(self, other: Behaviours) -> Behaviours:
        return Behaviours(
            np.concatenate([self.actions, other.actions]),
            np.concatenate([self.terminate, other.terminate]),
            self.names + other.names,
        )
