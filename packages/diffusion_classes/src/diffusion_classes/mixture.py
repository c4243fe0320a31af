"""Gaussian mixtures with class-dependent centroid, variance and weight, under the OU forward process.

Forward process (Ornstein-Uhlenbeck, as in Bonnaire et al. 2025): ``x_t = e^{-t} x_0 + sqrt(1 -
e^{-2t}) z``. A mixture component ``N(mu_c, diag(v_c))`` becomes ``N(e^{-t} mu_c, diag(e^{-2t} v_c +
1 - e^{-2t}))``, so the noised mixture and its **exact score** stay in closed form. The
**empirical-optimal score** is the exact score of the noised training set (a mixture of ``n``
Gaussians of variance ``1 - e^{-2t}`` at ``e^{-t} x_nu``): the score a model that memorises learns.
Everything is vectorised torch (float64 by default) so it can be checked against autograd.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

DTYPE = torch.float64


def delta(t: float | torch.Tensor) -> torch.Tensor:
    """Noise variance ``1 - e^{-2t}`` of the OU process at time ``t``."""
    return -torch.expm1(-2 * torch.as_tensor(t, dtype=DTYPE))


def forward_noise(
    x0: torch.Tensor, t: float, gen: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x_t, z)`` with ``x_t = e^{-t} x0 + sqrt(1 - e^{-2t}) z``, ``z ~ N(0, I)``."""
    if t < 0:
        raise ValueError(f"t must be >= 0, got {t}")
    z = torch.randn(x0.shape, generator=gen, dtype=x0.dtype)
    return math.exp(-t) * x0 + delta(t).to(x0.dtype).sqrt() * z, z


@dataclass(frozen=True)
class GaussianMixture:
    """``sum_c w_c N(mu_c, diag(v_c))`` in R^d.

    ``means`` ``(C, d)``; ``variances`` ``(C,)`` (isotropic) or ``(C, d)`` (diagonal, e.g. spiked);
    ``weights`` ``(C,)`` summing to 1 (the class imbalance).
    """

    means: torch.Tensor
    variances: torch.Tensor
    weights: torch.Tensor

    def __post_init__(self) -> None:
        m = torch.as_tensor(self.means, dtype=DTYPE)
        v = torch.as_tensor(self.variances, dtype=DTYPE)
        w = torch.as_tensor(self.weights, dtype=DTYPE)
        if m.dim() != 2:
            raise ValueError(f"means must be (n_classes, d), got shape {tuple(m.shape)}")
        c, d = m.shape
        if v.dim() == 1:
            v = v[:, None].expand(c, d).clone()
        if v.shape != (c, d):
            raise ValueError(
                f"variances must be ({c},) or ({c}, {d}); got {tuple(v.shape)} (d mismatch?)"
            )
        if not bool((v > 0).all()):
            raise ValueError("variances must be > 0")
        if w.shape != (c,) or not bool((w >= 0).all()):
            raise ValueError(f"weights must be {c} non-negative numbers")
        if abs(float(w.sum()) - 1.0) > 1e-6:
            raise ValueError(f"weights must sum to 1, got {float(w.sum()):.6f}")
        object.__setattr__(self, "means", m)
        object.__setattr__(self, "variances", v)
        object.__setattr__(self, "weights", w)

    @property
    def d(self) -> int:
        return int(self.means.shape[1])

    @property
    def n_classes(self) -> int:
        return int(self.means.shape[0])

    @classmethod
    def isotropic(
        cls,
        means: torch.Tensor,
        sigmas2: list[float] | torch.Tensor,
        weights: list[float] | torch.Tensor,
    ) -> GaussianMixture:
        return cls(torch.as_tensor(means), torch.as_tensor(sigmas2), torch.as_tensor(weights))

    def sample(self, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x, labels)``: ``n`` draws, labels ``~ Categorical(weights)``."""
        if n < 1:
            raise ValueError("n must be >= 1")
        gen = torch.Generator().manual_seed(seed)
        labels = torch.multinomial(self.weights, n, replacement=True, generator=gen)
        z = torch.randn(n, self.d, generator=gen, dtype=DTYPE)
        return self.means[labels] + self.variances[labels].sqrt() * z, labels

    def sample_class(self, c: int, n: int, seed: int = 0) -> torch.Tensor:
        """``n`` draws of class ``c`` alone."""
        if not 0 <= c < self.n_classes:
            raise ValueError(f"class {c} out of range [0, {self.n_classes})")
        gen = torch.Generator().manual_seed(seed)
        z = torch.randn(n, self.d, generator=gen, dtype=DTYPE)
        return self.means[c] + self.variances[c].sqrt() * z

    def noised(self, t: float) -> GaussianMixture:
        """The law of ``x_t`` when ``x_0`` follows this mixture."""
        if t < 0:
            raise ValueError(f"t must be >= 0, got {t}")
        a = math.exp(-t)
        return GaussianMixture(a * self.means, a * a * self.variances + delta(t), self.weights)

    def _check(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.as_tensor(x, dtype=DTYPE)
        if x.dim() != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must be (n, {self.d}), got {tuple(x.shape)}")
        return x

    def class_log_prob(self, x: torch.Tensor, t: float = 0.0) -> torch.Tensor:
        """``(n, C)``: ``log w_c + log N(x; mean_c(t), var_c(t))``."""
        x = self._check(x)
        g = self.noised(t) if t > 0 else self
        diff = x[:, None, :] - g.means[None]
        quad = (diff**2 / g.variances[None]).sum(-1)
        logdet = g.variances.log().sum(-1)
        return g.weights.log()[None] - 0.5 * (quad + logdet[None] + self.d * math.log(2 * math.pi))

    def log_prob(self, x: torch.Tensor, t: float = 0.0) -> torch.Tensor:
        """``(n,)`` log-density of the (noised) mixture."""
        return torch.logsumexp(self.class_log_prob(x, t), dim=1)

    def posterior(self, x: torch.Tensor, t: float = 0.0) -> torch.Tensor:
        """``(n, C)`` class responsibilities ``P(c | x_t)`` (the exact class assignment)."""
        return torch.softmax(self.class_log_prob(x, t), dim=1)

    def class_scores(self, x: torch.Tensor, t: float = 0.0) -> torch.Tensor:
        """``(n, C, d)``: the score of each noised component, ``-(x - mean_c(t)) / var_c(t)``."""
        x = self._check(x)
        g = self.noised(t) if t > 0 else self
        return -(x[:, None, :] - g.means[None]) / g.variances[None]

    def score(self, x: torch.Tensor, t: float = 0.0) -> torch.Tensor:
        """``(n, d)`` exact score ``grad_x log p_t(x) = sum_c P(c | x) score_c(x)``."""
        return (self.posterior(x, t)[:, :, None] * self.class_scores(x, t)).sum(1)


def empirical_score(
    x: torch.Tensor, t: float, train: torch.Tensor, chunk: int = 4096
) -> torch.Tensor:
    """Exact score of the noised empirical distribution of ``train`` (the memorising optimum)."""
    if t <= 0:
        raise ValueError("the empirical score is singular at t = 0; use t > 0")
    x = torch.as_tensor(x, dtype=DTYPE)
    train = torch.as_tensor(train, dtype=DTYPE)
    if x.dim() != 2 or train.dim() != 2 or x.shape[1] != train.shape[1]:
        raise ValueError(
            f"x and train must be (n, d) with the same d; got {tuple(x.shape)}, {tuple(train.shape)}"
        )
    a, dt = math.exp(-t), float(delta(t))
    centres = a * train
    out = torch.empty_like(x)
    for s in range(0, x.shape[0], chunk):
        xb = x[s : s + chunk]
        logits = -torch.cdist(xb, centres).pow(2) / (2 * dt)
        w = torch.softmax(logits, dim=1)
        out[s : s + chunk] = (w @ centres - xb) / dt
    return out
