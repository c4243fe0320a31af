"""The experiment's size at each scale: problems, warm-up, RL budget, evaluation samples, seeds."""

from __future__ import annotations

from dataclasses import dataclass

from paper_common.experiment import MIN_SEEDS


@dataclass(frozen=True)
class Scale:
    """One scale of the reproduction.

    Attributes:
        n_warmup: Countdown problems the LM is warmed up on (2 solutions each).
        n_rl: problems RL trains on (and is evaluated on).
        n_heldout: further problems, evaluated only (pass@k).
        warmup_steps: supervised warm-up steps.
        rl_steps: RL optimiser steps (each generation feeds 2 of them).
        prompts_per_step: prompts per generation.
        num_generations: samples per prompt (the group).
        eval_samples: samples per problem at evaluation.
        seeds: replicate RL seeds (``replicate_seeds``) each claim's interval is over.
        workers: worker processes for the (method, seed) runs.
        model: the model to load at ``full`` scale (empty: a tiny LM trained in-process).
    """

    n_warmup: int
    n_rl: int
    n_heldout: int
    warmup_steps: int
    rl_steps: int
    prompts_per_step: int
    num_generations: int
    eval_samples: int
    seeds: int
    workers: int
    model: str = ""

    def __post_init__(self) -> None:
        if self.seeds < 1 or self.num_generations < 2 or self.rl_steps < 1:
            raise ValueError(
                f"need seeds >= 1, num_generations >= 2, rl_steps >= 1; got {self.seeds}, "
                f"{self.num_generations}, {self.rl_steps}"
            )


SCALES = {
    # smoke: 2 seeds (claims come out 'not measured': a t-interval needs MIN_SEEDS)
    "smoke": Scale(40, 8, 8, 40, 2, 2, 4, 4, 2, 1),
    "quick": Scale(300, 48, 32, 600, 40, 4, 8, 16, MIN_SEEDS, 2),
    # for a GPU: Qwen2.5-1.5B-Instruct on Countdown (TinyZero-style); steps and groups as in GRPO papers
    "full": Scale(0, 1024, 512, 0, 500, 32, 16, 64, MIN_SEEDS, 1, "Qwen/Qwen2.5-1.5B-Instruct"),
}
