"""The sizes of the experiment: one frozen :class:`Scale` per scale (smoke, quick, full)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Scale:
    """What one scale runs.

    Attributes:
        regression: keyword arguments of :class:`~lora_alpha.RegressionTask` (empty: its defaults).
        world: keyword arguments of ``paper_common.facts.World`` for the two LM tasks.
        lm_steps: training steps of the fact LM; cutoff: its cutoff year.
        alphas, ranks, seeds: the alpha x rank sweep (seeds are offsets from the run's seed; the
            alpha-vs-lr test runs on every seed too).
        sweep_steps: fine-tuning steps of a regression run.
        surface_rank, surface_lrs: the alpha x learning-rate surface.
        factors: the k of "alpha x k" and "lr x k"; interaction_rank: their rank.
        lm_finetune_steps: fine-tuning steps of an LM run.
        reference_steps: steps of the full-fine-tuning reference (Adam, lr 1e-3).
        compare_ranks, compare_lm_ranks: ranks of the LoRA-alpha comparison.
        compare_lrs: the learning-rate grid the baselines are tuned over (on validation).
        batch_size: every run's batch size.
        extra: the full scale's model and datasets.
    """

    regression: dict[str, Any]
    world: dict[str, int]
    lm_steps: int
    cutoff: int
    alphas: tuple[float, ...]
    ranks: tuple[int, ...]
    seeds: tuple[int, ...]
    sweep_steps: int
    surface_rank: int
    surface_lrs: tuple[float, ...]
    factors: tuple[float, ...]
    interaction_rank: int
    lm_finetune_steps: int
    reference_steps: int
    compare_ranks: tuple[int, ...]
    compare_lm_ranks: tuple[int, ...]
    compare_lrs: tuple[float, ...]
    batch_size: int
    extra: dict[str, Any] = field(default_factory=dict)


SCALES = {
    "smoke": Scale(
        {"d_in": 8, "hidden": 16, "d_out": 4, "shift_rank": 4, "n_train": 128, "n_test": 64,
         "n_val": 64},
        {"n_people": 8, "n_cities": 6, "n_companies": 4, "n_countries": 3}, 40, 2016,
        (16, 64, 256), (1, 4), (0, 1), 20, 4, (2e-5, 1e-3), (1, 4), 4, 10, 10,
        (4,), (4,), (2e-5, 1e-4, 1e-3), 16,
    ),
    "quick": Scale(
        {}, {"n_people": 40, "n_cities": 12, "n_companies": 10, "n_countries": 4}, 1000, 2018,
        tuple(float(2**k) for k in range(4, 14)), (1, 4, 16, 64), (0, 1, 2), 200, 8,
        (2e-5, 1e-4, 1e-3, 1e-2), (1, 4, 16, 64), 8, 80, 100,
        (4, 16, 64), (4, 16), (2e-5, 1e-4, 1e-3, 1e-2), 32,
    ),
    # the paper's setting, for a GPU: a 0.5B model on GSM8K (generation) and GLUE SST-2
    # (classification); needs `datasets` and the hub (see run.full_tasks)
    "full": Scale(
        {"d_in": 64, "hidden": 512, "d_out": 32, "shift_rank": 64, "n_train": 8192},
        {}, 0, 0,
        tuple(float(2**k) for k in range(2, 15)), (4, 8, 16, 32, 64, 128, 256), (0, 1, 2, 3, 4),
        1000, 16, (1e-5, 2e-5, 1e-4, 3e-4, 1e-3), (1, 2, 4, 8, 16, 32, 64), 16, 1000, 500,
        (8, 32, 128), (8, 32, 128), (1e-5, 2e-5, 1e-4, 3e-4, 1e-3), 16,
        {"model": "Qwen/Qwen2.5-0.5B", "gen_dataset": ("openai/gsm8k", "main"),
         "cls_dataset": ("nyu-mll/glue", "sst2"), "n_val": 500},
    ),
}  # fmt: skip
