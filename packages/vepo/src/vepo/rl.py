"""End to end on a CPU: a tiny LM warmed up on solved problems, then RL with VEPO or a baseline.

:data:`METHODS` are the compared configurations, all through :class:`~vepo.trainer.VEPOTrainer`
(the same generation, reward and clipping code): GRPO, GRPO + token-entropy bonus, GRPO +
sequence-entropy bonus, clip-higher (DAPO-style asymmetric clipping) and VEPO.
"""

from __future__ import annotations

import logging
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vepo.tasks import Problem
from vepo.trainer import VEPOConfig, VEPOTrainer

log = logging.getLogger(__name__)

#: name -> VEPOConfig overrides. Every method reuses each generation for 2 updates
#: (``num_iterations=2``) so that clipping acts (on-policy, clip-higher would equal GRPO). The token
#: bonus uses 0.01 (the usual PPO entropy coefficient); the trajectory-level terms use 0.005 on
#: their plain (unscaled, no baseline) score-function weights. At 0.05 (and with standardised
#: weights at 0.1) every trajectory-level term, VEPO included, collapsed the policy into random
#: 16-token text in our quick runs; the history is in seeds/vepo.md.
METHODS: dict[str, dict[str, Any]] = {
    "GRPO": {"entropy_mode": "none", "entropy_coef": 0.0},
    "GRPO + token entropy": {"entropy_mode": "token", "entropy_coef": 0.01},
    "GRPO + sequence entropy": {"entropy_mode": "sequence", "entropy_coef": 0.005},
    "clip-higher": {"entropy_mode": "none", "entropy_coef": 0.0, "epsilon_high": 0.28},
    "VEPO": {"entropy_mode": "effective", "entropy_coef": 0.005},
    "VEPO (normalised H)": {"entropy_mode": "effective_normalized", "entropy_coef": 0.005},
}


def build_tokenizer_for(problems: Sequence[Problem], max_int: int = 200) -> Any:
    """A word-level tokenizer covering the prompts, the solutions and the integers up to ``max_int``."""
    from paper_common.lm import build_tokenizer

    texts = [p.prompt + " " + s for p in problems for s in p.solutions]
    texts += [" ".join(str(i) for i in range(max_int + 1)) + " + - * / ( ) nums target : Q A = Q:"]
    return build_tokenizer(texts)


def warmup(
    problems: Sequence[Problem],
    solutions_per_problem: int = 2,
    steps: int = 600,
    n_layers: int = 2,
    d_model: int = 64,
    n_heads: int = 4,
    lr: float = 3e-3,
    seed: int = 0,
    tokenizer: Any = None,
) -> tuple[Any, Any]:
    """Supervised warm-up: a tiny LM trained on up to ``solutions_per_problem`` solutions each.

    Few solutions per problem leave the warmed-up policy concentrated, so RL has valid solutions
    to discover. Returns ``(model, tokenizer)``.
    """
    from paper_common.lm import tiny_causal_lm, train_causal_lm

    if solutions_per_problem < 1:
        raise ValueError(f"solutions_per_problem must be >= 1; got {solutions_per_problem}")
    rng = np.random.default_rng(seed)
    pairs = []
    for p in problems:
        idx = rng.permutation(len(p.solutions))[:solutions_per_problem]
        pairs += [(p.prompt, " " + p.solutions[i]) for i in idx]
    tok = tokenizer if tokenizer is not None else build_tokenizer_for(problems)
    model = tiny_causal_lm(tok, "llama", n_layers, d_model, n_heads, seed=seed)
    train_causal_lm(model, tok, pairs=pairs, steps=steps, lr=lr, batch_size=64, seed=seed)
    model.eval()
    return model, tok


def reward_function(problems: Sequence[Problem]) -> Callable[..., list[float]]:
    """A TRL reward function: 1.0 for a valid completion of its prompt's problem, else 0.0."""
    by_prompt = {p.prompt: p for p in problems}

    def correctness(prompts: list[str], completions: list[str], **_: Any) -> list[float]:
        return [float(by_prompt[p].check(c)) if p in by_prompt else 0.0
                for p, c in zip(prompts, completions, strict=True)]  # fmt: skip

    return correctness


@dataclass
class RLResult:
    method: str
    seed: int
    history: list[dict[str, float]]
    seconds: float
    model: Any


def train_rl(
    model: Any,
    tok: Any,
    problems: Sequence[Problem],
    method: str | dict[str, Any] = "VEPO",
    steps: int = 100,
    prompts_per_step: int = 4,
    num_generations: int = 8,
    learning_rate: float = 5e-4,
    max_completion_length: int = 16,
    num_iterations: int = 2,
    seed: int = 0,
    **overrides: Any,
) -> RLResult:
    """Run one RL method (a name in :data:`METHODS` or a dict of ``VEPOConfig`` fields).

    ``steps`` counts optimiser steps; each generated batch is used for ``num_iterations`` of them,
    so every method sees ``steps / num_iterations * prompts_per_step * num_generations`` samples:
    equal budgets.
    The model is trained in place (pass a copy to keep the original).
    """
    from datasets import Dataset
    from transformers import PrinterCallback

    if isinstance(method, str) and method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)} or a dict; got {method!r}")
    if steps < 1 or prompts_per_step < 1:
        raise ValueError(
            f"steps and prompts_per_step must be >= 1; got {steps}, {prompts_per_step}"
        )
    name = method if isinstance(method, str) else "custom"
    fields = METHODS[method] if isinstance(method, str) else method
    with tempfile.TemporaryDirectory() as tmp:
        cfg = VEPOConfig(
            output_dir=tmp, per_device_train_batch_size=prompts_per_step * num_generations,
            num_generations=num_generations, max_completion_length=max_completion_length,
            max_steps=steps, learning_rate=learning_rate, lr_scheduler_type="constant",
            beta=0.0, loss_type="grpo", temperature=1.0, report_to=[], logging_steps=1,
            num_iterations=num_iterations,
            save_strategy="no", use_cpu=True, disable_tqdm=True, seed=seed, data_seed=seed,
            **{**fields, **overrides},
        )  # fmt: skip
        data = Dataset.from_list([{"prompt": p.prompt} for p in problems])
        trainer = VEPOTrainer(model=model, reward_funcs=reward_function(problems), args=cfg,
                              train_dataset=data, processing_class=tok)  # fmt: skip
        trainer.remove_callback(PrinterCallback)  # the history is returned, not printed
        start = time.perf_counter()
        with warnings.catch_warnings():
            # transformers 5 deprecation notices raised by TRL internals on every step
            warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
            trainer.train()
        seconds = time.perf_counter() - start
    history = [h for h in trainer.state.log_history if "reward" in h]
    model.eval()
    return RLResult(name, seed, history, seconds, model)
