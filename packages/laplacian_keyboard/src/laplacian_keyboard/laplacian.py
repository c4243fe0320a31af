"""Exact graph Laplacians of a state graph and their first eigenvectors.

The state graph is built with networkx from a transition model: the edge weight between ``s`` and
``s'`` is the symmetrised probability ``(P_pi[s, s'] + P_pi[s', s]) / 2`` under a behaviour policy
(uniform random by default). Directed dynamics (one-way cells) are symmetrised, as in the
graph-drawing literature.
"""

from __future__ import annotations

import warnings
from typing import Literal

import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import eigsh

from laplacian_keyboard.mdp import check_model, policy_matrix

__all__ = [
    "KINDS",
    "laplacian_eigenvectors",
    "laplacian_matrix",
    "sr_eigenvectors",
    "state_graph",
]

Kind = Literal["transition", "combinatorial", "normalized", "random_walk"]
KINDS: tuple[str, ...] = ("transition", "combinatorial", "normalized", "random_walk")


def _policy_transitions(P: np.ndarray, policy: np.ndarray | None) -> np.ndarray:
    P = check_model(P)
    S, A, _ = P.shape
    pi = np.full((S, A), 1.0 / A) if policy is None else policy_matrix(policy, A)
    return np.einsum("sa,sat->st", pi, P)


def state_graph(P: np.ndarray, policy: np.ndarray | None = None) -> nx.Graph:
    """Undirected weighted state graph of ``P (S, A, S)`` under ``policy`` (uniform by default).

    Self-transitions (wall bumps) are kept as self-loops with their probability as weight.
    """
    P_pi = _policy_transitions(P, policy)
    W = 0.5 * (P_pi + P_pi.T)
    return nx.from_numpy_array(W)


def laplacian_matrix(
    source: np.ndarray | nx.Graph, kind: Kind = "transition", policy: np.ndarray | None = None
) -> sp.csr_array:
    """Sparse ``(S, S)`` Laplacian of a transition tensor ``(S, A, S)``, an adjacency ``(S, S)`` or a graph.

    Kinds (``W`` the symmetric weights, ``D`` the degrees without self-loops):

    * ``"transition"``: ``D_W - W`` with self-loops counted in ``D_W``, the operator ALLO's graph
      loss estimates from transitions sampled under ``policy`` from uniformly drawn states; it is
      ``I - W`` when ``P_pi`` is symmetric and stays well defined for one-way (directed) dynamics;
    * ``"combinatorial"``: ``D - W``; ``"normalized"``: ``I - D^{-1/2} W D^{-1/2}``;
    * ``"random_walk"``: ``I - D^{-1} W`` (not symmetric; see :func:`laplacian_eigenvectors`).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    if isinstance(source, nx.Graph):
        W = nx.to_scipy_sparse_array(source, weight="weight", format="csr", dtype=float)
    else:
        arr = np.asarray(source, dtype=float)
        if arr.ndim == 3:
            W = sp.csr_array(
                0.5 * (_policy_transitions(arr, policy) + _policy_transitions(arr, policy).T)
            )
        elif arr.ndim == 2 and arr.shape[0] == arr.shape[1]:
            if not np.allclose(arr, arr.T):
                raise ValueError("an adjacency matrix must be symmetric; symmetrise it first")
            W = sp.csr_array(arr)
        else:
            raise ValueError(
                f"source must be P (S, A, S), an adjacency (S, S) or a networkx graph; got {arr.shape}"
            )
    n = W.shape[0]
    eye = sp.eye_array(n, format="csr")
    if kind == "transition":
        # D - W with self-loops kept in the degree: I - W when P_pi is symmetric (rows sum to 1)
        deg = np.asarray(W.sum(axis=1)).ravel()
        return sp.csr_array(sp.diags_array(deg) - W)
    W = W - sp.diags_array(W.diagonal())
    deg = np.asarray(W.sum(axis=1)).ravel()
    if np.any(deg <= 0):
        raise ValueError(
            f"the state graph has {int(np.sum(deg <= 0))} isolated states; remove them first"
        )
    if kind == "combinatorial":
        return sp.csr_array(sp.diags_array(deg) - W)
    if kind == "normalized":
        inv = sp.diags_array(deg**-0.5)
        return sp.csr_array(eye - inv @ W @ inv)
    return sp.csr_array(eye - sp.diags_array(1.0 / deg) @ W)


SIGN_RTOL = 1e-6
"""Entries within this relative distance of a column's largest magnitude count as tied for the
sign rule (mirror-symmetric states have entries of equal magnitude and opposite signs, which the
eigensolver returns with last-bit differences)."""


def _fix_signs(vecs: np.ndarray, rtol: float = SIGN_RTOL) -> np.ndarray:
    """A deterministic sign per column ``(S, d)``: the lowest-index entry whose magnitude is within
    ``rtol`` of the column's largest is made positive. Unlike the plain largest entry, this does
    not flip with rounding noise when two entries have the same magnitude."""
    mag = np.abs(vecs)
    idx = (mag >= (1 - rtol) * mag.max(axis=0, keepdims=True)).argmax(axis=0)
    sign = np.sign(vecs[idx, np.arange(vecs.shape[1])])
    return vecs * np.where(sign == 0, 1.0, sign)


def _smallest_symmetric(L: sp.csr_array, d: int) -> tuple[np.ndarray, np.ndarray]:
    n = L.shape[0]
    if n <= 200 or d >= n - 1:
        vals, vecs = np.linalg.eigh(L.toarray())
        return vals[:d], vecs[:, :d]
    # shift-invert just below 0: the Laplacian is PSD, so L + 1e-3 I is positive definite
    # a seeded start vector: ARPACK's own random start differs between processes (seen with
    # OMP_NUM_THREADS=1 vs 2), and so do the last bits of the eigenvectors it returns
    v0 = np.random.default_rng(0).standard_normal(n)
    vals, vecs = eigsh(L.tocsc(), k=d, sigma=-1e-3, which="LM", v0=v0)
    order = np.argsort(vals)
    return vals[order], vecs[:, order]


def laplacian_eigenvectors(
    source: np.ndarray | nx.Graph,
    d: int,
    kind: Kind = "transition",
    policy: np.ndarray | None = None,
    drop_first: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``d`` eigenvectors of the Laplacian with the smallest eigenvalues.

    Returns ``(eigenvalues (d,), eigenvectors (S, d))``, ascending, columns orthonormal (for
    ``"random_walk"`` the columns are ``D^{-1/2}`` times the normalised Laplacian's eigenvectors,
    scaled to unit norm). ``drop_first`` skips the first (constant on a connected graph) eigenvector,
    which is the usual choice for a reward basis because it is the same for every policy.
    Eigenvectors are computed with ``scipy.sparse.linalg.eigsh`` (shift-invert) on large graphs.
    """
    if not isinstance(d, int | np.integer) or d < 1:
        raise ValueError(f"d must be a positive integer; got {d!r}")
    k = int(d) + int(drop_first)
    L = laplacian_matrix(source, "normalized" if kind == "random_walk" else kind, policy)
    n = L.shape[0]
    if k > n:
        raise ValueError(
            f"d={d} (drop_first={drop_first}) asks for more eigenvectors than the {n} states"
        )
    vals, vecs = _smallest_symmetric(L, k)
    if kind == "random_walk":
        W = laplacian_matrix(source, "combinatorial", policy)
        deg = W.diagonal()
        vecs = vecs / np.sqrt(deg)[:, None]
        vecs = vecs / np.linalg.norm(vecs, axis=0)
    vecs = _fix_signs(vecs)
    if drop_first and k > 1 and vals[1] < 1e-10:
        warnings.warn(
            f"the state graph is disconnected ({int(np.sum(vals < 1e-10))}+ components): the first "
            "eigenvectors are component indicators, which no policy can change; restrict P to the "
            "states reachable from the start (e.g. enumerate_transitions) before building a reward basis",
            stacklevel=2,
        )
    return vals[int(drop_first) :], vecs[:, int(drop_first) :]


def sr_eigenvectors(
    P: np.ndarray, d: int, gamma: float = 0.95, policy: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``d`` eigenvectors of the (symmetrised) successor representation ``(I - gamma P_pi)^{-1}``.

    For a symmetric ``P_pi`` they coincide with the ``"transition"`` Laplacian's first eigenvectors
    (eigenvalue ``1 / (1 - gamma (1 - lambda))``). Returns ``(eigenvalues (d,) descending, (S, d))``.
    """
    P_pi = _policy_transitions(P, policy)
    n = P_pi.shape[0]
    if not 0 <= gamma < 1:
        raise ValueError(f"gamma must be in [0, 1); got {gamma}")
    if d < 1 or d > n:
        raise ValueError(f"d must be in [1, {n}] (the number of states); got {d}")
    SR = np.linalg.inv(np.eye(n) - gamma * P_pi)
    vals, vecs = np.linalg.eigh(0.5 * (SR + SR.T))
    return vals[::-1][:d], _fix_signs(vecs[:, ::-1][:, :d])
