import numpy as np
import pytest
import torch

from spherical_grokking import (
    HISTORY_KEYS,
    METHOD_ARMS,
    Arm,
    GrokfastEMA,
    ModelConfig,
    TrainConfig,
    baseline_arms,
    build_model,
    modular_task,
    run_arm,
    split,
    train,
)

TASK = modular_task("+", 13)
DATA = split(TASK, 0.5, seed=0)
SMALL = {"d_model": 16, "n_heads": 2, "d_mlp": 32}


def quick_config(**kw) -> TrainConfig:
    return TrainConfig(**{"lr": 3e-3, "steps": 40, "eval_every": 10, "device": "cpu", **kw})


@pytest.mark.parametrize("variant", ["layernorm", "sphere", "sphere+uniform", "ngpt"])
def test_a_few_steps_lower_the_training_loss(variant):
    model = build_model(ModelConfig.for_task(TASK, variant, **SMALL), seed=0)
    # nGPT's logits start inside [-1, 1] (s_z = 1): it trains without weight decay and a larger lr
    ngpt = {"weight_decay": 0.0, "lr": 1e-2} if variant == "ngpt" else {}
    result = train(model, DATA, quick_config(**ngpt))
    loss = result.history["train_loss"]
    assert loss[-1] < 0.9 * loss[0]
    assert list(result.history) == list(HISTORY_KEYS)
    np.testing.assert_array_equal(result.history["step"], [0, 10, 20, 30, 40])
    assert result.metrics.budget == 40
    assert not result.diverged


def test_training_is_deterministic_by_seed():
    runs = [
        train(build_model(ModelConfig.for_task(TASK, "sphere", **SMALL), seed=s), split(TASK, 0.5, seed=s),
              quick_config())
        for s in (7, 7, 8)
    ]  # fmt: skip
    for key in HISTORY_KEYS:
        np.testing.assert_array_equal(runs[0].history[key], runs[1].history[key])
    assert not np.array_equal(runs[0].history["train_loss"], runs[2].history["train_loss"])


def test_train_and_test_rows_come_from_the_same_weights():
    model = build_model(ModelConfig.for_task(TASK, "layernorm", **SMALL), seed=0)
    result = train(model, DATA, quick_config(steps=20, eval_every=20))
    x, y, _tx, _ty = DATA.tensors()
    with torch.no_grad():
        acc = float((model(x).argmax(-1) == y).float().mean())
    assert result.history["train_acc"][-1] == pytest.approx(acc)
    assert result.rows()[-1]["step"] == 20


def test_early_stop_once_test_accuracy_reaches_the_target():
    model = build_model(ModelConfig.for_task(TASK, "layernorm", **SMALL), seed=0)
    result = train(model, DATA, quick_config(stop_at=1e-6))
    assert result.stopped_early
    assert result.history["step"].tolist() == [0]
    assert result.metrics.steps_run == 0
    assert result.metrics.budget == 40


def test_grokfast_ema_known_answer():
    p = torch.nn.Parameter(torch.zeros(3))
    f = GrokfastEMA(alpha=0.5, lamb=2.0)
    g1, g2 = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([3.0, 0.0, -1.0])
    p.grad = g1.clone()
    f([p])
    torch.testing.assert_close(p.grad, g1 + 2.0 * g1)  # the EMA starts at the first gradient
    p.grad = g2.clone()
    f([p])
    ema = 0.5 * g1 + 0.5 * g2
    torch.testing.assert_close(p.grad, g2 + 2.0 * ema)


def test_run_arm_applies_the_arm_overrides():
    cfg = quick_config(steps=10)
    wd = run_arm(TASK, Arm("ln wd", "layernorm", weight_decay=0.25), 0, 0.5, cfg, **SMALL).row()
    assert wd["weight_decay"] == 0.25
    assert wd["head"] == "linear"
    assert wd["variant"] == "layernorm"
    frac = run_arm(TASK, baseline_arms(weight_decays=(), grokfast=None)[0], 0, 0.5, cfg, **SMALL)
    assert frac.row()["train_fraction"] == pytest.approx(int(0.6 * len(TASK)) / len(TASK))
    gf = run_arm(
        TASK, baseline_arms(weight_decays=(), train_fraction=None)[0], 0, 0.5, cfg, **SMALL
    )
    assert gf.result.config.grokfast_alpha == 0.98
    assert gf.row()["grokfast"]
    sphere = run_arm(TASK, METHOD_ARMS["sphere wd=0"], 0, 0.5, cfg, **SMALL)
    assert sphere.row()["head"] == "cosine"
    assert sphere.result.config.weight_decay == 0.0


def test_bad_training_input_is_refused():
    with pytest.raises(ValueError, match="lr"):
        TrainConfig(lr=0.0)
    with pytest.raises(ValueError, match="betas"):
        TrainConfig(betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="stop_at"):
        TrainConfig(stop_at=1.5)
    with pytest.raises(ValueError, match="grokfast_alpha"):
        TrainConfig(grokfast_alpha=1.0)
    with pytest.raises(ValueError, match="alpha"):
        GrokfastEMA(alpha=-0.1)
    with pytest.raises(ValueError, match=r"Arm\.variant"):
        Arm("x", "batchnorm")
    with pytest.raises(ValueError, match="train_fraction"):
        Arm("x", "sphere", train_fraction=1.2)
    model = build_model(ModelConfig.for_task(TASK, "layernorm", **SMALL))
    with pytest.raises(TypeError, match="Split"):
        train(model, TASK, quick_config())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="TrainConfig"):
        train(model, DATA, {"lr": 1e-3})  # type: ignore[arg-type]
