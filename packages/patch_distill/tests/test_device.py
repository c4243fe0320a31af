"""Issue 44: device and mixed precision through pretraining, one iBOT centre update per step, the
masked lambda = 0 control. There is no GPU in CI: device handling is checked on ``meta`` (a tensor
made on the CPU inside the objective meets a meta tensor and raises) and with an explicit device
and an autocast dtype on the CPU."""

import ast
import math
from pathlib import Path

import pytest
import torch

from patch_distill import (
    PretrainConfig,
    SyntheticShapes,
    ViTConfig,
    build_model,
    encode_tokens,
    make_masks,
    multicrop,
    pretrain,
    view_pair,
)

TINY = ViTConfig(embed_dim=32, depth=1, num_heads=2)
SRC = Path(__file__).resolve().parents[1] / "src" / "patch_distill"

CONFIGS = [
    PretrainConfig(objective="dino", patch_weight=1.0, koleo_weight=0.1),
    PretrainConfig(objective="dino", patch_weight=0.0, mask_student=True),
    PretrainConfig(objective="contrastive", patch_weight=1.0),
    PretrainConfig(objective="vicreg", patch_weight=0.0),
    PretrainConfig(objective="barlow", patch_weight=2.0),
    PretrainConfig.baseline("mae"),
    PretrainConfig.baseline("latent"),
]


def _views(cfg: PretrainConfig, device: str, n: int = 4):
    gen = torch.Generator().manual_seed(0)
    images = SyntheticShapes().sample(n).images.to(device)
    n_local = cfg.n_local_crops if cfg.objective == "dino" else 0
    globals_, locals_ = multicrop(
        images, gen, 32, 16, n_local, cfg.global_scale, cfg.local_scale, 0.1
    )
    masks = (
        [make_masks(n, (8, 8), cfg.mask_ratio, cfg.mask_mode, gen, device=device) for _ in globals_]
        if cfg.masks_student
        else None
    )
    return globals_, locals_, masks


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.label)
def test_every_objective_runs_on_meta(config):
    """Before: MAE built its token buffer with ``torch.zeros`` on the CPU, the crops their affine
    matrices on the CPU, and the patch term picked masked tokens by boolean indexing (a host sync;
    undefined on meta), so no objective could run off the CPU. Now a whole step (crops, masks,
    losses, backward, EMA) stays on the model's device."""
    import torch.fx.experimental._config as fx_config

    # lightly's NT-Xent and VICReg drop a diagonal by boolean indexing (device-correct, but its
    # output size is data-dependent): let meta assume the count, as it is only a shape here
    cfg = config.with_(vit=TINY, batch_size=4)
    torch.manual_seed(0)
    with fx_config.patch(meta_nonzero_assume_all_nonzero=True):
        model = build_model(cfg).to("meta")
        globals_, locals_, masks = _views(cfg, "meta")
        terms = model.losses(globals_, locals_, masks)
        terms["loss"].backward()
        model.update_teacher(0.99)
    assert all(g.device.type == "meta" for g in globals_ + locals_)
    assert masks is None or all(m.device.type == "meta" for m in masks)
    assert all(v.device.type == "meta" for v in terms.values())
    grads = [p.grad for p in model.parameters() if p.requires_grad and p.grad is not None]
    assert grads
    assert all(g.device.type == "meta" for g in grads)
    assert all(b.device.type == "meta" for b in model.buffers())


def test_view_pair_follows_the_images_device():
    pair = view_pair(torch.empty(2, 3, 32, 32, device="meta"), "zoom", 1.5)
    assert pair.b.device.type == "meta"


def test_encode_tokens_moves_images_to_the_models_device():
    """Before: the images stayed where they were, so a GPU-trained backbone could not be evaluated
    on the (CPU) data sets."""
    seen = []

    class Probe(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.empty(1, device="meta"))

        def forward(self, x):
            seen.append(x.device.type)
            return torch.zeros(x.shape[0], 4, 2)

    cls, patches = encode_tokens(Probe(), torch.rand(3, 3, 8, 8), batch_size=2)
    assert seen == ["meta", "meta"]
    assert patches.shape == (3, 4, 2)
    assert cls.device.type == "cpu"


def test_pretrain_on_an_explicit_device_with_bfloat16_autocast():
    data = SyntheticShapes().sample(64, seed=3)
    cfg = PretrainConfig(objective="dino", patch_weight=1.0, vit=TINY, steps=3, batch_size=16)
    dtypes: list[torch.dtype] = []
    bf16 = cfg.with_(precision="bfloat16")
    rows = []

    def record(step, row):
        rows.append(row)

    res = pretrain(bf16, data, device="cpu", callback=record)
    assert all(p.device.type == "cpu" for p in res.model.parameters())
    assert all(p.dtype == torch.float32 for p in res.model.parameters())  # master weights
    assert all(math.isfinite(h["loss"]) for h in res.history)
    # the forward ran under autocast: a block's matmul output is bfloat16
    hook = res.model.student.vit.blocks[0].mlp.fc1.register_forward_hook(
        lambda m, i, o: dtypes.append(o.dtype)
    )
    from patch_distill.train import autocast_for

    with autocast_for(bf16, torch.device("cpu")):
        res.model.student.encode(data.images[:2])
    hook.remove()
    assert dtypes == [torch.bfloat16]
    fp32 = pretrain(cfg, data, device="cpu")
    assert fp32.loss_curve() != res.loss_curve()  # bfloat16 rounding changed the run
    assert fp32.loss_curve()[0] == pytest.approx(res.loss_curve()[0], rel=0.05)
    assert len(rows) == 3


def test_pretrain_rejects_bad_device_and_precision():
    data = torch.rand(4, 3, 32, 32)
    cfg = PretrainConfig(vit=TINY, batch_size=2, steps=1)
    with pytest.raises(ValueError, match="device"):
        pretrain(cfg, data, device="not-a-device")
    with pytest.raises(ValueError, match="precision"):
        PretrainConfig(precision="int8")  # type: ignore[arg-type]


FACTORIES = {"tensor", "zeros", "ones", "empty", "full", "arange", "linspace", "rand", "randn",
             "randint", "randperm", "eye"}  # fmt: skip


@pytest.mark.parametrize("module", ["augment.py", "objectives.py", "train.py", "models.py"])
def test_no_tensor_is_made_without_a_device(module):
    """Every ``torch.<factory>(...)`` in the training path names its ``device=`` (the input's, or
    the CPU generator's for random draws that are then moved): none lands on the CPU by default."""
    tree = ast.parse((SRC / module).read_text())
    bare = [
        f"{module}:{node.lineno} torch.{node.func.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "torch"
        and node.func.attr in FACTORIES
        and not any(k.arg == "device" for k in node.keywords)
    ]
    assert bare == []


def test_ibot_centre_is_updated_once_per_step():
    """Before: the iBOT loss was called once per global view, so its centre moved twice per step
    (momentum 0.9 acted as 0.81) and the second view's batch weighed more. Now one update per
    step, from the masked teacher logits of both views (DINOv2)."""
    cfg = PretrainConfig(objective="dino", patch_weight=1.0, vit=TINY, batch_size=4)
    torch.manual_seed(0)
    model = build_model(cfg)
    globals_, locals_, masks = _views(cfg, "cpu")
    calls = {"patch": 0, "cls": 0}
    patch_update, cls_update = model.patch_loss.center.update, model.base_loss.update_center

    def count(name, fn):
        def wrapped(x):
            calls[name] += 1
            return fn(x)

        return wrapped

    model.patch_loss.center.update = count("patch", patch_update)
    model.base_loss.update_center = count("cls", cls_update)
    terms = model.losses(globals_, locals_, masks)
    assert calls == {"patch": 1, "cls": 1}
    # the term is lightly's IBOTPatchLoss (centre 0, as before the update) over both views
    from lightly.loss import IBOTPatchLoss

    from patch_distill.objectives import _with_prefix, masked_patch_loss

    with torch.no_grad():
        s_full = torch.cat([model.patch_head(model.student.encode(g, mask=_with_prefix(m))[:, 1:])
                            for g, m in zip(globals_, masks, strict=True)])  # fmt: skip
        t_full = torch.cat([model.teacher_patch_head(model.teacher.encode(g)[:, 1:])
                            for g in globals_])  # fmt: skip
    fresh = IBOTPatchLoss(cfg.patch_out_dim, cfg.teacher_temp, cfg.student_temp)
    expected_loss = masked_patch_loss(fresh, t_full, s_full, torch.cat(masks))
    assert terms["patch"].item() == pytest.approx(expected_loss.item(), rel=1e-5)
    # the centre is (1 - m) times the mean masked teacher logit over both views (it started at 0)
    with torch.no_grad():
        t = torch.cat(
            [model.teacher_patch_head(model.teacher.encode(g)[:, 1:][m.flatten(1)])
             for g, m in zip(globals_, masks, strict=True)]
        )  # fmt: skip
    expected = (1 - cfg.center_momentum) * t.mean(0, keepdim=True)
    assert torch.allclose(model.patch_loss.center.value, expected, atol=1e-6)


def test_masked_lambda_zero_control_masks_the_student_without_the_patch_loss():
    """The lambda = 0 arm used to switch masking off too, so the sweep could not tell the patch
    loss from masking. The control: the student sees the same masked views, no patch term."""
    control = PretrainConfig(objective="vicreg", patch_weight=0.0, mask_student=True)
    assert control.masks_student
    assert control.label == "vicreg λ=0 masked"
    assert not PretrainConfig(objective="vicreg", patch_weight=0.0).masks_student
    with pytest.raises(ValueError, match="mask_student"):
        PretrainConfig(objective="vicreg", patch_weight=1.0, mask_student=False)
    cfg = control.with_(vit=TINY, batch_size=4)
    torch.manual_seed(0)
    model = build_model(cfg)
    globals_, locals_, masks = _views(cfg, "cpu")
    seen = []
    encode = model.student.encode

    def spy(x, mask=None, **kw):
        seen.append(mask is not None)
        return encode(x, mask=mask, **kw)

    model.student.encode = spy
    terms = model.losses(globals_, locals_, masks)
    assert "patch" not in terms
    assert seen == [True, True]
    seen.clear()
    model.losses(globals_, locals_, None)  # the plain lambda = 0 arm
    assert seen == [False, False]


def test_pretrain_rejects_meta_with_a_clear_error():
    """Before: ``resolve_device`` accepted ``meta`` and ``pretrain`` went on to fail deep inside
    the step (reading a meta loss back to the host). A meta step is what the tests run on the
    objective (``model.losses``); ``pretrain`` itself needs real numbers, so it refuses meta."""
    data = torch.rand(8, 3, 32, 32)
    with pytest.raises(ValueError, match="meta"):
        pretrain(PretrainConfig(vit=TINY, batch_size=4, steps=1), data, device="meta")
