"""The conversion harness on a real tiny GQA Llama: exactness, frozen backbone, transfer, determinism."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
import torch

from linearize.convert import (
    TransferConfig,
    capture,
    decode_logits,
    finetune_kl,
    layer_errors,
    linearize,
    students,
    transfer,
    transfer_diverged,
)
from linearize.evaluate import fact_accuracy, task_scores
from linearize.student import LinearizeConfig
from linearize.tasks import make_task
from linearize.teachers import TeacherSpec, recall_teacher, teacher_cache_key
from paper_common.device import pinned_threads

TEXTS = make_task("mqar", 24, 8, seed=3).texts + make_task("copy", 24, 8, seed=4).texts


def test_a_full_cache_reproduces_the_teacher_logits(teacher) -> None:
    model, tok = teacher
    assert model.config.num_key_value_heads < model.config.num_attention_heads  # GQA
    enc = tok(TEXTS[:6], return_tensors="pt", padding=True)
    n = enc["input_ids"].shape[1]
    with torch.no_grad():
        ref = model(**enc).logits
        for update in ("delta", "linear", "none"):
            cfg = LinearizeConfig(update=update, budget=n, sinks=1, window=2, conv=True)
            out = linearize(model, cfg)(**enc).logits
            valid = enc["attention_mask"].bool()
            torch.testing.assert_close(out[valid], ref[valid], atol=1e-4, rtol=1e-4)


def test_transfer_trains_students_only_and_is_deterministic(teacher) -> None:
    model, tok = teacher
    before = copy.deepcopy(model.state_dict())
    data = capture(model, tok, TEXTS, batch_size=8)
    held = capture(model, tok, make_task("mqar", 16, 8, seed=9).texts)
    cfg = LinearizeConfig(update="gated_delta", conv=True, budget=4, sinks=1, window=1)
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        student = linearize(model, cfg)
        err0 = layer_errors(student, held).mean()
        losses = transfer(student, data, TransferConfig(steps=30, lr=1e-2, seed=5, progress=False))
        runs.append((losses, layer_errors(student, held)))
        t = dict(model.named_parameters())
        assert all(torch.equal(p, t[n]) for n, p in student.named_parameters() if n in t)
        assert all(
            not p.requires_grad for n, p in student.named_parameters() if "linear_attn" not in n
        )
    assert runs[0][0] == runs[1][0]  # same seed, same numbers
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    assert runs[0][1].mean() < err0  # transfer lowered the held-out error
    assert np.mean(runs[0][0][-5:]) < np.mean(runs[0][0][:5])
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])  # the teacher itself is untouched


def test_transfer_stops_on_a_non_finite_loss(teacher) -> None:
    """Planted: NaN teacher outputs. The transfer stops before the update (students keep their
    weights) and flags the run with a NaN loss, instead of training on NaN."""
    model, tok = teacher
    data = capture(model, tok, TEXTS[:8])
    for batch in data.batches:
        for r in batch:
            r["out"] = torch.full_like(r["out"], float("nan"))
    student = linearize(model, LinearizeConfig(update="delta", conv=True))
    before = copy.deepcopy(student.state_dict())
    losses = transfer(student, data, TransferConfig(steps=5, progress=False))
    assert len(losses) == 1
    assert transfer_diverged(losses)
    for key, value in student.state_dict().items():
        assert torch.equal(value, before[key])
    assert not transfer_diverged([0.5, 0.4])


def test_a_nan_model_answers_nothing(teacher) -> None:
    """Planted: every weight NaN. answer_rank puts a NaN answer first (no candidate compares
    higher), so the model used to score every fact right; now every item is wrong."""
    model, tok = teacher
    broken = copy.deepcopy(model)
    with torch.no_grad():
        for p in broken.parameters():
            p.fill_(float("nan"))
    words = make_task("mqar", 4, 8, seed=1).texts[0].split()
    prompts = [" ".join(words[:4])] * 2
    answers, cands = [words[4], words[5]], [[words[6], words[7]]] * 2
    assert fact_accuracy(broken, tok, prompts, answers, cands) == 0.0
    assert task_scores(broken, tok, make_task("mqar", 8, 8, seed=11)).accuracy == 0.0


def test_students_save_with_the_model_and_load_back(teacher, tmp_path) -> None:
    model, tok = teacher
    student = linearize(model, LinearizeConfig(update="delta", conv=True))
    transfer(student, capture(model, tok, TEXTS[:8]), TransferConfig(steps=3, progress=False))
    sd = student.state_dict()
    assert any("linear_attn.conv_weight" in k for k in sd)
    fresh = linearize(model, LinearizeConfig(update="delta", conv=True))
    fresh.load_state_dict(sd)
    ts = make_task("mqar", 8, 8, seed=11)
    assert task_scores(fresh, tok, ts).accuracy == task_scores(student, tok, ts).accuracy
    assert len(students(fresh)) == model.config.num_hidden_layers


def test_kl_finetuning_and_the_lora_ablation(teacher) -> None:
    model, tok = teacher
    student = linearize(model, LinearizeConfig(update="gated"))
    _, losses = finetune_kl(student, model, tok, TEXTS, steps=12, lr=1e-2, batch_size=8)
    assert len(losses) == 12
    assert np.isfinite(losses).all()
    lora, _ = finetune_kl(
        linearize(model, LinearizeConfig(update="gated")),
        model,
        tok,
        TEXTS,
        steps=2,
        batch_size=4,
        lora_rank=2,
    )
    assert any("lora_" in n and p.requires_grad for n, p in lora.named_parameters())


def test_teacher_cache_round_trips_through_from_pretrained(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PAPER_CACHE_DIR", str(tmp_path))
    spec = TeacherSpec(
        d_model=16, n_heads=2, n_kv_heads=1, length=8, n_train=60, steps=3, batch_size=4
    )
    a, tok = recall_teacher(spec, progress=False)
    b, _ = recall_teacher(spec, progress=False)  # loaded from disk
    enc = tok(TEXTS[:2], return_tensors="pt", padding=True)
    with torch.no_grad():
        torch.testing.assert_close(a(**enc).logits, b(**enc).logits)
    assert b.teacher_info["spec"]["d_model"] == 16


def test_warm_up_and_jobs_share_one_cached_teacher(tmp_path, monkeypatch) -> None:
    """The teacher cache is keyed by the thread count: the warm-up trains it with the jobs' count,
    so a job loads it (one cached teacher), whatever the caller's threads were."""
    from linearize import reproduce as rep

    monkeypatch.setenv("PAPER_CACHE_DIR", str(tmp_path))
    spec = TeacherSpec(
        d_model=16, n_heads=2, n_kv_heads=1, length=8, n_train=60, steps=3, batch_size=4
    )
    with pinned_threads(2, torch=True):  # the parent's pin at the quick scale
        rep._warm_teacher((replace(rep.SCALES["smoke"], teacher=spec), "llama"))
    with pinned_threads(rep.JOB_THREADS, torch=True):  # what a recall job does
        recall_teacher(spec, progress=False)
    assert len(list((tmp_path / "linearize").glob("llama-*/teacher.json"))) == 1
    # the key covers the recipe version and the training data, not only the spec
    key = teacher_cache_key(spec)
    monkeypatch.setattr("linearize.teachers.TEACHER_VERSION", 2)
    assert teacher_cache_key(spec) != key


def test_bad_input_is_named(teacher) -> None:
    model, tok = teacher
    with pytest.raises(TypeError, match="LinearizeConfig"):
        linearize(model, {"update": "delta"})
    with pytest.raises(ValueError, match="at least one text"):
        capture(model, tok, [])
    with pytest.raises(ValueError, match="steps"):
        TransferConfig(steps=-1)
    with pytest.raises(ValueError, match="arch"):
        TeacherSpec(arch="gpt2")


@pytest.mark.parametrize(
    "cfg",
    [
        LinearizeConfig(update="gated_delta", conv=True, budget=6, sinks=2, window=2),
        LinearizeConfig(update="delta", budget=6, sinks=1, window=2, routing="self_recall"),
        LinearizeConfig(update="linear", feature_map="hedgehog", budget=4, window=4),
    ],
)
def test_the_model_decodes_token_by_token_with_a_fixed_state(teacher, cfg) -> None:
    """The whole linearized model run recurrently (one token per call, no KV cache, each layer
    keeping a DecodeState of fixed size) gives the logits of the parallel forward."""
    model, tok = teacher
    student = linearize(model, cfg)
    with torch.no_grad():
        for p in students(student)[0].parameters():
            p.add_(0.05)
    ids = tok(make_task("mqar", 2, 16, seed=5).texts, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        ref = student(input_ids=ids, use_cache=False).logits
    torch.testing.assert_close(decode_logits(student, ids), ref, atol=1e-4, rtol=1e-4)
    assert all(m.decoding is None for m in students(student))  # the context was left
