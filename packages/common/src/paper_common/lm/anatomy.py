"""Where the parts of a Hugging Face causal LM live (blocks, final norm), float64 mode, shared input checks."""

from __future__ import annotations

import contextlib
import logging
import types
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

log = logging.getLogger("paper_common.lm")


# ============================================================================ model anatomy
def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def _first_module(model: nn.Module, paths: Sequence[str]) -> nn.Module | None:
    """The module at the first dotted attribute path that exists (``"model.layers"``), else None."""
    for path in paths:
        obj: Any = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if isinstance(obj, nn.Module):
            return obj
    return None


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The list of transformer blocks of a Hugging Face causal LM (Llama, Qwen2, Mistral, GPT-2, NeoX, OPT)."""
    found = _first_module(
        model, ("model.layers", "transformer.h", "gpt_neox.layers", "model.decoder.layers")
    )
    if isinstance(found, nn.ModuleList):
        return found
    n = getattr(getattr(model, "config", None), "num_hidden_layers", None)
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and len(module) == n:
            return module
    raise ValueError(f"cannot find the decoder blocks of {type(model).__name__}")


def final_norm(model: nn.Module) -> nn.Module:
    """The norm applied to the last residual before the unembedding."""
    paths = (
        "model.norm",
        "transformer.ln_f",
        "gpt_neox.final_layer_norm",
        "model.decoder.final_layer_norm",
    )
    found = _first_module(model, paths)
    if found is not None:
        return found
    raise ValueError(f"cannot find the final norm of {type(model).__name__}")


def num_layers(model: nn.Module) -> int:
    return len(decoder_layers(model))


# ============================================================================ float64
_RMSNORMS = ("LlamaRMSNorm", "Qwen2RMSNorm", "Qwen3RMSNorm", "MistralRMSNorm", "Phi3RMSNorm")


def _rmsnorm_native(self: nn.Module, hidden_states: torch.Tensor) -> torch.Tensor:
    var = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(var + self.variance_epsilon))


def _attention_native(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager attention in the inputs' dtype (HF's eager softmax runs in float32)."""
    groups = getattr(module, "num_key_value_groups", 1)
    if groups > 1:
        key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    weights = query @ key.transpose(2, 3) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask[:, :, :, : key.shape[-2]]
    weights = torch.softmax(weights, -1)
    return (weights @ value).transpose(1, 2).contiguous(), weights


def float64_exact(model: nn.Module) -> nn.Module:
    """Convert ``model`` to float64 and make it float64 throughout.

    Llama-style RMSNorms and HF's eager attention softmax compute in float32 whatever the input
    dtype, which caps a float64 model at float32 precision (a Jacobian and a ``jvp`` then disagree
    at 1e-7). The norms' forward is replaced by the same formula in the input's dtype and attention
    by an eager one in the input's dtype (registered as ``"float64_eager"``; forward-mode AD through
    PyTorch's fused CPU attention is not implemented, so sdpa would not do either).
    """
    model = model.to(torch.float64)
    for module in model.modules():
        if type(module).__name__ in _RMSNORMS and hasattr(module, "variance_epsilon"):
            module.forward = types.MethodType(_rmsnorm_native, module)
    if hasattr(model, "set_attn_implementation"):
        register_float64_attention()
        model.set_attn_implementation("float64_eager")
    return model.eval()


def register_float64_attention() -> None:
    """Make ``"float64_eager"`` a known attention implementation (call it before loading a model
    saved with it)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register("float64_eager", _attention_native)
    AttentionMaskInterface.register("float64_eager", eager_mask)  # additive float masks


def _check_layers(
    model: nn.Module, layers: Sequence[int] | None, top: int | None = None
) -> list[int]:
    n = num_layers(model)
    top = n if top is None else top
    if layers is None:
        return list(range(top + 1))
    layers = [int(layer) for layer in layers]
    if not layers:
        raise ValueError("layers must not be empty")
    bad = [layer for layer in layers if not 0 <= layer <= top]
    if bad:
        raise ValueError(f"layer(s) {bad} out of range: this model's layers are 0..{top}")
    return layers


@contextlib.contextmanager
def _eval(model: nn.Module) -> Iterator[None]:
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        model.train(was_training)


def _check_prompts(prompts: Sequence[str], name: str = "prompts") -> list[str]:
    if isinstance(prompts, str):
        raise TypeError(f"{name} must be a list of strings, not one string")
    prompts = list(prompts)
    if not prompts:
        raise ValueError(f"{name} must not be empty")
    if not all(isinstance(p, str) for p in prompts):
        raise TypeError(f"{name} must all be strings")
    return prompts


def _check_pair(a: Sequence[Any], b: Sequence[Any], na: str, nb: str) -> None:
    if len(a) != len(b):
        raise ValueError(f"{na} and {nb} must have the same length; got {len(a)} and {len(b)}")


def _batches(n: int, batch_size: int) -> Iterator[slice]:
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    for i in range(0, n, batch_size):
        yield slice(i, min(i + batch_size, n))


def right_padded(seqs: list[list[int]], pad: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Right-padded ``(ids, attention_mask, lengths)`` of token-id lists, on ``device``."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids.to(device), mask.to(device), mask.sum(1).to(device)


def _encode(tok: PreTrainedTokenizerBase, prompts: list[str]) -> list[list[int]]:
    """Token ids of ``prompts`` with the tokenizer's special tokens, except for a prompt that already
    starts with the BOS token's text (a rendered chat template: Llama-3, Gemma, SmolLM2): it is
    encoded as it is, so the model sees one BOS, not two."""
    bos = getattr(tok, "bos_token", None)
    rendered = [bool(bos) and p.startswith(bos) for p in prompts]
    plain = [p for p, r in zip(prompts, rendered, strict=True) if not r]
    chat = [p for p, r in zip(prompts, rendered, strict=True) if r]
    plain_ids = iter(tok(plain)["input_ids"] if plain else [])
    chat_ids = iter(tok(chat, add_special_tokens=False)["input_ids"] if chat else [])
    return [next(chat_ids) if r else next(plain_ids) for r in rendered]


def _prompt_ids(tok: PreTrainedTokenizerBase, prompts: list[str]) -> list[list[int]]:
    ids = _encode(tok, prompts)
    if any(len(s) == 0 for s in ids):
        raise ValueError("a prompt encodes to zero tokens; give a non-empty prompt")
    return ids
