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


# --------------------------------------------------------------------- issue 44: peft options


def _scales(model) -> dict[str, float]:
    return {
        name.rsplit(".", 1)[-1]: float(m.scaling["default"])
        for name, m in model.named_modules()
        if hasattr(m, "scaling") and "default" in getattr(m, "scaling", {})
    }


def test_ordinary_peft_options_are_accepted():
    """Issue 44: the allow-list rejected rank_pattern and target_parameters, ordinary peft options
    that do not touch the law."""
    cfg = LoraAlphaConfig(2, c=32, target_modules=["proj"], lora_kwargs={"target_parameters": ["out.weight"], "lora_dropout": 0.1})  # fmt: skip
    peft_cfg = cfg.to_peft()
    assert list(peft_cfg.target_parameters) == ["out.weight"]
    assert peft_cfg.lora_dropout == pytest.approx(0.1)
    assert lora_alpha_config(2, ["proj"], c=32, layer_replication=None).lora_alpha == pytest.approx(
        32 * math.sqrt(2)
    )


def test_rank_pattern_follows_the_law_per_module():
    """A module with its own rank (rank_pattern) gets alpha = c sqrt(its rank), not c sqrt(r)."""
    cfg = LoraAlphaConfig(4, c=32, target_modules=["proj", "out"], lora_kwargs={"rank_pattern": {"out": 16}})  # fmt: skip
    assert cfg.to_peft().alpha_pattern == {"out": pytest.approx(32 * 4.0)}
    model = get_lora_alpha_model(Toy(), cfg)
    scales = _scales(model)
    assert scales["proj"] == pytest.approx(32 / math.sqrt(4))
    assert scales["out"] == pytest.approx(32 / math.sqrt(16))


def test_alpha_pattern_off_the_law_is_rejected():
    with pytest.raises(ValueError, match=r"alpha_pattern\['out'\].*c \* sqrt"):
        LoraAlphaConfig(4, c=32, lora_kwargs={"alpha_pattern": {"out": 8.0}})
    with pytest.raises(ValueError, match=r"alpha_pattern\['out'\]"):
        LoraAlphaConfig(4, c=32, lora_kwargs={"rank_pattern": {"out": 16}, "alpha_pattern": {"out": 64.0}})  # fmt: skip
    ok = LoraAlphaConfig(4, c=32, lora_kwargs={"rank_pattern": {"out": 16}, "alpha_pattern": {"out": 128.0}})  # fmt: skip
    assert ok.to_peft().alpha_pattern == {"out": pytest.approx(128.0)}
    with pytest.raises(ValueError, match="rank_pattern"):
        LoraAlphaConfig(4, lora_kwargs={"rank_pattern": {"out": 0}})


def test_eva_rank_redistribution_is_rejected():
    """EVA with rho > 1 moves ranks between layers and rescales alpha to keep alpha / r."""
    with pytest.raises(ValueError, match="EVA"):
        LoraAlphaConfig(4, lora_kwargs={"init_lora_weights": "eva"})


def test_lora_alpha_is_rslora_with_alpha_c():
    """LoRA-alpha(c) applies c / sqrt(r) at every rank: rsLoRA with alpha = c."""
    from lora_alpha import rslora

    for r in (1, 4, 16):
        assert LoraAlphaConfig(r, c=32).scaling == pytest.approx(rslora(32).scaling(r))
        ours = _scales(get_lora_alpha_model(Toy(), LoraAlphaConfig(r, c=32, target_modules=["proj"])))  # fmt: skip
        rs = _scales(get_lora_alpha_model(Toy(), rslora(32).lora_config(r, ["proj"])))
        assert ours == pytest.approx(rs)


def test_method_lora_config_keeps_its_rule():
    """Before: Method.lora_config(..., lora_alpha=3) raised a TypeError from inside peft, and a
    rank_pattern left alpha_2r / LoRA-alpha modules off their rule."""
    with pytest.raises(ValueError, match=r"lora_alpha is set by Method\(.standard.\)"):
        Method("standard").lora_config(2, ["proj"], lora_alpha=3)
    with pytest.raises(ValueError, match="use_rslora is set by Method"):
        Method("lora_alpha").lora_config(2, ["proj"], use_rslora=True)
    cfg = Method("alpha_2r").lora_config(2, ["proj", "out"], rank_pattern={"out": 8})
    assert cfg.alpha_pattern == {"out": pytest.approx(16.0)}
    cfg = Method("lora_alpha", c=32).lora_config(4, ["proj", "out"], rank_pattern={"out": 16})
    assert cfg.alpha_pattern == {"out": pytest.approx(128.0)}
    with pytest.raises(ValueError, match="unknown"):
        Method("standard").lora_config(2, ["proj"], rank=3)


def test_alpha_pattern_regex_keys_are_resolved_per_module():
    """Review of issue 44: peft matches alpha_pattern / rank_pattern keys as regexes in order, but
    the check matched keys exactly. A regex key that is on the law for the module it reaches was
    rejected; a caller's key placed before the rank-derived ones shadowed them (the module got
    alpha at the wrong rank, silently); a regex key off the law passed the exact-match check."""
    law = lambda k: 32 * math.sqrt(k)  # noqa: E731
    # on the law for "out" at rank 16, through a regex: accepted, and out is on the law
    cfg = LoraAlphaConfig(4, c=32, target_modules=["proj", "out"],
                          lora_kwargs={"rank_pattern": {"out": 16}, "alpha_pattern": {".*ut": law(16)}})  # fmt: skip
    scales = _scales(get_lora_alpha_model(Toy(), cfg))
    assert scales["out"] == pytest.approx(32 / 4)
    assert scales["proj"] == pytest.approx(32 / 2)
    # "o.t" (alpha at rank 4) used to come first and shadow "out" (rank 16): out got 64 / 16
    cfg = LoraAlphaConfig(4, c=32, target_modules=["proj", "out"],
                          lora_kwargs={"rank_pattern": {"out": 16}, "alpha_pattern": {"o.t": law(4)}})  # fmt: skip
    model = get_lora_alpha_model(Toy(), cfg)  # rank-derived keys first: out stays on the law
    assert _scales(model)["out"] == pytest.approx(32 / 4)
    # a regex key off the law for the module it reaches: caught after wrapping
    cfg = LoraAlphaConfig(4, c=32, target_modules=["proj", "out"],
                          lora_kwargs={"rank_pattern": {"out": 16}, "alpha_pattern": {"pr.j": 999.0}})  # fmt: skip
    with pytest.raises(ValueError, match=r"proj.*off the rule"):
        get_lora_alpha_model(Toy(), cfg)
    std = Method("standard")
    peft_cfg = std.lora_config(4, ["proj", "out"], rank_pattern={"out": 16},
                               alpha_pattern={"pr.j": 999.0})  # fmt: skip
    with pytest.raises(ValueError, match="off the rule"):
        get_lora_alpha_model(Toy(), peft_cfg, alpha_of_rank=std.lora_alpha)
