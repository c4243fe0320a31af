import math

import pytest
import torch

from lora_alpha import (
    CausalLMTask,
    ClassificationTask,
    KnowledgeInjectionTask,
    OffTaskPush,
    RegressionTask,
    finetune,
    lora_alpha,
    standard,
)
from lora_alpha.train import DIVERGENCE_WINDOW
from paper_common.lm import build_tokenizer, fact_lm, tiny_causal_lm

LM_STEPS, CUTOFF = 40, 2016  # the smoke reproduce's fact LM (trained once, cached)


def test_regression_task_starts_at_zero_score_and_learns():
    task = RegressionTask(d_in=8, hidden=16, d_out=4, shift_rank=4, n_train=256, n_test=128)
    assert task.evaluate(task.base_model())["score"] == pytest.approx(0.0, abs=1e-6)
    run = finetune(task, lora_alpha(c=64), r=4, lr=1e-3, steps=150, batch_size=32, seed=0)
    assert run.score > 0.3
    assert run.losses[-1] < run.losses[0]
    again = finetune(task, lora_alpha(c=64), r=4, lr=1e-3, steps=150, batch_size=32, seed=0)
    assert again.loss == run.loss  # deterministic with a seed
    other = finetune(task, lora_alpha(c=64), r=4, lr=1e-3, steps=150, batch_size=32, seed=1)
    assert other.loss != run.loss


def test_regression_task_bad_input():
    with pytest.raises(ValueError, match="hidden"):
        RegressionTask(hidden=0)


def test_finetune_records_diagnostics_and_bad_steps():
    task = RegressionTask(d_in=8, hidden=16, d_out=4, shift_rank=4, n_train=128, n_test=64)
    run = finetune(
        task,
        standard(),
        r=2,
        lr=1e-3,
        steps=30,
        diagnostics=True,
        diagnostics_every=10,
        keep_delta=True,
    )
    assert [h["step"] for h in run.diagnostics] == [10, 20, 30]
    assert set(run.delta) == {"fc1", "fc2", "fc3"}
    assert "drift_ratio" in run.row()
    with pytest.raises(ValueError, match="steps"):
        finetune(task, standard(), steps=0)


def test_knowledge_injection_learns_new_facts(world):
    task = KnowledgeInjectionTask(world, CUTOFF, LM_STEPS)
    before = task.evaluate(task.base_model())
    assert set(before) == {"loss", "score", "retention"}
    # validation: the held-out phrasings, apart from the scored (trained) phrasings
    assert set(task.evaluate(task.base_model(), "validation")) == {"loss", "score"}
    # LoRA-alpha's scaling is 128 at r = 4 (c = 256), so its step is 32x standard LoRA's: lr 1e-4
    # (lr 1e-3 overshoots and raises the loss on these Worlds, seeds 0 and 1)
    run = finetune(task, lora_alpha(), r=4, lr=1e-4, steps=40, batch_size=16, validate=True)
    assert run.loss < before["loss"]
    assert run.score >= before["score"]
    assert set(run.val_metrics) == {"loss", "score"}
    with pytest.raises(ValueError, match="no fact"):
        KnowledgeInjectionTask(world, world.end_year, LM_STEPS)


def test_classification_head_starts_as_the_verbaliser(world):
    task = ClassificationTask(world, LM_STEPS, CUTOFF)
    lm, tok = fact_lm(world, cutoff=CUTOFF, steps=LM_STEPS)
    model = task.base_model()
    batch = {k: v[:4] for k, v in task._train.items()}
    ids = [tok(w, add_special_tokens=False)["input_ids"][-1] for w in (" False", " True")]
    last = batch["attention_mask"].sum(1) - 1
    with torch.no_grad():
        lm_logits = lm(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        cls_logits = model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).logits
    expected = lm_logits[torch.arange(4), last][:, ids]
    assert torch.allclose(cls_logits, expected, atol=1e-4)
    run = finetune(task, lora_alpha(), r=4, lr=1e-3, steps=20, batch_size=16)
    assert 0.0 <= run.score <= 1.0
    # structural only: 20 steps leave the head at chance (measured train accuracy exactly 0.5)
    assert 0.0 <= run.metrics["train_accuracy"] <= 1.0


def test_causal_lm_task_from_pretrained(tmp_path):
    pairs = [
        (f"Q: colour of {w}? A:", f" {c}")
        for w, c in [("sky", "blue"), ("grass", "green"), ("snow", "white")]
    ]
    tok = build_tokenizer([p + a for p, a in pairs])
    tiny_causal_lm(tok, "llama", n_layers=1, d_model=32, n_heads=2, seed=0).save_pretrained(
        tmp_path
    )
    tok.save_pretrained(tmp_path)
    task = CausalLMTask.from_pretrained(str(tmp_path), pairs)
    run = finetune(task, lora_alpha(c=32), r=2, lr=1e-2, steps=60, batch_size=3)
    assert run.losses[-1] < run.losses[0]
    assert run.score == pytest.approx(1.0)
    with pytest.raises(ValueError, match="train_pairs"):
        CausalLMTask(task.base_model(), tok, [])


class _Diverging(RegressionTask):
    """Planted divergence: from the 4th step on, the loss (and so the weights) turn NaN."""

    calls = 0

    def loss(self, model, batch):
        self.calls += 1
        scale = math.nan if self.calls > 3 else 1.0
        return super().loss(model, batch) * scale


class _NaNWeights(RegressionTask):
    """Planted: the evaluation of a model whose weights turned NaN on its last step."""

    def evaluate(self, model):
        return dict.fromkeys(("loss", "score", "relative_mse"), math.nan)


def test_a_diverged_run_counts_as_inf_loss_and_zero_score():
    task = _Diverging(d_in=4, hidden=8, d_out=2, shift_rank=2, n_train=64, n_test=32)
    run = finetune(task, standard(), r=2, lr=1e-3, steps=20, batch_size=16)
    assert run.diverged
    assert len(run.losses) == 3
    assert run.loss == math.inf
    assert run.score == -math.inf  # the worst score (0 ranked above finite negative scores)
    assert math.isnan(run.metrics["relative_mse"])
    # planted: weights turned NaN on the last step, seen only by the evaluation (NaN loss and
    # score: the regression score used to stay NaN, which no max() over runs can order)
    task = _NaNWeights(d_in=4, hidden=8, d_out=2, shift_rank=2, n_train=64, n_test=32)
    run = finetune(task, standard(), r=2, lr=1e-3, steps=5, batch_size=16)
    assert run.diverged
    assert run.loss == math.inf
    assert run.score == -math.inf  # the documented rule, not NaN (which no ranking can order)
    assert math.isnan(run.metrics["relative_mse"])  # not measured


# ------------------------------------------------------------ issue 44: divergence, validation


class _BlowsUpFinite(RegressionTask):
    """Planted: the final evaluation (after training) reports a finite but absurd loss (2.6e14, as
    a quick sweep run did), which the old rule (only non-finite counts) left unflagged."""

    calls = 0

    def evaluate(self, model, split="test"):
        self.calls += 1
        out = super().evaluate(model, split)
        if self.calls == 1:  # before training
            return out
        return {**out, "loss": 2.6e14, "score": 1.0 - 2.6e14 / self._initial_mse}


class _TrainLossBlowsUp(RegressionTask):
    """Planted: from the 4th step on the training loss is 1e12 times larger, and finite."""

    calls = 0

    def loss(self, model, batch):
        self.calls += 1
        return super().loss(model, batch) * (1e12 if self.calls > 3 else 1.0)


SMALL = {"d_in": 4, "hidden": 8, "d_out": 2, "shift_rank": 2, "n_train": 64, "n_test": 32}


def test_a_finite_blow_up_is_flagged_as_diverged():
    run = finetune(_BlowsUpFinite(**SMALL), standard(), r=2, lr=1e-3, steps=5, batch_size=16)
    assert run.diverged
    assert run.loss == math.inf
    assert run.score == -math.inf
    run = finetune(_TrainLossBlowsUp(**SMALL), standard(), r=2, lr=1e-3, steps=20, batch_size=16)
    assert run.diverged
    assert len(run.losses) == 3 + DIVERGENCE_WINDOW - 1  # stopped once the blow-up was sustained
    ok = finetune(RegressionTask(**SMALL), standard(), r=2, lr=1e-3, steps=5, batch_size=16)
    assert not ok.diverged
    with pytest.raises(ValueError, match="divergence_factor"):
        finetune(RegressionTask(**SMALL), standard(), r=2, steps=1, divergence_factor=1.0)


def test_regression_has_a_validation_split_apart_from_test():
    task = RegressionTask(**SMALL, n_val=40)
    model = task.base_model()
    val, test = task.evaluate(model, "validation"), task.evaluate(model, "test")
    assert val["score"] == pytest.approx(0.0)  # the base model removes none of its own error
    assert val["loss"] != pytest.approx(test["loss"])  # other inputs
    assert task.evaluate(model) == test
    with pytest.raises(ValueError, match="split"):
        task.evaluate(model, "train")
    run = finetune(task, standard(), r=2, lr=1e-3, steps=5, batch_size=16, validate=True)
    assert set(run.val_metrics) >= {"loss", "score"}
    assert run.val_metrics["loss"] != pytest.approx(run.loss)


class _Spike(RegressionTask):
    """Planted: training batches 2-4 come back 1e6 times larger (a spike), then the loss recovers;
    the old rule stopped such runs at step 1-2 though, unstopped, they finish fine."""

    calls = 0

    def loss(self, model, batch):
        self.calls += 1
        return super().loss(model, batch) * (1e6 if 2 <= self.calls <= 4 else 1.0)


class _EasyTraining(RegressionTask):
    """Planted: the base model nearly fits the training batches (their loss is 1e-4 of the true
    one) but not the test split; the old rule compared the test loss with 100x the first TRAINING
    loss and flagged a healthy run."""

    def loss(self, model, batch):
        return super().loss(model, batch) * 1e-4


def test_recovering_spikes_and_train_test_gaps_are_not_divergence():
    run = finetune(_Spike(**SMALL), standard(), r=2, lr=1e-3, steps=20, batch_size=16)
    assert not run.diverged
    assert len(run.losses) == 20
    assert math.isfinite(run.loss)
    run = finetune(_EasyTraining(**SMALL), standard(), r=2, lr=1e-3, steps=5, batch_size=16,
                   validate=True)  # fmt: skip
    assert not run.diverged
    assert math.isfinite(run.loss)
    assert math.isfinite(run.val_metrics["loss"])


def test_b_only_makes_alpha_x_k_and_lr_x_k_the_same_update():
    """With lora_A frozen and Adam without weight decay, alpha x k and lr x k train the same dW up
    to Adam's eps: the negative control of the alpha-vs-lr claims. With A trained they differ."""
    task = RegressionTask(**SMALL)
    kw = {"r": 2, "steps": 30, "batch_size": 16, "seed": 0, "keep_delta": True}
    a = finetune(task, standard(64.0), lr=1e-3, freeze_a=True, **kw).delta
    b = finetune(task, standard(16.0), lr=4e-3, freeze_a=True, **kw).delta
    rel = max(float((a[k] - b[k]).norm() / b[k].norm()) for k in a)
    assert rel < 1e-3
    a = finetune(task, standard(64.0), lr=1e-3, **kw).delta
    b = finetune(task, standard(16.0), lr=4e-3, **kw).delta
    assert max(float((a[k] - b[k]).norm() / b[k].norm()) for k in a) > 0.05


def test_off_task_push_plants_a_second_shift_every_other_batch():
    task = RegressionTask(**SMALL)
    push = OffTaskPush(task, every=2, seed=0)
    plain, pushed = task.batches(16, 0), push.batches(16, 0)
    for i in range(4):
        (x, y), (px, py) = next(plain), next(pushed)
        assert torch.equal(x, px)
        assert torch.equal(y, py) == (i % 2 == 0)
    again = OffTaskPush(task, every=2, seed=0).batches(16, 0)
    pushed = OffTaskPush(task, every=2, seed=0).batches(16, 0)
    assert all(torch.equal(next(again)[1], next(pushed)[1]) for _ in range(3))  # seeded
    assert push.name == task.name
    assert push.evaluate(task.base_model()) == task.evaluate(task.base_model())
    with pytest.raises(ValueError, match="every"):
        OffTaskPush(task, every=0)


def test_classification_validation_and_test_share_no_prompt(world):
    """Review of issue 44: the true claims were the same prompts in train, test and validation
    (validation was 56% test). Now a seeded half of the true claims is scored on test, the other
    half on validation; the false claims carry distractors never trained on, apart per split."""
    task = ClassificationTask(world, LM_STEPS, CUTOFF)
    test, val = set(task.prompts["test"]), set(task.prompts["validation"])
    assert test
    assert val
    assert not test & val
    assert task._val["labels"].sum() > 0  # validation has true claims
    assert task._test["labels"].sum() > 0
