"""Multi-crop augmentation and patch masks, vectorised over the batch.

Crops are random-resized crops (area fraction in ``scale``, aspect ratio in [3/4, 4/3]) with a
horizontal flip drawn per image, done in one ``affine_grid``/``grid_sample`` call per view;
colour jitter is a per-image brightness, contrast and per-channel gain.

Random numbers are drawn from the caller's generator on its own device (the CPU for a CPU
generator) and moved to the images' device, so a seed gives the same crops and masks whatever
device the model trains on.
"""

from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F


def random_resized_crops(
    images: torch.Tensor,
    size: int,
    scale: tuple[float, float],
    gen: torch.Generator,
    jitter: float = 0.0,
) -> torch.Tensor:
    """One random-resized crop (with flip and colour jitter) per image, output ``size`` x ``size``."""
    n, dev = images.shape[0], images.device

    def draw(*shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=gen, device=gen.device).to(dev)

    area = scale[0] + (scale[1] - scale[0]) * draw(n)
    ratio = torch.exp((draw(n) * 2 - 1) * math.log(4 / 3))
    w = torch.sqrt(area * ratio).clamp(max=1.0)
    h = torch.sqrt(area / ratio).clamp(max=1.0)
    cx = (draw(n) * 2 - 1) * (1 - w)
    cy = (draw(n) * 2 - 1) * (1 - h)
    flip = torch.where(draw(n) < 0.5, -1.0, 1.0)
    zero = torch.zeros_like(w)
    theta = torch.stack(
        [torch.stack([w * flip, zero, cx], -1), torch.stack([zero, h, cy], -1)], 1
    ).to(images.dtype)
    grid = F.affine_grid(theta, [n, images.shape[1], size, size], align_corners=False)
    out = F.grid_sample(
        images, grid, mode="bilinear", padding_mode="reflection", align_corners=False
    )
    if jitter > 0:
        bright = 1 + jitter * (draw(n, 1, 1, 1) * 2 - 1)
        gain = 1 + 0.5 * jitter * (draw(n, out.shape[1], 1, 1) * 2 - 1)
        contrast = 1 + jitter * (draw(n, 1, 1, 1) * 2 - 1)
        mean = out.mean(dim=(1, 2, 3), keepdim=True)
        out = (out - mean) * contrast + mean
        out = out * bright * gain
    return out


def multicrop(
    images: torch.Tensor,
    gen: torch.Generator,
    global_size: int,
    local_size: int,
    n_local: int,
    global_scale: tuple[float, float],
    local_scale: tuple[float, float],
    jitter: float,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Two global crops and ``n_local`` local crops of every image."""
    globals_ = [
        random_resized_crops(images, global_size, global_scale, gen, jitter) for _ in range(2)
    ]
    locals_ = [
        random_resized_crops(images, local_size, local_scale, gen, jitter) for _ in range(n_local)
    ]
    return globals_, locals_


def make_masks(
    batch: int,
    grid: tuple[int, int],
    ratio: float,
    mode: str,
    gen: torch.Generator,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``(batch, rows, cols)`` boolean masks with exactly ``round(ratio * rows * cols)`` True each.

    ``random``: a uniformly random subset. ``block``: DINOv2-style rectangles from lightly's
    ``random_block_mask_image`` (which may stop short of the count), topped up with random patches
    so that every image has the configured ratio. Drawn on the generator's device, returned on
    ``device`` (default: the generator's).
    """
    if not 0.0 < ratio < 1.0:
        raise ValueError(f"mask ratio must be in (0, 1), got {ratio}")
    rows, cols = grid
    n = rows * cols
    k = max(1, round(ratio * n))
    out = gen.device if device is None else torch.device(device)
    noise = torch.rand(batch, n, generator=gen, device=gen.device)
    if mode == "random":
        idx = noise.argsort(dim=1)[:, :k]
        mask = torch.zeros(batch, n, dtype=torch.bool, device=gen.device)
        mask.scatter_(1, idx, True)
        return mask.reshape(batch, rows, cols).to(out)
    if mode != "block":
        raise ValueError(f"mask mode must be 'block' or 'random', got {mode!r}")
    from lightly.models.utils import random_block_mask_image

    state = random.getstate()  # lightly draws from Python's global RNG: seed it from ours, restore
    random.seed(int(torch.randint(2**31 - 1, (1,), generator=gen, device=gen.device)))
    try:
        blocks = torch.stack(
            [
                random_block_mask_image(
                    (rows, cols), num_masks=k, min_num_masks_per_block=min(4, k), device=gen.device
                )
                for _ in range(batch)
            ]
        ).reshape(batch, n)
    finally:
        random.setstate(state)
    # top up to exactly k: rank unmasked patches by noise and add the first (k - count)
    missing = k - blocks.sum(1, keepdim=True)
    score = torch.where(blocks, torch.full_like(noise, -1.0), noise)
    rank = score.argsort(dim=1, descending=True).argsort(dim=1)
    mask = blocks | (rank < missing)
    return mask.reshape(batch, rows, cols).to(out)
