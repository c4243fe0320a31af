"""What the Signal-Drift diagnostics cost, as a ratio to a plain LoRA training step.

Prints, for the regression MLP and the fact-LM knowledge-injection task: seconds per plain step,
the overhead of recording Signal-Drift + spectrum every step and every 10 steps, and one
10-iteration Hessian power iteration in units of training steps.

    uv run python packages/lora_alpha/benchmarks/bench_diagnostics.py
"""

from __future__ import annotations

import time

import torch

from lora_alpha import (
    KnowledgeInjectionTask,
    RegressionTask,
    SignalDriftCallback,
    get_lora_alpha_model,
    lora_alpha,
    reference_gradient,
    top_hessian_eigenvalue,
)
from paper_common import markdown_table


def _loop(task, steps: int, callback: SignalDriftCallback | None) -> float:
    torch.manual_seed(0)
    model = get_lora_alpha_model(
        task.base_model(), lora_alpha().lora_config(8, task.target_modules)
    )
    opt = lora_alpha().optimizer(model, 1e-4)
    batches = task.batches(32, 0)
    start = time.perf_counter()
    for step in range(1, steps + 1):
        loss = task.loss(model, next(batches))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if callback is not None:
            callback.on_step(model, step)
    return (time.perf_counter() - start) / steps


def main(steps: int = 100) -> None:
    rows = []
    for task in (RegressionTask(), KnowledgeInjectionTask()):
        wrapped = get_lora_alpha_model(
            task.base_model(), lora_alpha().lora_config(8, task.target_modules)
        )
        ref = reference_gradient(wrapped, task.loss, task.reference_batch())
        plain = _loop(task, steps, None)
        every1 = _loop(task, steps, SignalDriftCallback(ref, every=1))
        every10 = _loop(task, steps, SignalDriftCallback(ref, every=10))
        start = time.perf_counter()
        top_hessian_eigenvalue(wrapped, task.loss, task.reference_batch(), iters=10, tol=0)
        hessian = time.perf_counter() - start
        rows.append({
            "task": task.name,
            "plain step (ms)": 1e3 * plain,
            "Signal-Drift every step (x)": every1 / plain,
            "every 10 steps (x)": every10 / plain,
            "sharpness, 10 HVPs (steps)": hessian / plain,
        })  # fmt: skip
    print(markdown_table(rows))


if __name__ == "__main__":
    main()
