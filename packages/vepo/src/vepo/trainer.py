"""VEPO on TRL: ``VEPOConfig(GRPOConfig)`` and ``VEPOTrainer(GRPOTrainer)``.

Only the advantage (or, for the token-entropy bonus, the loss) changes; generation, rewards,
clipping, logging and everything else are TRL's, so any causal LM and any TRL reward function work.

``entropy_mode``:

* ``"none"``: GRPO (with ``epsilon_high > epsilon``: DAPO-style clip-higher).
* ``"effective"`` (VEPO): advantage ``+= entropy_coef * w``, ``w = v (-log pi(y) - 1)``, ``v`` =
  reward ``>= valid_threshold``: the plain score-function estimate of ``grad H_eff`` (see
  :mod:`vepo.entropy`). Optional leave-one-out baseline and group standardisation (both off:
  with the baseline invalid samples get negative weights, and standardising near-constant
  weights amplifies noise; either made our runs collapse into random text).
* ``"effective_normalized"``: the weights of ``grad H(pi_V)`` (centred among valid samples).
* ``"sequence"``: the same with ``v = 1`` for every trajectory (blind sequence-entropy bonus).
* ``"token"``: loss ``-= entropy_coef * mean token entropy`` over completion tokens (blind).

``log pi(y)`` is the completion's log-probability under the sampling distribution (temperature
applied), computed without gradient from the policy that generated it. The trainer also logs, per
step, the estimates of sequence entropy, effective entropy and the invalid-entropy share on its own
samples (``entropy/*`` in ``trainer.state.log_history``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from trl import GRPOConfig, GRPOTrainer

from vepo.entropy import entropy_weights, estimate_entropies, valid_entropy_weights

MODES = ("none", "token", "sequence", "effective", "effective_normalized")


@dataclass
class VEPOConfig(GRPOConfig):
    """``GRPOConfig`` plus the entropy term. ``entropy_coef=0`` is GRPO exactly."""

    entropy_mode: str = field(
        default="effective",
        metadata={"help": "none | token | sequence | effective (VEPO) | effective_normalized"},
    )
    entropy_coef: float = field(
        default=0.05, metadata={"help": "weight of the entropy term (>= 0)"}
    )
    valid_threshold: float = field(
        default=1.0, metadata={"help": "a completion is valid when its total reward >= this"}
    )
    entropy_baseline: bool = field(
        default=False,
        metadata={
            "help": "subtract the leave-one-out group mean of the weights (off: invalid "
            "trajectories get exactly 0)"
        },
    )
    entropy_standardize: bool = field(
        default=False, metadata={"help": "divide the weights by their group standard deviation"}
    )

    def __post_init__(self) -> None:
        if self.entropy_mode not in MODES:
            raise ValueError(f"entropy_mode must be one of {MODES}; got {self.entropy_mode!r}")
        if not (self.entropy_coef >= 0 and self.entropy_coef < float("inf")):
            raise ValueError(f"entropy_coef must be a finite number >= 0; got {self.entropy_coef}")
        super().__post_init__()
        if self.num_generations is not None and self.num_generations < 2:
            raise ValueError(
                f"num_generations must be >= 2 for group baselines; got {self.num_generations}"
            )


class VEPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` with a validity-aware (or blind) entropy term; see the module docstring."""

    args: VEPOConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(self.args, VEPOConfig):
            raise TypeError(f"VEPOTrainer needs a VEPOConfig; got {type(self.args).__name__}")
        self._last_rewards: torch.Tensor | None = None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):  # type: ignore[no-untyped-def]
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._last_rewards = rewards
        return rewards

    @torch.no_grad()
    def _sequence_logps(self, out: dict[str, Any]) -> torch.Tensor:
        ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)
        mask = torch.cat([out["prompt_mask"], out["completion_mask"]], 1)
        logps, _, _ = self._get_per_token_logps_and_entropies(
            self.model, ids, mask, out["completion_ids"].size(1)
        )
        return (logps * out["completion_mask"]).sum(1)

    def _generate_and_score_completions(self, inputs):  # type: ignore[no-untyped-def]
        out = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        rewards = self._last_rewards
        if rewards is None:  # pragma: no cover - TRL always scores before returning
            return out
        weights = self.reward_weights.to(rewards.device)
        total = (rewards * weights.unsqueeze(0)).nansum(1)
        # one process: the gathered rewards are this process's; several: keep our slice
        n = out["advantages"].shape[0]
        if total.shape[0] != n:
            rank = self.accelerator.process_index
            total = total[rank * n : (rank + 1) * n]
        valid = (total >= self.args.valid_threshold).to(out["advantages"].dtype)
        logp = self._sequence_logps(out).to(out["advantages"].dtype)
        stats = estimate_entropies(logp.clamp(max=0), valid)
        for key in ("sequence_entropy", "effective_entropy", "invalid_entropy_share", "valid_mass"):
            self._metrics[mode][f"entropy/{key}"].append(stats[key])
        coef = self.args.entropy_coef
        mode_e = self.args.entropy_mode
        if coef > 0 and mode_e in ("sequence", "effective", "effective_normalized"):
            g = self.num_generations
            if mode_e == "effective_normalized":
                w = valid_entropy_weights(logp.view(-1, g), valid.view(-1, g)).flatten()
            else:
                v = valid.view(-1, g) if mode_e == "effective" else None
                w = entropy_weights(
                    logp.view(-1, g), v, self.args.entropy_baseline, self.args.entropy_standardize
                ).flatten()
            out["advantages"] = out["advantages"] + coef * w
            self._metrics[mode]["entropy/bonus_abs_mean"].append(float((coef * w).abs().mean()))
        return out

    def _compute_loss(self, model, inputs):  # type: ignore[no-untyped-def]
        loss = super()._compute_loss(model, inputs)
        if self.args.entropy_mode != "token" or self.args.entropy_coef == 0:
            return loss
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
        mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1)
        _, entropies, _ = self._get_per_token_logps_and_entropies(
            model, ids, mask, inputs["completion_ids"].size(1), compute_entropy=True
        )
        cm = inputs["completion_mask"].to(entropies.dtype)
        token_entropy = (entropies * cm).sum() / cm.sum().clamp(min=1)
        return loss - self.args.entropy_coef * token_entropy
