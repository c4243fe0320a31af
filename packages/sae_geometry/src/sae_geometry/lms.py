"""Tiny language models on cyclic text, and layer activations from any Hugging Face causal LM.

:func:`cyclic_lm` trains (or loads from the cache) a ``paper_common.lm.tiny_causal_lm`` on
:func:`~sae_geometry.data.cyclic_corpus` mixed with a ``World``'s fact statements; the cache is keyed
by the config, the seed and the training texts under ``$PAPER_CACHE_DIR/sae_geometry`` and read back with
``from_pretrained``. :func:`layer_activations` returns per-layer token activations of any causal LM
(a local Gemma 2 checkpoint at ``full``) for SAE training and geometry.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from sae_geometry.data import cyclic_corpus

__all__ = ["LMConfig", "cyclic_lm", "layer_activations"]


@dataclass(frozen=True)
class LMConfig:
    """A tiny LM on cyclic text: architecture, size and training (``paper_common.lm`` helpers)."""

    arch: Literal["llama", "qwen2", "gpt2"] = "llama"
    n_layers: int = 4
    d_model: int = 64
    n_heads: int = 4
    steps: int = 600
    batch_size: int = 32
    lr: float = 3e-3
    n_texts: int = 4000
    n_people: int = 40

    def __post_init__(self) -> None:
        for name in ("n_layers", "d_model", "n_heads", "steps", "batch_size", "n_texts"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"LMConfig.{name} must be a positive int; got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"LMConfig.d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )

    def corpus(self, n_texts: int | None = None, seed: int = 0) -> list[str]:
        """Training (or, with another seed, evaluation) texts."""
        from paper_common.facts import World

        world = World(seed=7, n_people=self.n_people, n_cities=12, n_companies=8, n_countries=6)
        facts = [s.text for s in world.statements()]
        return cyclic_corpus(n_texts or self.n_texts, seed=seed, facts=facts)


def _cache_dir() -> Path:
    from paper_common.lm import fact_lm_cache_dir

    return fact_lm_cache_dir().parent / "sae_geometry"


def cyclic_lm(
    config: LMConfig = LMConfig(), seed: int = 0, cache: bool = True, progress: bool | None = None
) -> tuple[Any, Any, dict[str, Any]]:
    """Train (or load) a tiny LM on cyclic text; returns ``(model, tokenizer, info)`` in eval mode.

    Cached by the config, the seed, a hash of the training texts and
    :func:`paper_common.lm.cache_key`'s environment, which includes torch's thread count at the
    call: a model trained under one :func:`paper_common.device.pinned_threads` count is a cache miss
    under another (``reproduce`` trains and loads at its scale's pin).
    """
    import filelock

    from paper_common.lm import (
        build_tokenizer,
        cache_key,
        load_lm,
        save_lm,
        tiny_causal_lm,
        train_causal_lm,
    )

    texts = config.corpus(seed=seed)
    vocab_texts = [*texts, *config.corpus(200, seed=seed + 1)]
    # the texts themselves, so a change to cyclic_corpus or to the World's statement templates
    # trains anew (the tokenizer is built from vocab_texts, so they fix it too)
    data = hashlib.sha256(json.dumps(vocab_texts).encode()).hexdigest()[:16]
    key = cache_key({**asdict(config), "seed": seed, "v": 1, "data": data}, length=12)
    path = _cache_dir() / f"cyclic_lm_{key}"
    path.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(path) + ".lock"):
        if cache and (path / "info.json").exists():
            model, tok = load_lm(path)
            return model, tok, json.loads((path / "info.json").read_text())
        tok = build_tokenizer(vocab_texts)
        model = tiny_causal_lm(
            tok, config.arch, config.n_layers, config.d_model, config.n_heads, seed=seed
        )
        res = train_causal_lm(
            model, tok, texts=texts, steps=config.steps, batch_size=config.batch_size,
            lr=config.lr, seed=seed, progress=progress,
        )  # fmt: skip
        info = {"final_loss": float(np.mean(res.losses[-50:])), "train_s": res.seconds}
        if cache:
            save_lm(model, tok, path, info=info)
    return model, tok, info


def layer_activations(
    model: Any,
    tok: Any,
    texts: Sequence[str],
    layers: Sequence[int] | None = None,
    n_tokens: int = 20_000,
    batch_size: int = 32,
) -> dict[int, np.ndarray]:
    """Residual-stream activations at every non-bos token: ``{layer: (n_tokens, d_model)}``.

    ``layers`` index block outputs (1..n_layers; 0 is the embedding), default all blocks. Raises
    ``ValueError`` if ``texts`` hold fewer than ``n_tokens`` tokens.
    """
    from paper_common.lm import num_layers, residual_tokens

    layers = list(range(1, num_layers(model) + 1)) if layers is None else list(layers)
    acts = residual_tokens(model, tok, texts, layers, max_tokens=n_tokens, batch_size=batch_size)
    if len(acts) < n_tokens:
        raise ValueError(f"texts hold {len(acts)} tokens; need n_tokens={n_tokens}: give more text")
    return {layer: acts[:, i].numpy() for i, layer in enumerate(layers)}
