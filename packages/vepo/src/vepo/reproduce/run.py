"""The measurements: a tiny LM warmed up on Countdown, then every method of
:data:`vepo.rl.METHODS` and every null arm of :data:`vepo.rl.NULL_ARMS` from the same weights with the same sample budget, over replicate seeds,
each evaluated on the RL problems (pass@k, distinct valid solutions, entropies) and on held-out
ones."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from paper_common import map_jobs
from paper_common.device import pinned_threads
from paper_common.experiment import replicate_seeds
from vepo.metrics import evaluate_policy
from vepo.reproduce.scales import Scale
from vepo.rl import METHODS, NULL_ARMS, train_rl, warmup
from vepo.tasks import countdown

__all__ = ["Results", "ks", "measure"]


@dataclass
class Results:
    """``runs``: one dict per (method, seed) with the evaluation metrics and the training
    ``history``; ``base``: the warm-up model's evaluation; ``seeds``: the replicate seeds;
    ``ks``: the pass@k values measured."""

    runs: list[dict[str, Any]]
    base: dict[str, float]
    seeds: list[int]
    ks: tuple[int, ...]


def ks(n: int) -> tuple[int, ...]:
    """The k of pass@k measured with ``n`` samples per problem."""
    return tuple(k for k in (1, 8, 16) if k <= n) or (1,)


def _job(args: tuple[Any, ...]) -> dict[str, Any]:
    """One (method, seed) run in a worker: RL from the warm-up weights, then evaluation.

    Always one torch and BLAS thread, in a spawned worker or in this process alike (a spawned
    worker inherits neither the parent's torch pin nor its BLAS limits): the result does not
    depend on ``workers``."""
    with pinned_threads(1, torch=True):
        return _run(args)


def _run(args: tuple[Any, ...]) -> dict[str, Any]:
    model, tok, rl_set, heldout, method, seed, cfg = args
    res = train_rl(copy.deepcopy(model), tok, rl_set, method, steps=cfg.rl_steps,
                   prompts_per_step=cfg.prompts_per_step, num_generations=cfg.num_generations,
                   seed=seed)  # fmt: skip
    ev = evaluate_policy(res.model, tok, rl_set, n=cfg.eval_samples,
                         ks=ks(cfg.eval_samples), seed=1000 + seed % 2**20)  # fmt: skip
    held = evaluate_policy(res.model, tok, heldout, n=cfg.eval_samples, ks=(cfg.eval_samples,),
                           seed=2000 + seed % 2**20)  # fmt: skip
    ev["heldout pass@k"] = held[f"pass@{cfg.eval_samples}"]
    return {"method": method, "seed": seed, **ev, "seconds": res.seconds, "history": res.history}


def measure(cfg: Scale, seed: int) -> Results:
    """Warm up on ``cfg.n_warmup`` problems, then run every method for every replicate seed."""
    if cfg.model:
        raise NotImplementedError(
            f"scale 'full' ({cfg.model} on Countdown) is a plan, not implemented: reproduce only "
            "trains the in-process tiny LM (no code here loads a hub model, formats chat prompts "
            "or evaluates it). To run it: load the model with AutoModelForCausalLM."
            "from_pretrained on a GPU and call vepo.rl.train_rl with this scale's budgets"
        )
    problems = countdown(cfg.n_warmup + cfg.n_rl + cfg.n_heldout, seed=seed)
    warm = problems[: cfg.n_warmup]
    rl_set = problems[cfg.n_warmup : cfg.n_warmup + cfg.n_rl]
    heldout = problems[cfg.n_warmup + cfg.n_rl :]
    model, tok = warmup(warm, steps=cfg.warmup_steps, seed=seed)
    k = ks(cfg.eval_samples)
    base = evaluate_policy(model, tok, rl_set, n=cfg.eval_samples, ks=k, seed=999)
    seeds = replicate_seeds(seed, cfg.seeds)
    arms = [*METHODS, *NULL_ARMS]  # the null arms feed the negative controls
    jobs = [(model, tok, rl_set, heldout, m, s, cfg) for s in seeds for m in arms]
    runs = map_jobs(_job, jobs, cfg.workers, start_method="spawn")
    return Results(runs, base, seeds, k)
