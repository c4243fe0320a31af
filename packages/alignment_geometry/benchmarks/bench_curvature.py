"""What the curvature tools cost on the tiny aligned LM, as ratios to one training step.

One task-loss gradient step is the unit. Prints the seconds of a step, then one Fisher-vector
product (jvp + vjp on the harmful prompts), one Hessian-vector product (jvp of grad on the task),
the nested-jvp quartic coefficient, |H|_2 by eigsh, the top-9 Fisher eigenpairs by eigsh and by
the exact Gram decomposition, and the memory of a dense Fisher against the matrix-free operator.

    uv run python packages/alignment_geometry/benchmarks/bench_curvature.py
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from alignment_geometry import (
    CategoricalFisher,
    HessianOperator,
    build_system,
    hvp,
    quartic_coefficient,
    response_logits,
    sequence_nll,
    task_gradient,
)
from paper_common import markdown_table


def _seconds(fn: Callable[[], object], repeat: int = 5) -> float:
    fn()  # warm-up
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def main() -> None:
    torch.set_num_threads(1)
    system = build_system(0)
    space = system.space()
    theta = space.vector()
    loss = sequence_nll(space, system.task_batch("copy", 32, 0))
    logits = response_logits(space, system.harmful)
    fisher = CategoricalFisher(logits, theta)
    g = task_gradient(loss, theta)
    hg = hvp(loss, theta, g)
    step = _seconds(lambda: task_gradient(loss, theta))
    timings = {
        "Fisher-vector product": _seconds(lambda: fisher.matvec(g)),
        "Hessian-vector product": _seconds(lambda: hvp(loss, theta, g)),
        "c4 by nested jvp": _seconds(lambda: quartic_coefficient(logits, theta, g, hg)),
        "|H|_2 by eigsh": _seconds(lambda: HessianOperator(loss, theta).spectral_norm(), 1),
        "top-9 Fisher pairs by eigsh": _seconds(lambda: fisher.top_eigenpairs(9), 1),
        "exact decomposition (Gram)": _seconds(lambda: fisher.decompose(), 1),
    }
    rows = [{"operation": "training step (task gradient)", "seconds": step, "in steps": 1.0}]
    rows += [{"operation": k, "seconds": v, "in steps": v / step} for k, v in timings.items()]
    print(f"tiny LM: {space.size} parameters, {len(system.harmful)} harmful prompts, 1 thread")
    print(markdown_table(rows))
    p = space.size
    n_rows = fisher.n * fisher.k
    print()
    print(
        markdown_table(
            [
                {"representation": "dense Fisher P x P", "MiB": p * p * 8 / 2**20},
                {
                    "representation": "factor A (n K x P), exact decomposition",
                    "MiB": n_rows * p * 8 / 2**20,
                },
                {"representation": "matrix-free (jvp + vjp), one vector", "MiB": p * 8 / 2**20},
            ]
        )
    )


if __name__ == "__main__":
    main()
