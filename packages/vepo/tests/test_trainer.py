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


@pytest.mark.parametrize(
    "mode", ["sequence", "differential_smoothing", "effective", "anti_effective"]
)
def test_zero_coefficient_is_grpo_exactly(mode):
    """``vepo_coef=0`` is GRPO. Review of issue 44: with the real reward an untrained model solves
    nothing, so every advantage was 0 and the check vacuous; rewards 0.5 / 0 give non-zero
    advantages, and the policy is moved after sampling (``num_iterations=2``) so clipping acts."""
    _, tok, model, data = _setup()
    with tempfile.TemporaryDirectory() as out:
        kw = {"model": model, "reward_funcs": _half_reward, "train_dataset": data,
              "processing_class": tok}  # fmt: skip
        it = {"bf16": False, "num_iterations": 2}
        vepo = VEPOTrainer(args=_args(VEPOConfig, out, vepo_mode=mode, vepo_coef=0.0, **it), **kw)
        grpo = GRPOTrainer(args=_args(GRPOConfig, out, **it), **kw)
        batch = _batch(vepo)
        torch.manual_seed(0)
        a = vepo._generate_and_score_completions(batch)
        torch.manual_seed(0)
        b = grpo._generate_and_score_completions(batch)
        assert torch.equal(a["completion_ids"], b["completion_ids"])
        assert (a["advantages"] != 0).any()
        assert torch.equal(a["advantages"], b["advantages"])
        _perturb(model)
        assert _same(_loss_and_grads(vepo, model, a), _loss_and_grads(grpo, model, b))


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
def _reference(name: str) -> dict:
    from vepo.rl import TOKEN_COEF

    return {
        "GRPO": {},
        "GRPO + token entropy": {"entropy_coef": TOKEN_COEF},  # TRL's own token-entropy bonus
        "GRPO + sequence entropy": {},
        "clip-higher": {"epsilon_high": 0.28},
        "VEPO": {},
        "VEPO (normalised H)": {},
        "Differential Smoothing": {},
    }[name]


REFERENCE_NAMES = ("GRPO", "GRPO + token entropy", "GRPO + sequence entropy", "clip-higher", "VEPO",
                   "VEPO (normalised H)", "Differential Smoothing")  # fmt: skip


#: a wrong reference's clipping range (looser on both sides: with DS every advantage of this batch
#: is negative, so only the lower end binds)
LOOSE = {"epsilon": 0.5, "epsilon_high": 5.0}


def _half_reward(prompts, completions, **_):
    """0.5 for every other completion, 0 for the rest: GRPO's advantages are not 0 (the group
    rewards vary), but nothing reaches ``vepo_valid_threshold`` (1.0), so the validity-aware terms
    are 0."""
    return [0.5 * (i % 2) for i in range(len(prompts))]


def _perturb(model, scale: float = 0.3) -> None:
    """Move the policy away from the one that sampled (as the second of ``num_iterations=2``
    updates does), so the importance ratio is not 1 and clipping acts."""
    gen = torch.Generator().manual_seed(123)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=gen))


def _loss_and_grads(trainer, model, inputs):
    model.zero_grad(set_to_none=True)
    loss = trainer._compute_loss(model, inputs)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


def _same(x, y) -> bool:
    return torch.equal(x[0], y[0]) and all(
        torch.equal(a, b) for a, b in zip(x[1], y[1], strict=True)
    )


def test_no_config_field_of_ours_collides_with_grpo_config():
    """Issue 44: ``VEPOConfig.entropy_coef`` was also ``GRPOConfig.entropy_coef`` (TRL >= 1.x), so
    TRL added its own blind token-entropy bonus to every VEPO and sequence-bonus run."""
    import dataclasses

    ours = set(VEPOConfig.__annotations__)
    assert ours, "VEPOConfig declares no fields"
    parent = {f.name for f in dataclasses.fields(GRPOConfig)}
    assert ours & parent == set()


@pytest.mark.parametrize("name", REFERENCE_NAMES)
def test_every_method_is_grpo_apart_from_its_own_term(name):
    """Issue 44: for every method, VEPOTrainer's loss and gradients equal GRPOTrainer's (configured
    with the method's TRL options only) exactly on the same inputs, and the advantage differs from
    GRPO's by exactly our own term. Before, TRL's own ``entropy_coef`` read our coefficient: the
    loss was off by coef x token entropy (-0.017 for VEPO).

    The batch is not degenerate (review of issue 44: with an all-zero reward every advantage, loss
    and gradient was 0, so a wrong reference passed too): rewards 0.5 / 0 give GRPO non-zero
    advantages while no completion is valid (threshold 1), and the policy is moved after sampling so
    the ratio is not 1 and clipping acts. The same check against a wrong reference (a different
    clipping range, or TRL's token bonus added: the old collision) must fail."""
    from vepo.rl import METHODS

    assert set(METHODS) == set(REFERENCE_NAMES)
    _, tok, model, data = _setup()
    with tempfile.TemporaryDirectory() as out:
        kw = {"model": model, "reward_funcs": _half_reward, "train_dataset": data,
              "processing_class": tok}  # fmt: skip
        it = {"bf16": False, "num_iterations": 2}
        vepo = VEPOTrainer(args=_args(VEPOConfig, out, **it, **METHODS[name]), **kw)
        ref = _reference(name)
        grpo = GRPOTrainer(args=_args(GRPOConfig, out, **it, **ref), **kw)
        wrong = [
            GRPOTrainer(args=_args(GRPOConfig, out, **it, **{**ref, **LOOSE}), **kw),
            GRPOTrainer(args=_args(GRPOConfig, out, **it, **{**ref, "entropy_coef": ref.get(
                "entropy_coef", 0.0) + 0.05}), **kw),
        ]  # fmt: skip
        batch = _batch(vepo)
        torch.manual_seed(0)
        a = vepo._generate_and_score_completions(batch)
        torch.manual_seed(0)
        b = grpo._generate_and_score_completions(batch)
        assert torch.equal(a["completion_ids"], b["completion_ids"])
        assert (b["advantages"] != 0).sum() >= b["advantages"].numel() // 2  # not vacuous
        assert "old_per_token_logps" in a
        mode = vepo.args.vepo_mode
        if mode in ("none", "effective", "effective_normalized"):
            assert torch.equal(a["advantages"], b["advantages"])
        else:  # blind sequence bonus / DS on invalid samples: coef x (their weight)
            logp = vepo._sequence_logps(a)
            term = -logp - 1 if mode == "sequence" else logp
            assert torch.allclose(a["advantages"] - b["advantages"], vepo.args.vepo_coef * term,
                                  atol=1e-6)  # fmt: skip
        _perturb(model)
        ours = _loss_and_grads(vepo, model, a)
        assert ours[0] != 0
        assert _same(ours, _loss_and_grads(grpo, model, a))
        for bad in wrong:  # the check has teeth: a wrong reference differs
            assert not _same(ours, _loss_and_grads(bad, model, a))


#: which completions of the group of 8 are valid (reward 1), the rest reward 0: 5 of 8
VALID_PATTERN = (1, 0, 1, 1, 0, 1, 0, 1)


def _pattern_reward(prompts, completions, **_):
    return [float(VALID_PATTERN[i % 8]) for i in range(len(prompts))]


@pytest.mark.parametrize(
    "mode", ["effective", "effective_normalized", "differential_smoothing", "anti_effective"]
)
def test_valid_path_adds_exactly_the_formula(mode):
    """Review of issue 44: the validity-aware terms were only checked where nothing is valid (term
    0). With 5 of 8 completions valid, the advantage differs from the coefficient-0 run by exactly
    the formula, written out here element by element (``l = -log pi(y)``, ``v`` valid, ``k = 5``):
    VEPO ``c v (l - 1)``; normalised ``c v (G/k) (l_i - mean of l over the other valid ones)``; DS
    ``c l`` valid, ``-c l`` invalid; the null arm ``-c v (l - 1)``."""
    _, tok, model, data = _setup()
    c = 0.07
    with tempfile.TemporaryDirectory() as out:
        kw = {"model": model, "reward_funcs": _pattern_reward, "train_dataset": data,
              "processing_class": tok}  # fmt: skip
        common = {"output_dir": out, "per_device_train_batch_size": 8, "num_generations": 8,
                  "max_completion_length": 8, "max_steps": 1, "beta": 0.0, "loss_type": "grpo",
                  "report_to": [], "use_cpu": True, "save_strategy": "no", "disable_tqdm": True,
                  "seed": 0, "bf16": False, "vepo_mode": mode}  # fmt: skip
        on = VEPOTrainer(args=VEPOConfig(**common, vepo_coef=c), **kw)
        off = VEPOTrainer(args=VEPOConfig(**common, vepo_coef=0.0), **kw)
        batch = _batch(on)
        torch.manual_seed(2)
        a = on._generate_and_score_completions(batch)
        torch.manual_seed(2)
        b = off._generate_and_score_completions(batch)
        assert torch.equal(a["completion_ids"], b["completion_ids"])
        lp = [float(x) for x in on._sequence_logps(a).double()]
    diff = [float(x) for x in (a["advantages"] - b["advantages"])]
    v, g, k = VALID_PATTERN, 8, sum(VALID_PATTERN)
    ls = [-x for x in lp]
    expected = []
    for i in range(g):
        if mode == "effective":
            e = c * v[i] * (ls[i] - 1)
        elif mode == "anti_effective":
            e = -c * v[i] * (ls[i] - 1)
        elif mode == "differential_smoothing":
            e = c * ls[i] if v[i] else -c * ls[i]
        else:
            others = [ls[j] for j in range(g) if j != i and v[j]]
            e = c * v[i] * (g / k) * (ls[i] - sum(others) / len(others))
        expected.append(e)
    assert any(abs(e) > 0.05 for e in expected)  # a real term, not 0
    assert diff == pytest.approx(expected, abs=1e-5)


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


def test_coefficients_reject_bool_and_default_is_vepos_tuned_value():
    """Review of issue 44: ``vepo_coef=True`` passed as 1.0; the default ``vepo_coef`` (0.05) was
    not the coefficient the reproduction uses, and GRPO runs recorded it although unused."""
    from vepo.rl import COEFS, METHODS

    with tempfile.TemporaryDirectory() as out:
        for name in ("vepo_coef", "vepo_coef_incorrect", "vepo_valid_threshold"):
            with pytest.raises(ValueError, match=name):
                VEPOConfig(output_dir=out, **{name: True})
        assert VEPOConfig(output_dir=out).vepo_coef == COEFS["VEPO"]
    assert METHODS["VEPO"]["vepo_coef"] == COEFS["VEPO"]
    for name, fields in METHODS.items():
        if fields["vepo_mode"] == "none":
            assert fields["vepo_coef"] == 0.0, name
