"""Learning Laplacian eigenvectors from sampled transitions (ALLO-style proper Laplacian learning).

The encoder ``u: observation -> R^d`` minimises the graph-drawing objective
``E_(s, s')[ sum_i (u_i(s) - u_i(s'))^2 ]`` subject to ``E_s[u_i(s) u_j(s)] = delta_ij``, through the
augmented Lagrangian of Gomez, Bowling & Machado (2024):

``graph + sum_{j<=i} beta_ij (<u_i, sg(u_j)> - delta_ij) + b sum_{j<=i} (<u_i, sg(u_j)> - delta_ij)^2``

with stop-gradients ``sg`` on the lower triangle (which breaks the rotation symmetry, so the
solution is the eigenvectors themselves, in order, not any basis of their span), dual variables
``beta`` updated by gradient ascent and a barrier ``b``. Inner products use two independent batches
of states, so the quadratic term is unbiased.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

__all__ = [
    "ALLOConfig",
    "LaplacianEncoder",
    "eigenvector_similarity",
    "subspace_similarity",
    "train_allo",
]


@dataclass(frozen=True)
class ALLOConfig:
    """Hyper-parameters of :func:`train_allo` (validated)."""

    d: int = 4
    hidden: int = 128
    steps: int = 3000
    batch_size: int = 256
    lr: float = 3e-3
    lr_duals: float = 0.01
    barrier: float = 2.0
    max_duals: float = 100.0

    def __post_init__(self) -> None:
        for name in ("d", "hidden", "steps", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"ALLOConfig.{name} must be >= 1; got {getattr(self, name)}")
        for name in ("lr", "lr_duals", "barrier", "max_duals"):
            if getattr(self, name) <= 0:
                raise ValueError(f"ALLOConfig.{name} must be > 0; got {getattr(self, name)}")


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Draw from torch's global RNG seeded with ``seed`` inside the block (network
    initialisation), and give the caller's global RNG state back after it."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def mlp(n_in: int, n_out: int, hidden: int) -> nn.Sequential:
    """Two hidden ReLU layers: the network shape of the encoder, the USFA and DQN."""
    return nn.Sequential(
        nn.Linear(n_in, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, n_out),
    )


class LaplacianEncoder(nn.Module):
    """MLP ``(batch, n_in) -> (batch, d)``; with one-hot inputs it is a tabular representation."""

    def __init__(self, n_in: int, d: int, hidden: int = 128) -> None:
        super().__init__()
        self.net = mlp(n_in, d, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def embed(self, x: np.ndarray) -> np.ndarray:
        """Numpy convenience: ``(n, n_in) -> (n, d)``."""
        with torch.no_grad():
            return self(torch.as_tensor(np.asarray(x), dtype=torch.float32)).numpy().astype(float)


def train_allo(
    states: np.ndarray,
    next_states: np.ndarray,
    config: ALLOConfig = ALLOConfig(),
    seed: int = 0,
    progress: bool = False,
) -> tuple[LaplacianEncoder, dict[str, list[float]]]:
    """Fit a :class:`LaplacianEncoder` on transitions ``states (n, n_in) -> next_states (n, n_in)``.

    Returns the encoder and a history with the graph loss and the orthonormality error per step.
    """
    x = torch.as_tensor(np.asarray(states), dtype=torch.float32)
    x2 = torch.as_tensor(np.asarray(next_states), dtype=torch.float32)
    if x.ndim != 2 or x.shape != x2.shape:
        raise ValueError(
            f"states and next_states must both be (n, n_in); got {tuple(x.shape)} and {tuple(x2.shape)}"
        )
    if len(x) < 2:
        raise ValueError("need at least 2 transitions")
    gen = torch.Generator().manual_seed(seed)
    d = config.d
    with seeded(seed):
        enc = LaplacianEncoder(x.shape[1], d, config.hidden)
    opt = torch.optim.Adam(enc.parameters(), lr=config.lr)
    duals = torch.zeros(d, d)
    tril = torch.tril(torch.ones(d, d))
    eye = torch.eye(d)
    history: dict[str, list[float]] = {"graph": [], "orthogonality_error": []}
    n = len(x)
    for _ in tqdm(range(config.steps), desc="ALLO", disable=not progress, leave=False):
        i = torch.randint(n, (config.batch_size,), generator=gen)
        j = torch.randint(n, (config.batch_size,), generator=gen)
        k = torch.randint(n, (config.batch_size,), generator=gen)
        u, u2 = enc(x[i]), enc(x2[i])
        graph = ((u - u2) ** 2).sum(dim=1).mean()
        a, b = enc(x[j]), enc(x[k])
        inner_a = a.T @ a.detach() / len(a)  # <u_i, sg(u_j)>, gradient only to the row index i
        inner_b = b.T @ b.detach() / len(b)
        err_a, err_b = (inner_a - eye) * tril, (inner_b - eye) * tril
        loss = graph + (duals * err_a).sum() + config.barrier * (err_a * err_b.detach()).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            duals = (duals + config.lr_duals * 0.5 * (err_a + err_b)).clamp(
                -config.max_duals, config.max_duals
            )
        history["graph"].append(graph.item())
        history["orthogonality_error"].append(err_a.detach().abs().max().item())
    enc.eval()
    return enc, history


def eigenvector_similarity(learned: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """``(d,)`` absolute cosine similarity of matching columns of ``learned`` and ``exact (n, d)``."""
    a, b = np.asarray(learned, float), np.asarray(exact, float)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(
            f"learned and exact must have the same (n, d) shape; got {a.shape} and {b.shape}"
        )
    return np.abs((a * b).sum(0)) / (np.linalg.norm(a, axis=0) * np.linalg.norm(b, axis=0) + 1e-300)


def subspace_similarity(learned: np.ndarray, exact: np.ndarray) -> float:
    """Mean squared cosine of the principal angles between the column spans (1 = same subspace);
    insensitive to rotations inside eigenspaces of repeated eigenvalues."""
    qa, _ = np.linalg.qr(np.asarray(learned, float))
    qb, _ = np.linalg.qr(np.asarray(exact, float))
    return float(np.mean(np.linalg.svd(qa.T @ qb, compute_uv=False) ** 2))
