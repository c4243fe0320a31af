"""The residual stream and MLPs: recording, logit lens, steering and MLP capture."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from paper_common.lm.anatomy import (
    _batches,
    _check_layers,
    _check_prompts,
    _device,
    _eval,
    _prompt_ids,
    decoder_layers,
    final_norm,
    right_padded,
)
from paper_common.lm.train import pad_id

log = logging.getLogger("paper_common.lm")


# ============================================================================ residual stream
def _block_output(out: Any) -> torch.Tensor:
    return out[0] if isinstance(out, tuple) else out


def _replace_block_output(out: Any, hidden: torch.Tensor) -> Any:
    return (hidden, *out[1:]) if isinstance(out, tuple) else hidden


def _hidden_arg(args: tuple, kwargs: dict) -> torch.Tensor:
    return args[0] if args else kwargs["hidden_states"]


@contextlib.contextmanager
def _record_residual(model: nn.Module, layers: list[int]) -> Iterator[dict[int, torch.Tensor]]:
    """Record the residual stream at ``layers`` during the next forward passes (last one kept)."""
    blocks = decoder_layers(model)
    store: dict[int, torch.Tensor] = {}
    handles = []
    if 0 in layers:

        def pre(_module: nn.Module, args: tuple, kwargs: dict) -> None:
            store[0] = _hidden_arg(args, kwargs)

        handles.append(blocks[0].register_forward_pre_hook(pre, with_kwargs=True))
    for layer in layers:
        if layer == 0:
            continue

        def post(_module: nn.Module, _args: tuple, out: Any, layer: int = layer) -> None:
            store[layer] = _block_output(out)

        handles.append(blocks[layer - 1].register_forward_hook(post))
    try:
        yield store
    finally:
        for h in handles:
            h.remove()


def residual_stream(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    layers: Sequence[int] | None = None,
    position: Literal["last", "mean"] = "last",
    batch_size: int = 64,
) -> torch.Tensor:
    """The residual stream at ``layers`` (default all, ``0..n_layers``): ``(n, len(layers), d_model)``.

    ``position="last"``: at the last prompt token; ``"mean"``: averaged over the prompt's tokens.
    Float32, on CPU.
    """
    prompts = _check_prompts(prompts)
    layers = _check_layers(model, layers)
    if position not in ("last", "mean"):
        raise ValueError(f"position must be 'last' or 'mean'; got {position!r}")
    device, pad = _device(model), pad_id(tok)
    seqs = _prompt_ids(tok, prompts)
    out = []
    with _eval(model), _record_residual(model, layers) as store:
        for sl in _batches(len(seqs), batch_size):
            ids, mask, lengths = right_padded(seqs[sl], pad, device)
            model(input_ids=ids, attention_mask=mask)
            hs = torch.stack([store[layer] for layer in layers], dim=1).float()  # (b, L, seq, d)
            if position == "last":
                rows = torch.arange(len(lengths), device=device)
                out.append(hs[rows, :, lengths - 1].cpu())
            else:
                m = mask[:, None, :, None].float()
                out.append(((hs * m).sum(2) / m.sum(2)).cpu())
    return torch.cat(out)


def residual_tokens(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    texts: Sequence[str],
    layers: Sequence[int] | None = None,
    skip_bos: bool = True,
    max_tokens: int | None = None,
    batch_size: int = 32,
) -> torch.Tensor:
    """The residual stream at every token of ``texts``: ``(n_tokens, len(layers), d_model)``.

    Tokens are taken in text order, padding excluded; ``skip_bos`` drops each text's first token when
    it is the tokenizer's bos (its activations are outliers, as SAE training pipelines also drop
    them); ``max_tokens`` stops early. Layers as in :func:`residual_stream`. Float32, on CPU.
    """
    texts = _check_prompts(texts, "texts")
    layers = _check_layers(model, layers)
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1 or None; got {max_tokens}")
    device, pad = _device(model), pad_id(tok)
    seqs = _prompt_ids(tok, texts)
    out, total = [], 0
    with _eval(model), _record_residual(model, layers) as store:
        for sl in _batches(len(seqs), batch_size):
            ids, mask, _ = right_padded(seqs[sl], pad, device)
            model(input_ids=ids, attention_mask=mask)
            keep = mask.bool()
            if skip_bos and tok.bos_token_id is not None:
                keep[:, 0] &= ids[:, 0] != tok.bos_token_id
            hs = torch.stack([store[layer] for layer in layers], dim=2)  # (b, seq, L, d)
            out.append(hs[keep].float().cpu())
            total += len(out[-1])
            if max_tokens is not None and total >= max_tokens:
                break
    acts = torch.cat(out)
    return acts[:max_tokens] if max_tokens is not None else acts


def logit_lens(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    layers: Sequence[int] | None = None,
    batch_size: int = 64,
) -> torch.Tensor:
    """Next-token log-probs read off each layer's residual (last token) through the final norm and
    the unembedding: ``(n, len(layers), vocab)``. At the last layer this is the model's own output."""
    layers = _check_layers(model, layers)
    resid = residual_stream(model, tok, prompts, layers, "last", batch_size)
    norm, unembed = final_norm(model), model.get_output_embeddings()
    device = _device(model)
    with _eval(model):
        logits = unembed(norm(resid.to(device)))
    return torch.log_softmax(logits.float(), dim=-1).cpu()


@contextlib.contextmanager
def add_to_residual(
    model: PreTrainedModel,
    layer: int,
    vector: torch.Tensor | np.ndarray,
    positions: Sequence[int] | slice | None = None,
    scale: float = 1.0,
) -> Iterator[None]:
    """Add ``scale * vector`` (``(d_model,)``) to the residual stream at ``layer`` inside the block.

    ``layer`` uses :func:`residual_stream`'s indices (``0``: embeddings, ``l``: output of block
    ``l-1``; ``n_layers`` is allowed and steers the final residual). ``positions`` are sequence
    indices of each forward pass (``None``: all; during cached generation later steps see one
    position each). The hook is removed on exit, also after an exception.
    """
    _check_layers(model, [layer])
    vec = torch.as_tensor(vector, dtype=torch.float32)
    d = model.get_input_embeddings().weight.shape[1]
    if vec.shape != (d,):
        raise ValueError(f"vector must have shape ({d},); got {tuple(vec.shape)}")
    blocks = decoder_layers(model)

    def steer(hidden: torch.Tensor) -> torch.Tensor:
        delta = (scale * vec).to(hidden.device, hidden.dtype)
        if positions is None:
            return hidden + delta
        hidden = hidden.clone()
        hidden[:, positions] += delta
        return hidden

    if layer == 0:

        def pre(_module: nn.Module, args: tuple, kwargs: dict) -> Any:
            if args:
                return (steer(args[0]), *args[1:]), kwargs
            return args, {**kwargs, "hidden_states": steer(kwargs["hidden_states"])}

        handle = blocks[0].register_forward_pre_hook(pre, with_kwargs=True)
    else:

        def post(_module: nn.Module, _args: tuple, out: Any) -> Any:
            return _replace_block_output(out, steer(_block_output(out)))

        handle = blocks[layer - 1].register_forward_hook(post)
    try:
        yield
    finally:
        handle.remove()


@dataclass
class MLPRecord:
    """Input and output of one block's MLP on the last forward pass: ``(batch, seq, d_model)``."""

    inputs: torch.Tensor | None = None
    outputs: torch.Tensor | None = None


def mlp_module(model: nn.Module, block: int) -> nn.Module:
    """The MLP of transformer block ``block`` (0-based)."""
    blocks = decoder_layers(model)
    if not 0 <= block < len(blocks):
        raise ValueError(
            f"block {block} out of range: this model's blocks are 0..{len(blocks) - 1}"
        )
    mlp = getattr(blocks[block], "mlp", None)
    if not isinstance(mlp, nn.Module):
        raise ValueError(f"block {block} of {type(model).__name__} has no .mlp")
    return mlp


# the MLP's output projection (d_ff -> d_model) under the names the common architectures use:
# Llama/Qwen2/Mistral ``down_proj``, GPT-2/GPT-Neo ``c_proj`` (Conv1D), GPT-J ``fc_out``,
# NeoX/Falcon ``dense_4h_to_h``, OPT ``fc2`` (OPT's MLP lives on the block itself)
_DOWN_PROJ_NAMES = ("down_proj", "c_proj", "fc_out", "dense_4h_to_h", "fc2")


def mlp_down_proj(model: nn.Module, block: int) -> nn.Module:
    """The output projection of block ``block``'s MLP (the matrix ROME and MEMIT edit).

    Its input is the MLP's hidden activation (the "key"), its output the MLP's contribution to the
    residual stream (the "value"). See :func:`down_proj_weight` for the weight in one orientation.
    """
    blocks = decoder_layers(model)
    if not 0 <= block < len(blocks):
        raise ValueError(
            f"block {block} out of range: this model's blocks are 0..{len(blocks) - 1}"
        )
    for owner in (getattr(blocks[block], "mlp", None), blocks[block]):
        if not isinstance(owner, nn.Module):
            continue
        for name in _DOWN_PROJ_NAMES:
            module = getattr(owner, name, None)
            if isinstance(module, nn.Module) and hasattr(module, "weight"):
                return module
    raise ValueError(
        f"cannot find the MLP output projection of block {block} of {type(model).__name__} "
        f"(looked for {', '.join(_DOWN_PROJ_NAMES)})"
    )


def down_proj_weight(module: nn.Module) -> torch.Tensor:
    """The weight of an MLP output projection as a ``(d_model, d_ff)`` view (``y = W x + b``).

    ``nn.Linear`` stores it that way; GPT-2's ``Conv1D`` stores the transpose, so this returns a
    transposed view. In-place updates of the view (``W.add_(delta)``) change the module's weight.
    """
    weight = module.weight
    if type(module).__name__ == "Conv1D":
        return weight.T
    if isinstance(module, nn.Linear):
        return weight
    raise TypeError(f"expected nn.Linear or transformers' Conv1D; got {type(module).__name__}")


@contextlib.contextmanager
def capture_mlp(
    model: nn.Module, blocks: Sequence[int], site: Literal["mlp", "down_proj"] = "mlp"
) -> Iterator[dict[int, MLPRecord]]:
    """Record the input and output of each of ``blocks``' (0-based) MLP on every forward inside.

    ``site="mlp"``: the whole MLP (input: the normed residual, ``d_model``; output: its write to the
    residual). ``site="down_proj"``: the output projection (:func:`mlp_down_proj`; input: the
    hidden activation, ``d_ff``; output the same write). Hooks are removed on exit.

    >>> # with capture_mlp(model, [0, 1]) as rec: model(**batch); rec[1].outputs.shape
    """
    blocks = list(blocks)
    if not blocks:
        raise ValueError("blocks must not be empty")
    if site not in ("mlp", "down_proj"):
        raise ValueError(f"site must be 'mlp' or 'down_proj'; got {site!r}")
    store = {b: MLPRecord() for b in blocks}
    handles = []
    for b in blocks:
        module = mlp_module(model, b) if site == "mlp" else mlp_down_proj(model, b)

        def hook(_module: nn.Module, args: tuple, out: Any, b: int = b) -> None:
            store[b].inputs = args[0].detach() if args else None
            store[b].outputs = _block_output(out).detach()

        handles.append(module.register_forward_hook(hook))
    try:
        yield store
    finally:
        for h in handles:
            h.remove()
