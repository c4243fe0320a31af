"""Sparse autoencoders: a trainable TopK SAE (Gao et al.) and an inference-only JumpReLU SAE (Gemma Scope).

:class:`TopKSAE` holds ``G`` independent SAEs of one width in stacked tensors, so a whole sweep
(layers x seeds x sparsities) trains as a few batched matrix products instead of hundreds of small
loops; ``G = 1`` is the ordinary single SAE. Each member has its own ``k``.

Definitions (Gao et al. 2024, §2; SAELens's TopK SAE):

* encode: ``z = TopK_k(relu(W_enc^T (x - b_dec) + b_enc))``; decode: ``x_hat = W_dec^T z + b_dec``;
* decoder rows (one per latent) have unit norm, renormalised after every step, and the gradient
  parallel to each row is removed before the step;
* ``W_enc = W_dec^T`` at initialisation, ``b_dec`` = the geometric median of the data;
* AuxK: the residual ``e = x - x_hat`` is reconstructed from the top ``k_aux`` pre-activations of the
  dead latents (none fired in the last ``dead_tokens`` training tokens); loss
  ``NMSE(x_hat) + aux_coef * NMSE_e(e_hat)``, ``k_aux = d_in / 2``, ``aux_coef = 1/32``.

Shapes: ``x`` is ``(batch, d_in)`` for ``G = 1`` or ``(G, batch, d_in)``; latents ``(G, batch, n)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

__all__ = [
    "JumpReLUSAE",
    "SAETrainConfig",
    "TopKSAE",
    "fvu",
    "geometric_median",
    "l0",
    "train_sae",
]


def _as_tensor(x: torch.Tensor | np.ndarray, name: str = "x") -> torch.Tensor:
    t = torch.as_tensor(x)
    if not torch.is_floating_point(t):
        t = t.float()
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} has non-finite values (NaN or inf); clean the activations first")
    return t


def fvu(x: torch.Tensor, x_hat: torch.Tensor) -> torch.Tensor:
    """Fraction of variance unexplained, ``sum ||x - x_hat||^2 / sum ||x - mean(x)||^2``.

    ``x``, ``x_hat``: ``(..., batch, d)``; one value per leading index (a scalar for 2-D input).
    """
    err = (x - x_hat).pow(2).sum((-1, -2))
    var = (x - x.mean(-2, keepdim=True)).pow(2).sum((-1, -2))
    return err / var.clamp_min(torch.finfo(var.dtype).tiny)


def l0(z: torch.Tensor) -> torch.Tensor:
    """Mean number of non-zero latents per input: ``z`` ``(..., batch, n)`` -> ``(...)``."""
    return (z != 0).float().sum(-1).mean(-1)


def geometric_median(x: torch.Tensor, iters: int = 50, tol: float = 1e-5) -> torch.Tensor:
    """Weiszfeld's geometric median of ``x`` ``(..., n, d)`` -> ``(..., d)``, batched over leading dims."""
    x = _as_tensor(x)
    y = x.mean(-2)
    for _ in range(iters):
        dist = (x - y.unsqueeze(-2)).norm(dim=-1).clamp_min(1e-12)
        w = 1.0 / dist
        new = (w.unsqueeze(-1) * x).sum(-2) / w.sum(-1, keepdim=True)
        moved = (new - y).norm(dim=-1).max()
        y = new
        if moved < tol * (1.0 + y.norm(dim=-1).max()):
            break
    return y


class TopKSAE(nn.Module):
    """``G`` TopK sparse autoencoders ``R^d_in -> R^n_latents -> R^d_in``, stacked.

    Args:
        d_in: input dimension.
        n_latents: dictionary width ``n``.
        k: active latents per input; an int, or one per member (a sequence of length ``G``).
        n_saes: ``G``, the number of stacked members (default 1, or ``len(k)``).
        seed: initialisation seed (each member gets its own draw).
        apply_b_dec_to_input: subtract ``b_dec`` before encoding (Gao et al.; SAELens's default).

    Parameters (SAELens orientation, with a leading member axis): ``W_enc (G, d_in, n)``,
    ``W_dec (G, n, d_in)``, ``b_enc (G, n)``, ``b_dec (G, d_in)``.
    """

    def __init__(
        self,
        d_in: int,
        n_latents: int,
        k: int | Sequence[int],
        n_saes: int | None = None,
        seed: int = 0,
        apply_b_dec_to_input: bool = True,
    ) -> None:
        super().__init__()
        ks = [k] if isinstance(k, int | np.integer) else list(k)
        n_saes = n_saes if n_saes is not None else len(ks)
        if len(ks) == 1:
            ks = ks * n_saes
        if len(ks) != n_saes:
            raise ValueError(f"k must be an int or have one entry per member ({n_saes}); got {k!r}")
        for name, value in [("d_in", d_in), ("n_latents", n_latents), ("n_saes", n_saes)]:
            if not isinstance(value, int | np.integer) or value < 1:
                raise ValueError(f"{name} must be a positive int; got {value!r}")
        for kk in ks:
            if not isinstance(kk, int | np.integer) or not 1 <= kk <= n_latents:
                raise ValueError(
                    f"k must be an int in [1, n_latents={n_latents}]; got {kk!r} "
                    "(a TopK SAE cannot keep more latents than it has)"
                )
        self.d_in, self.n_latents, self.n_saes = int(d_in), int(n_latents), int(n_saes)
        self.apply_b_dec_to_input = apply_b_dec_to_input
        self.register_buffer("k", torch.tensor([int(kk) for kk in ks]))
        gen = torch.Generator().manual_seed(seed)
        w = torch.randn(n_saes, n_latents, d_in, generator=gen)
        w = w / w.norm(dim=-1, keepdim=True)
        self.W_dec = nn.Parameter(w)
        self.W_enc = nn.Parameter(w.transpose(1, 2).clone())
        self.b_enc = nn.Parameter(torch.zeros(n_saes, n_latents))
        self.b_dec = nn.Parameter(torch.zeros(n_saes, d_in))

    @property
    def k_max(self) -> int:
        return int(self.k.max())

    def _stacked(
        self, x: torch.Tensor, data_index: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, bool]:
        """``x`` as ``(M, N, d_in)`` and whether the input was a single SAE's 2-D batch. Without
        ``data_index`` ``M`` must be ``G`` (or ``x`` 2-D, shared); with it member ``g`` reads
        ``x[data_index[g]]``, so members that share data need one copy."""
        x = _as_tensor(x).to(self.W_enc.dtype)
        if data_index is not None:
            data_index = torch.as_tensor(data_index, dtype=torch.long)
            if x.ndim != 3 or data_index.shape != (self.n_saes,):
                raise ValueError(
                    f"with data_index, x must be (M, N, {self.d_in}) and data_index ({self.n_saes},)"
                )
            if int(data_index.min()) < 0 or int(data_index.max()) >= x.shape[0]:
                raise ValueError(f"data_index must be in [0, {x.shape[0]})")
        elif x.ndim == 2 and self.n_saes == 1:
            return x.unsqueeze(0), True
        elif x.ndim == 2:
            return x.unsqueeze(0).expand(self.n_saes, -1, -1), False
        elif x.ndim != 3 or x.shape[0] != self.n_saes:
            raise ValueError(
                f"x must be (batch, {self.d_in}) or ({self.n_saes}, batch, {self.d_in}); "
                f"got {tuple(x.shape)}"
            )
        if x.shape[-1] != self.d_in:
            raise ValueError(f"x has {x.shape[-1]} features; this SAE expects d_in={self.d_in}")
        return x, False

    def _rows(self, xs: torch.Tensor, data_index: torch.Tensor | None) -> torch.Tensor:
        """Which row of the stacked data ``xs`` each member reads."""
        if data_index is not None:
            return torch.as_tensor(data_index, dtype=torch.long)
        if xs.shape[0] == 1:
            return torch.zeros(self.n_saes, dtype=torch.long)
        return torch.arange(self.n_saes)

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        """``relu(W_enc^T (x - b_dec) + b_enc)``: ``(G, batch, n)``; ``x`` ``(G, batch, d_in)``."""
        if self.apply_b_dec_to_input:
            x = x - self.b_dec.unsqueeze(1)
        return torch.relu(torch.baddbmm(self.b_enc.unsqueeze(1), x, self.W_enc))

    def _topk(self, pre: torch.Tensor) -> torch.Tensor:
        """Keep each member's top ``k`` pre-activations (``(G, batch, n)``), zero the rest."""
        vals, idx = pre.topk(self.k_max, dim=-1)
        keep = torch.arange(self.k_max, device=pre.device) < self.k.view(-1, 1, 1)
        return torch.zeros_like(pre).scatter(-1, idx, vals * keep)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Sparse codes: ``(batch, n)`` for ``G = 1`` and 2-D input, else ``(G, batch, n)``."""
        xs, single = self._stacked(x)
        z = self._topk(self.pre_activations(xs))
        return z[0] if single else z

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """``W_dec^T z + b_dec``: ``(G, batch, d_in)`` (or ``(batch, d_in)`` for 2-D ``z``)."""
        if z.ndim == 2:
            return z @ self.W_dec[0] + self.b_dec[0]
        return torch.baddbmm(self.b_dec.unsqueeze(1), z, self.W_dec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Reconstruction ``x_hat``, the same shape as ``x``."""
        return self.decode(self.encode(x))

    @torch.no_grad()
    def normalize_decoder(self) -> None:
        """Rescale every decoder row to unit norm."""
        self.W_dec.div_(self.W_dec.norm(dim=-1, keepdim=True).clamp_min(1e-12))

    @torch.no_grad()
    def remove_parallel_gradient(self) -> None:
        """Project out the component of ``W_dec.grad`` along each (unit) decoder row."""
        if self.W_dec.grad is not None:
            g, w = self.W_dec.grad, self.W_dec
            g.sub_((g * w).sum(-1, keepdim=True) * w)

    def member(self, i: int) -> TopKSAE:
        """Member ``i`` as a stand-alone ``G = 1`` SAE (a copy)."""
        if not 0 <= i < self.n_saes:
            raise ValueError(f"member index must be in [0, {self.n_saes}); got {i}")
        out = TopKSAE(self.d_in, self.n_latents, int(self.k[i]), 1, 0, self.apply_b_dec_to_input)
        with torch.no_grad():
            for name in ("W_enc", "W_dec", "b_enc", "b_dec"):
                getattr(out, name).copy_(getattr(self, name)[i : i + 1])
        return out.to(self.W_enc.dtype)

    @torch.no_grad()
    def evaluate(
        self, x: torch.Tensor, batch_size: int = 4096, data_index: torch.Tensor | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(fvu, l0)`` per member on ``x`` (``(N, d_in)`` shared or ``(G, N, d_in)``, or with
        ``data_index`` as in :func:`train_sae`), in batches."""
        xs, _ = self._stacked(x, data_index)
        rows = self._rows(xs, data_index)
        err = torch.zeros(self.n_saes, dtype=torch.float64)
        active = torch.zeros(self.n_saes, dtype=torch.float64)
        var = (xs - xs.mean(1, keepdim=True)).pow(2).sum((1, 2)).double()[rows]
        for s in range(0, xs.shape[1], batch_size):
            xb = xs[:, s : s + batch_size][rows]
            z = self._topk(self.pre_activations(xb))
            err += (xb - self.decode(z)).pow(2).sum((1, 2)).double()
            active += (z != 0).sum((1, 2)).double()
        return (err / var).numpy(), (active / xs.shape[1]).numpy()


class JumpReLUSAE(nn.Module):
    """An inference-only JumpReLU SAE (Gemma Scope, Rajamanoharan et al. 2024).

    ``pre = x W_enc + b_enc``, ``z = pre * 1[pre > threshold]``, ``x_hat = z W_dec + b_dec`` with
    ``W_enc (d_in, d_sae)``, ``W_dec (d_sae, d_in)``, ``b_enc (d_sae,)``, ``b_dec (d_in,)``,
    ``threshold (d_sae,)``. A standard ReLU SAE is the special case ``threshold = 0``.
    ``apply_b_dec_to_input`` subtracts ``b_dec`` first (``pre = (x - b_dec) W_enc + b_enc``), as
    SAELens's standard SAEs do; Gemma Scope's JumpReLU SAEs do not (the default).
    """

    def __init__(
        self,
        W_enc: torch.Tensor | np.ndarray,
        W_dec: torch.Tensor | np.ndarray,
        b_enc: torch.Tensor | np.ndarray,
        b_dec: torch.Tensor | np.ndarray,
        threshold: torch.Tensor | np.ndarray,
        apply_b_dec_to_input: bool = False,
    ) -> None:
        super().__init__()
        self.apply_b_dec_to_input = bool(apply_b_dec_to_input)
        tensors = {
            "W_enc": W_enc,
            "W_dec": W_dec,
            "b_enc": b_enc,
            "b_dec": b_dec,
            "threshold": threshold,
        }
        t = {k: _as_tensor(v, k).float() for k, v in tensors.items()}
        d_in, d_sae = t["W_enc"].shape if t["W_enc"].ndim == 2 else (None, None)
        expected = {
            "W_enc": (d_in, d_sae),
            "W_dec": (d_sae, d_in),
            "b_enc": (d_sae,),
            "b_dec": (d_in,),
            "threshold": (d_sae,),
        }
        for name, shape in expected.items():
            if d_in is None or tuple(t[name].shape) != shape:
                raise ValueError(
                    f"{name} has shape {tuple(t[name].shape)}; expected {shape} "
                    "(W_enc must be (d_in, d_sae))"
                )
        self.d_in, self.n_latents = int(d_in), int(d_sae)
        for name, value in t.items():
            self.register_buffer(name, value)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., d_in) -> (..., d_sae)``."""
        x = _as_tensor(x).to(self.W_enc.dtype)
        if self.apply_b_dec_to_input:
            x = x - self.b_dec
        pre = x @ self.W_enc + self.b_enc
        return pre * (pre > self.threshold)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return z @ self.W_dec + self.b_dec

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))

    @torch.no_grad()
    def evaluate(self, x: torch.Tensor, batch_size: int = 4096) -> tuple[float, float]:
        """``(fvu, l0)`` on ``x`` ``(N, d_in)``."""
        x = _as_tensor(x).to(self.W_enc.dtype)
        if x.ndim != 2 or x.shape[1] != self.d_in:
            raise ValueError(f"x must be (N, {self.d_in}); got {tuple(x.shape)}")
        err = active = 0.0
        for s in range(0, len(x), batch_size):
            z = self.encode(x[s : s + batch_size])
            err += float((x[s : s + batch_size] - self.decode(z)).double().pow(2).sum())
            active += float((z != 0).sum())
        var = float((x - x.mean(0)).double().pow(2).sum())
        return err / var, active / len(x)


@dataclass(frozen=True)
class SAETrainConfig:
    """Training settings for :func:`train_sae` (Adam, Gao et al.'s TopK recipe at small scale).

    ``dead_tokens``: a latent that has not fired in this many training tokens is dead (Gao et al.
    use 10M tokens; here it scales with the data). ``k_aux``: ``None`` is ``d_in // 2``.
    """

    steps: int = 1000
    batch_size: int = 512
    lr: float = 2e-3
    k_aux: int | None = None
    aux_coef: float = 1.0 / 32.0
    dead_tokens: int = 20_000
    warmup_fraction: float = 0.05
    median_sample: int = 2048
    losses: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "dead_tokens", "median_sample"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"SAETrainConfig.{name} must be a positive int; got {value!r}")
        if not self.lr > 0:
            raise ValueError(f"SAETrainConfig.lr must be > 0; got {self.lr}")
        if self.aux_coef < 0:
            raise ValueError(f"SAETrainConfig.aux_coef must be >= 0; got {self.aux_coef}")
        if self.k_aux is not None and self.k_aux < 1:
            raise ValueError(f"SAETrainConfig.k_aux must be >= 1 or None; got {self.k_aux}")
        if not 0 <= self.warmup_fraction < 1:
            raise ValueError(
                f"SAETrainConfig.warmup_fraction must be in [0, 1); got {self.warmup_fraction}"
            )


def train_sae(
    sae: TopKSAE,
    x: torch.Tensor | np.ndarray,
    config: SAETrainConfig | None = None,
    seed: int = 0,
    progress: bool = False,
    b_dec: torch.Tensor | None = None,
    data_index: torch.Tensor | None = None,
) -> list[float]:
    """Train ``sae`` in place on ``x``: ``(N, d_in)`` shared by all members, or ``(G, N, d_in)``.

    Every member draws the same batch indices (members differ by data, ``k`` and initialisation).
    ``b_dec`` (``(G, d_in)``) initialises the decoder bias; by default the geometric median of
    ``config.median_sample`` training rows. ``data_index`` (``(G,)``): member ``g`` trains on
    ``x[data_index[g]]`` of ``x`` ``(M, N, d_in)``, so members sharing data need one copy.
    Returns the mean training NMSE per step when ``config.losses`` is set, else ``[]``.
    """
    config = config or SAETrainConfig()
    xs, _ = sae._stacked(torch.as_tensor(x), data_index)
    rows = sae._rows(xs, data_index)
    n = xs.shape[1]
    if n < 2:
        raise ValueError(f"train_sae needs at least 2 inputs; got {n}")
    k_aux = config.k_aux or max(1, sae.d_in // 2)
    k_aux = min(k_aux, sae.n_latents)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        if b_dec is None:
            sample = xs[:, torch.randperm(n, generator=gen)[: config.median_sample]]
            b_dec = geometric_median(sample.double())[rows]
        sae.b_dec.copy_(torch.as_tensor(b_dec).reshape(sae.b_dec.shape).to(sae.b_dec.dtype))
        sae.normalize_decoder()
    opt = torch.optim.Adam(sae.parameters(), lr=config.lr, betas=(0.9, 0.999), eps=6.25e-10)
    warm = max(1, int(config.warmup_fraction * config.steps))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm))
    since_fired = torch.zeros(sae.n_saes, sae.n_latents)
    dead_after = math.ceil(config.dead_tokens / config.batch_size)
    losses: list[float] = []
    from tqdm.auto import tqdm

    for _ in tqdm(range(config.steps), desc="sae", disable=not progress, leave=False):
        idx = torch.randint(0, n, (config.batch_size,), generator=gen)
        xb = xs[:, idx][rows]
        pre = sae.pre_activations(xb)
        z = sae._topk(pre)
        x_hat = sae.decode(z)
        loss = fvu(xb, x_hat)
        with torch.no_grad():
            fired = (z != 0).any(1)
            since_fired = torch.where(fired, 0.0, since_fired + 1)
            dead = since_fired >= dead_after
        if config.aux_coef > 0 and bool(dead.any()):
            e = (xb - x_hat).detach()
            masked = pre.masked_fill(~dead.unsqueeze(1), -1.0)
            a_vals, a_idx = masked.topk(k_aux, dim=-1)
            a_vals = a_vals.clamp_min(0.0)  # live latents (marked -1) contribute nothing
            e_hat = torch.bmm(torch.zeros_like(pre).scatter(-1, a_idx, a_vals), sae.W_dec)
            aux = fvu(e, e_hat) * dead.any(-1)
            loss = loss + config.aux_coef * torch.nan_to_num(aux, nan=0.0)
        opt.zero_grad(set_to_none=True)
        loss.sum().backward()
        sae.remove_parallel_gradient()
        opt.step()
        sched.step()
        sae.normalize_decoder()
        if config.losses:
            losses.append(float(loss.detach().mean()))
    return losses
