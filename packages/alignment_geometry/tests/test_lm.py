"""The tiny aligned LM: alignment, float64 exactness, the orthogonalised task and its quartic onset,
LoRA and Safe LoRA, loading a saved model, and bad input."""

import copy
import json

import numpy as np
import pytest
import torch
from torch.func import jacrev, jvp

from alignment_geometry import (
    AlignedPoint,
    FlatParams,
    TaskGeometry,
    add_lora,
    build_system,
    finetune,
    load_system,
    loglog_slope,
    orthogonalised,
    read_prompts,
    response_logits,
    safe_lora,
    sequence_nll,
)
from alignment_geometry.system import HARMFUL_WORDS, TASKS, SystemConfig, task_examples
from paper_common.lm import save_lm


@pytest.fixture(scope="module")
def point(system):
    return AlignedPoint.measure(system.space(), system.harmful, d=4, refuse_id=system.refuse_id)


def test_the_model_is_aligned(system):
    space = system.space()
    th = space.vector()
    # measured (1 thread, torch 2.15): refuses 8 of 8 harmful prompts and 0 of 8 benign ones; the
    # bounds allow one miss each (with 8 prompts 0.9 would demand all 8)
    assert system.refusal_rate(space, th) >= 7 / 8
    z = response_logits(space, system.benign_chat)(th)
    assert float((z.argmax(-1) == system.refuse_id).double().mean()) <= 1 / 8
    p = torch.softmax(response_logits(space, system.harmful)(th), -1)
    # label smoothing keeps the refusal probability away from 1, so the Fisher does not vanish
    # (measured: mean 0.904, per prompt 0.898-0.910; 0.086 below the upper bound)
    assert 0.5 < float(p[:, system.refuse_id].mean()) < 0.99


def test_tasks_hold_no_harmful_word():
    for name in TASKS:
        for prompt, answer in task_examples(name, 20, seed=0):
            assert not set((prompt + " " + answer).split()) & set(HARMFUL_WORDS)
    with pytest.raises(ValueError, match="unknown task"):
        task_examples("nope", 3, 0)


def test_float64_model_is_exact_under_jvp_and_jacobian(system):
    space = system.space()
    fn = response_logits(space, system.harmful)
    th = space.vector()
    v = torch.randn(space.size, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    idx = torch.arange(2)
    jac = jacrev(lambda t: fn(t, idx))(th)
    jv = jvp(lambda t: fn(t, idx), (th,), (v,))[1]
    # HF's float32 RMSNorm and attention softmax would leave ~1e-7 here
    assert float((jac @ v - jv).abs().max()) < 1e-11 * float(jv.abs().max())


def test_orthogonalised_task_has_fg_zero_and_quartic_onset(system, point):
    space = point.space
    loss = sequence_nll(space, system.task_batch("copy", 16, 0))
    g = TaskGeometry.measure(point, loss).g
    g_f = point.decomposition.range_component(g)
    orth = orthogonalised(loss, point.theta0, g_f)
    geo = TaskGeometry.measure(point, orth)
    assert torch.allclose(geo.g, g - g_f, atol=1e-12)
    fg = point.fisher.matvec(geo.g)
    assert float(fg.norm()) < 1e-10 * float(point.eigenvalues[0]) * float(geo.g.norm())
    assert geo.aic.r_proj < 1e-12
    assert geo.c2 < 1e-15 * TaskGeometry.measure(point, loss).c2 + 1e-18
    steps = 60
    lr = 0.05 / (geo.hessian_norm * steps)
    traj = finetune(orth, point.theta0, steps=steps, lr=lr, monitor=point.monitor)
    s = np.arange(10, steps + 1, 5)
    slope, _ = loglog_slope(traj.time[s], traj.alignment_loss[s])
    assert 3.5 < slope < 4.5
    ratio = traj.alignment_loss[-1] / traj.time[-1] ** 4 / geo.c4
    assert 0.75 < ratio < 1.25


def test_bad_input_on_the_lm(system):
    with pytest.raises(ValueError, match="d must be"):
        AlignedPoint.measure(system.space(), system.harmful, d=10**7)
    with pytest.raises(ValueError, match="float32"):
        FlatParams(copy.deepcopy(system.model).float())
    with pytest.raises(ValueError, match="label_smoothing"):
        SystemConfig(label_smoothing=0.0)


def test_lora_and_safe_lora(system):
    aligned = copy.deepcopy(system.model)
    weights = {k: v.detach().clone() for k, v in aligned.named_parameters()}
    peft_model = add_lora(aligned, r=2, alpha=4.0)
    space = FlatParams(peft_model, "lora")
    th0 = space.vector()
    fn = response_logits(space, system.harmful)
    z_aligned = response_logits(system.space(), system.harmful)(system.space().vector())
    assert torch.allclose(fn(th0), z_aligned, atol=1e-12)  # B = 0: LoRA starts at the aligned model
    loss = sequence_nll(space, system.task_batch("chat_copy", 16, 0))
    traj = finetune(loss, th0, steps=20, lr=0.05)
    assert traj.task_loss[-1] < traj.task_loss[0]
    space.assign(th0 + traj.delta)
    rows = safe_lora(peft_model, system.base, weights, tau=0.0)
    assert rows
    assert not any(r["projected"] for r in rows)  # C is PSD, so cos >= 0 = tau: untouched
    before = space.vector()
    rows = safe_lora(peft_model, system.base, weights, tau=1.0)
    assert all(r["projected"] for r in rows if r["cosine"] < 1.0)
    assert not torch.equal(space.vector(), before)
    with pytest.raises(ValueError, match="tau"):
        safe_lora(peft_model, system.base, weights, tau=2.0)


def test_load_system_from_a_saved_model(system, tmp_path):
    path = save_lm(system.model, system.tokenizer, tmp_path / "aligned")
    prompts = [
        system.tokenizer.decode(ids[m.bool()], skip_special_tokens=True)
        for ids, m in zip(system.harmful.input_ids, system.harmful.attention_mask, strict=True)
    ]
    file = tmp_path / "harmful.jsonl"
    file.write_text("\n".join(json.dumps({"prompt": p}) for p in prompts))
    loaded = load_system(path, read_prompts(file), refusal_token=" REFUSE")
    space = loaded.space()
    assert loaded.refusal_rate(space, space.vector()) == system.refusal_rate(
        system.space(), system.space().vector()
    )
    with pytest.raises(ValueError, match="single-token"):
        load_system(path, prompts, refusal_token=" REFUSE REFUSE")
    with pytest.raises(FileNotFoundError, match="local path"):
        read_prompts(tmp_path / "missing.jsonl")


def test_build_system_is_deterministic_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("PAPER_CACHE_DIR", str(tmp_path))
    cfg = SystemConfig(pretrain_steps=20, align_steps=10, n_harmful_eval=4, n_align_prompts=40)
    a = build_system(5, cfg)
    assert list((tmp_path / "alignment_geometry").glob("system-*.pt"))
    b = build_system(5, cfg)  # from the cache
    c = build_system(5, cfg, cache=False)
    for other in (b, c):
        assert torch.equal(a.space().vector(), other.space().vector())
        assert torch.equal(a.harmful.input_ids, other.harmful.input_ids)
