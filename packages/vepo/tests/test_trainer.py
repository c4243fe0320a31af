import tempfile

import pytest
import torch
from trl import GRPOConfig, GRPOTrainer

from paper_common.lm import tiny_causal_lm
from vepo import (
    VEPOConfig,
    VEPOTrainer,
    build_tokenizer_for,
    countdown,
    entropy_weights,
    reward_function,
)


def _setup():
    from datasets import Dataset

    problems = countdown(6, seed=0)
    tok = build_tokenizer_for(problems)
    model = tiny_causal_lm(tok, "llama", 1, 32, 2, seed=0)
    data = Dataset.from_list([{"prompt": p.prompt} for p in problems])
    return problems, tok, model, data


def _args(cls, out, **kw):
    return cls(output_dir=out, per_device_train_batch_size=8, num_generations=4, max_completion_length=8,
               max_steps=3, beta=0.0, loss_type="grpo", report_to=[], use_cpu=True, save_strategy="no",
               disable_tqdm=True, seed=0, **kw)  # fmt: skip


def _batch(trainer):
    return next(iter(trainer.get_train_dataloader()))


@pytest.mark.parametrize("mode", ["sequence", "differential_smoothing"])
def test_zero_coefficient_is_grpo_exactly(mode):
    problems, tok, model, data = _setup()
    with tempfile.TemporaryDirectory() as out:
        kw = {"model": model, "reward_funcs": reward_function(problems), "train_dataset": data,
              "processing_class": tok}  # fmt: skip
        vepo = VEPOTrainer(
            args=_args(VEPOConfig, out, vepo_mode=mode, vepo_coef=0.0, bf16=False), **kw
        )
        grpo = GRPOTrainer(args=_args(GRPOConfig, out, bf16=False), **kw)
        batch = _batch(vepo)
        torch.manual_seed(0)
        a = vepo._generate_and_score_completions(batch)
        torch.manual_seed(0)
        b = grpo._generate_and_score_completions(batch)
        assert torch.equal(a["completion_ids"], b["completion_ids"])
        assert torch.equal(a["advantages"], b["advantages"])
        assert torch.equal(vepo._compute_loss(model, a), grpo._compute_loss(model, b))


def test_positive_coefficient_adds_the_entropy_weights():
    problems, tok, model, data = _setup()
    with tempfile.TemporaryDirectory() as out:
        kw = {"model": model, "reward_funcs": reward_function(problems), "train_dataset": data,
              "processing_class": tok}  # fmt: skip
        on = VEPOTrainer(args=_args(VEPOConfig, out, vepo_mode="sequence", vepo_coef=0.1), **kw)
        off = VEPOTrainer(args=_args(VEPOConfig, out, vepo_mode="sequence", vepo_coef=0.0), **kw)
        batch = _batch(on)
        torch.manual_seed(1)
        a = on._generate_and_score_completions(batch)
        torch.manual_seed(1)
        b = off._generate_and_score_completions(batch)
        logp = on._sequence_logps(a)
        w = entropy_weights(logp.view(-1, 4), None, baseline=False)
        assert torch.allclose(a["advantages"] - b["advantages"], 0.1 * w.flatten(), atol=1e-6)


def test_vepo_trains_and_logs_effective_entropy():
    problems, tok, model, data = _setup()
    with tempfile.TemporaryDirectory() as out:
        trainer = VEPOTrainer(model=model, reward_funcs=reward_function(problems),
                              args=_args(VEPOConfig, out, logging_steps=1), train_dataset=data,
                              processing_class=tok)  # fmt: skip
        trainer.train()
    logs = [h for h in trainer.state.log_history if "entropy/effective_entropy" in h]
    assert len(logs) == 3
    assert all(
        0 <= h["entropy/effective_entropy"] <= h["entropy/sequence_entropy"] + 1e-6 for h in logs
    )


def test_bad_configs():
    with tempfile.TemporaryDirectory() as out:
        with pytest.raises(ValueError, match="vepo_mode"):
            VEPOConfig(output_dir=out, vepo_mode="blind")
        with pytest.raises(ValueError, match="TRL's own entropy_coef"):
            VEPOConfig(output_dir=out, vepo_mode="token")
        with pytest.raises(ValueError, match="vepo_coef"):
            VEPOConfig(output_dir=out, vepo_coef=-1.0)
        with pytest.raises(ValueError, match="vepo_coef_incorrect"):
            VEPOConfig(output_dir=out, vepo_coef_incorrect=float("nan"))
        with pytest.raises(ValueError, match="vepo_valid_threshold"):
            VEPOConfig(output_dir=out, vepo_valid_threshold=float("inf"))


def test_train_rl_bad_method():
    from vepo import train_rl

    problems, tok, model, _ = _setup()
    with pytest.raises(ValueError, match="method must be one of"):
        train_rl(model, tok, problems, "PPO")
    with pytest.raises(ValueError, match="steps"):
        train_rl(model, tok, problems, "GRPO", steps=0)


# --- issue 44 -------------------------------------------------------------------------------------

#: what each method is on TRL's side: the GRPOConfig options it sets (written out here, not derived
#: from METHODS, so a field of ours that TRL also reads cannot sneak into the reference)
REFERENCE = {
    "GRPO": {},
    "GRPO + token entropy": {"entropy_coef": 0.01},  # TRL's own token-entropy bonus
    "GRPO + sequence entropy": {},
    "clip-higher": {"epsilon_high": 0.28},
    "VEPO": {},
    "VEPO (normalised H)": {},
    "Differential Smoothing": {},
}


def _zero_reward(prompts, completions, **_):
    return [0.0] * len(prompts)


def test_no_config_field_of_ours_collides_with_grpo_config():
    """Issue 44: ``VEPOConfig.entropy_coef`` was also ``GRPOConfig.entropy_coef`` (TRL >= 1.x), so
    TRL added its own blind token-entropy bonus to every VEPO and sequence-bonus run."""
    import dataclasses

    ours = set(VEPOConfig.__annotations__)
    assert ours, "VEPOConfig declares no fields"
    parent = {f.name for f in dataclasses.fields(GRPOConfig)}
    assert ours & parent == set()


@pytest.mark.parametrize("name", list(REFERENCE))
def test_every_method_is_grpo_apart_from_its_own_term(name):
    """Issue 44: for every method, on a batch where no completion is valid (so the validity-aware
    terms are 0), VEPOTrainer's loss and gradients equal GRPOTrainer's (configured with the
    method's TRL options only) exactly, on the same inputs; and the advantage differs from GRPO's
    by exactly our own term (0 for the validity-aware ones). Before, TRL's own ``entropy_coef``
    read our coefficient: the loss was off by coef x token entropy (-0.017 for VEPO)."""
    from vepo.rl import METHODS

    assert set(METHODS) == set(REFERENCE)
    _, tok, model, data = _setup()
    with tempfile.TemporaryDirectory() as out:
        kw = {"model": model, "reward_funcs": _zero_reward, "train_dataset": data,
              "processing_class": tok}  # fmt: skip
        vepo = VEPOTrainer(args=_args(VEPOConfig, out, bf16=False, **METHODS[name]), **kw)
        grpo = GRPOTrainer(args=_args(GRPOConfig, out, bf16=False, **REFERENCE[name]), **kw)
        batch = _batch(vepo)
        torch.manual_seed(0)
        a = vepo._generate_and_score_completions(batch)
        torch.manual_seed(0)
        b = grpo._generate_and_score_completions(batch)
        assert torch.equal(a["completion_ids"], b["completion_ids"])
        mode = vepo.args.vepo_mode
        if mode in ("none", "effective", "effective_normalized"):
            assert torch.equal(a["advantages"], b["advantages"])
        else:  # blind sequence bonus / DS on invalid samples: coef x (their weight)
            logp = vepo._sequence_logps(a)
            term = -logp - 1 if mode == "sequence" else logp
            assert torch.allclose(a["advantages"] - b["advantages"], vepo.args.vepo_coef * term,
                                  atol=1e-6)  # fmt: skip
        grads = []
        for trainer in (vepo, grpo):
            model.zero_grad(set_to_none=True)
            loss = trainer._compute_loss(model, a)
            loss.backward()
            grads.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
        assert torch.equal(grads[0][0], grads[1][0])
        assert all(torch.equal(x, y) for x, y in zip(grads[0][1], grads[1][1], strict=True))


def test_cpu_run_does_not_inherit_bf16():
    """Issue 44: GRPOConfig turns bf16 on unless told otherwise, so a CPU run trained under bf16
    autocast. Unset, it is on only where a CUDA device supports it; set, the user's choice stands."""
    with tempfile.TemporaryDirectory() as out:
        assert VEPOConfig(output_dir=out, use_cpu=True).bf16 is False
        if not torch.cuda.is_available():
            assert VEPOConfig(output_dir=out).bf16 is False
        assert VEPOConfig(output_dir=out, use_cpu=True, bf16=False).bf16 is False


def test_train_rl_takes_overrides_of_any_field():
    """Issue 44: train_rl passed temperature, beta, loss_type ... itself, so overriding one raised
    ``TypeError: got multiple values``. Overrides win over the method's fields and the defaults."""
    from vepo import train_rl

    problems, tok, model, _ = _setup()
    res = train_rl(model, tok, problems, "VEPO", steps=1, prompts_per_step=2, num_generations=2,
                   max_completion_length=4, num_iterations=1, temperature=0.7, beta=0.01)  # fmt: skip
    assert res.config["temperature"] == 0.7
    assert res.config["beta"] == 0.01
    assert res.config["use_cpu"] is True
    assert res.config["bf16"] is False
    assert len(res.history) == 1
    with pytest.raises(TypeError, match="no_such_field"):
        train_rl(model, tok, problems, "GRPO", steps=1, no_such_field=1)


def test_installed_trl_is_the_lowest_supported_one():
    """Issue 44: ``trl>=0.20`` was never tested (VEPOTrainer overrides GRPOTrainer internals that
    changed since). The bound is now the version the tests run on: this fails when the lock moves
    past it without the bound following."""
    import tomllib
    from importlib.metadata import version
    from pathlib import Path

    from packaging.requirements import Requirement
    from packaging.version import Version

    meta = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    trl = next(Requirement(d) for d in meta["project"]["dependencies"] if d.startswith("trl"))
    installed = Version(version("trl"))
    assert installed in trl.specifier
    lowest = min(Version(s.version) for s in trl.specifier if s.operator == ">=")
    assert (installed.major, installed.minor) == (lowest.major, lowest.minor)
