"""Snapshots of one fact LM at several training cutoffs, by continued training (cached).

The first snapshot is trained from scratch on the world as it was at the first cutoff; each later one
continues from the previous snapshot on the world at its own cutoff (new values as statements, ended
ones as history, cues up to the cutoff), the way a model family is refreshed with newer data. All
snapshots of a world share one tokenizer (it covers every text the world can render), so the same
prompt is the same token sequence to every snapshot.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import filelock

from drift_probe.data import training_corpus
from paper_common.facts import World
from paper_common.lm import (
    build_tokenizer,
    cache_key,
    fact_lm_cache_dir,
    load_lm,
    save_lm,
    tiny_causal_lm,
    train_causal_lm,
)

__all__ = ["SnapshotConfig", "snapshots"]


@dataclass(frozen=True)
class SnapshotConfig:
    """Model size and training budget: ``steps`` for the first snapshot, ``continue_steps`` for each later one."""

    arch: Literal["llama", "qwen2", "gpt2"] = "llama"
    n_layers: int = 4
    d_model: int = 128
    n_heads: int = 4
    steps: int = 1200
    continue_steps: int = 500
    batch_size: int = 64
    lr: float = 3e-3
    seed: int = 0
    change_questions: bool = False
    """Train the World's change questions too (:func:`~drift_probe.data.training_corpus`)."""

    def __post_init__(self) -> None:
        if self.arch not in ("llama", "qwen2", "gpt2"):
            raise ValueError(f"arch must be 'llama', 'qwen2' or 'gpt2'; got {self.arch!r}")
        for name in ("n_layers", "d_model", "n_heads", "steps", "continue_steps", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int; got {value!r}")


def _cache_path(
    world: World, cutoffs: Sequence[int], config: SnapshotConfig, unseen: list[str]
) -> Path:
    key = {
        "world": world.fingerprint(),
        "cutoffs": list(cutoffs),
        "config": asdict(config),
        "unseen": hashlib.sha256("\n".join(unseen).encode()).hexdigest()[:16],
    }
    return fact_lm_cache_dir().parent / "drift_probe" / cache_key(key)


def snapshots(
    world: World,
    cutoffs: Sequence[int],
    config: SnapshotConfig | None = None,
    unseen: Iterable[str] = (),
    cache: bool = True,
    progress: bool | None = None,
) -> list[tuple[Any, Any]]:
    """``[(model, tokenizer)]``, one per cutoff (ascending), each continuing from the one before.

    Cached under the ``fact_lm`` cache root (``$PAPER_CACHE_DIR``) by the world, the cutoffs so far,
    the config and ``unseen``; a cached snapshot loads with ``from_pretrained``.
    """
    config = config or SnapshotConfig()
    cutoffs = [world._check_time(c) for c in cutoffs]
    if not cutoffs or sorted(set(cutoffs)) != cutoffs:
        raise ValueError(f"cutoffs must be non-empty and strictly increasing; got {cutoffs}")
    hidden = sorted(set(unseen))
    tok = None
    out: list[tuple[Any, Any]] = []
    model = None
    for i, cutoff in enumerate(cutoffs):
        path = _cache_path(world, cutoffs[: i + 1], config, hidden)
        lock = filelock.FileLock(str(path) + ".lock") if cache else None
        if lock is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock.acquire()
        try:
            if cache and (path / "snapshot.json").exists():
                model, tok = load_lm(path)
            else:
                if tok is None:
                    tok = build_tokenizer(world.vocabulary_texts())
                if model is None:
                    model = tiny_causal_lm(
                        tok,
                        config.arch,
                        config.n_layers,
                        config.d_model,
                        config.n_heads,
                        seed=config.seed,
                    )
                texts, pairs = training_corpus(
                    world, cutoff, hidden, change_questions=config.change_questions
                )
                result = train_causal_lm(
                    model,
                    tok,
                    texts,
                    pairs,
                    steps=config.steps if i == 0 else config.continue_steps,
                    lr=config.lr,
                    batch_size=config.batch_size,
                    seed=config.seed + 1000 * i,
                    progress=progress,
                )
                info = {"cutoff": cutoff, "seconds": result.seconds, "loss": result.losses[-1]}
                if cache:
                    save_lm(model, tok, path, info, info_file="snapshot.json")
        finally:
            if lock is not None:
                lock.release()
        out.append((model, tok))
        if i + 1 < len(cutoffs):  # the next snapshot continues from a copy; this one stays as it is
            model = copy.deepcopy(model)
    return out
