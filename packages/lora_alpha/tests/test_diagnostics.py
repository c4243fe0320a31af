import math

import pytest
import torch
from torch import nn

from lora_alpha import (
    LoraAlphaConfig,
    SignalDriftCallback,
    delta_weights,
    full_finetune_delta,
    get_lora_alpha_model,
    reference_gradient,
    signal_drift,
    spectral_summary,
    standard,
    top_hessian_eigenvalue,
)


class One(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2, bias=False)

    def forward(self, x):
        return self.lin(x)


def _toy(scale: float):
    """Rank-1 adapter on a 2x2 layer with A = [1, 0], B = [1, 1]^T: dW = s [[1, 0], [1, 0]]."""
    model = get_lora_alpha_model(One(), standard(alpha=scale).lora_config(1, ["lin"]))
    layer = model.base_model.model.lin
    with torch.no_grad():
        layer.lora_A["default"].weight.copy_(torch.tensor([[1.0, 0.0]]))
        layer.lora_B["default"].weight.copy_(torch.tensor([[1.0], [1.0]]))
    return model


def test_signal_drift_closed_form_on_a_rank1_toy():
    s = 3.0
    model = _toy(s)
    delta = delta_weights(model)
    assert list(delta) == ["lin"]
    assert torch.allclose(delta["lin"], s * torch.tensor([[1.0, 0.0], [1.0, 0.0]]))
    ref = {"lin": torch.tensor([[2.0, 0.0], [0.0, 0.0]])}  # direction e11, any length
    sd = signal_drift(delta, ref)
    assert sd.update_norm == pytest.approx(s * math.sqrt(2))
    assert sd.signal == pytest.approx(s)
    assert sd.drift == pytest.approx(s)
    assert sd.drift_ratio == pytest.approx(1.0)
    assert sd.cosine == pytest.approx(1 / math.sqrt(2))
    # an update along the reference has no drift; scaling the update leaves the ratio unchanged
    assert signal_drift({"lin": 5 * ref["lin"]}, ref).drift_ratio == pytest.approx(0.0)
    assert signal_drift(delta_weights(_toy(10 * s)), ref).drift_ratio == pytest.approx(1.0)


def test_signal_drift_of_a_diverged_or_zero_update_is_explicit():
    ref = {"lin": torch.tensor([[2.0, 0.0], [0.0, 0.0]])}
    # planted: a diverged run's NaN weights. Before: drift = sqrt(max(nan, 0.0)) = NaN, ratio NaN
    sd = signal_drift({"lin": torch.tensor([[math.nan, 1.0], [0.0, 0.0]])}, ref)
    assert sd.drift_ratio == math.inf  # censored: drifted past every finite value
    assert sd.update_norm == math.inf
    assert math.isnan(sd.signal)
    assert math.isnan(sd.cosine)
    assert signal_drift({"lin": torch.full((2, 2), math.inf)}, ref).drift_ratio == math.inf
    zero = signal_drift({"lin": torch.zeros(2, 2)}, ref)  # no update: 0/0
    assert math.isnan(zero.drift_ratio)
    assert zero.update_norm == 0.0
    orthogonal = signal_drift({"lin": torch.tensor([[0.0, 1.0], [0.0, 0.0]])}, ref)
    assert orthogonal.drift_ratio == math.inf
    with pytest.raises(ValueError, match="non-finite"):
        signal_drift(ref, {"lin": torch.full((2, 2), math.nan)})


def test_signal_drift_bad_input():
    d = {"lin": torch.ones(2, 2)}
    with pytest.raises(ValueError, match="different layers"):
        signal_drift(d, {"other": torch.ones(2, 2)})
    with pytest.raises(ValueError, match="layer lin"):
        signal_drift(d, {"lin": torch.ones(2, 3)})
    with pytest.raises(ValueError, match="zero"):
        signal_drift(d, {"lin": torch.zeros(2, 2)})


def test_spectral_summary_known_matrix():
    out = spectral_summary({"a": torch.diag(torch.tensor([3.0, 4.0]))})
    assert out["stable_rank"] == pytest.approx(25 / 16)
    assert out["top1_energy"] == pytest.approx(16 / 25)


def test_top_hessian_eigenvalue_of_a_quadratic():
    h = torch.tensor([[4.0, 1.0, 0.0], [1.0, 3.0, 0.0], [0.0, 0.0, -1.0]])

    class Q(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.x = nn.Parameter(torch.tensor([0.3, -0.2, 0.5]))

    eig = top_hessian_eigenvalue(Q(), lambda m, _: 0.5 * m.x @ h @ m.x, None, iters=200, tol=1e-10)
    assert eig == pytest.approx(float(torch.linalg.eigvalsh(h).max()), rel=1e-4)


def test_reference_gradient_is_the_full_finetuning_gradient():
    torch.manual_seed(0)
    x, y = torch.randn(16, 2), torch.randn(16, 2)

    def loss_fn(m, batch):
        return ((m(batch[0]) - batch[1]) ** 2).mean()

    model = get_lora_alpha_model(One(), LoraAlphaConfig(1, target_modules=["lin"]))
    w = model.base_model.model.lin.base_layer.weight.detach().clone().requires_grad_(True)
    expected = -torch.autograd.grad(((x @ w.T - y) ** 2).mean(), w)[0]
    got = reference_gradient(model, loss_fn, (x, y))
    assert torch.allclose(got["lin"], expected, atol=1e-6)
    assert not model.base_model.model.lin.base_layer.weight.requires_grad


def test_full_finetune_delta_moves_only_named_modules():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
    before = [p.detach().clone() for p in model.parameters()]
    batches = iter(lambda: (torch.randn(8, 3), torch.randn(8, 1)), None)
    delta = full_finetune_delta(
        model, lambda m, b: ((m(b[0]) - b[1]) ** 2).mean(), batches, ["1"], 1e-2, 5
    )
    assert set(delta) == {"1"}
    assert delta["1"].abs().sum() > 0
    assert torch.equal(model[0].weight, before[0])
    with pytest.raises(ValueError, match="modules"):
        full_finetune_delta(model, lambda m, b: m(b).sum(), batches, ["nope"])


def test_callback_records_in_a_plain_loop():
    torch.manual_seed(0)
    model = get_lora_alpha_model(One(), LoraAlphaConfig(1, c=4, target_modules=["lin"]))
    x = torch.randn(32, 2)
    y = x @ torch.tensor([[1.0, 2.0], [0.0, 1.0]]).T

    def loss_fn(m, batch):
        return ((m(batch[0]) - batch[1]) ** 2).mean()

    ref = reference_gradient(model, loss_fn, (x, y))
    cb = SignalDriftCallback(ref, every=5, sharpness=(loss_fn, (x, y)), sharpness_every=10)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for step in range(1, 21):
        loss = loss_fn(model, (x, y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        cb.on_step(model, step, loss.item())
    assert [h["step"] for h in cb.history] == [5, 10, 15, 20]
    assert all("sharpness" in h for h in cb.history if h["step"] % 10 == 0)
    assert all(h["sharpness"] > 0 for h in cb.history if "sharpness" in h)
    assert cb.history[-1]["update_norm"] > cb.history[0]["update_norm"] > 0
    # early on the update follows the gradient: the cosine with it is positive
    assert cb.history[0]["cosine"] > 0
    with pytest.raises(ValueError, match="every"):
        SignalDriftCallback(every=0)


def test_no_lora_layers():
    with pytest.raises(ValueError, match="no LoRA layers"):
        delta_weights(One())


def test_callback_works_with_the_transformers_trainer(tmp_path):
    from transformers import Trainer, TrainingArguments

    from paper_common.lm import build_tokenizer, tiny_causal_lm

    texts = ["the sky is blue", "the grass is green", "snow is white", "coal is black"]
    tok = build_tokenizer(texts)
    model = get_lora_alpha_model(
        tiny_causal_lm(tok, "llama", n_layers=1, d_model=32, n_heads=2, seed=0),
        LoraAlphaConfig(2, c=16, target_modules=["q_proj", "v_proj"]),
    )
    enc = tok(texts, padding=True)
    rows = [
        {
            "input_ids": i,
            "attention_mask": m,
            "labels": [t if k else -100 for t, k in zip(i, m, strict=True)],
        }
        for i, m in zip(enc["input_ids"], enc["attention_mask"], strict=True)
    ]
    batch = {k: torch.tensor([r[k] for r in rows]) for k in rows[0]}
    sharp = top_hessian_eigenvalue(model, lambda m, b: m(**b).loss, batch, iters=5)
    assert math.isfinite(sharp)
    assert sharp != 0  # double backward through the model's attention works
    cb = SignalDriftCallback(every=2)
    args = TrainingArguments(
        output_dir=str(tmp_path), max_steps=6, per_device_train_batch_size=2, learning_rate=1e-2,
        report_to=[], save_strategy="no", logging_steps=1, use_cpu=True, disable_tqdm=True,
    )  # fmt: skip
    Trainer(model=model, args=args, train_dataset=rows, callbacks=[cb.trainer_callback()]).train()
    assert [h["step"] for h in cb.history] == [2, 4, 6]
    norms = [h["update_norm"] for h in cb.history]
    assert norms[0] > 0
    # the update grows over training (measured 1.04, 1.52, 1.73: the ends 66% apart)
    assert norms[-1] > norms[0]
