"""A small U-Net score model (diffusers ``UNet2DModel``) trained by denoising score matching on
images, with the same per-class memorisation measurements as the random-features model.

The network predicts the noise ``z`` of ``x_t = e^{-t} x_0 + sqrt(Delta_t) z``; its score is
``s(x, t) = -z_hat / sqrt(Delta_t)``. Training samples ``t`` log-uniformly in ``[t_min, t_max]``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from .data import ImageSet
from .dynamics import Crossing, crossing
from .mixture import delta
from .sampling import copy_fraction, sample

TIME_SCALE = 100.0  # diffusers' sinusoidal embedding expects timesteps ~ 1..1000


def make_unet(image_size: int, channels: tuple[int, ...] = (16, 32), seed: int = 0):
    """A ``UNet2DModel`` for 1-channel ``image_size`` x ``image_size`` images."""
    from diffusers import UNet2DModel

    if image_size % 2 ** (len(channels) - 1):
        raise ValueError(f"image_size {image_size} must be divisible by 2^{len(channels) - 1}")
    torch.manual_seed(seed)
    return UNet2DModel(
        sample_size=image_size, in_channels=1, out_channels=1, block_out_channels=channels,
        down_block_types=("DownBlock2D",) * len(channels),
        up_block_types=("UpBlock2D",) * len(channels),
        layers_per_block=1, norm_num_groups=min(8, channels[0]),
    )  # fmt: skip


def predict_noise(model: torch.nn.Module, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return model(x.float(), (t * TIME_SCALE).float()).sample


def unet_score(model: torch.nn.Module) -> Callable[[torch.Tensor, float], torch.Tensor]:
    """The score function ``(x, t) -> s(x, t)`` of a noise-predicting U-Net (for the samplers)."""

    @torch.no_grad()
    def score(x: torch.Tensor, t: float) -> torch.Tensor:
        tt = torch.full((x.shape[0],), t)
        return -predict_noise(model, x, tt).to(x.dtype) / float(delta(t)) ** 0.5

    return score


@torch.no_grad()
def class_losses(
    model: torch.nn.Module, data: ImageSet, ts: tuple[float, ...], n_noise: int = 4, seed: int = 0,
    batch: int = 512,
) -> dict[int, float]:  # fmt: skip
    """Per-class DSM loss ``E ||z_hat - z||^2 / D`` at the times ``ts``, with noise fixed by ``seed``
    (so that successive checkpoints are compared on the same draws)."""
    gen = torch.Generator().manual_seed(seed)
    x0 = data.images.float().repeat(n_noise * len(ts), 1, 1, 1)
    lab = data.labels.repeat(n_noise * len(ts))
    t = torch.tensor(ts, dtype=torch.float32).repeat_interleave(n_noise * len(data))
    z = torch.randn(x0.shape, generator=gen)
    xt = torch.exp(-t)[:, None, None, None] * x0 + delta(t).float().sqrt()[:, None, None, None] * z
    err = torch.cat([
        (predict_noise(model, xt[s : s + batch], t[s : s + batch]) - z[s : s + batch]).pow(2)
        .flatten(1).mean(1) for s in range(0, len(t), batch)
    ])  # fmt: skip
    return {int(c): float(err[lab == c].mean()) for c in torch.unique(lab)}


@dataclass
class UNetRun:
    """Per-class curves over training steps and the onset times derived from them (``tau_mem[c]``
    censored at the last evaluation when class ``c`` never started to memorise)."""

    steps: list[int] = field(default_factory=list)
    train_loss: dict[int, list[float]] = field(default_factory=dict)
    test_loss: dict[int, list[float]] = field(default_factory=dict)
    tau_mem: dict[int, Crossing] = field(default_factory=dict)

    def gap(self, c: int) -> np.ndarray:
        return np.asarray(self.test_loss[c]) - np.asarray(self.train_loss[c])


def train_unet(
    model: torch.nn.Module, train: ImageSet, test: ImageSet, steps: int = 2000, batch: int = 128,
    lr: float = 2e-3, t_min: float = 1e-2, t_max: float = 3.0, n_evals: int = 15,
    eval_ts: tuple[float, ...] = (0.05, 0.2), eval_noise: int = 4, mem_tol: float = 0.05, seed: int = 0,
    progress: bool = False,
) -> UNetRun:  # fmt: skip
    """Adam on the DSM loss; at ``n_evals`` log-spaced steps the per-class train and test losses.

    ``tau_mem[c]`` = first step at which class ``c``'s test - train gap has grown, from its value at
    the first evaluation, by ``mem_tol`` times the test loss at that step (log-interpolated), as a
    :class:`~.dynamics.Crossing`: censored at the last evaluation (``steps``) if it never did.
    """
    if steps < 1 or n_evals < 2:
        raise ValueError("need steps >= 1 and n_evals >= 2")
    evals = set(np.unique(np.geomspace(max(1, steps // 50), steps, n_evals).round().astype(int)))
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    x_all = train.images.float()
    run = UNetRun()
    lo, hi = math.log(t_min), math.log(t_max)
    for step in tqdm(range(1, steps + 1), disable=not progress, desc="U-Net"):
        idx = torch.randint(len(train), (batch,), generator=gen)
        t = torch.exp(lo + (hi - lo) * torch.rand(batch, generator=gen))
        z = torch.randn((batch, *x_all.shape[1:]), generator=gen)
        a, s = torch.exp(-t)[:, None, None, None], delta(t).float().sqrt()[:, None, None, None]
        loss = (predict_noise(model, a * x_all[idx] + s * z, t) - z).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step in evals:
            model.eval()
            tr = class_losses(model, train, eval_ts, eval_noise, seed=seed + 1)
            te = class_losses(model, test, eval_ts, eval_noise, seed=seed + 2)
            model.train()
            run.steps.append(step)
            for c in tr:
                run.train_loss.setdefault(c, []).append(tr[c])
                run.test_loss.setdefault(c, []).append(te[c])
    st = np.asarray(run.steps, dtype=float)
    for c in run.train_loss:
        # the held-out images differ from the training ones before any memorisation: measure the
        # gap's growth from the first evaluation
        g = run.gap(c)
        rel = (g - g[0]) / np.asarray(run.test_loss[c])
        run.tau_mem[c] = crossing(st, rel, mem_tol, above=True)
    return run


def class_copy_fractions(
    model: torch.nn.Module, train: ImageSet, classify: Callable[[torch.Tensor], torch.Tensor],
    n: int = 500, steps: int = 200, seed: int = 0,
) -> tuple[dict[int, float], torch.Tensor, torch.Tensor]:  # fmt: skip
    """Generate ``n`` images, assign each a class with ``classify`` (flattened images -> labels), and
    return per class the fraction that copy a training image (d1/d2 < 1/3 over the whole set),
    with the flattened samples and their classes."""
    shape = train.images.shape[1:]
    flat = int(np.prod(shape))
    score = unet_score(model)
    xs = sample(lambda x, t: score(x.reshape(-1, *shape), t).reshape(-1, flat), n, flat,
                t_max=4.0, t_min=1e-2, steps=steps, seed=seed)  # fmt: skip
    cls = classify(xs)
    copies = copy_fraction(xs, train.flat)
    frac = {int(c): float(copies[cls == c].double().mean()) for c in torch.unique(cls)}
    return frac, xs, cls
