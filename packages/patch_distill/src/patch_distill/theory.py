"""The population argument, checked numerically.

A masked target is ``t = g(context) + u`` with ``u`` independent of the visible context. Whatever
the predictor, the minimiser of the expected masked loss is the conditional expectation of the
target given the context:

- squared loss: ``f*(c) = E[t | c]``; floor ``E ||t - f*||^2 = E tr Var(t | c)``; the predictor
  keeps ``tr Var(E[t | c])`` of the target variance and none of ``u``;
- soft-target cross-entropy (iBOT's loss, teacher distribution ``p(. | c, v)``): ``q*(c) =
  E_v p(. | c, v)``; floor ``E_c H(q*(c))``; the averaged-out part is the Jensen gap
  ``E_{c,v} KL(p(. | c, v) || q*(c))`` above the teacher's own entropy.

:class:`GaussianPopulation` and :class:`DiscretePopulation` give the closed forms;
:func:`fit_gaussian` and :func:`fit_discrete` train a predictor by SGD on fresh population samples
(``visible=True`` also shows it ``u`` / ``v``: the unmasked case, which keeps everything) and
measure the same quantities on held-out samples.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class GaussianPopulation:
    """``c ~ N(0, I_dc)``, ``t = A c + u``, ``u ~ N(0, noise_std^2 I_dt)``; ``A`` fixed by ``seed``."""

    context_dim: int = 16
    target_dim: int = 8
    noise_std: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.context_dim < 1 or self.target_dim < 1 or self.noise_std < 0:
            raise ValueError("dimensions must be >= 1 and noise_std >= 0")

    @property
    def A(self) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.seed)
        return torch.randn(self.target_dim, self.context_dim, generator=gen) / self.context_dim**0.5

    def sample(
        self, n: int, gen: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(c, t, u)`` for ``n`` draws."""
        c = torch.randn(n, self.context_dim, generator=gen)
        u = self.noise_std * torch.randn(n, self.target_dim, generator=gen)
        return c, c @ self.A.T + u, u

    def closed_form(self, visible: bool = False) -> dict[str, float]:
        """Loss floor, retained (predictable) variance, target variance, retained share of ``u``."""
        predictable = float((self.A**2).sum())
        noise = self.target_dim * self.noise_std**2
        if visible:
            return {"loss_floor": 0.0, "retained_variance": predictable + noise,
                    "target_variance": predictable + noise, "retained_unpredictable": 1.0}  # fmt: skip
        return {"loss_floor": noise, "retained_variance": predictable,
                "target_variance": predictable + noise, "retained_unpredictable": 0.0}  # fmt: skip


def _r2(y: torch.Tensor, x: torch.Tensor) -> float:
    """Variance-weighted R^2 of the least-squares regression of ``y`` on ``x`` (with intercept)."""
    x1 = torch.cat([x, torch.ones(len(x), 1)], 1)
    beta = torch.linalg.lstsq(x1, y).solution
    resid = y - x1 @ beta
    return float(1 - resid.pow(2).sum() / (y - y.mean(0)).pow(2).sum())


def fit_gaussian(
    pop: GaussianPopulation, visible: bool = False, steps: int = 800, batch_size: int = 512,
    hidden: int = 64, lr: float = 3e-3, n_eval: int = 20000, seed: int = 0,
) -> dict[str, float]:  # fmt: skip
    """Train an MLP predictor of ``t`` from ``c`` (and ``u`` if ``visible``) with squared loss.

    Each step draws a fresh batch from the population. Returns the held-out ``loss``, the variance
    of the predictions ``retained_variance``, and ``retained_unpredictable`` = the share of ``u``'s
    variance that the predictions add, linearly, to what the context alone explains (0 when the
    prediction is a function of the context, 1 when it carries ``u``).
    """
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    d_in = pop.context_dim + (pop.target_dim if visible else 0)
    net = nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Linear(hidden, pop.target_dim))
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    for _ in range(steps):
        c, t, u = pop.sample(batch_size, gen)
        x = torch.cat([c, u], 1) if visible else c
        loss = F.mse_loss(net(x), t, reduction="none").sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    with torch.no_grad():
        c, t, u = pop.sample(n_eval, torch.Generator().manual_seed(seed + 2))
        pred = net(torch.cat([c, u], 1) if visible else c)
        return {
            "loss": float((pred - t).pow(2).sum(1).mean()),
            "retained_variance": float(pred.var(0).sum()),
            "target_variance": float(t.var(0).sum()),
            "retained_unpredictable": max(0.0, _r2(u, torch.cat([pred, c], 1)) - _r2(u, c)),
        }


@dataclass(frozen=True)
class DiscretePopulation:
    """Context token ``c`` (uniform over ``n_contexts``), hidden token ``v`` (uniform over
    ``n_hidden``, independent of ``c``), teacher distribution ``p(. | c, v) = softmax(L[c, v] /
    temperature)`` over ``n_prototypes`` with random logits ``L`` fixed by ``seed``."""

    n_contexts: int = 8
    n_hidden: int = 4
    n_prototypes: int = 16
    temperature: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        if min(self.n_contexts, self.n_hidden, self.n_prototypes) < 1 or self.temperature <= 0:
            raise ValueError("sizes must be >= 1 and temperature > 0")

    @property
    def teacher(self) -> torch.Tensor:
        """``(n_contexts, n_hidden, n_prototypes)`` teacher probabilities."""
        gen = torch.Generator().manual_seed(self.seed)
        logits = torch.randn(self.n_contexts, self.n_hidden, self.n_prototypes, generator=gen)
        return F.softmax(logits / self.temperature, dim=-1)

    def closed_form(self, visible: bool = False) -> dict[str, float]:
        """Cross-entropy floor, the teacher's own entropy and the Jensen (averaged-out) gap."""
        p = self.teacher
        teacher_entropy = float(-(p * p.log()).sum(-1).mean())
        if visible:
            return {
                "loss_floor": teacher_entropy,
                "teacher_entropy": teacher_entropy,
                "averaged_out": 0.0,
            }
        q = p.mean(1)  # E_v p(. | c, v)
        floor = float(-(q * q.log()).sum(-1).mean())
        return {
            "loss_floor": floor,
            "teacher_entropy": teacher_entropy,
            "averaged_out": floor - teacher_entropy,
        }


def fit_discrete(
    pop: DiscretePopulation, visible: bool = False, steps: int = 1500, batch_size: int = 512,
    lr: float = 0.1, seed: int = 0,
) -> dict[str, float]:  # fmt: skip
    """Train a logit table ``q(. | c)`` (or ``q(. | c, v)``) on sampled (c, v) with soft-target CE.

    Returns the exact expected ``loss`` of the trained predictor, the ``averaged_out`` part above
    the teacher entropy, and ``tv_to_optimum``: the mean total-variation distance to ``E_v p``.
    """
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    p = pop.teacher
    shape = (pop.n_contexts, pop.n_hidden if visible else 1, pop.n_prototypes)
    logits = torch.zeros(shape, requires_grad=True)
    opt = torch.optim.Adam([logits], lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    for _ in range(steps):
        c = torch.randint(pop.n_contexts, (batch_size,), generator=gen)
        v = torch.randint(pop.n_hidden, (batch_size,), generator=gen)
        log_q = F.log_softmax(logits[c, v if visible else 0], dim=-1)
        loss = -(p[c, v] * log_q).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    with torch.no_grad():
        log_q = F.log_softmax(logits, dim=-1).expand(pop.n_contexts, pop.n_hidden, pop.n_prototypes)
        expected = float(-(p * log_q).sum(-1).mean())
        target = p if visible else p.mean(1, keepdim=True).expand_as(p)
        tv = float(0.5 * (log_q.exp() - target).abs().sum(-1).mean())
        entropy = float(-(p * p.log()).sum(-1).mean())
    return {"loss": expected, "averaged_out": expected - entropy, "tv_to_optimum": tv}
