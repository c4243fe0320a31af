"""Cost of the reward-free phase: exact successor features and the behaviour library.

    make bench PKG=laplacian_keyboard

1. Successor features of one policy: one linear solve against iterating the SF Bellman equation to
   1e-10, on grids of 100 to 2,500 states.
2. The library (optimal from the start state) for d = 1..3 eigenvectors in four rooms: its size,
   value-iteration queries, seconds and peak memory, against the baseline of querying as many random
   unit weight vectors: how many of the library's policies random queries find.
"""

from __future__ import annotations

import time

import numpy as np

from laplacian_keyboard import GridWorld, build_library, laplacian_eigenvectors, optimal_policy
from laplacian_keyboard.mdp import state_successor_features
from paper_common import Timer, markdown_table, peak_memory

GAMMA = 0.95


def _open(n: int) -> str:
    rows = ["#" * (n + 2)] + ["#" + "." * n + "#"] * n + ["#" * (n + 2)]
    return "\n".join(rows)


def _iterative_sf(P: np.ndarray, phi: np.ndarray, pi: np.ndarray, tol: float = 1e-10) -> np.ndarray:
    P_pi = P[np.arange(len(pi)), pi]
    Psi = np.zeros_like(phi)
    while True:
        new = P_pi @ (phi + GAMMA * Psi)
        if np.abs(new - Psi).max() < tol:
            return new
        Psi = new


def sf_rows() -> list[dict]:
    rows = []
    for n in (10, 25, 50):
        P = GridWorld(_open(n)).transition_matrix()
        _, phi = laplacian_eigenvectors(P, 4, drop_first=True)
        pi = optimal_policy(P, phi[:, 0], GAMMA)[0]
        t_exact = Timer(repeat=3)(state_successor_features, P, phi, pi, GAMMA).median_s
        t_iter = Timer(repeat=3)(_iterative_sf, P, phi, pi).median_s
        err = np.abs(state_successor_features(P, phi, pi, GAMMA) - _iterative_sf(P, phi, pi)).max()
        rows.append(
            {
                "states": n * n,
                "linear solve (s)": t_exact,
                "iteration (s)": t_iter,
                "speed-up": t_iter / t_exact,
                "max |diff|": err,
            }
        )
    return rows


def library_rows() -> list[dict]:
    env = GridWorld("four_rooms")
    P = env.transition_matrix()
    _, phi = laplacian_eigenvectors(P, 3, drop_first=True)
    mu = np.zeros(env.n_states)
    mu[env.start] = 1.0
    rows = []
    for d in (1, 2, 3):
        with peak_memory() as mem:
            start = time.perf_counter()
            lib = build_library(P, phi[:, :d], GAMMA, mu=mu)
            seconds = time.perf_counter() - start
        # baseline: the same number of random unit w; which library members does it find?
        rng = np.random.default_rng(0)
        start = time.perf_counter()
        found = set()
        for w in rng.standard_normal((lib.n_queries, d)):
            pi = optimal_policy(P, phi[:, :d] @ (w / np.linalg.norm(w)), GAMMA)[0]
            x = mu @ state_successor_features(P, phi[:, :d], pi, GAMMA)
            found.add(int(np.argmin(np.linalg.norm(lib.points - x, axis=1))))
        t_rand = time.perf_counter() - start
        rows.append(
            {
                "d": d,
                "library size": len(lib),
                "queries": lib.n_queries,
                "seconds": seconds,
                "peak MiB": mem.peak_mib,
                "random-w queries find": len(found),
                "random coverage": len(found) / len(lib),
                "random (s)": t_rand,
            }
        )
    return rows


def main() -> None:
    print("Successor features of one policy (exact linear solve vs SF Bellman iteration)\n")
    print(markdown_table(sf_rows()))
    print("\nBehaviour library in four rooms (104 states) vs as many random-w queries\n")
    print(markdown_table(library_rows()))


if __name__ == "__main__":
    main()
