"""Fine-tuning tasks that run on a CPU, and the interface a task of your own implements.

A task supplies a pretrained model, training batches, a loss and an evaluation:

* :class:`RegressionTask`: a pretrained MLP must absorb a planted low-rank shift of its weights
  (teacher-student regression; score = share of the initial test error removed).
* :class:`KnowledgeInjectionTask`: a fact LM (``paper_common.lm.fact_lm``) trained on a world up to
  a cutoff year learns the facts that changed after it (score = greedy match on their answers).
* :class:`ClassificationTask`: the fact LM's backbone with a new sequence-classification head
  decides whether claims are true (score = accuracy on held-out facts' claims).

Any object with the same attributes works with :func:`lora_alpha.finetune` and
:func:`lora_alpha.sweep`: wrap a 0.5B model and GSM8K or GLUE the same way (see ``FULL_TASKS`` in
:mod:`lora_alpha.reproduce`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

LLAMA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class Task(Protocol):
    """What :func:`lora_alpha.finetune` needs from a task."""

    name: str
    target_modules: tuple[str, ...]
    lora_kwargs: dict[str, Any]

    def base_model(self) -> nn.Module:
        """A fresh copy of the pretrained model (each call independent)."""

    def batches(self, batch_size: int, seed: int) -> Iterator[Any]:
        """An endless stream of training batches."""

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        """Scalar training loss of ``model`` on ``batch``."""

    def reference_batch(self) -> Any:
        """A fixed batch for the reference gradient and the sharpness estimate."""

    def evaluate(self, model: nn.Module, split: str = "test") -> dict[str, float]:
        """``{"loss": ..., "score": ...}`` (score: higher is better) plus task-specific metrics.

        ``split="validation"`` (optional for a task of your own): a held-out set apart from the
        test set, for choosing hyper-parameters (``finetune(..., validate=True)`` asks for it)."""


SPLITS = ("test", "validation")


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}; got {split!r}")


def _batch_stream(n: int, batch_size: int, seed: int) -> Iterator[np.ndarray]:
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(n)
        for i in range(0, n - min(batch_size, n) + 1, min(batch_size, n)):
            yield order[i : i + batch_size]


class MLP(nn.Module):
    """``fc3(tanh(fc2(tanh(fc1(x)))))``: the regression task's model."""

    def __init__(self, d_in: int, hidden: int, d_out: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))


@dataclass
class RegressionTask:
    """Teacher-student regression: fit ``f(W0 + dW*)`` starting from the pretrained ``f(W0)``.

    ``dW*`` has rank ``shift_rank`` in every layer and Frobenius norm ``shift_scale * ||W0||``.

    Args:
        d_in, hidden, d_out: MLP sizes.
        shift_rank, shift_scale: the planted shift.
        n_train, n_test, n_val: Gaussian inputs (``n_val``: the validation split, drawn after
            the others, so the training and test data do not depend on it).
        noise: standard deviation of label noise on the training targets.
        seed: the pretrained weights, the shift and the data.
    """

    d_in: int = 32
    hidden: int = 128
    d_out: int = 16
    shift_rank: int = 16
    shift_scale: float = 0.5
    n_train: int = 2048
    n_test: int = 1024
    noise: float = 0.0
    n_val: int = 1024
    seed: int = 0
    name: str = "regression"

    def __post_init__(self) -> None:
        for f in ("d_in", "hidden", "d_out", "shift_rank", "n_train", "n_test", "n_val"):
            if getattr(self, f) < 1:
                raise ValueError(f"{f} must be >= 1; got {getattr(self, f)}")
        if not self.shift_scale > 0 or self.noise < 0:
            raise ValueError("shift_scale must be > 0 and noise >= 0")
        self.target_modules = ("fc1", "fc2", "fc3")
        self.lora_kwargs: dict[str, Any] = {}
        gen = torch.Generator().manual_seed(self.seed)
        torch.manual_seed(self.seed)
        self._base = MLP(self.d_in, self.hidden, self.d_out)
        teacher = copy.deepcopy(self._base)
        with torch.no_grad():
            for layer in (teacher.fc1, teacher.fc2, teacher.fc3):
                w = layer.weight
                k = min(self.shift_rank, *w.shape)
                u = torch.randn(w.shape[0], k, generator=gen)
                v = torch.randn(k, w.shape[1], generator=gen)
                shift = u @ v
                w += self.shift_scale * w.norm() * shift / shift.norm()
        x = torch.randn(self.n_train + self.n_test, self.d_in, generator=gen)
        with torch.no_grad():
            y = teacher(x)
        y_train = y[: self.n_train] + self.noise * torch.randn(
            self.n_train, self.d_out, generator=gen
        )
        self._train = (x[: self.n_train], y_train)
        self._test = (x[self.n_train :], y[self.n_train :])
        x_val = torch.randn(self.n_val, self.d_in, generator=gen)
        with torch.no_grad():
            self._val = (x_val, teacher(x_val))
            self._initial_mse = float(F.mse_loss(self._base(self._test[0]), self._test[1]))
            self._initial_val_mse = float(F.mse_loss(self._base(x_val), self._val[1]))

    def base_model(self) -> nn.Module:
        return copy.deepcopy(self._base)

    def batches(self, batch_size: int, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        x, y = self._train
        for idx in _batch_stream(len(x), batch_size, seed):
            yield x[idx], y[idx]

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(model(x), y)

    def reference_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._train[0][:512], self._train[1][:512]

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str = "test") -> dict[str, float]:
        _check_split(split)
        model.eval()
        (x, y), start = (
            (self._test, self._initial_mse)
            if split == "test"
            else (self._val, self._initial_val_mse)
        )
        mse = float(F.mse_loss(model(x), y))
        return {"loss": mse, "score": 1.0 - mse / start, "relative_mse": mse / start}


def _encode_pairs(tok: Any, pairs: list[tuple[str, str]]) -> dict[str, torch.Tensor]:
    """Right-padded ids of ``prompt + answer + eos`` with labels only on the answer (and eos)."""
    prompts = tok([p for p, _ in pairs])["input_ids"]
    answers = tok([a for _, a in pairs], add_special_tokens=False)["input_ids"]
    eos = [tok.eos_token_id] if tok.eos_token_id is not None else []
    seqs = [p + a + eos for p, a in zip(prompts, answers, strict=True)]
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), tok.pad_token_id, dtype=torch.long)
    labels = torch.full((len(seqs), width), -100, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    answer_mask = torch.zeros((len(seqs), width), dtype=torch.bool)
    for i, (p, a, s) in enumerate(zip(prompts, answers, seqs, strict=True)):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
        labels[i, len(p) : len(s)] = ids[i, len(p) : len(s)]
        answer_mask[i, len(p) : len(p) + len(a)] = True
    return {"input_ids": ids, "attention_mask": mask, "labels": labels, "answer_mask": answer_mask}


def _take(batch: dict[str, torch.Tensor], idx: Any) -> dict[str, torch.Tensor]:
    return {k: v[idx] for k, v in batch.items()}


def _world(world: Any) -> Any:
    from paper_common.facts import World

    if world is None:
        return World(seed=0, n_people=40, n_cities=12, n_companies=10, n_countries=4)
    if not isinstance(world, World):
        raise TypeError(f"world must be a paper_common.facts.World; got {type(world).__name__}")
    return world


class _HFTask:
    """What the Hugging Face tasks share: a frozen model copied per run and a dict of tensors."""

    _model: nn.Module
    _train: dict[str, torch.Tensor]

    def base_model(self) -> nn.Module:
        return copy.deepcopy(self._model)

    def batches(self, batch_size: int, seed: int) -> Iterator[dict[str, torch.Tensor]]:
        n = len(next(iter(self._train.values())))
        for idx in _batch_stream(n, batch_size, seed):
            yield _take(self._train, idx)

    def reference_batch(self) -> dict[str, torch.Tensor]:
        return _take(self._train, slice(0, 64))


class CausalLMTask(_HFTask):
    """Fine-tune any Hugging Face causal LM on ``(prompt, answer)`` pairs (loss on the answer).

    Evaluation on each named set of pairs: answer NLL per token and greedy match (every answer
    token is the argmax under teacher forcing, i.e. greedy decoding reproduces the answer). The
    first eval set gives ``loss`` and ``score``; the others are reported by name.

    Args:
        model: a ``PreTrainedModel`` (copied per run; the task never changes it).
        tokenizer: its tokenizer (a pad token is required).
        train_pairs: training ``(prompt, answer)``; answers usually start with a space.
        eval_sets: ``{name: pairs}``; default ``{"train": train_pairs}``.
        target_modules: LoRA targets (default: the attention and MLP projections of LLaMA/Qwen).
        validation: pairs for ``evaluate(model, "validation")`` (loss and greedy match), kept apart
            from ``eval_sets`` for choosing hyper-parameters; None: the task has no validation split.
    """

    name = "causal_lm"

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Any,
        train_pairs: Sequence[tuple[str, str]],
        eval_sets: Mapping[str, Sequence[tuple[str, str]]] | None = None,
        target_modules: Sequence[str] = LLAMA_TARGETS,
        validation: Sequence[tuple[str, str]] | None = None,
    ) -> None:
        if not train_pairs:
            raise ValueError("train_pairs is empty")
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no pad token; set tokenizer.pad_token")
        self._model = model.eval()
        self.tokenizer = tokenizer
        self.target_modules = tuple(target_modules)
        self.lora_kwargs: dict[str, Any] = {}
        self._train = _encode_pairs(tokenizer, list(train_pairs))
        sets = dict(eval_sets) if eval_sets is not None else {"train": train_pairs}
        if not sets or any(not v for v in sets.values()):
            raise ValueError("eval_sets must be a non-empty mapping of non-empty pair lists")
        self._eval = {k: _encode_pairs(tokenizer, list(v)) for k, v in sets.items()}
        if validation is not None and not validation:
            raise ValueError("validation must be None or a non-empty list of pairs")
        self._val = _encode_pairs(tokenizer, list(validation)) if validation else None

    @classmethod
    def from_pretrained(
        cls, path: str, train_pairs: Sequence[tuple[str, str]], **kwargs: Any
    ) -> CausalLMTask:
        """Load the model and tokenizer with ``AutoModelForCausalLM`` / ``AutoTokenizer``."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(path)
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        return cls(AutoModelForCausalLM.from_pretrained(path), tok, train_pairs, **kwargs)

    def loss(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            labels=batch["labels"],
        ).loss

    @torch.no_grad()
    def _match(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> tuple[float, float]:
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        pred = logits[:, :-1].argmax(-1)
        target = batch["input_ids"][:, 1:]
        amask = batch["answer_mask"][:, 1:]
        ok = ((pred == target) | ~amask).all(-1)
        lp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, target[..., None])[..., 0]
        nll = -(lp * amask).sum() / amask.sum()
        return float(ok.float().mean()), float(nll)

    def evaluate(self, model: nn.Module, split: str = "test") -> dict[str, float]:
        _check_split(split)
        model.eval()
        if split == "validation":
            if self._val is None:
                raise ValueError(f"{self.name} has no validation split: pass validation=pairs")
            acc, nll = self._match(model, self._val)
            return {"loss": nll, "score": acc}
        out: dict[str, float] = {}
        for i, (name, batch) in enumerate(self._eval.items()):
            acc, nll = self._match(model, batch)
            if i == 0:
                out.update(loss=nll, score=acc)
            else:
                out[name] = acc
        return out


class KnowledgeInjectionTask(CausalLMTask):
    """Teach a fact LM cut off at ``cutoff`` the facts that changed after it.

    The model is ``paper_common.lm.fact_lm(world, cutoff=cutoff)``. Trains on the QA pairs
    (training phrasings) of the current values of the facts that changed after ``cutoff``;
    reports greedy match on them (``score``) and on as many facts that did not change
    (``retention``). The validation split is the held-out phrasings of the same questions (never
    trained on, never scored): hyper-parameters are chosen on it, not on the score.

    Args:
        world: a ``paper_common.facts.World`` (default: a 40-person world).
        cutoff: the year the pretrained model's knowledge stops.
        lm_steps: training steps of the fact LM (None: ``fact_lm``'s default for the size).
        seed: seed of the fact LM.
    """

    name = "knowledge_injection"

    def __init__(
        self, world: Any = None, cutoff: int = 2018, lm_steps: int | None = 1000, seed: int = 0
    ) -> None:
        from paper_common.lm import fact_lm

        self.world = _world(world)
        changed = self.world.changed_after(cutoff)
        if not changed:
            raise ValueError(
                f"no fact of this world changes after {cutoff}; pick an earlier cutoff"
            )
        keys = {(f.subject, f.relation) for f in changed}
        # the value true now of every fact that changed (a fact may change twice after cutoff)
        new = [f for f in self.world.facts("all") if (f.subject, f.relation) in keys]
        kept = [f for f in self.world.facts("all") if (f.subject, f.relation) not in keys]
        rng = np.random.default_rng(seed)
        kept = [kept[i] for i in rng.permutation(len(kept))[: len(new)]]
        model, tok = fact_lm(self.world, cutoff=cutoff, steps=lm_steps, seed=seed)
        qa = self.world.qa_pairs
        pairs = lambda items: [(q.question, q.target) for q in items]  # noqa: E731
        train = pairs(qa("all", facts=new))
        super().__init__(
            model,
            tok,
            train,
            {"new_facts": train, "retention": pairs(qa("all", facts=kept))},
            validation=pairs(qa("all", templates="heldout", facts=new)),
        )
        self.n_facts = len(new)


class SequenceClassificationTask(_HFTask):
    """Fine-tune any ``AutoModelForSequenceClassification`` model on labelled texts.

    peft is told ``task_type="SEQ_CLS"``, so the classification head is trained with the
    adapters. ``score`` is test accuracy, ``loss`` test cross-entropy.

    Args:
        model: a sequence-classification ``PreTrainedModel`` (its config has ``pad_token_id``).
        tokenizer: its tokenizer.
        train: ``(texts, labels)``; test: ``(texts, labels)``.
        target_modules: LoRA targets.
        validation: ``(texts, labels)`` for ``evaluate(model, "validation")``, apart from test;
            None: the task has no validation split.
    """

    name = "sequence_classification"

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Any,
        train: tuple[Sequence[str], Sequence[int]],
        test: tuple[Sequence[str], Sequence[int]],
        target_modules: Sequence[str] = LLAMA_TARGETS,
        validation: tuple[Sequence[str], Sequence[int]] | None = None,
    ) -> None:
        self._model = model.eval()
        self.tokenizer = tokenizer
        self.target_modules = tuple(target_modules)
        self.lora_kwargs: dict[str, Any] = {"task_type": "SEQ_CLS"}
        self._train = self._encode(*train)
        self._test = self._encode(*test)
        self._val = self._encode(*validation) if validation is not None else None

    def _encode(self, texts: Sequence[str], labels: Sequence[int]) -> dict[str, torch.Tensor]:
        if not texts or len(texts) != len(labels):
            raise ValueError(
                f"need as many labels as texts (> 0); got {len(texts)} and {len(labels)}"
            )
        enc = self.tokenizer(list(texts), padding=True, return_tensors="pt")
        return {
            "input_ids": enc["input_ids"],
            "attention_mask": enc["attention_mask"],
            "labels": torch.as_tensor(list(labels), dtype=torch.long),
        }

    def loss(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return model(**batch).loss

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str = "test") -> dict[str, float]:
        _check_split(split)
        model.eval()
        if split == "validation":
            if self._val is None:
                raise ValueError(
                    f"{self.name} has no validation split: pass validation=(texts, labels)"
                )
            out = model(**self._val)
            acc = float((out.logits.argmax(-1) == self._val["labels"]).float().mean())
            return {"loss": float(out.loss), "score": acc}
        out = model(**self._test)
        acc = float((out.logits.argmax(-1) == self._test["labels"]).float().mean())
        train_logits = model(**self._train).logits
        train_acc = float((train_logits.argmax(-1) == self._train["labels"]).float().mean())
        return {"loss": float(out.loss), "score": acc, "train_accuracy": train_acc}


class ClassificationTask(SequenceClassificationTask):
    """True/false claims about a world, classified by the fact LM's backbone with a new head.

    The backbone is the fact LM trained on ``world`` up to ``cutoff`` (it has read every fact);
    its ``AutoModelForSequenceClassification`` head (2 labels) starts as the LM head's " False" /
    " True" rows. Training claims: one true and one false claim per fact. The score is the
    accuracy on the true claims and on false claims with a distractor value never seen in
    training: it measures whether the model learned which value is true, not which sentences
    were labelled.

    Args:
        world: a ``paper_common.facts.World`` (default: a 40-person world).
        lm_steps: training steps of the fact LM.
        cutoff: the fact LM's cutoff year (the same model as :class:`KnowledgeInjectionTask`).
        seed: fact LM, head and distractors.
    """

    name = "classification"

    def __init__(
        self,
        world: Any = None,
        lm_steps: int | None = 1000,
        cutoff: int | None = 2018,
        seed: int = 0,
    ) -> None:
        from transformers import AutoModelForSequenceClassification

        from paper_common.lm import fact_lm

        self.world = _world(world)
        lm, tok = fact_lm(self.world, cutoff=cutoff, steps=lm_steps, seed=seed)
        cfg = copy.deepcopy(lm.config)
        cfg.num_labels = 2
        torch.manual_seed(seed)
        model = AutoModelForSequenceClassification.from_config(cfg)
        missing = model.load_state_dict(lm.state_dict(), strict=False).missing_keys
        if any(not k.startswith("score") for k in missing):
            raise ValueError(f"backbone weights did not transfer: {missing}")
        ids = [tok(w, add_special_tokens=False)["input_ids"][-1] for w in (" False", " True")]
        with torch.no_grad():
            model.score.weight.copy_(lm.get_output_embeddings().weight[ids])
        train = self.world.verification_items("all", t=cutoff, seed=seed)
        seen = {v.prompt for v in train}
        # the true claims are the same in every draw: a seeded half goes to test, the other half to
        # validation, so the two splits share no prompt (issue 44: they shared every true claim)
        truths = sorted({v.prompt for v in train if v.label})
        order = np.random.default_rng(seed).permutation(len(truths))
        val_truths = {truths[i] for i in order[: len(truths) // 2]}
        fresh = self.world.verification_items("all", t=cutoff, seed=seed + 1)
        test = [v for v in fresh if (v.label and v.prompt not in val_truths)
                or (not v.label and v.prompt not in seen)]  # fmt: skip
        tested = {v.prompt for v in test}
        other = self.world.verification_items("all", t=cutoff, seed=seed + 2)
        val = [v for v in other if (v.label and v.prompt in val_truths)
               or (not v.label and v.prompt not in seen and v.prompt not in tested)]  # fmt: skip
        self.prompts = {"train": [v.prompt for v in train], "test": [v.prompt for v in test],
                        "validation": [v.prompt for v in val]}  # fmt: skip
        super().__init__(
            model,
            tok,
            ([v.prompt for v in train], [int(v.label) for v in train]),
            ([v.prompt for v in test], [int(v.label) for v in test]),
            validation=([v.prompt for v in val], [int(v.label) for v in val]),
        )


class OffTaskPush:
    """``task`` with every ``every``-th training batch carrying a second planted shift: a training
    signal the evaluation never asks for, so the update grows an off-task part (the drift ratio's
    training-time control). Everything else (evaluation, reference batch, base model) is
    ``task``'s.

    The second shift, fixed by ``seed`` (ours):

    * regression batches ``(x, y)``: targets ``y + x @ P``, ``P`` a Gaussian ``d_in x d_out`` map
      with the training targets' scale;
    * causal-LM batches (2-D ``labels``): every label token mapped through a fixed permutation of
      the vocabulary (``-100`` kept);
    * classification batches (1-D ``labels``): each prompt's label replaced by a fixed pseudo-random
      one (a seeded hash of its token bag), ``n_labels`` classes.

    Args:
        task: the task to push.
        every: every ``every``-th batch is pushed (``1``: all of them; >= 1).
        seed: the planted shift.
        n_labels: classes of a classification task.
    """

    def __init__(self, task: Task, every: int = 2, seed: int = 0, n_labels: int = 2) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be an int >= 1; got {every!r}")
        if isinstance(n_labels, bool) or not isinstance(n_labels, int) or n_labels < 2:
            raise ValueError(f"n_labels must be an int >= 2; got {n_labels!r}")
        self.task, self.every, self.seed, self.n_labels = task, every, seed, n_labels
        self._gen = torch.Generator().manual_seed(seed)
        self._map: torch.Tensor | None = None

    def __getattr__(self, name: str) -> Any:
        if name == "task":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.task, name)

    def batches(self, batch_size: int, seed: int) -> Iterator[Any]:
        for i, batch in enumerate(self.task.batches(batch_size, seed)):
            yield self.push(batch) if i % self.every == self.every - 1 else batch

    def push(self, batch: Any) -> Any:
        """``batch`` with the second shift planted (see the class)."""
        if isinstance(batch, tuple):
            x, y = batch
            if self._map is None:
                scale = float(self.task.reference_batch()[1].std())
                p = torch.randn(x.shape[1], y.shape[1], generator=self._gen, dtype=x.dtype)
                self._map = p * scale / math.sqrt(x.shape[1])
            return x, y + x @ self._map
        if not (isinstance(batch, Mapping) and "labels" in batch):
            raise TypeError(f"cannot push a batch of type {type(batch).__name__}")
        labels = batch["labels"]
        if labels.dim() == 2:
            if self._map is None:
                self._map = torch.randperm(len(self.task.tokenizer), generator=self._gen)
            pushed = torch.where(labels >= 0, self._map[labels.clamp(min=0)], labels)
        else:
            if self._map is None:
                size = (len(self.task.tokenizer),)
                self._map = torch.randint(0, self.n_labels, size, generator=self._gen)
            mask = batch.get("attention_mask", torch.ones_like(batch["input_ids"]))
            h = (self._map[batch["input_ids"]] * mask).sum(-1)  # a bag of tokens: padding-proof
            pushed = torch.remainder(h, self.n_labels)
        return {**batch, "labels": pushed}
