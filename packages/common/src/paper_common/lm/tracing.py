"""Causal tracing (Meng et al. 2022, ROME): where in a causal LM is a fact recalled?

The subject's token embeddings are corrupted with Gaussian noise, which lowers the probability of
the right answer; then one hidden state (here: the MLP output of a window of blocks at one token)
is restored to its clean value. The *indirect effect* of that state is how much of the answer's
probability the restoration brings back. ROME found the effect of MLPs peaking at the subject's
last token in middle layers; a model that recalls facts only at the last token (the question's end)
shows it there instead. This module runs on any Hugging Face causal LM with ``model.model.layers``-
style blocks (:func:`paper_common.lm.decoder_layers`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from paper_common.lm.anatomy import _device, _encode, num_layers
from paper_common.lm.hooks import mlp_module

__all__ = ["TraceResult", "causal_trace", "embedding_noise_scale", "subject_token_span"]


@dataclass
class TraceResult:
    """Causal traces of prompts: ``effects[i]`` is ``(n_layers, n_tokens_i)``, the restored minus
    the corrupted probability of the answer's first token; ``clean`` and ``corrupted`` are those
    probabilities; ``subject_last[i]`` is the index of the subject's last token in prompt ``i``."""

    effects: list[np.ndarray]
    clean: np.ndarray
    corrupted: np.ndarray
    subject_last: list[int]

    def at_subject_last(self) -> np.ndarray:
        """Per prompt: the largest effect over layers at the subject's last token."""
        return np.array(
            [e[:, j].max() for e, j in zip(self.effects, self.subject_last, strict=True)]
        )

    def at_last(self) -> np.ndarray:
        """Per prompt: the largest effect over layers at the prompt's last token."""
        return np.array([e[:, -1].max() for e in self.effects])


def subject_token_span(tok: PreTrainedTokenizerBase, prompt: str, subject: str) -> tuple[int, int]:
    """``[start, end)`` token indices (with the tokenizer's special tokens, none added to a prompt
    that starts with the BOS text, as the trace encodes it) covering ``subject``'s first occurrence
    in ``prompt``; ``ValueError`` if it is not there."""
    at = prompt.find(subject)
    if at < 0:
        raise ValueError(f"subject {subject!r} not in prompt {prompt!r}")
    bos = getattr(tok, "bos_token", None)
    rendered = bool(bos) and prompt.startswith(bos)  # as _encode: no second BOS
    enc = tok(prompt, return_offsets_mapping=True, add_special_tokens=not rendered)
    ids = [
        i
        for i, (a, b) in enumerate(enc["offset_mapping"])
        if b > a and a < at + len(subject) and b > at
    ]
    if not ids:
        raise ValueError(f"subject {subject!r} maps to no token of {prompt!r}")
    return ids[0], ids[-1] + 1


def embedding_noise_scale(
    model: PreTrainedModel, tok: PreTrainedTokenizerBase, subjects: Sequence[str]
) -> float:
    """ROME's noise level: 3 times the standard deviation of the subjects' token embeddings, every
    subject's tokens counted (ROME's ``collect_embedding_std``: a token shared by several subjects,
    a first name, counts once per subject)."""
    emb = model.get_input_embeddings().weight.detach()
    ids = [i for s in subjects for i in tok(" " + s, add_special_tokens=False)["input_ids"]]
    if not ids:
        raise ValueError("subjects encode to no tokens")
    return float(3.0 * emb[ids].float().std())


def causal_trace(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    subjects: Sequence[str],
    answers: Sequence[str],
    noise: float | None = None,
    samples: int = 10,
    window: int = 10,
    seed: int = 0,
) -> TraceResult:
    """Trace the MLP outputs of every block and token of each prompt (ROME's "mlp" kind).

    ``answers`` are continuations (a leading space is added if missing); their first token is
    scored. ``noise`` defaults to :func:`embedding_noise_scale` of ``subjects``; ``samples`` noise
    draws are averaged (one batch); restoring block ``l`` restores the MLP outputs of the
    ``window`` blocks centred on it (ROME: 10), clipped to the model. Seeded.
    """
    if not (len(prompts) == len(subjects) == len(answers)) or not prompts:
        raise ValueError("prompts, subjects and answers must be non-empty and of one length")
    if samples < 1 or window < 1:
        raise ValueError(f"samples and window must be >= 1; got {samples}, {window}")
    noise = embedding_noise_scale(model, tok, subjects) if noise is None else float(noise)
    device = _device(model)
    n_layers = num_layers(model)
    gen = torch.Generator().manual_seed(seed)
    effects, clean_p, corrupt_p, last = [], [], [], []
    model.eval()
    for prompt, subject, answer in zip(prompts, subjects, answers, strict=True):
        ids = torch.tensor([_encode(tok, [prompt])[0]], device=device)
        a, b = subject_token_span(tok, prompt, subject)
        target = tok(answer if answer.startswith(" ") else " " + answer, add_special_tokens=False)
        target_id = target["input_ids"][0]
        d = model.get_input_embeddings().weight.shape[1]
        eps = torch.randn(samples, b - a, d, generator=gen).to(device) * noise
        batch = ids.expand(samples + 1, -1)  # row 0 clean, the rest corrupted
        clean_out = _run(model, batch, a, b, eps, None)
        p = torch.softmax(clean_out["logits"][:, -1].float(), -1)[:, target_id]
        p_clean, p_corrupt = float(p[0]), float(p[1:].mean())
        grid = np.zeros((n_layers, ids.shape[1]))
        for layer in range(n_layers):
            lo, hi = max(0, layer - window // 2), min(n_layers, layer - window // 2 + window)
            blocks = range(lo, hi) if window > 1 else range(layer, layer + 1)
            for pos in range(ids.shape[1]):
                patch = {blk: (pos, clean_out["mlp"][blk][0, pos]) for blk in blocks}
                out = _run(model, batch, a, b, eps, patch)
                q = torch.softmax(out["logits"][1:, -1].float(), -1)[:, target_id].mean()
                grid[layer, pos] = float(q) - p_corrupt
        effects.append(grid)
        clean_p.append(p_clean)
        corrupt_p.append(p_corrupt)
        last.append(b - 1)
    return TraceResult(effects, np.array(clean_p), np.array(corrupt_p), last)


@torch.inference_mode()
def _run(
    model: PreTrainedModel,
    batch: torch.Tensor,
    a: int,
    b: int,
    eps: torch.Tensor,
    patch: dict[int, tuple[int, torch.Tensor]] | None,
) -> dict[str, object]:
    """One forward pass: rows 1.. get ``eps`` added to the embeddings of tokens ``a:b``; MLP outputs
    are recorded, and with ``patch`` the given blocks' outputs at one position are set (rows 1..)."""
    recorded: dict[int, torch.Tensor] = {}
    handles = []

    def corrupt(_m: nn.Module, _i: tuple, out: torch.Tensor) -> torch.Tensor:
        out = out.clone()
        out[1:, a:b] += eps.to(out.dtype)
        return out

    handles.append(model.get_input_embeddings().register_forward_hook(corrupt))
    for blk in range(num_layers(model)):

        def hook(_m: nn.Module, _i: tuple, out: torch.Tensor, blk: int = blk) -> torch.Tensor:
            if patch is not None and blk in patch:
                pos, value = patch[blk]
                out = out.clone()
                out[1:, pos] = value.to(out.dtype)
            recorded[blk] = out
            return out

        handles.append(mlp_module(model, blk).register_forward_hook(hook))
    try:
        logits = model(input_ids=batch).logits
    finally:
        for h in handles:
            h.remove()
    return {"logits": logits, "mlp": recorded}
