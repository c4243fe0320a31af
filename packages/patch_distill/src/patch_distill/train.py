"""One trainer for every objective: multi-crop views, masks, AdamW with warmup + cosine, EMA teacher."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn
from tqdm.auto import tqdm

from .augment import make_masks, multicrop
from .config import PretrainConfig
from .data import ImageSet
from .objectives import build_model


@dataclass
class PretrainResult:
    """A trained model: ``backbone`` (what to evaluate), the full ``model`` and the loss history."""

    config: PretrainConfig
    model: nn.Module
    history: list[dict[str, float]] = field(default_factory=list)

    @property
    def backbone(self) -> nn.Module:
        return self.model.backbone  # type: ignore[return-value]

    def loss_curve(self, key: str = "loss") -> list[float]:
        return [h[key] for h in self.history if key in h]


def momentum_at(step: int, steps: int, start: float, end: float) -> float:
    """Cosine schedule of the teacher momentum from ``start`` (step 0) to ``end`` (last step)."""
    if steps <= 1:
        return end
    return end - (end - start) * (math.cos(math.pi * step / (steps - 1)) + 1) / 2


def _lr_factor(step: int, steps: int, warmup: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return 0.5 * (1 + math.cos(math.pi * progress))


def resolve_device(device: torch.device | str | None) -> torch.device:
    """``device``, checked; ``None``: :func:`paper_common.device.pick_device` (cuda > mps > cpu,
    ``PAPER_DEVICE`` overrides)."""
    from paper_common.device import pick_device

    if device is None:
        return pick_device()
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device {device!r} is not a torch device name") from exc
    return dev if dev.type == "meta" else pick_device(str(dev))


def autocast_for(
    config: PretrainConfig, device: torch.device
) -> contextlib.AbstractContextManager[None]:
    """The forward pass's autocast context for ``config.precision`` on ``device`` (a no-op for
    ``float32``)."""
    if config.precision == "float32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=getattr(torch, config.precision))


def pretrain(
    config: PretrainConfig,
    data: ImageSet | torch.Tensor,
    progress: bool = False,
    callback: Callable[[int, dict[str, float]], None] | None = None,
    device: torch.device | str | None = None,
) -> PretrainResult:
    """Pretrain a ViT with ``config`` on ``data`` (images ``(n, 3, H, W)``), deterministic in seed.

    Each step draws a batch, two global crops of ``vit.img_size`` and ``n_local_crops`` local crops,
    masks for the student's global views when the patch term, a masked baseline or the masked
    lambda = 0 control asks for them, takes one AdamW step on the summed loss and moves the EMA
    teacher. ``device``: where the model and each batch live (``None``: the best available,
    :func:`resolve_device`; ``meta`` is refused with a ValueError); the data set stays where it
    is and the random draws come from one CPU generator, so a seed draws the same batches, crops
    and masks on any device. The forward pass runs under autocast at ``config.precision`` (the
    weights stay float32).
    """
    dev = resolve_device(device)
    if dev.type == "meta":
        raise ValueError(
            "device='meta' cannot pretrain: each step reads its loss back to check it is finite "
            "and to log it, and meta tensors hold no numbers (a meta step of the objective, "
            "model.losses, is what runs on meta); use cpu, cuda or mps"
        )
    images = data.images if isinstance(data, ImageSet) else data
    if images.dim() != 4 or images.shape[1] != 3:
        raise ValueError(f"images must be (n, 3, H, W), got {tuple(images.shape)}")
    if images.shape[0] < config.batch_size:
        raise ValueError(
            f"need at least batch_size={config.batch_size} images, got {images.shape[0]}"
        )
    torch.manual_seed(config.seed)
    gen = torch.Generator().manual_seed(config.seed)
    model = build_model(config).to(dev)
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() > 1]
    no_decay = [p for p in params if p.dim() <= 1]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": config.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=config.lr,
    )
    warmup = max(1, round(config.warmup_frac * config.steps))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _lr_factor(s, config.steps, warmup))
    grid = (config.vit.grid, config.vit.grid)
    n_local = config.n_local_crops if config.objective == "dino" else 0
    scaler = torch.amp.GradScaler(dev.type, enabled=config.precision == "float16")
    result = PretrainResult(config, model)
    model.train()
    bar = tqdm(range(config.steps), desc=config.label, disable=not progress, leave=False)
    for step in bar:
        idx = torch.randint(images.shape[0], (config.batch_size,), generator=gen, device=gen.device)
        batch = images[idx.to(images.device)].to(dev, non_blocking=True)
        globals_, locals_ = multicrop(
            batch, gen, config.vit.img_size, config.local_size, n_local,
            config.global_scale, config.local_scale, config.colour_jitter,
        )  # fmt: skip
        masks = (
            [
                make_masks(
                    config.batch_size, grid, config.mask_ratio, config.mask_mode, gen, device=dev
                )
                for _ in globals_
            ]
            if config.masks_student
            else None
        )
        with autocast_for(config, dev):
            terms = model.losses(globals_, locals_, masks)
        opt.zero_grad(set_to_none=True)
        scaler.scale(terms["loss"]).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(params, 3.0)
        scaler.step(opt)
        scaler.update()
        sched.step()
        model.update_teacher(momentum_at(step, config.steps, *config.momentum))
        values = torch.stack([v.detach().float() for v in terms.values()]).cpu().tolist()
        record = dict(zip(terms, values, strict=True))  # one device sync per step
        if not math.isfinite(record["loss"]):
            raise FloatingPointError(f"loss became {record['loss']} at step {step}; lower lr")
        result.history.append(record)
        if callback is not None:
            callback(step, record)
        if progress:
            bar.set_postfix(loss=f"{record['loss']:.3f}")
    model.eval()
    return result
