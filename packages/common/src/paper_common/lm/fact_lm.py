"""Fact LMs: a tiny model that has memorised a World, cached on disk by everything that changes it."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import filelock
import numpy as np
import torch
import transformers
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from paper_common.lm.models import load_lm, save_lm, tiny_causal_lm
from paper_common.lm.train import train_causal_lm
from paper_common.lm.vocab import build_tokenizer, fixed_tokenizer

if TYPE_CHECKING:
    from paper_common.facts import World

log = logging.getLogger("paper_common.lm")


CACHE_ENV = "PAPER_CACHE_DIR"
_CACHE_VERSION = 1


# ============================================================================ fact LMs
FACT_LM_SIZES: dict[str, dict[str, Any]] = {
    # "tiny" (0.57M parameters on the default World) trains in about 100 s on 2 CPU cores
    "tiny": {
        "n_layers": 2,
        "d_model": 128,
        "n_heads": 4,
        "steps": 2000,
        "batch_size": 64,
        "lr": 3e-3,
    },
    # "tiny4": four blocks (so logit-lens readouts have intermediate layers), about 70 s on 2 cores
    # for a World of 160 people
    "tiny4": {
        "n_layers": 4,
        "d_model": 128,
        "n_heads": 4,
        "steps": 800,
        "batch_size": 64,
        "lr": 3e-3,
    },
    "small": {
        "n_layers": 4,
        "d_model": 256,
        "n_heads": 8,
        "steps": 3000,
        "batch_size": 64,
        "lr": 1e-3,
    },
}


def training_environment() -> dict[str, Any]:
    """What changes a model trained here besides its config and seed: library versions, torch's
    intra-op thread count (a reduction's order follows it), the device and the CPU's vector
    instruction set. Every on-disk cache of a trained model is keyed by it (:func:`cache_key`)."""
    import platform

    from paper_common.device import pick_device

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": _version("tokenizers"),
        "numpy": np.__version__,
        "torch_threads": torch.get_num_threads(),
        "device": pick_device().type,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "machine": platform.machine(),
    }


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def cache_key(config: Any, length: int = 20) -> str:
    """Hex digest naming a cached trained model: ``config`` (anything JSON can write, with sorted
    keys: sizes, seed, data fingerprint, a version of the training recipe) together with
    :func:`training_environment` at the time of the call. Call it in the process, and with the
    thread count, that trains the model."""
    blob = json.dumps({"config": config, "environment": training_environment()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


def fact_lm_cache_dir() -> Path:
    """Where :func:`fact_lm` caches models: ``$PAPER_CACHE_DIR`` or the platform's user cache."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]) / "fact_lm"
    import platformdirs

    return Path(platformdirs.user_cache_dir("paper-suite")) / "fact_lm"


def fact_lm(
    world: World,
    size: str = "tiny",
    seed: int = 0,
    cutoff: int | None = None,
    arch: Literal["llama", "qwen2", "gpt2"] = "llama",
    tokenizer_kind: Literal["wordlevel", "bpe", "fixed"] = "wordlevel",
    steps: int | None = None,
    history: bool = True,
    cues: bool = True,
    corpus_options: dict[str, Any] | None = None,
    cache: bool = True,
    progress: bool | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """A model that has memorised ``world``'s facts (true at ``cutoff``, default the last year).

    Trained on ``world.corpus(cutoff)``: statements of every fact, QA and True/False items of the
    format facts (see :mod:`paper_common.facts`). The tokenizer covers every text the world can
    render, so snapshots of one world at several cutoffs share a vocabulary; ``tokenizer_kind="fixed"``
    uses :func:`~paper_common.lm.vocab.fixed_tokenizer`, the vocabulary every World shares.
    ``corpus_options`` go to :meth:`World.corpus` (``style``, ``augmentation``, ``formats``, ``seed``). Cached under
    :func:`fact_lm_cache_dir` by a hash of the world and the training config, written atomically,
    and loaded with ``from_pretrained``; ``cache=False`` always trains. Concurrent calls for the same
    model (parallel test workers) are serialised by a file lock: one trains, the others load.
    Training metadata (config, seconds, final loss) is in ``model.fact_lm_info``.
    """
    from paper_common.device import pick_device
    from paper_common.facts import World as _World

    if not isinstance(world, _World):
        raise TypeError(f"fact_lm expects a paper_common.facts.World; got {type(world).__name__}")
    if size not in FACT_LM_SIZES:
        raise ValueError(f"size must be one of {', '.join(FACT_LM_SIZES)}; got {size!r}")
    if cutoff is not None:
        world._check_time(cutoff)
    spec = dict(FACT_LM_SIZES[size])
    if steps is not None:
        spec["steps"] = steps
    config = {
        "version": _CACHE_VERSION,
        "world": world.fingerprint(),
        "size": spec,
        "seed": seed,
        "cutoff": cutoff,
        "arch": arch,
        "tokenizer": tokenizer_kind,
        "history": history,
        "cues": cues,
    }
    if corpus_options:
        config["corpus_options"] = dict(corpus_options)
    # the texts themselves, so a change to the templates or the corpus recipe trains anew
    if tokenizer_kind not in ("wordlevel", "bpe", "fixed"):
        raise ValueError(
            f"tokenizer_kind must be 'wordlevel', 'bpe' or 'fixed'; got {tokenizer_kind!r}"
        )
    texts, pairs = world.corpus(cutoff, history=history, cues=cues, **(corpus_options or {}))
    corpus = hashlib.sha256(json.dumps([texts, pairs], default=list).encode()).hexdigest()[:16]
    path = fact_lm_cache_dir() / cache_key({**config, "corpus": corpus})
    if not cache:
        return _train_fact_lm(world, config, progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    # one process trains, others wanting the same model wait and then load it
    with filelock.FileLock(str(path) + ".lock"):
        if not (path / "fact_lm.json").exists():
            model, tok = _train_fact_lm(world, config, progress)
            save_lm(model, tok, path, model.fact_lm_info, info_file="fact_lm.json")
            return model, tok
    model, tok = load_lm(path, pick_device())
    model.fact_lm_info = json.loads((path / "fact_lm.json").read_text())
    return model, tok


def _train_fact_lm(
    world: World, config: dict[str, Any], progress: bool | None
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    from paper_common.device import pick_device

    spec = config["size"]
    if config["tokenizer"] == "fixed":
        tok = fixed_tokenizer()
    else:
        tok = build_tokenizer(world.vocabulary_texts(), kind=config["tokenizer"])
    texts, pairs = world.corpus(
        config["cutoff"],
        history=config["history"],
        cues=config["cues"],
        **config.get("corpus_options", {}),
    )
    model = tiny_causal_lm(
        tok, config["arch"], spec["n_layers"], spec["d_model"], spec["n_heads"], seed=config["seed"]
    ).to(pick_device())
    result = train_causal_lm(
        model,
        tok,
        texts,
        pairs,
        steps=spec["steps"],
        lr=spec["lr"],
        batch_size=spec["batch_size"],
        seed=config["seed"],
        progress=progress,
    )
    info = {
        "config": config,
        "environment": training_environment(),
        "seconds": result.seconds,
        "final_loss": float(np.mean(result.losses[-20:])),
    }
    model.fact_lm_info = info
    log.info("fact_lm trained in %.1f s, loss %.3f", result.seconds, info["final_loss"])
    return model, tok
