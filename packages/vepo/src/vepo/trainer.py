"""VEPO on TRL: ``VEPOConfig(GRPOConfig)`` and ``VEPOTrainer(GRPOTrainer)``.

Only the advantage changes; generation, rewards, clipping, the loss, logging and everything else
are TRL's, so any causal LM and any TRL reward function work.

``vepo_mode``:

* ``"none"``: GRPO (with ``epsilon_high > epsilon``: DAPO-style clip-higher; with TRL's own
  ``entropy_coef > 0``: GRPO + the blind token-entropy bonus, as TRL implements it).
* ``"effective"`` (VEPO): advantage ``+= vepo_coef * w``, ``w = v (-log pi(y) - 1)``, ``v`` =
  reward ``>= vepo_valid_threshold``: the plain score-function estimate of ``grad H_eff`` (see
  :mod:`vepo.entropy`). Optional leave-one-out baseline and group standardisation (both off:
  with the baseline invalid samples get negative weights, and standardising near-constant
  weights amplifies noise).
* ``"effective_normalized"``: the weights of ``grad H(pi_V)`` (centred among valid samples).
* ``"sequence"``: the same as ``"effective"`` with ``v = 1`` for every trajectory (blind
  sequence-entropy bonus).
* ``"differential_smoothing"`` (Gai et al. 2025, arXiv 2511.19942, a baseline): advantage ``+=
  vepo_coef * (-log pi(y))`` on valid trajectories and ``+= vepo_coef_incorrect * log pi(y)`` on
  invalid ones (:func:`~vepo.entropy.differential_smoothing_weights`).
* ``"anti_effective"``: VEPO's term with its sign flipped (advantage ``-= vepo_coef * w``): it
  descends the effective entropy. Not a method: the null arm of the reproduction's negative
  controls (a run where "VEPO's term helps" must not hold).

Every field of ours is prefixed ``vepo_``: TRL 1.x's ``GRPOConfig`` has its own ``entropy_coef``
(a token-entropy bonus in the loss), and a subclass field of the same name silently switches it on.
Importing this module fails if a TRL release ever adds a field of ours.

``log pi(y)`` is the completion's log-probability under the sampling distribution (temperature
applied), computed without gradient from the policy that generated it. The trainer also logs, per
step, the estimates of sequence entropy, effective entropy and the invalid-entropy share on its own
samples (``entropy/*`` in ``trainer.state.log_history``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import torch
from trl import GRPOConfig, GRPOTrainer

from vepo.entropy import (
    differential_smoothing_weights,
    entropy_weights,
    estimate_entropies,
    valid_entropy_weights,
)

#: the default ``vepo_coef``: VEPO's coefficient from the search in seeds/vepo.md (``vepo.rl.COEFS``)
VEPO_COEF = 0.03

MODES = (
    "none",
    "sequence",
    "effective",
    "effective_normalized",
    "differential_smoothing",
    "anti_effective",
)


@dataclass
class VEPOConfig(GRPOConfig):
    """``GRPOConfig`` plus the entropy term. ``vepo_coef=0`` (or ``vepo_mode="none"``) is GRPO.

    ``bf16`` left unset is on only where a CUDA device supports it (``GRPOConfig`` turns it on
    everywhere, so a CPU run trained under bf16 autocast).
    """

    vepo_mode: str = field(
        default="effective",
        metadata={"help": f"one of {', '.join(MODES)}; 'effective' is VEPO"},
    )
    vepo_coef: float = field(
        default=VEPO_COEF,
        metadata={"help": "weight of the entropy term (>= 0); Differential Smoothing's gamma_p"},
    )
    vepo_coef_incorrect: float | None = field(
        default=None,
        metadata={
            "help": "Differential Smoothing's gamma_n, on invalid trajectories (>= 0; None: "
            "vepo_coef)"
        },
    )
    vepo_valid_threshold: float = field(
        default=1.0, metadata={"help": "a completion is valid when its total reward >= this"}
    )
    vepo_baseline: bool = field(
        default=False,
        metadata={
            "help": "subtract the leave-one-out group mean of the weights (off: invalid "
            "trajectories get exactly 0)"
        },
    )
    vepo_standardize: bool = field(
        default=False, metadata={"help": "divide the weights by their group standard deviation"}
    )

    def __post_init__(self) -> None:
        if self.vepo_mode not in MODES:
            hint = " (the token-entropy bonus is TRL's own entropy_coef)" * (
                self.vepo_mode == "token"
            )
            raise ValueError(f"vepo_mode must be one of {MODES}; got {self.vepo_mode!r}{hint}")
        for name in ("vepo_coef", "vepo_coef_incorrect"):
            value = getattr(self, name)
            if value is None and name == "vepo_coef_incorrect":
                continue
            if isinstance(value, bool) or not (
                isinstance(value, int | float) and 0 <= value < math.inf
            ):
                raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
        if isinstance(self.vepo_valid_threshold, bool) or not (
            isinstance(self.vepo_valid_threshold, int | float)
            and math.isfinite(self.vepo_valid_threshold)
        ):
            raise ValueError(
                f"vepo_valid_threshold must be finite; got {self.vepo_valid_threshold!r}"
            )
        if self.bf16 is None:  # GRPOConfig would make it True on any device
            self.bf16 = (
                not self.fp16
                and not self.use_cpu
                and torch.cuda.is_available()
                and torch.cuda.is_bf16_supported()
            )
        super().__post_init__()
        if self.num_generations is not None and self.num_generations < 2:
            raise ValueError(
                f"num_generations must be >= 2 for group baselines; got {self.num_generations}"
            )


OWN_FIELDS = tuple(VEPOConfig.__annotations__)
_CLASH = set(OWN_FIELDS) & {f.name for f in dataclasses.fields(GRPOConfig)}
if _CLASH:  # pragma: no cover - only on a TRL release that adds one of our names
    raise ImportError(
        f"VEPOConfig field(s) {sorted(_CLASH)} also exist in this TRL's GRPOConfig, which would "
        "read them; rename ours"
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
        valid = (total >= self.args.vepo_valid_threshold).to(out["advantages"].dtype)
        # a sum of log-softmax values is <= 0; clamp float rounding so the checks downstream hold
        logp = self._sequence_logps(out).to(out["advantages"].dtype).clamp(max=0)
        stats = estimate_entropies(logp, valid)
        for key in ("sequence_entropy", "effective_entropy", "invalid_entropy_share", "valid_mass"):
            self._metrics[mode][f"entropy/{key}"].append(stats[key])
        term = self._advantage_term(logp.view(-1, self.num_generations),
                                    valid.view(-1, self.num_generations))  # fmt: skip
        if term is not None:
            out["advantages"] = out["advantages"] + term.flatten()
            self._metrics[mode]["entropy/bonus_abs_mean"].append(float(term.abs().mean()))
        return out

    def _advantage_term(self, logp: torch.Tensor, valid: torch.Tensor) -> torch.Tensor | None:
        """What this mode adds to the advantage; ``logp``, ``valid``: ``(groups, G)``. None: nothing."""
        a = self.args
        coef, mode_e = a.vepo_coef, a.vepo_mode
        if mode_e == "differential_smoothing":
            gamma_n = coef if a.vepo_coef_incorrect is None else a.vepo_coef_incorrect
            if coef == 0 and gamma_n == 0:
                return None
            return differential_smoothing_weights(logp, valid, coef, gamma_n)
        if coef == 0 or mode_e == "none":
            return None
        if mode_e == "effective_normalized":
            return coef * valid_entropy_weights(logp, valid)
        v = None if mode_e == "sequence" else valid
        sign = -1.0 if mode_e == "anti_effective" else 1.0
        return sign * coef * entropy_weights(logp, v, a.vepo_baseline, a.vepo_standardize)
