"""Tokenizers trained in-process: word-level or byte-level BPE."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal

from transformers import PreTrainedTokenizerFast

log = logging.getLogger("paper_common.lm")


SPECIAL_TOKENS = {
    "pad_token": "<pad>",
    "unk_token": "<unk>",
    "bos_token": "<s>",
    "eos_token": "</s>",
}


# ============================================================================ tokenizers
def build_tokenizer(
    texts: Sequence[str],
    kind: Literal["wordlevel", "bpe"] = "wordlevel",
    vocab_size: int = 2000,
    min_frequency: int = 1,
) -> PreTrainedTokenizerFast:
    """Train a tokenizer on ``texts`` in-process and wrap it as a ``PreTrainedTokenizerFast``.

    ``wordlevel``: one token per word and per punctuation mark (a leading-space marker ``▁`` is part
    of each word, so ``" Paris"`` and ``"Paris"`` are the same token and decoding restores spaces);
    every word of ``texts`` is in the vocabulary, ``vocab_size`` is ignored. ``bpe``: byte-level BPE
    (GPT-2 style) with ``vocab_size`` merges target. Both add ``<s>`` in front of every encoded text
    and define ``<pad>``, ``<unk>``, ``<s>``, ``</s>``.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    texts = list(texts)
    if not texts:
        raise ValueError("build_tokenizer needs at least one text")
    if kind not in ("wordlevel", "bpe"):
        raise ValueError(f"kind must be 'wordlevel' or 'bpe'; got {kind!r}")
    specials = list(SPECIAL_TOKENS.values())
    if kind == "wordlevel":
        tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=False),
                pre_tokenizers.Split(Regex(r"▁?[^\W_]+|▁?[^\w▁]|▁"), behavior="isolated"),
            ]
        )
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
        trainer = trainers.WordLevelTrainer(special_tokens=specials, min_frequency=min_frequency)
    else:
        if vocab_size < 300:
            raise ValueError(f"vocab_size must be >= 300 for byte-level BPE; got {vocab_size}")
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
    tok.train_from_iterator(texts, trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", bos)]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, padding_side="right", **SPECIAL_TOKENS)
