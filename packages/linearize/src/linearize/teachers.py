"""Softmax teachers for the recall tasks: a tiny Llama / Qwen2 (grouped-query attention) trained by
:func:`paper_common.lm.train_causal_lm` on MQAR, copy and passkey at 1x, 2x and 4x the base length
(so the teacher itself is right at 4x, where the students are tested), the loss on the answer part
only. Cached under ``$PAPER_CACHE_DIR/linearize`` by a hash of the spec, loaded with
``from_pretrained``."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import filelock
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from linearize.tasks import PASSKEY_MIN, TASKS, make_task, vocabulary
from paper_common.lm import (
    build_tokenizer,
    cache_key,
    fact_lm_cache_dir,
    load_lm,
    save_lm,
    tiny_causal_lm,
    train_causal_lm,
)

__all__ = ["TeacherSpec", "recall_teacher"]

# bump when the training recipe changes in a way the spec and the data do not show (the model
# built, the loss, the optimiser): cached teachers of an older recipe are then trained anew
TEACHER_VERSION = 1


@dataclass(frozen=True)
class TeacherSpec:
    """A recall teacher: architecture and size, the base task ``length`` (words; 4x is tested) and
    its training budget."""

    arch: str = "llama"
    n_layers: int = 2
    d_model: int = 128
    n_heads: int = 4
    n_kv_heads: int = 2
    length: int = 16
    n_train: int = 3000
    steps: int = 2500
    batch_size: int = 32
    lr: float = 3e-3
    seed: int = 0

    def __post_init__(self) -> None:
        if self.arch not in ("llama", "qwen2"):
            raise ValueError(f"arch must be 'llama' or 'qwen2'; got {self.arch!r}")
        for name in (
            "n_layers",
            "d_model",
            "n_heads",
            "n_kv_heads",
            "n_train",
            "steps",
            "batch_size",
        ):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive int; got {getattr(self, name)!r}")
        if not isinstance(self.length, int) or self.length < 8:
            raise ValueError(f"length must be an int >= 8; got {self.length!r}")


def _cache_dir() -> Path:
    return fact_lm_cache_dir().parent / "linearize"


def _longest(spec: TeacherSpec) -> int:
    """Tokens of the longest training sequence (4x, plus the copy gap, bos and eos)."""
    return max(4 * spec.length, PASSKEY_MIN) + 8


def training_pairs(spec: TeacherSpec) -> list[tuple[str, str]]:
    """The teacher's ``(prompt, answer)`` training data: every task at 1x, 2x and 4x ``length``
    (4 : 2 : 1), MQAR three times as often as copy and passkey, which are learned much faster."""
    pairs: list[tuple[str, str]] = []
    for i, task in enumerate(TASKS):
        weight = 3 if task == "mqar" else 1
        for factor, share in ((1, 4), (2, 2), (4, 1)):
            n = max(1, weight * spec.n_train * share // 7)
            pairs += make_task(
                task, n, factor * spec.length, seed=1000 * spec.seed + 10 * i + factor
            ).pairs
    return pairs


@functools.lru_cache(maxsize=8)
def _data_fingerprint(spec: TeacherSpec) -> str:
    """Hash of what the teacher is trained on: its training pairs and the tokenizer's vocabulary
    (a change to a task generator or to the vocabulary trains anew)."""
    blob = json.dumps([training_pairs(spec), vocabulary()])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def teacher_cache_key(spec: TeacherSpec) -> str:
    """Name of the cached teacher of ``spec``: the spec, :data:`TEACHER_VERSION` and the data
    fingerprint, with :func:`paper_common.lm.training_environment` (library versions, torch
    threads, device, CPU) at the time of the call. Call it, as :func:`recall_teacher` does, with
    the thread count the teacher is trained with."""
    config = {"spec": asdict(spec), "version": TEACHER_VERSION, "data": _data_fingerprint(spec)}
    return f"{spec.arch}-{cache_key(config, length=16)}"


def recall_teacher(
    spec: TeacherSpec = TeacherSpec(), cache: bool = True, progress: bool | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """The teacher of ``spec``, trained once and cached (``cache=False``: always train).

    The cache is keyed by :func:`teacher_cache_key`, which includes torch's thread count: load a
    teacher with the thread count it was trained with (or it is trained again).
    """
    tok = build_tokenizer(vocabulary())
    path = _cache_dir() / teacher_cache_key(spec)

    def train() -> PreTrainedModel:
        model = tiny_causal_lm(
            tok,
            spec.arch,
            spec.n_layers,
            spec.d_model,
            spec.n_heads,
            max_positions=_longest(spec) + 8,
            seed=spec.seed,
            n_kv_heads=spec.n_kv_heads,
        )
        result = train_causal_lm(
            model,
            tok,
            pairs=training_pairs(spec),
            steps=spec.steps,
            lr=spec.lr,
            batch_size=spec.batch_size,
            seed=spec.seed,
            max_length=_longest(spec),
            progress=progress,
        )
        model.teacher_info = {"spec": asdict(spec), "seconds": result.seconds}
        return model

    if not cache:
        return train(), tok
    path.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(path) + ".lock"):
        if not (path / "teacher.json").exists():
            model = train()
            save_lm(model, tok, path, model.teacher_info, info_file="teacher.json")
            return model, tok
    model, tok = load_lm(path)
    model.teacher_info = json.loads((path / "teacher.json").read_text())
    return model, tok
