"""Tiny causal LMs built from a transformers config; saving and loading models atomically."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import torch
import transformers
from transformers import PreTrainedModel, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from paper_common.lm.train import pad_id

log = logging.getLogger("paper_common.lm")


# ============================================================================ models
def tiny_causal_lm(
    tokenizer: PreTrainedTokenizerBase,
    arch: Literal["llama", "qwen2", "gpt2"] = "llama",
    n_layers: int = 2,
    d_model: int = 128,
    n_heads: int = 4,
    d_ff: int | None = None,
    max_positions: int = 128,
    seed: int = 0,
    n_kv_heads: int | None = None,
) -> PreTrainedModel:
    """A randomly initialised causal LM of a real architecture, sized for a CPU.

    Built from ``LlamaConfig`` / ``Qwen2Config`` / ``GPT2Config`` with the tokenizer's vocabulary and
    special-token ids; ``d_ff`` defaults to ``4 * d_model``; no dropout (as Llama); ``n_kv_heads``
    (Llama / Qwen2 only, default ``n_heads``) below ``n_heads`` gives grouped-query attention.
    Initialisation is seeded; the model is returned in eval mode.
    """
    for name, value, low in [
        ("n_layers", n_layers, 1),
        ("d_model", d_model, 8),
        ("n_heads", n_heads, 1),
    ]:
        if not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}; got {value!r}")
    if d_model % n_heads:
        raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    if not isinstance(n_kv_heads, int) or n_kv_heads < 1 or n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads must divide n_heads ({n_heads}); got {n_kv_heads!r}")
    if arch == "gpt2" and n_kv_heads != n_heads:
        raise ValueError("gpt2 has no grouped-query attention: leave n_kv_heads unset")
    d_ff = d_ff or 4 * d_model
    ids = {
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": pad_id(tokenizer),
    }
    vocab = len(tokenizer)
    if arch in ("llama", "qwen2"):
        config_cls = transformers.LlamaConfig if arch == "llama" else transformers.Qwen2Config
        config = config_cls(
            vocab_size=vocab,
            hidden_size=d_model,
            intermediate_size=d_ff,
            num_hidden_layers=n_layers,
            num_attention_heads=n_heads,
            num_key_value_heads=n_kv_heads,
            max_position_embeddings=max_positions,
            tie_word_embeddings=True,
            **ids,
        )
    elif arch == "gpt2":
        config = transformers.GPT2Config(
            vocab_size=vocab,
            n_embd=d_model,
            n_inner=d_ff,
            n_layer=n_layers,
            n_head=n_heads,
            n_positions=max_positions,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            **ids,
        )
    else:
        raise ValueError(f"arch must be 'llama', 'qwen2' or 'gpt2'; got {arch!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.AutoModelForCausalLM.from_config(config)
    return model.eval()


def load_tokenizer(path: str | os.PathLike[str]) -> Any:
    """The tokenizer saved in ``path``: ``AutoTokenizer``, except for a tokenizer built by
    :func:`build_tokenizer`, which ``AutoTokenizer`` would replace by the architecture's own class."""
    path = Path(path)
    tok_config = path / "tokenizer_config.json"
    cls = json.loads(tok_config.read_text()).get("tokenizer_class") if tok_config.exists() else None
    if cls in ("TokenizersBackend", "PreTrainedTokenizerFast"):
        return PreTrainedTokenizerFast.from_pretrained(path)
    return transformers.AutoTokenizer.from_pretrained(path)


def load_lm(path: str | os.PathLike[str], device: Any = None) -> tuple[PreTrainedModel, Any]:
    """``from_pretrained`` of a model and its tokenizer saved in one directory (any HF causal LM)."""
    path = Path(path)
    if not (path / "config.json").exists():
        raise ValueError(f"{path} holds no saved model (config.json missing)")
    tok = load_tokenizer(path)
    with quiet_hf_progress():
        model = transformers.AutoModelForCausalLM.from_pretrained(path)
    if device is not None:
        model.to(device)
    model.eval()
    return model, tok


@contextlib.contextmanager
def quiet_hf_progress() -> Iterator[None]:
    """Silence transformers' progress bars ("Writing model shards", "Loading weights") in the block:
    they are noise for models of a few MB."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def save_lm(
    model: Any,
    tok: Any,
    path: str | os.PathLike[str],
    info: dict[str, Any] | None = None,
    info_file: str = "info.json",
) -> Path:
    """Save a model, its tokenizer and an ``info`` JSON into ``path`` atomically: written to a temp
    directory beside it and renamed, so readers never see half a model. If another process saved
    ``path`` first, theirs is kept. Load it back with :func:`load_lm` (causal LMs)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        with quiet_hf_progress():
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
        if info is not None:
            (tmp / info_file).write_text(json.dumps(info, indent=2))
        try:
            os.replace(tmp, path)
        except OSError:  # another process cached the same model first: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path
