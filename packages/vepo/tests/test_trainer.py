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


@pytest.mark.parametrize("mode", ["effective", "sequence", "token"])
def test_zero_coefficient_is_grpo_exactly(mode):
    problems, tok, model, data = _setup()
    with tempfile.TemporaryDirectory() as out:
        kw = {"model": model, "reward_funcs": reward_function(problems), "train_dataset": data,
              "processing_class": tok}  # fmt: skip
        vepo = VEPOTrainer(args=_args(VEPOConfig, out, entropy_mode=mode, entropy_coef=0.0), **kw)
        grpo = GRPOTrainer(args=_args(GRPOConfig, out), **kw)
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
        on = VEPOTrainer(
            args=_args(VEPOConfig, out, entropy_mode="sequence", entropy_coef=0.1), **kw
        )
        off = VEPOTrainer(
            args=_args(VEPOConfig, out, entropy_mode="sequence", entropy_coef=0.0), **kw
        )
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
        with pytest.raises(ValueError, match="entropy_mode"):
            VEPOConfig(output_dir=out, entropy_mode="blind")
        with pytest.raises(ValueError, match="entropy_coef"):
            VEPOConfig(output_dir=out, entropy_coef=-1.0)


def test_train_rl_bad_method():
    from vepo import train_rl

    problems, tok, model, _ = _setup()
    with pytest.raises(ValueError, match="method must be one of"):
        train_rl(model, tok, problems, "PPO")
    with pytest.raises(ValueError, match="steps"):
        train_rl(model, tok, problems, "GRPO", steps=0)
