"""One call per experimental condition: split the task, build the arm's model, train, diagnose."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from torch import nn

from .baselines import Arm
from .cosets import coset_probe
from .fourier import fourier_analysis
from .model import ModelConfig, build_model
from .tasks import Split, Task, split
from .train import TrainConfig, TrainResult, train

__all__ = ["ArmRun", "run_arm"]


@dataclass
class ArmRun:
    """A trained arm: its data split, model, training log and metrics."""

    arm: Arm
    seed: int
    data: Split
    model: nn.Module
    result: TrainResult

    def row(self) -> dict[str, Any]:
        """One tidy row: task, arm, seed, what the arm trained with, and every metric."""
        cfg = self.result.config
        return {
            "task": self.data.task.name,
            "arm": self.arm.name,
            "variant": self.arm.variant,
            "head": self.arm.head,
            "seed": self.seed,
            "lr": cfg.lr,
            "weight_decay": cfg.weight_decay,
            "train_fraction": self.data.train_fraction,
            "grokfast": cfg.grokfast_alpha is not None,
            **self.result.metrics.as_row(),
            "seconds": round(self.result.seconds, 2),
        }

    def diagnostics(self, k: int = 5) -> dict[str, Any]:
        """Fourier analysis (Z_p tasks) or coset probes (S_n) of the trained embedding."""
        task = self.data.task
        if task.modulus is not None:
            report = fourier_analysis(self.model, self.data, k=k)
            return {"fourier": report.as_row(), "spectrum": report.spectrum.tolist()}
        weights = self.model.embed.weight.detach().cpu().numpy()
        assert task.degree is not None
        return {"cosets": coset_probe(weights, task.degree, seed=self.seed)}


def run_arm(
    task: Task,
    arm: Arm,
    seed: int,
    train_fraction: float,
    config: TrainConfig,
    progress: bool | None = False,
    **model_overrides: Any,
) -> ArmRun:
    """Train ``arm`` on ``task`` with ``seed`` (split and initial weights) and return the run.

    ``train_fraction`` and ``config`` are the experiment's; the arm's own weight decay, train
    fraction and Grokfast setting replace them. ``model_overrides`` size the model (``d_model``...).
    """
    data = split(task, arm.train_fraction or train_fraction, seed=seed)
    model_config = ModelConfig.for_task(task, arm.variant, **{**model_overrides, **dict(arm.model)})
    model = build_model(model_config, seed=seed)
    changes: dict[str, Any] = {}
    if arm.weight_decay is not None:
        changes["weight_decay"] = arm.weight_decay
    if arm.grokfast is not None:
        changes["grokfast_alpha"], changes["grokfast_lamb"] = arm.grokfast
    result = train(model, data, replace(config, **changes), progress=progress)
    return ArmRun(arm, seed, data, model, result)
