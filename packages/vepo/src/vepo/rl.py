"""End to end: a tiny LM warmed up on solved problems, then RL with VEPO or a baseline.

:data:`METHODS` are the compared configurations, all through :class:`~vepo.trainer.VEPOTrainer`
(the same generation, reward and clipping code): GRPO, GRPO + token-entropy bonus (TRL's own),
GRPO + sequence-entropy bonus, clip-higher (DAPO-style asymmetric clipping), Differential Smoothing
(arXiv 2511.19942), VEPO and its normalised variant. :func:`train_rl` runs on the model's device.
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
from vepo.trainer import VEPO_COEF, VEPOConfig, VEPOTrainer

log = logging.getLogger(__name__)

#: Each method's own coefficient, chosen by the same rule on search seeds the reproduction does not
#: use (``benchmarks/coef_search.py``; the rule and the outcome are in seeds/vepo.md and
#: ``docs/packages/vepo/coef_search.json``): ``vepo_coef`` for the trajectory-level terms (for
#: Differential Smoothing both its gammas), TRL's ``entropy_coef`` for the token bonus.
COEFS: dict[str, float] = {
    "VEPO": VEPO_COEF,
    "VEPO (normalised H)": 0.1,
    "GRPO + sequence entropy": 0.3,
    "Differential Smoothing": 0.1,
    # the smallest value tried, after two extensions of the grid: the token bonus's score fell
    # with every step up, so the rule's choice sits at the edge (effectively GRPO)
    "GRPO + token entropy": 0.0001,
}
#: VEPO's coefficient (also ``VEPOConfig``'s default ``vepo_coef``)
COEF = COEFS["VEPO"]
#: TRL's ``entropy_coef`` for the token-bonus baseline
TOKEN_COEF = COEFS["GRPO + token entropy"]

#: name -> VEPOConfig fields. Every method reuses each generation for 2 updates
#: (``num_iterations=2``, set by :func:`train_rl`) so that clipping acts (on-policy, clip-higher would
#: equal GRPO). Methods without a term of ours set ``vepo_coef=0`` so that their recorded config
#: says so.
METHODS: dict[str, dict[str, Any]] = {
    "GRPO": {"vepo_mode": "none", "vepo_coef": 0.0},
    "GRPO + token entropy": {"vepo_mode": "none", "vepo_coef": 0.0, "entropy_coef": TOKEN_COEF},
    "GRPO + sequence entropy": {"vepo_mode": "sequence",
                                "vepo_coef": COEFS["GRPO + sequence entropy"]},
    "clip-higher": {"vepo_mode": "none", "vepo_coef": 0.0, "epsilon_high": 0.28},
    "Differential Smoothing": {"vepo_mode": "differential_smoothing",
                               "vepo_coef": COEFS["Differential Smoothing"]},
    "VEPO": {"vepo_mode": "effective", "vepo_coef": COEF},
    "VEPO (normalised H)": {"vepo_mode": "effective_normalized",
                            "vepo_coef": COEFS["VEPO (normalised H)"]},
}  # fmt: skip

#: Null arms for the reproduction's negative controls (not methods): VEPO's term with its sign
#: flipped (it descends the effective entropy), at VEPO's coefficient.
NULL_ARMS: dict[str, dict[str, Any]] = {
    "VEPO, sign flipped (null)": {"vepo_mode": "anti_effective", "vepo_coef": COEF},
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
    """A TRL reward function: 1.0 for a valid completion of its prompt's problem, else 0.0.

    Completions are text, or (conversational datasets) a list of messages whose last ``content``
    is the answer; anything else raises ``TypeError`` naming it. Odd text scores 0, never raises.
    """
    by_prompt = {p.prompt: p for p in problems}

    def correctness(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
        return [float(by_prompt[key].check(_text(c))) if (key := _text(p)) in by_prompt else 0.0
                for p, c in zip(prompts, completions, strict=True)]  # fmt: skip

    return correctness


def _text(x: Any) -> str:
    """The text of a completion or prompt: a string, or the last message's ``content``."""
    if isinstance(x, str):
        return x
    if (
        isinstance(x, list)
        and x
        and isinstance(x[-1], dict)
        and isinstance(x[-1].get("content"), str)
    ):
        return x[-1]["content"]
    raise TypeError(
        f"a completion must be a str or a list of messages with 'content'; got {type(x).__name__}"
    )


@dataclass
class RLResult:
    method: str
    seed: int
    history: list[dict[str, float]]
    seconds: float
    model: Any
    config: dict[str, Any]


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

    named = {**METHODS, **NULL_ARMS}
    if isinstance(method, str) and method not in named:
        raise ValueError(f"method must be one of {list(named)} or a dict; got {method!r}")
    if steps < 1 or prompts_per_step < 1:
        raise ValueError(
            f"steps and prompts_per_step must be >= 1; got {steps}, {prompts_per_step}"
        )
    name = method if isinstance(method, str) else "custom"
    fields = named[method] if isinstance(method, str) else method
    device = next(model.parameters()).device
    # train_rl's defaults < the method's fields < the caller's overrides
    args: dict[str, Any] = {
        "per_device_train_batch_size": prompts_per_step * num_generations,
        "num_generations": num_generations, "max_completion_length": max_completion_length,
        "max_steps": steps, "learning_rate": learning_rate, "lr_scheduler_type": "constant",
        "beta": 0.0, "loss_type": "grpo", "temperature": 1.0, "report_to": [], "logging_steps": 1,
        "num_iterations": num_iterations, "save_strategy": "no", "use_cpu": device.type == "cpu",
        "disable_tqdm": True, "seed": seed, "data_seed": seed,
        **fields, **overrides,
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        try:
            cfg = VEPOConfig(**{"output_dir": tmp, **args})
        except TypeError as e:
            raise TypeError(f"train_rl: not a VEPOConfig field: {e}") from e
        data = Dataset.from_list([{"prompt": p.prompt} for p in problems])
        # with a KL term TRL loads the reference model from the policy's name or path: an
        # in-process model has none, and a hub model's would be the hub weights, not these
        name_or_path = model.config._name_or_path
        if cfg.beta != 0:
            model.save_pretrained(f"{tmp}/reference")
            model.config._name_or_path = f"{tmp}/reference"
        try:
            trainer = VEPOTrainer(model=model, reward_funcs=reward_function(problems), args=cfg,
                                  train_dataset=data, processing_class=tok)  # fmt: skip
        finally:
            model.config._name_or_path = name_or_path
        trainer.remove_callback(PrinterCallback)  # the history is returned, not printed
        start = time.perf_counter()
        with warnings.catch_warnings():
            # transformers 5 deprecation notices raised by TRL internals on every step
            warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
            trainer.train()
        seconds = time.perf_counter() - start
    history = [h for h in trainer.state.log_history if "reward" in h]
    model.eval()
    config = {k: getattr(cfg, k) for k in args} | {"bf16": cfg.bf16, "use_cpu": cfg.use_cpu}
    return RLResult(name, seed, history, seconds, model, config)
