"""MLP direct logit attribution: the linearised norm reproduces the model's own logit."""

import numpy as np
import pytest
import torch

from drift_probe.data import drift_items
from drift_probe.mechanism import mlp_logit_attribution, profile_correlation
from paper_common.lm import capture_mlp, final_norm, num_layers, residual_stream


def test_attributions_plus_the_rest_equal_the_logit(world, random_lm, tok):
    prompts = [i.prompt for i in drift_items(world, 2022)[:6]]
    dla = mlp_logit_attribution(random_lm, tok, prompts)
    n_blocks = num_layers(random_lm)
    assert dla.shape == (6, n_blocks)
    norm = final_norm(random_lm)
    unembed = random_lm.get_output_embeddings().weight.detach()
    centred = isinstance(norm, torch.nn.LayerNorm)
    for k, prompt in enumerate(prompts):
        ids = tok([prompt], return_tensors="pt")["input_ids"]
        with torch.no_grad(), capture_mlp(random_lm, range(n_blocks)) as rec:
            logits = random_lm(input_ids=ids).logits[0, -1]
        top = int(logits.argmax())
        h = residual_stream(random_lm, tok, [prompt], [n_blocks])[0, 0].double()
        mlp_sum = sum(rec[b].outputs[0, -1].double() for b in range(n_blocks))
        rest = h - mlp_sum
        if centred:
            scale = 1 / torch.sqrt(((h - h.mean()) ** 2).mean() + norm.eps)
            rest = rest - rest.mean()
        else:
            scale = 1 / torch.sqrt((h**2).mean() + norm.variance_epsilon)
        w = unembed[top].double() * norm.weight.detach().double()
        bias = (
            unembed[top].double() @ norm.bias.detach().double()
            if getattr(norm, "bias", None) is not None
            else 0.0
        )
        rebuilt = dla[k].sum() + float(w @ (rest * scale)) + float(bias)
        assert rebuilt == pytest.approx(float(logits[top]), abs=1e-3)


def test_a_silenced_mlp_attributes_nothing(world, tok):
    from paper_common.lm import down_proj_weight, mlp_down_proj, tiny_causal_lm

    model = tiny_causal_lm(tok, "llama", n_layers=3, d_model=32, n_heads=4, seed=2)
    with torch.no_grad():
        down_proj_weight(mlp_down_proj(model, 1)).zero_()
    dla = mlp_logit_attribution(model, tok, [i.prompt for i in drift_items(world, 2022)[:5]])
    np.testing.assert_allclose(dla[:, 1], 0.0, atol=1e-7)
    assert np.abs(dla[:, 0]).min() > 0


def test_profile_correlation():
    assert profile_correlation(np.array([1.0, 2, 3, 4]), np.array([2.0, 4, 6, 8]))[
        0
    ] == pytest.approx(1.0)
    with pytest.raises(ValueError, match=">= 3 blocks"):
        profile_correlation(np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match="token ids"):
        mlp_logit_attribution(None, None, ["a", "b"], [1])
