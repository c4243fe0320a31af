"""Swap or record the attention of any Hugging Face causal LM through ``transformers``' ``AttentionInterface``.

Needs the ``lm`` extra. Works for every model whose attention modules call the registered attention
function (Llama, Qwen2, Mistral, GPT-2 families): the function receives each layer's queries, keys and
values *after* rotary embeddings, ``(batch, heads, seq, head_dim)``, and here grouped-query key/value
heads are repeated to the number of query heads before anything else sees them.

- :func:`swap_attention` attaches one module per layer (``attn.<attr>``, so its parameters are part of
  the model's ``state_dict``) and routes attention through it. The module is called as
  ``module(query, key, value, causal, key_mask=..., scale=...)`` and returns ``(batch, heads, seq, d)``;
  ``key_mask`` is ``(batch, n_keys)``, True at real (non-padding) keys, or None when all are real.
- :func:`capture_attention` runs the model with exact softmax attention and records, per layer call,
  ``q``, ``k``, ``v``, the softmax ``out`` (before the output projection), ``key_mask`` and ``scale``:
  the teacher side of an attention-transfer step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import nn
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from paper_common.lm import decoder_layers

__all__ = [
    "CAPTURE_IMPL",
    "SWAP_IMPL",
    "attention_modules",
    "capture_attention",
    "key_mask_from",
    "repeat_kv",
    "set_attention_impl",
    "swap_attention",
    "swapped_modules",
]

SWAP_IMPL = "paper_common_swap"
CAPTURE_IMPL = "paper_common_capture"
_SWAP_ATTR = "_paper_common_swap_attr"
_RECORDS: list[list[dict[str, Any]]] = []


def attention_modules(model: nn.Module) -> list[nn.Module]:
    """The self-attention module of every decoder block, in order."""
    mods = []
    for block in decoder_layers(model):
        attn = getattr(block, "self_attn", None) or getattr(block, "attn", None)
        if attn is None:
            raise ValueError(f"cannot find the attention of {type(block).__name__}")
        mods.append(attn)
    return mods


def repeat_kv(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values with grouped-query heads repeated to the number of query heads (dim 1)."""
    if query.shape[1] % key.shape[1]:
        raise ValueError(
            f"{query.shape[1]} query heads is not a multiple of {key.shape[1]} kv heads"
        )
    rep = query.shape[1] // key.shape[1]
    if rep > 1:
        key, value = key.repeat_interleave(rep, 1), value.repeat_interleave(rep, 1)
    return key, value


def key_mask_from(attention_mask: torch.Tensor | None, n_keys: int) -> torch.Tensor | None:
    """``(batch, n_keys)`` True at real keys, read from a 4D boolean or additive mask (its last query
    row sees every real key); None when there is no mask or every key is real."""
    if attention_mask is None or attention_mask.ndim != 4:
        return None
    last = attention_mask[:, 0, -1, -n_keys:]
    keep = last if last.dtype == torch.bool else last > torch.finfo(last.dtype).min / 2
    return None if bool(keep.all()) else keep


def _swap_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    attr = getattr(module, _SWAP_ATTR, None)
    student = getattr(module, attr, None) if attr else None
    if student is None:
        raise RuntimeError("this attention module has no swapped module: call swap_attention first")
    key, value = repeat_kv(query, key, value)
    causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
    out = student(
        query,
        key,
        value,
        causal,
        key_mask=key_mask_from(attention_mask, key.shape[2]),
        scale=scaling,
    )
    return out.transpose(1, 2).contiguous(), None


def _capture_forward(module, query, key, value, attention_mask, **kwargs):  # type: ignore[no-untyped-def]
    out, _ = sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    k, v = repeat_kv(query, key, value)
    if _RECORDS:
        _RECORDS[-1].append(
            {
                "q": query.detach(),
                "k": k.detach(),
                "v": v.detach(),
                "out": out.transpose(1, 2).detach(),
                "key_mask": key_mask_from(attention_mask, k.shape[2]),
                "scale": kwargs.get("scaling"),
            }
        )
    return out, None


AttentionInterface.register(SWAP_IMPL, _swap_forward)
AttentionInterface.register(CAPTURE_IMPL, _capture_forward)
AttentionMaskInterface.register(SWAP_IMPL, sdpa_mask)
AttentionMaskInterface.register(CAPTURE_IMPL, sdpa_mask)


def set_attention_impl(model: PreTrainedModel, impl: str) -> None:
    """Route every attention module of ``model`` through the registered attention function ``impl``
    (``"sdpa"``, ``"eager"``, :data:`SWAP_IMPL`, ...), sub-configs included."""
    model.config._attn_implementation = impl
    for mod in attention_modules(model):
        cfg = getattr(mod, "config", None)
        if cfg is not None and cfg is not model.config:
            cfg._attn_implementation = impl


def swap_attention(
    model: PreTrainedModel,
    modules: Sequence[nn.Module] | Callable[[int, nn.Module], nn.Module],
    attr: str = "swapped_attention",
) -> PreTrainedModel:
    """Replace the attention of every layer of ``model`` (in place) by one module per layer; returns
    ``model``. ``modules`` is a list (one per layer) or ``build(layer_index, attention_module)``.
    Each module is attached as ``attn.<attr>`` on the model's device and dtype."""
    attns = attention_modules(model)
    if not callable(modules) and len(modules) != len(attns):
        raise ValueError(f"{len(modules)} modules for a model with {len(attns)} attention layers")
    param = next(model.parameters())
    for i, attn in enumerate(attns):
        new = modules(i, attn) if callable(modules) else modules[i]
        if not isinstance(new, nn.Module):
            raise TypeError(f"layer {i}: expected an nn.Module; got {type(new).__name__}")
        setattr(attn, attr, new.to(device=param.device, dtype=param.dtype))
        object.__setattr__(attn, _SWAP_ATTR, attr)
    set_attention_impl(model, SWAP_IMPL)
    return model


def swapped_modules(model: nn.Module) -> list[nn.Module]:
    """The modules :func:`swap_attention` attached, one per layer."""
    out = []
    for i, attn in enumerate(attention_modules(model)):
        attr = getattr(attn, _SWAP_ATTR, None)
        if attr is None or getattr(attn, attr, None) is None:
            raise ValueError(f"layer {i} has no swapped attention module")
        out.append(getattr(attn, attr))
    return out


@contextlib.contextmanager
def capture_attention(model: PreTrainedModel) -> Iterator[list[dict[str, Any]]]:
    """Run ``model`` with exact softmax attention and record, per layer call, ``q, k, v``
    ``(batch, heads, seq, d)`` (after rotary embeddings, kv heads repeated), the softmax ``out``
    (before the output projection), the ``key_mask`` and the ``scale``. The previous attention
    implementation is restored on exit."""
    old = model.config._attn_implementation
    records: list[dict[str, Any]] = []
    _RECORDS.append(records)
    set_attention_impl(model, CAPTURE_IMPL)
    try:
        yield records
    finally:
        _RECORDS.remove(records)
        set_attention_impl(model, old)
