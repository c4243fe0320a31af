"""Bracketed systems whose commutator is known in closed form: the estimator's ground truth.

Each system gives two fields (for :func:`~skill_commutator.commutator.lie_bracket`), their flows in
closed form (the estimators only see these rollouts) and the true bracket.

- :class:`LinearSystem`: ``X = A x``, ``Y = B x``, flows ``expm(h A) x``, ``[X, Y] = (BA - AB) x``.
- :class:`Heisenberg`: ``X = (1, 0, -eps y / 2)``, ``Y = (0, 1, eps x / 2)``, ``[X, Y] = (0, 0, eps)``;
  the ordered commutator C1 is exact at every ``h``.
- :class:`Commuting`: ``d/dx`` and ``d/dy`` (translations), bracket 0: the null.
- :class:`MLPReadout`: a frozen random MLP ``R^m -> R^32``; through it the truth is ``Df . [X, Y]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from skill_commutator.commutator import Flow, expm_flow

__all__ = ["Commuting", "Heisenberg", "LinearSystem", "MLPReadout"]


@dataclass
class LinearSystem:
    """Linear fields ``X = A x`` and ``Y = B x`` on ``R^m`` (float64).

    ``LinearSystem.random(m, seed)`` draws ``A``, ``B`` with i.i.d. ``N(0, 1/m)`` entries, so the
    flows stay ``O(1)`` for ``|h| <~ 1``.
    """

    a: torch.Tensor
    b: torch.Tensor

    def __post_init__(self) -> None:
        self.a = torch.as_tensor(self.a, dtype=torch.float64)
        self.b = torch.as_tensor(self.b, dtype=torch.float64)
        m = self.a.shape[0]
        if self.a.shape != (m, m) or self.b.shape != (m, m):
            raise ValueError(
                f"A and B must be square and of the same size; got {tuple(self.a.shape)} and "
                f"{tuple(self.b.shape)}"
            )

    @classmethod
    def random(cls, m: int, seed: int = 0) -> LinearSystem:
        if not isinstance(m, int) or m < 2:
            raise ValueError(f"m must be an int >= 2; got {m!r}")
        gen = torch.Generator().manual_seed(seed)
        a, b = torch.randn(2, m, m, generator=gen, dtype=torch.float64) / np.sqrt(m)
        return cls(a, b)

    @property
    def dim(self) -> int:
        return int(self.a.shape[0])

    def field_x(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.a.T

    def field_y(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.b.T

    def flow_x(self) -> Flow:
        return expm_flow(self.a.numpy())

    def flow_y(self) -> Flow:
        return expm_flow(self.b.numpy())

    def bracket(self, x: torch.Tensor) -> torch.Tensor:
        """``(BA - AB) x``."""
        return x @ (self.b @ self.a - self.a @ self.b).T


@dataclass
class Heisenberg:
    """The Heisenberg fields on ``R^3`` with bracket ``(0, 0, eps)`` everywhere."""

    eps: float = 1.0

    dim: int = field(default=3, init=False)

    def field_x(self, p: torch.Tensor) -> torch.Tensor:
        x, y, _ = p.unbind(-1)
        return torch.stack([torch.ones_like(x), torch.zeros_like(x), -self.eps * y / 2], -1)

    def field_y(self, p: torch.Tensor) -> torch.Tensor:
        x = p[..., 0]
        return torch.stack([torch.zeros_like(x), torch.ones_like(x), self.eps * x / 2], -1)

    def flow_x(self) -> Flow:
        def flow(p: torch.Tensor, h: float, seed: int | None = None) -> torch.Tensor:
            x, y, z = p.unbind(-1)
            return torch.stack([x + h, y, z - self.eps * y * h / 2], -1)

        return flow

    def flow_y(self) -> Flow:
        def flow(p: torch.Tensor, h: float, seed: int | None = None) -> torch.Tensor:
            x, y, z = p.unbind(-1)
            return torch.stack([x, y + h, z + self.eps * x * h / 2], -1)

        return flow

    def bracket(self, p: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(p)
        out[..., 2] = self.eps
        return out


@dataclass
class Commuting:
    """Translations along the first two axes of ``R^dim``: commuting fields, bracket 0."""

    dim: int = 3

    def _unit(self, p: torch.Tensor, i: int) -> torch.Tensor:
        e = torch.zeros(self.dim, dtype=p.dtype, device=p.device)
        e[i] = 1.0
        return e.expand_as(p)

    def field_x(self, p: torch.Tensor) -> torch.Tensor:
        return self._unit(p, 0)

    def field_y(self, p: torch.Tensor) -> torch.Tensor:
        return self._unit(p, 1)

    def flow_x(self) -> Flow:
        return lambda p, h, seed=None: p + h * self._unit(p, 0)

    def flow_y(self) -> Flow:
        return lambda p, h, seed=None: p + h * self._unit(p, 1)

    def bracket(self, p: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(p)


class MLPReadout(torch.nn.Module):
    """A frozen random tanh MLP ``R^m -> R^out`` (float64): a readout ``f`` whose commutator truth
    is ``Df . [X, Y]`` (:meth:`pushforward`)."""

    def __init__(self, m: int, out: int = 32, hidden: int = 64, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.w1 = torch.randn(hidden, m, generator=gen, dtype=torch.float64) / np.sqrt(m)
        self.b1 = 0.1 * torch.randn(hidden, generator=gen, dtype=torch.float64)
        self.w2 = torch.randn(out, hidden, generator=gen, dtype=torch.float64) / np.sqrt(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x @ self.w1.T + self.b1) @ self.w2.T

    def pushforward(self, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``Df(x) v`` by one jvp."""
        return torch.func.jvp(self.forward, (x,), (v,))[1]
