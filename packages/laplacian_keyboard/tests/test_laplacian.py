import networkx as nx
import numpy as np
import pytest

from laplacian_keyboard import (
    GridWorld,
    laplacian_eigenvectors,
    laplacian_matrix,
    sr_eigenvectors,
    state_graph,
)


def _walk(n: int, cycle: bool) -> np.ndarray:
    """A 2-action walk on a path or cycle: left / right, bumping at the path's ends."""
    P = np.zeros((n, 2, n))
    for s in range(n):
        left, right = (s - 1) % n, (s + 1) % n
        if not cycle:
            left, right = max(s - 1, 0), min(s + 1, n - 1)
        P[s, 0, left] = P[s, 1, right] = 1.0
    return P


@pytest.mark.parametrize("kind", ["transition", "combinatorial", "normalized", "random_walk"])
def test_eigenvectors_are_orthonormal_for_every_kind(kind):
    P = GridWorld("four_rooms").transition_matrix()
    vals, vecs = laplacian_eigenvectors(P, 6, kind=kind)
    assert vecs.shape == (104, 6)
    assert vals.shape == (6,)
    assert np.all(np.diff(vals) >= -1e-10)
    if kind != "random_walk":
        np.testing.assert_allclose(vecs.T @ vecs, np.eye(6), atol=1e-8)
        L = laplacian_matrix(P, kind).toarray()
        np.testing.assert_allclose(L @ vecs, vecs * vals, atol=1e-8)
    else:  # right eigenvectors of I - D^-1 W, unit norm
        L = laplacian_matrix(P, kind).toarray()
        np.testing.assert_allclose(np.linalg.norm(vecs, axis=0), 1.0)
        np.testing.assert_allclose(L @ vecs, vecs * vals, atol=1e-8)


def test_path_graph_closed_form():
    n = 12
    vals, vecs = laplacian_eigenvectors(nx.path_graph(n), n, kind="combinatorial")
    k = np.arange(n)
    np.testing.assert_allclose(vals, 2 - 2 * np.cos(np.pi * k / n), atol=1e-10)
    # eigenvector k: cos(pi k (i + 1/2) / n), unique up to sign for a path
    expected = np.cos(np.pi * np.outer(np.arange(n) + 0.5, k) / n)
    expected /= np.linalg.norm(expected, axis=0)
    np.testing.assert_allclose(np.abs(np.sum(vecs * expected, axis=0)), 1.0, atol=1e-8)


def test_cycle_graph_closed_form_and_large_sparse_path():
    n = 10
    vals, vecs = laplacian_eigenvectors(nx.cycle_graph(n), n, kind="combinatorial")
    expected = np.sort(2 - 2 * np.cos(2 * np.pi * np.arange(n) / n))
    np.testing.assert_allclose(vals, expected, atol=1e-10)
    # the cycle's second eigenspace is 2-D, spanned by cos and sin of 2 pi i / n
    i = np.arange(n)
    basis = np.stack([np.cos(2 * np.pi * i / n), np.sin(2 * np.pi * i / n)], 1)
    proj = basis @ np.linalg.lstsq(basis, vecs[:, 1:3], rcond=None)[0]
    np.testing.assert_allclose(proj, vecs[:, 1:3], atol=1e-8)
    # above 200 states the sparse shift-invert path (eigsh) is used
    m = 300
    vals, _ = laplacian_eigenvectors(nx.path_graph(m), 4, kind="combinatorial")
    np.testing.assert_allclose(vals, 2 - 2 * np.cos(np.pi * np.arange(4) / m), atol=1e-9)


def test_transition_laplacian_of_a_random_walk_and_graph_matches_tensor():
    n = 9
    P = _walk(n, cycle=True)
    vals, _ = laplacian_eigenvectors(P, n, kind="transition")
    # uniform policy on a cycle: W = (shift + shift^T) / 2, eigenvalues 1 - cos(2 pi k / n)
    np.testing.assert_allclose(vals, np.sort(1 - np.cos(2 * np.pi * np.arange(n) / n)), atol=1e-10)
    G = state_graph(P)
    assert G.number_of_nodes() == n
    assert G.number_of_edges() == n
    np.testing.assert_allclose(
        laplacian_matrix(G, "combinatorial").toarray(),
        laplacian_matrix(P, "combinatorial").toarray(),
    )


def test_drop_first_skips_the_constant_vector():
    P = GridWorld("open_room").transition_matrix()
    vals_all, vecs_all = laplacian_eigenvectors(P, 4)
    vals, _vecs = laplacian_eigenvectors(P, 3, drop_first=True)
    assert abs(vals_all[0]) < 1e-10
    np.testing.assert_allclose(np.abs(vecs_all[:, 0]), 1 / np.sqrt(P.shape[0]), atol=1e-10)
    np.testing.assert_allclose(vals, vals_all[1:], atol=1e-10)


def test_sr_eigenvectors_match_transition_laplacian_for_symmetric_walk():
    P = _walk(11, cycle=False)  # the uniform walk on a path with bumps is symmetric
    gamma = 0.9
    lap_vals, lap_vecs = laplacian_eigenvectors(P, 11)
    sr_vals, sr_vecs = sr_eigenvectors(P, 11, gamma=gamma)
    np.testing.assert_allclose(sr_vals, 1 / (1 - gamma * (1 - lap_vals)), rtol=1e-9)
    np.testing.assert_allclose(np.abs(np.sum(sr_vecs * lap_vecs, axis=0)), 1.0, atol=1e-8)


def test_bad_inputs_raise_clear_errors():
    P = GridWorld("open_room").transition_matrix()
    n = P.shape[0]
    with pytest.raises(ValueError, match="more eigenvectors than"):
        laplacian_eigenvectors(P, n + 1)
    with pytest.raises(ValueError, match="more eigenvectors than"):
        laplacian_eigenvectors(P, n, drop_first=True)
    with pytest.raises(ValueError, match="positive integer"):
        laplacian_eigenvectors(P, 0)
    with pytest.raises(ValueError, match="kind"):
        laplacian_matrix(P, "signless")
    with pytest.raises(ValueError, match="symmetric"):
        laplacian_matrix(np.triu(np.ones((4, 4))), "combinatorial")
    with pytest.raises(ValueError, match="probability"):
        laplacian_matrix(P * 2)
    with pytest.raises(ValueError, match="isolated"):
        laplacian_matrix(np.diag([1.0, 1.0, 0.0]), "normalized")
    with pytest.raises(ValueError, match=r"d must be in \[1"):
        sr_eigenvectors(P, n + 1)


def test_transition_laplacian_is_the_graph_loss_operator_for_one_way_dynamics():
    P = GridWorld("one_way", slip=0.1).transition_matrix()
    n = P.shape[0]
    L = laplacian_matrix(P, "transition").toarray()
    np.testing.assert_allclose(L, L.T, atol=1e-12)
    assert np.linalg.eigvalsh(L).min() > -1e-10
    # E_{s uniform, s' ~ P_pi(s)} (u(s) - u(s'))^2 = (2 / n) u^T L u, for any u
    u = np.random.default_rng(0).normal(size=n)
    P_pi = P.mean(axis=1)
    graph_loss = np.sum(P_pi * (u[:, None] - u[None, :]) ** 2) / n
    np.testing.assert_allclose(graph_loss, 2 / n * u @ L @ u, rtol=1e-10)


def test_disconnected_graph_warns():
    G = nx.disjoint_union(nx.path_graph(4), nx.path_graph(5))
    with pytest.warns(UserWarning, match="disconnected"):
        vals, _ = laplacian_eigenvectors(G, 2, kind="combinatorial", drop_first=True)
    assert vals[0] < 1e-10  # the second component indicator
