"""One LoRA fine-tuning run: a task, a scaling rule, a rank and a learning rate."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from tqdm.auto import tqdm

from lora_alpha.baselines import Method
from lora_alpha.config import get_lora_alpha_model
from lora_alpha.diagnostics import SignalDriftCallback, delta_weights, reference_gradient
from lora_alpha.tasks import Task


@dataclass
class RunResult:
    """What :func:`finetune` returns: the evaluation after training and the curves."""

    method: str
    r: int
    lr: float
    alpha: float
    scaling: float
    seed: int
    metrics: dict[str, float]
    losses: list[float]
    diagnostics: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0
    diverged: bool = False
    delta: dict[str, torch.Tensor] | None = field(default=None, repr=False)
    val_metrics: dict[str, float] = field(default_factory=dict)

    @property
    def loss(self) -> float:
        return self.metrics["loss"]

    @property
    def score(self) -> float:
        return self.metrics["score"]

    def row(self) -> dict[str, Any]:
        out = {
            "method": self.method,
            "r": self.r,
            "lr": self.lr,
            "alpha": self.alpha,
            "scaling": self.scaling,
            "seed": self.seed,
            **self.metrics,
            **{f"val_{k}": v for k, v in self.val_metrics.items()},
        }
        if self.diagnostics:
            last = self.diagnostics[-1]
            for k in ("drift_ratio", "cosine", "signal", "drift", "update_norm", "stable_rank"):
                if k in last:
                    out[k] = last[k]
        return out


#: A run diverged when its loss exceeds this many times the loss it started from ("ours": a run at
#: 100x the error it started from has blown up; finite losses of 2.6e14 used to pass as results).
DIVERGENCE_FACTOR = 100.0
#: Training is judged on this many consecutive batches ("ours"): a run stops as diverged only when
#: every one of them is above the limit (a spike that recovers is not a divergence).
DIVERGENCE_WINDOW = 10


def diverged_metrics(metrics: Mapping[str, float]) -> dict[str, float]:
    """The metrics a diverged run reports: loss ``inf``, score ``-inf`` (the worst: a regression
    score can be negative, so 0 would rank a blow-up above a finite bad run), every other metric
    NaN."""
    return {**dict.fromkeys(metrics, math.nan), "loss": math.inf, "score": -math.inf}


def within_limit(loss: float, start: float, factor: float = DIVERGENCE_FACTOR) -> bool:
    """Is a final evaluation ``loss`` a result (finite and at most ``factor`` times ``start``, the
    same split's loss before training)? A start of 0 or below allows any finite loss."""
    if not math.isfinite(loss):
        return False
    return not (math.isfinite(start) and start > 0) or loss <= factor * start


def finetune(
    task: Task,
    method: Method,
    r: int = 8,
    lr: float = 1e-4,
    steps: int = 200,
    batch_size: int = 32,
    seed: int = 0,
    diagnostics: bool | SignalDriftCallback = False,
    diagnostics_every: int = 20,
    reference: Mapping[str, torch.Tensor] | None = None,
    keep_delta: bool = False,
    progress: bool = False,
    validate: bool = False,
    divergence_factor: float = DIVERGENCE_FACTOR,
    freeze_a: bool = False,
) -> RunResult:
    """Fine-tune ``task.base_model()`` with LoRA adapters of rank ``r`` scaled by ``method``.

    Adapters are initialised with ``seed`` (peft's default: A Kaiming-uniform, B zero); batches
    follow ``seed`` too. A run diverged when its training loss turns non-finite, or stays above
    ``divergence_factor`` times its first training loss for :data:`DIVERGENCE_WINDOW` consecutive
    batches (it stops early), or when its final evaluation loss on a split (test, validation) is
    non-finite or above ``divergence_factor`` times the same split's loss before training (a spike
    that recovers, or a gap between the training and test losses, is no divergence). A diverged run counts as
    loss ``inf`` and score ``-inf`` (the rule :meth:`~lora_alpha.SweepResult.mean` documents); its other
    metrics are NaN (not measured: a model with non-finite weights answers at random).

    ``diagnostics=True`` records Signal-Drift every ``diagnostics_every`` steps against
    ``reference`` (default: the full-fine-tuning gradient of ``task.reference_batch()``); pass a
    :class:`~lora_alpha.diagnostics.SignalDriftCallback` instead to add sharpness.
    ``keep_delta=True`` keeps the final ``{layer: s * B @ A}`` in ``RunResult.delta``.
    ``validate=True`` also evaluates ``task.evaluate(model, "validation")`` into
    ``RunResult.val_metrics`` (what hyper-parameters are chosen on; the test metrics are reported).
    ``freeze_a=True`` trains only the ``lora_B`` matrices (``lora_A`` stays at its initialisation):
    with Adam and no weight decay, alpha x k and lr x k then give the same ``dW`` trajectory up to
    Adam's eps (the control of the alpha-vs-lr claims).
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1; got {steps}")
    if not (math.isfinite(divergence_factor) and divergence_factor > 1):
        raise ValueError(
            f"divergence_factor must be a finite number > 1; got {divergence_factor!r}"
        )
    torch.manual_seed(seed)
    model = get_lora_alpha_model(
        task.base_model(),
        method.lora_config(r, task.target_modules, **task.lora_kwargs),
        alpha_of_rank=method.lora_alpha,
    )
    if freeze_a:
        frozen = [p for n, p in model.named_parameters() if "lora_A" in n]
        if not frozen:
            raise ValueError("freeze_a=True but the model has no lora_A parameters")
        for p in frozen:
            p.requires_grad_(False)
    opt = method.optimizer(model, lr)
    before = {"test": task.evaluate(model)["loss"]}
    if validate:
        before["validation"] = task.evaluate(model, "validation")["loss"]
    callback: SignalDriftCallback | None
    if isinstance(diagnostics, SignalDriftCallback):
        callback = diagnostics
    elif diagnostics:
        if reference is None:
            reference = reference_gradient(model, task.loss, task.reference_batch())
        callback = SignalDriftCallback(reference, every=diagnostics_every)
    else:
        callback = None
    losses: list[float] = []
    diverged = False
    limit = math.inf
    start = time.perf_counter()
    batches = task.batches(batch_size, seed)
    above = 0  # consecutive training losses above the limit
    for step in tqdm(range(steps), desc=method.name, disable=not progress, leave=False):
        model.train()
        loss = task.loss(model, next(batches))
        if not torch.isfinite(loss):
            diverged = True
            break
        above = above + 1 if loss.item() > limit else 0
        if above >= DIVERGENCE_WINDOW:
            diverged = True
            break
        if step == 0 and loss.item() > 0:
            limit = divergence_factor * loss.item()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if callback is not None:
            callback.on_step(model, step + 1, losses[-1], force=step + 1 == steps)
    metrics = task.evaluate(model)
    val_metrics = task.evaluate(model, "validation") if validate else {}
    for split, m in (("test", metrics), ("validation", val_metrics)):
        if m and not within_limit(m["loss"], before[split], divergence_factor):
            diverged = True
    if diverged:
        metrics = diverged_metrics(metrics)
        val_metrics = diverged_metrics(val_metrics) if validate else {}
    return RunResult(
        method=method.name,
        r=r,
        lr=lr,
        alpha=method.lora_alpha(r),
        scaling=method.scaling(r),
        seed=seed,
        metrics=metrics,
        losses=losses,
        diagnostics=callback.history if callback is not None else [],
        seconds=time.perf_counter() - start,
        diverged=diverged,
        delta=delta_weights(model) if keep_delta else None,
        val_metrics=val_metrics,
    )
