"""The random-features score model and its exact gradient flow (Bonnaire et al. 2025, Sec. 3).

``s_A(x) = (A / sqrt(p)) sigma(W x / sqrt(d))`` with fixed ``W`` ``(p, d)`` and trained ``A``
``(d, p)``. At a fixed diffusion time ``t`` the denoising score-matching loss on training points
``x_nu`` and noise draws ``z``,

    L(A) = (1/d) E || sqrt(Delta_t) s_A(e^{-t} x_nu + sqrt(Delta_t) z) + z ||^2,

is quadratic in ``A``: with features ``phi`` of the noised inputs, ``U = E[phi phi^T]`` (``p x p``)
and ``V = E[phi z^T]`` (``p x d``), ``L = (1/d) [(Delta/p) tr(A U A^T) + 2 sqrt(Delta/p) tr(A V) +
d]``. Gradient flow ``dA/dtau = -grad L`` is linear: ``A(tau) = A* + (A_0 - A*) exp(-(2 Delta /
(d p)) U tau)`` with ``A* = -sqrt(p / Delta) V^T U^+``; mode ``k`` of ``U`` relaxes at rate
``2 Delta lambda_k / (d p)``, which is why the spectrum of ``U`` sets the timescales.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .mixture import DTYPE, delta

Activation = Callable[[torch.Tensor], torch.Tensor]


@dataclass
class RandomFeatures:
    """Fixed first layer ``W`` and activation; ``features(x)`` = ``sigma(W x / sqrt(d))``."""

    W: torch.Tensor
    activation: Activation = torch.tanh

    @classmethod
    def gaussian(
        cls, d: int, p: int, seed: int = 0, activation: Activation = torch.tanh
    ) -> RandomFeatures:
        gen = torch.Generator().manual_seed(seed)
        return cls(torch.randn(p, d, generator=gen, dtype=DTYPE), activation)

    @property
    def p(self) -> int:
        return int(self.W.shape[0])

    @property
    def d(self) -> int:
        return int(self.W.shape[1])

    def features(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must be (n, {self.d}), got {tuple(x.shape)}")
        return self.activation(x.to(DTYPE) @ self.W.T / math.sqrt(self.d))

    def score(self, A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``s_A(x)`` for a readout ``A`` ``(d, p)``: ``(n, d)``."""
        return self.features(x) @ A.T / math.sqrt(self.p)


@dataclass(frozen=True)
class QuadraticLoss:
    """The DSM loss at time ``t`` as ``(U, V, Delta)``, from ``n_noise`` draws per training point.

    The constant term ``E |z|^2`` is kept at its expectation ``d``, so ``value`` differs from the
    sample loss on the same draws by a constant (gradients and the optimum are exact)."""

    U: torch.Tensor
    V: torch.Tensor
    delta: float
    d: int
    p: int

    def value(self, A: torch.Tensor) -> float:
        dl, p = self.delta, self.p
        return float(
            (
                dl / p * torch.trace(A @ self.U @ A.T)
                + 2 * math.sqrt(dl / p) * torch.trace(A @ self.V)
                + self.d
            )
            / self.d
        )

    def grad(self, A: torch.Tensor) -> torch.Tensor:
        dl, p = self.delta, self.p
        return (2 / self.d) * (dl / p * A @ self.U + math.sqrt(dl / p) * self.V.T)

    def optimum(self) -> torch.Tensor:
        """``A* = -sqrt(p / Delta) V^T U^+`` (pseudo-inverse: the minimum-norm minimiser)."""
        return (
            -math.sqrt(self.p / self.delta) * self.V.T @ torch.linalg.pinv(self.U, hermitian=True)
        )

    def spectrum(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Eigenvalues (ascending) and eigenvectors of ``U``."""
        return torch.linalg.eigh(self.U)

    def flow(self, A0: torch.Tensor, taus: torch.Tensor) -> torch.Tensor:
        """Exact gradient-flow readouts ``A(tau)`` ``(len(taus), d, p)``."""
        lam, vec = self.spectrum()
        star = self.optimum()
        rate = 2 * self.delta * lam.clamp_min(0) / (self.d * self.p)
        coef = (A0 - star) @ vec  # (d, p) in U's eigenbasis
        decay = torch.exp(-rate[None, :] * torch.as_tensor(taus, dtype=DTYPE)[:, None])  # (T, p)
        return star[None] + (coef[None] * decay[:, None, :]) @ vec.T


def dsm_quadratic(
    rf: RandomFeatures, train: torch.Tensor, t: float, n_noise: int = 8, seed: int = 0
) -> QuadraticLoss:
    """Build ``U`` and ``V`` exactly from ``train`` (``n, d``) and ``n_noise`` noise draws per point."""
    if t <= 0:
        raise ValueError("t must be > 0")
    train = torch.as_tensor(train, dtype=DTYPE)
    gen = torch.Generator().manual_seed(seed)
    dl = float(delta(t))
    x = train.repeat(n_noise, 1)
    z = torch.randn(x.shape, generator=gen, dtype=DTYPE)
    phi = rf.features(math.exp(-t) * x + math.sqrt(dl) * z)
    m = x.shape[0]
    return QuadraticLoss(phi.T @ phi / m, phi.T @ z / m, dl, rf.d, rf.p)


@dataclass(frozen=True)
class ClassSpectrum:
    """Eigen-decomposition of ``U`` with the share of each eigenvalue owed to each class.

    ``U = sum_c (n_c / n) U_c`` with ``U_c`` the feature covariance of class ``c``'s noised points, so
    ``lambda_k = sum_c (n_c / n) v_k^T U_c v_k``; ``shares[k, c]`` is that term over ``lambda_k``.
    """

    eigenvalues: torch.Tensor
    eigenvectors: torch.Tensor
    shares: torch.Tensor
    delta: float
    d: int
    p: int

    def relaxation_times(self) -> torch.Tensor:
        """Gradient-flow time constant of every mode, ``d p / (2 Delta lambda_k)``."""
        return self.d * self.p / (2 * self.delta * self.eigenvalues.clamp_min(1e-300))


def class_spectrum(
    rf: RandomFeatures,
    train: torch.Tensor,
    labels: torch.Tensor,
    t: float,
    n_noise: int = 32,
    seed: int = 0,
) -> ClassSpectrum:
    """The spectrum of ``U`` at time ``t`` and its decomposition into class-attributable parts."""
    train = torch.as_tensor(train, dtype=DTYPE)
    labels = torch.as_tensor(labels)
    if labels.shape != (train.shape[0],):
        raise ValueError("labels must be (n,) for train (n, d)")
    gen = torch.Generator().manual_seed(seed)
    dl = float(delta(t))
    x = train.repeat(n_noise, 1)
    lab = labels.repeat(n_noise)
    phi = rf.features(
        math.exp(-t) * x + math.sqrt(dl) * torch.randn(x.shape, generator=gen, dtype=DTYPE)
    )
    m = x.shape[0]
    lam, vec = torch.linalg.eigh(phi.T @ phi / m)
    classes = torch.unique(labels)
    proj = phi @ vec  # (m, p): coordinates in U's eigenbasis
    parts = torch.stack([(proj[lab == c] ** 2).sum(0) / m for c in classes], 1)  # (p, C)
    shares = parts / parts.sum(1, keepdim=True)
    return ClassSpectrum(lam, vec, shares, dl, rf.d, rf.p)
