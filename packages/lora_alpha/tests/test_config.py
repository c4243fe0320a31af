import math

import pytest
import torch
from peft import LoraConfig
from torch import nn

from lora_alpha import (
    DEFAULT_C,
    LoraAlphaConfig,
    Method,
    get_lora_alpha_model,
    lora_alpha_config,
    loraplus,
)


class Toy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 5)
        self.out = nn.Linear(5, 3)

    def forward(self, x):
        return self.out(torch.relu(self.proj(x)))


def test_config_follows_the_square_root_law():
    cfg = lora_alpha_config(16, ["proj"], c=64)
    assert isinstance(cfg, LoraConfig)
    assert cfg.lora_alpha == pytest.approx(256.0)
    assert cfg.use_rslora is False
    c = LoraAlphaConfig(r=4, target_modules=["proj"])
    assert c.alpha == pytest.approx(DEFAULT_C * 2)
    assert c.scaling == pytest.approx(DEFAULT_C / 2)


@pytest.mark.parametrize(
    "method",
    [
        Method("lora_alpha", c=32),
        Method("standard", alpha=8),
        Method("rslora", alpha=8),
        Method("alpha_2r"),
        Method("loraplus", alpha=8),
    ],
)
@pytest.mark.parametrize("r", [1, 4])
def test_forward_pass_applies_the_configured_scale(method, r):
    torch.manual_seed(0)
    base = Toy()
    w, b = base.proj.weight.detach().clone(), base.proj.bias.detach().clone()
    model = get_lora_alpha_model(base, method.lora_config(r, ["proj"]))
    layer = model.base_model.model.proj
    with torch.no_grad():
        layer.lora_B["default"].weight.normal_()
    A = layer.lora_A["default"].weight.detach()
    B = layer.lora_B["default"].weight.detach()
    s = method.scaling(r)
    assert layer.scaling["default"] == pytest.approx(s)
    expected_s = {"standard": 8 / r, "rslora": 8 / math.sqrt(r), "alpha_2r": 2.0,
                  "loraplus": 8 / r, "lora_alpha": 32 / math.sqrt(r)}[method.rule]  # fmt: skip
    assert s == pytest.approx(expected_s)
    x = torch.randn(7, 6)
    expected = x @ (w + s * B @ A).T + b
    assert torch.allclose(layer(x), expected, atol=1e-5)


def test_only_adapters_are_trainable():
    model = get_lora_alpha_model(Toy(), LoraAlphaConfig(2, target_modules=["proj", "out"]))
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert names
    assert all("lora_" in n for n in names)


def test_loraplus_optimizer_scales_b_learning_rate():
    model = get_lora_alpha_model(Toy(), loraplus(ratio=4).lora_config(2, ["proj"]))
    opt = loraplus(ratio=4).optimizer(model, 1e-3)
    lrs = sorted({g["lr"] for g in opt.param_groups if g["params"]})
    assert lrs == pytest.approx([1e-3, 4e-3])


@pytest.mark.parametrize("r", [0, -1, 1.5, True])
def test_bad_rank(r):
    with pytest.raises(ValueError, match="r must be"):
        LoraAlphaConfig(r=r)


@pytest.mark.parametrize("c", [0, -2.0, math.inf])
def test_bad_coefficient(c):
    with pytest.raises(ValueError, match="c must be"):
        lora_alpha_config(4, c=c)


def test_bad_alpha_and_rule():
    with pytest.raises(ValueError, match="alpha must be"):
        Method("standard", alpha=0)
    with pytest.raises(ValueError, match="rule"):
        Method("dora")
    with pytest.raises(ValueError, match="lr must be"):
        Method().optimizer(Toy(), 0.0)
    with pytest.raises(ValueError, match="lora_alpha must be > 0"):
        get_lora_alpha_model(Toy(), LoraConfig(r=2, lora_alpha=0, target_modules=["proj"]))


def test_unknown_target_modules_list_the_linear_layers():
    with pytest.raises(ValueError, match=r"\['out', 'proj'\]"):
        get_lora_alpha_model(Toy(), LoraAlphaConfig(2, target_modules=["q_proj"]))


def test_bad_lora_kwargs():
    with pytest.raises(ValueError, match="unknown keys"):
        LoraAlphaConfig(2, lora_kwargs={"rank": 3})
    with pytest.raises(ValueError, match="set by LoraAlphaConfig"):
        LoraAlphaConfig(2, lora_kwargs={"use_rslora": True})
    with pytest.raises(TypeError, match=r"LoraAlphaConfig or peft\.LoraConfig"):
        get_lora_alpha_model(Toy(), {"r": 2})
