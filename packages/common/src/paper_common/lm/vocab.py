"""Tokenizers: word-level or byte-level BPE trained in-process, and the fixed word-level vocabulary
shared by every :class:`paper_common.facts.World`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import cache
from typing import Any, Literal

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
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    texts = list(texts)
    if not texts:
        raise ValueError("build_tokenizer needs at least one text")
    if kind not in ("wordlevel", "bpe"):
        raise ValueError(f"kind must be 'wordlevel' or 'bpe'; got {kind!r}")
    specials = list(SPECIAL_TOKENS.values())
    if kind == "wordlevel":
        tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
        _word_level_parts(tok)
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
    return _wrap(tok)


def _word_level_parts(tok: Any) -> None:
    """The word-level pre-tokenizer and decoder: one token per word and per punctuation mark."""
    from tokenizers import Regex, decoders, pre_tokenizers

    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=False),
            pre_tokenizers.Split(Regex(r"▁?[^\W_]+|▁?[^\w▁]|▁"), behavior="isolated"),
        ]
    )
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")


def _wrap(tok: Any) -> PreTrainedTokenizerFast:
    from tokenizers import processors

    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", bos)]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, padding_side="right", **SPECIAL_TOKENS)


@cache
def _fixed_vocab() -> tuple[str, ...]:
    from tokenizers import Tokenizer, models

    from paper_common.facts import fixed_vocabulary_texts

    probe = Tokenizer(models.WordLevel(vocab={"<unk>": 0}, unk_token="<unk>"))
    _word_level_parts(probe)
    words: set[str] = set()
    for text in fixed_vocabulary_texts():
        words.update(w for w, _ in probe.pre_tokenizer.pre_tokenize_str(text))
    return tuple(sorted(words))


def fixed_tokenizer() -> PreTrainedTokenizerFast:
    """The word-level tokenizer of the fixed vocabulary every :class:`~paper_common.facts.World`
    renders into (template words, pooled names, years, digits), the same ids on every machine:
    the special tokens first, then the words sorted. A model trained with it can be taught any
    World's facts (the shared base model uses it)."""
    from tokenizers import Tokenizer, models

    vocab = {t: i for i, t in enumerate(SPECIAL_TOKENS.values())}
    for w in _fixed_vocab():
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    _word_level_parts(tok)
    return _wrap(tok)
