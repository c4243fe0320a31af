"""Gemma Scope npz and SAELens safetensors checkpoints written here, scanned and loaded."""

import json

import numpy as np
import pytest
import torch
from safetensors.numpy import save_file

from sae_geometry import JumpReLUSAE, TopKSAE, load_sae, parse_width, save_sae, scan_release


def _params(rng, d=6, n=12):
    return {
        "W_enc": rng.standard_normal((d, n)).astype(np.float32),
        "W_dec": rng.standard_normal((n, d)).astype(np.float32),
        "b_enc": rng.standard_normal(n).astype(np.float32),
        "b_dec": rng.standard_normal(d).astype(np.float32),
        "threshold": np.abs(rng.standard_normal(n)).astype(np.float32),
    }


def _jumprelu_np(p, x):
    pre = x @ p["W_enc"] + p["b_enc"]
    return (pre * (pre > p["threshold"])) @ p["W_dec"] + p["b_dec"]


@pytest.fixture
def release(tmp_path):
    rng = np.random.default_rng(0)
    params = {}
    for layer, width, l0 in [(0, "16k", 20), (3, "12", 7), (3, "12", 40)]:
        folder = tmp_path / f"layer_{layer}" / f"width_{width}" / f"average_l0_{l0}"
        folder.mkdir(parents=True)
        params[layer, l0] = _params(rng)
        np.savez(folder / "params.npz", **params[layer, l0])
    (tmp_path / "layer_9" / "notes").mkdir(parents=True)  # ignored
    return tmp_path, params


def test_scan_release_lists_layer_width_and_l0(release):
    root, _ = release
    found = [(c.layer, c.width, c.l0) for c in scan_release(root)]
    assert found == [(0, 16384, 20), (3, 12, 7), (3, 12, 40)]
    assert parse_width("1m") == 2**20


def test_npz_checkpoint_reproduces_numpy_jumprelu(release):
    root, params = release
    ck = next(c for c in scan_release(root) if c.l0 == 40)
    sae = load_sae(ck)
    assert isinstance(sae, JumpReLUSAE)
    x = np.random.default_rng(1).standard_normal((9, 6)).astype(np.float32)
    np.testing.assert_allclose(
        sae(torch.from_numpy(x)).numpy(), _jumprelu_np(params[3, 40], x), rtol=1e-5, atol=1e-5
    )


def test_saelens_jumprelu_and_topk_folders(tmp_path):
    rng = np.random.default_rng(2)
    p = _params(rng)
    jr = tmp_path / "jr"
    jr.mkdir()
    save_file(p, str(jr / "sae_weights.safetensors"))
    (jr / "cfg.json").write_text(json.dumps({"architecture": "jumprelu", "d_in": 6, "d_sae": 12}))
    x = rng.standard_normal((5, 6)).astype(np.float32)
    np.testing.assert_allclose(
        load_sae(jr)(torch.from_numpy(x)).numpy(), _jumprelu_np(p, x), rtol=1e-5, atol=1e-5
    )
    q = {k: v for k, v in p.items() if k != "threshold"}
    pre = np.maximum((x - q["b_dec"]) @ q["W_enc"] + q["b_enc"], 0)  # b_dec applied to the input
    keep = np.argsort(-pre, axis=1)[:, :3]
    z = np.zeros_like(pre)
    np.put_along_axis(z, keep, np.take_along_axis(pre, keep, 1), 1)
    # the current TopK config and the older one (a "standard" SAE with a topk activation)
    for name, cfg in (
        ("tk", {"architecture": "topk", "activation_fn_kwargs": {"k": 3}}),
        ("tk_old", {"architecture": "standard", "activation_fn_str": "topk",
                    "activation_fn_kwargs": {"k": 3}}),
    ):  # fmt: skip
        (tmp_path / name).mkdir()
        save_file(q, str(tmp_path / name / "sae_weights.safetensors"))
        (tmp_path / name / "cfg.json").write_text(json.dumps(cfg))
        sae = load_sae(tmp_path / name)
        assert isinstance(sae, TopKSAE)
        np.testing.assert_allclose(sae(torch.from_numpy(x)).detach().numpy(),
                                   z @ q["W_dec"] + q["b_dec"], rtol=1e-5, atol=1e-5)  # fmt: skip
    # a standard ReLU SAE subtracts b_dec first unless its config says not to
    (tmp_path / "relu").mkdir()
    save_file(q, str(tmp_path / "relu" / "sae_weights.safetensors"))
    (tmp_path / "relu" / "cfg.json").write_text(
        json.dumps(
            {"architecture": "standard", "normalize_activations": "expected_average_only_in"}
        )
    )
    with pytest.warns(UserWarning, match="does not apply"):
        load_sae(tmp_path / "relu")
    for flag, shift in ((None, q["b_dec"]), (False, 0.0)):
        cfg = {"architecture": "standard"} | (
            {} if flag is None else {"apply_b_dec_to_input": flag}
        )
        (tmp_path / "relu" / "cfg.json").write_text(json.dumps(cfg))
        relu = np.maximum((x - shift) @ q["W_enc"] + q["b_enc"], 0)
        np.testing.assert_allclose(load_sae(tmp_path / "relu")(torch.from_numpy(x)).numpy(),
                                   relu @ q["W_dec"] + q["b_dec"], rtol=1e-5, atol=1e-5)  # fmt: skip


def test_wrong_layout_missing_key_and_wrong_shape(tmp_path, release):
    _root, _ = release
    with pytest.raises(ValueError, match="no checkpoints"):
        scan_release(tmp_path / "layer_9")
    with pytest.raises(ValueError, match="neither"):
        load_sae(tmp_path / "layer_9")
    bad = tmp_path / "bad.npz"
    p = _params(np.random.default_rng(3))
    np.savez(bad, **{k: v for k, v in p.items() if k != "threshold"})
    with pytest.raises(ValueError, match=r"missing key\(s\) \['threshold'\]"):
        load_sae(bad)
    p["b_enc"] = p["b_enc"][:5]
    np.savez(bad, **p)
    with pytest.raises(ValueError, match="b_enc has shape"):
        load_sae(bad)


def test_save_sae_round_trips_a_stacked_member_and_a_jumprelu(tmp_path):
    stacked = TopKSAE(6, 12, [2, 5], seed=4)
    with torch.no_grad():
        stacked.b_enc.normal_()
        stacked.b_dec.normal_()
    x = torch.randn(7, 6)
    back = load_sae(save_sae(stacked, tmp_path / "topk", member=1))
    assert isinstance(back, TopKSAE)
    assert int(back.k[0]) == 5
    assert torch.equal(back(x), stacked.member(1)(x))
    jr = JumpReLUSAE(**_params(np.random.default_rng(5)))
    assert torch.equal(load_sae(save_sae(jr, tmp_path / "jr"))(x), jr(x))
    with pytest.raises(ValueError, match="TopKSAE or a JumpReLUSAE"):
        save_sae(torch.nn.Linear(2, 2), tmp_path / "no")
