"""Tiny causal language models trained in-process, and scoring tools that work on any Hugging Face causal LM.

Needs the ``lm`` extra: ``pip install 'paper-common[lm]'`` (torch, transformers, tokenizers, platformdirs).

Models: :func:`build_tokenizer` (word-level or BPE, trained with Hugging Face ``tokenizers``),
:func:`tiny_causal_lm` (a real Llama / Qwen2 / GPT-2 built from its ``transformers`` config),
:func:`train_causal_lm` (AdamW + cosine schedule, prompt tokens masked out of the loss), and
:func:`fact_lm`, a model that has memorised a :class:`paper_common.facts.World`, cached on disk and
loaded back with ``from_pretrained``. :func:`save_lm` saves any model and tokenizer atomically;
:func:`load_lm` and :func:`load_tokenizer` load them back.

Scoring, batched with padding on any device, for any ``PreTrainedModel`` + tokenizer (Llama, Qwen2,
GPT-2 families): :func:`next_token_logprobs`, :func:`token_rank`, :func:`answer_rank`,
:func:`sequence_logprob`, :func:`greedy_answer`, :func:`sample`, :func:`residual_stream`,
:func:`logit_lens`; interventions: :func:`add_to_residual` (activation steering) and
:func:`capture_mlp` (MLP inputs and outputs); :func:`float64_exact` makes a model float64 throughout
(for finite differences and forward-mode AD).

Layer indices follow ``output_hidden_states``: the residual stream at layer ``0`` is the embedding
output (the input of block 0) and at layer ``l >= 1`` the output of block ``l - 1``, *before* the
final norm (``transformers`` applies the final norm to its last hidden state; we do not).
Prompts are scored with the tokenizer's own special tokens (``tok(prompt)``; a prompt that already
starts with the BOS text, a rendered chat template, is encoded as it is), continuations without
(``tok(continuation, add_special_tokens=False)``) appended to them, and padding is on the right, so
batched results equal unbatched ones.

Modules: :mod:`~paper_common.lm.vocab` (tokenizers), :mod:`~paper_common.lm.models` (building,
saving, loading), :mod:`~paper_common.lm.train`, :mod:`~paper_common.lm.fact_lm`,
:mod:`~paper_common.lm.anatomy` (blocks, norms, float64), :mod:`~paper_common.lm.scoring`,
:mod:`~paper_common.lm.hooks` (residual stream, MLPs); everything public is importable from here.
"""

from __future__ import annotations

try:
    import torch  # noqa: F401
    import transformers  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "paper_common.lm needs the 'lm' extra: pip install 'paper-common[lm]' (torch, transformers, "
        "tokenizers, platformdirs)"
    ) from exc

from paper_common.lm.anatomy import (
    decoder_layers,
    final_norm,
    float64_exact,
    num_layers,
    register_float64_attention,
    right_padded,
)
from paper_common.lm.fact_lm import (
    CACHE_ENV,
    FACT_LM_SIZES,
    cache_key,
    fact_lm,
    fact_lm_cache_dir,
    training_environment,
)
from paper_common.lm.hooks import (
    MLPRecord,
    add_to_residual,
    capture_mlp,
    down_proj_weight,
    logit_lens,
    mlp_down_proj,
    mlp_module,
    residual_stream,
    residual_tokens,
)
from paper_common.lm.models import (
    load_lm,
    load_tokenizer,
    quiet_hf_progress,
    save_lm,
    tiny_causal_lm,
)
from paper_common.lm.pretrained import (
    SMOLLM2_DIST,
    SMOLLM2_GGUF,
    load_pretrained,
    pretrained_cache_key,
    pretrained_info,
    smollm2_gguf_path,
)
from paper_common.lm.scoring import (
    AnswerRanks,
    SampleOutput,
    answer_rank,
    greedy_answer,
    next_token_logprobs,
    sample,
    sequence_logprob,
    token_rank,
)
from paper_common.lm.train import TrainResult, pad_id, train_causal_lm
from paper_common.lm.vocab import SPECIAL_TOKENS, build_tokenizer, fixed_tokenizer

__all__ = [
    "CACHE_ENV",
    "FACT_LM_SIZES",
    "SMOLLM2_DIST",
    "SMOLLM2_GGUF",
    "SPECIAL_TOKENS",
    "AnswerRanks",
    "MLPRecord",
    "SampleOutput",
    "TrainResult",
    "add_to_residual",
    "answer_rank",
    "build_tokenizer",
    "cache_key",
    "capture_mlp",
    "decoder_layers",
    "down_proj_weight",
    "fact_lm",
    "fact_lm_cache_dir",
    "final_norm",
    "fixed_tokenizer",
    "float64_exact",
    "greedy_answer",
    "load_lm",
    "load_pretrained",
    "load_tokenizer",
    "logit_lens",
    "mlp_down_proj",
    "mlp_module",
    "next_token_logprobs",
    "num_layers",
    "pad_id",
    "pretrained_cache_key",
    "pretrained_info",
    "quiet_hf_progress",
    "register_float64_attention",
    "residual_stream",
    "residual_tokens",
    "right_padded",
    "sample",
    "save_lm",
    "sequence_logprob",
    "smollm2_gguf_path",
    "tiny_causal_lm",
    "token_rank",
    "train_causal_lm",
    "training_environment",
]
