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
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

try:
    import filelock
    import torch
    import transformers
    from torch import nn
    from transformers import PreTrainedModel, PreTrainedTokenizerBase, PreTrainedTokenizerFast
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "paper_common.lm needs the 'lm' extra: pip install 'paper-common[lm]' (torch, transformers, "
        "tokenizers, platformdirs)"
    ) from exc

if TYPE_CHECKING:
    from paper_common.facts import World

__all__ = [
    "FACT_LM_SIZES",
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
    "float64_exact",
    "greedy_answer",
    "load_lm",
    "load_tokenizer",
    "logit_lens",
    "mlp_down_proj",
    "mlp_module",
    "next_token_logprobs",
    "num_layers",
    "pad_id",
    "quiet_hf_progress",
    "register_float64_attention",
    "residual_stream",
    "residual_tokens",
    "right_padded",
    "sample",
    "save_lm",
    "sequence_logprob",
    "tiny_causal_lm",
    "token_rank",
    "train_causal_lm",
    "training_environment",
]

log = logging.getLogger(__name__)

SPECIAL_TOKENS = {
    "pad_token": "<pad>",
    "unk_token": "<unk>",
    "bos_token": "<s>",
    "eos_token": "</s>",
}
CACHE_ENV = "PAPER_CACHE_DIR"
_CACHE_VERSION = 1


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


# ============================================================================ training
@dataclass
class TrainResult:
    """Losses per step, tokens seen and wall-clock seconds of a :func:`train_causal_lm` run."""

    losses: list[float]
    tokens: int
    seconds: float

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")


def pad_id(tok: PreTrainedTokenizerBase) -> int:
    """The id to pad with: the tokenizer's pad token, else its eos token."""
    if tok.pad_token_id is not None:
        return int(tok.pad_token_id)
    if tok.eos_token_id is not None:
        return int(tok.eos_token_id)
    raise ValueError("the tokenizer has neither a pad nor an eos token; set tokenizer.pad_token")


def _encode_examples(
    tok: PreTrainedTokenizerBase,
    texts: Sequence[str],
    pairs: Sequence[tuple[str, str]],
    max_length: int,
) -> tuple[list[list[int]], list[int]]:
    """Token ids of each example (with eos) and the index where its loss starts (0: whole text)."""
    eos = [tok.eos_token_id] if tok.eos_token_id is not None else []
    seqs, starts = [], []
    for ids in _encode(tok, list(texts)) if texts else []:
        seqs.append((ids + eos)[:max_length])
        starts.append(1)
    if pairs:
        prompts = _encode(tok, [p for p, _ in pairs])
        answers = tok([a for _, a in pairs], add_special_tokens=False)["input_ids"]
        for p, a in zip(prompts, answers, strict=True):
            seqs.append((p + a + eos)[:max_length])
            starts.append(len(p))
    return seqs, starts


def train_causal_lm(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str] = (),
    pairs: Sequence[tuple[str, str]] = (),
    steps: int = 600,
    lr: float = 3e-3,
    batch_size: int = 32,
    seed: int = 0,
    warmup_fraction: float = 0.05,
    weight_decay: float = 0.01,
    max_length: int = 64,
    progress: bool | None = None,
    schedule: Literal["cosine", "constant", "linear"] = "cosine",
    callback: Callable[[int], Any] | None = None,
    callback_every: int = 0,
) -> TrainResult:
    """Train (or keep training) ``model`` on ``texts`` (loss on every token) and ``(prompt, answer)``
    ``pairs`` (loss on the answer tokens only), with AdamW and a warm-up then ``schedule``
    (``cosine`` decay, ``constant``, or ``linear`` decay to zero).

    Each step draws ``batch_size`` examples uniformly from both, seeded. An eos token ends every
    example. ``callback(step)`` is called, with the model in eval mode, after every
    ``callback_every``-th step (for evaluations during one run, e.g. once per epoch; the optimizer
    and schedule carry on across calls). Returns the per-step losses; the model is left in eval mode
    on its device.
    """
    if not texts and not pairs:
        raise ValueError("train_causal_lm needs texts or pairs")
    for name, value in [("steps", steps), ("batch_size", batch_size), ("max_length", max_length)]:
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int; got {value!r}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0; got {lr}")
    schedulers = {"cosine": "cosine", "constant": "constant_with_warmup", "linear": "linear"}
    if schedule not in schedulers:
        raise ValueError(f"schedule must be one of {', '.join(schedulers)}; got {schedule!r}")
    if callback is not None and (not isinstance(callback_every, int) or callback_every < 1):
        raise ValueError(
            f"callback_every must be a positive int with a callback; got {callback_every!r}"
        )
    device = _device(model)
    seqs, starts = _encode_examples(tokenizer, texts, pairs, max_length)
    n, width = len(seqs), max(len(s) for s in seqs)
    pad = pad_id(tokenizer)
    ids = torch.full((n, width), pad, dtype=torch.long)
    labels = torch.full((n, width), -100, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    for i, (s, start) in enumerate(zip(seqs, starts, strict=True)):
        ids[i, : len(s)] = torch.tensor(s)
        labels[i, start : len(s)] = torch.tensor(s[start:])
        mask[i, : len(s)] = 1
    lengths = mask.sum(1)
    gen = torch.Generator().manual_seed(seed)
    optim = torch.optim.AdamW(
        model.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.98)
    )
    sched = transformers.get_scheduler(
        schedulers[schedule], optim, max(1, int(warmup_fraction * steps)), steps
    )
    model.train()
    losses, tokens = [], 0
    start = time.perf_counter()
    show = sys.stderr.isatty() if progress is None else progress
    from tqdm.auto import tqdm

    with tqdm(range(steps), desc="train", disable=not show, leave=False) as bar:
        for _ in bar:
            idx = torch.randint(0, n, (batch_size,), generator=gen)
            w = int(lengths[idx].max())
            b_ids, b_mask, b_lab = (t[idx, :w].to(device) for t in (ids, mask, labels))
            out = model(input_ids=b_ids, attention_mask=b_mask, labels=b_lab)
            optim.zero_grad(set_to_none=True)
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optim.step()
            sched.step()
            losses.append(float(out.loss.detach()))
            tokens += int(b_mask.sum())
            bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
            if callback is not None and len(losses) % callback_every == 0:
                model.eval()
                callback(len(losses))
                model.train()
    model.eval()
    return TrainResult(losses, tokens, time.perf_counter() - start)


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
    tokenizer_kind: Literal["wordlevel", "bpe"] = "wordlevel",
    steps: int | None = None,
    history: bool = True,
    cues: bool = True,
    cache: bool = True,
    progress: bool | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """A model that has memorised ``world``'s facts (true at ``cutoff``, default the last year).

    Trained on ``world.corpus(cutoff)``: statements of every fact, QA and True/False items of the
    format facts (see :mod:`paper_common.facts`). The tokenizer covers every text the world can
    render, so snapshots of one world at several cutoffs share a vocabulary. Cached under
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
    # the texts themselves, so a change to the templates or the corpus recipe trains anew
    texts, pairs = world.corpus(cutoff, history=history, cues=cues)
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
    tok = build_tokenizer(world.vocabulary_texts(), kind=config["tokenizer"])
    texts, pairs = world.corpus(config["cutoff"], history=config["history"], cues=config["cues"])
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


# ============================================================================ scoring
def next_token_logprobs(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    batch_size: int = 64,
) -> torch.Tensor:
    """Log-probabilities of the next token after each prompt: ``(n_prompts, vocab)``, float32, on CPU."""
    prompts = _check_prompts(prompts)
    device, pad = _device(model), pad_id(tok)
    seqs = _prompt_ids(tok, prompts)
    out = []
    with _eval(model):
        for sl in _batches(len(seqs), batch_size):
            ids, mask, lengths = right_padded(seqs[sl], pad, device)
            logits = model(input_ids=ids, attention_mask=mask).logits
            last = logits[torch.arange(len(lengths), device=device), lengths - 1]
            out.append(torch.log_softmax(last.float(), dim=-1).cpu())
    return torch.cat(out)


def token_rank(logprobs: torch.Tensor | np.ndarray, token_ids: Any) -> torch.Tensor | np.ndarray:
    """Rank of ``token_ids[i]`` in row ``i`` of ``logprobs`` (``(n, vocab)``): 1 = the top token.

    Ties count in the token's favour (rank = 1 + number of strictly higher tokens). A NaN score
    ranks below everything: a token whose own score is NaN gets the last rank, and a NaN elsewhere
    in the row counts as higher (a diverged model never ranks an answer first). Returns the same
    array type as ``logprobs``.
    """
    is_numpy = isinstance(logprobs, np.ndarray)
    lp = torch.as_tensor(logprobs)
    ids = torch.as_tensor(np.asarray(token_ids) if not torch.is_tensor(token_ids) else token_ids)
    if lp.ndim != 2:
        raise ValueError(f"logprobs must be (n, vocab); got shape {tuple(lp.shape)}")
    ids = ids.reshape(-1).long().to(lp.device)
    if ids.numel() != lp.shape[0]:
        raise ValueError(f"need one token id per row: {lp.shape[0]} rows, {ids.numel()} ids")
    if ids.numel() and (ids.min() < 0 or ids.max() >= lp.shape[1]):
        raise ValueError(f"token ids must be in [0, {lp.shape[1]})")
    target = lp.gather(1, ids[:, None])
    higher = (lp > target) | lp.isnan() | target.isnan()
    higher.scatter_(1, ids[:, None], False)  # the token itself
    ranks = 1 + higher.sum(1)
    return ranks.numpy() if is_numpy else ranks


def sequence_logprob(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    continuations: Sequence[str],
    batch_size: int = 64,
    reduction: Literal["sum", "mean", "none"] = "sum",
) -> torch.Tensor | list[torch.Tensor]:
    """Log-probability of each continuation given its prompt, summed (or averaged) over its tokens.

    ``reduction="none"`` returns a list of per-token log-prob tensors. Continuations are used as
    given (include the leading space a BPE tokenizer needs, e.g. ``" Paris"``).
    """
    prompts = _check_prompts(prompts)
    continuations = _check_prompts(continuations, "continuations")
    _check_pair(prompts, continuations, "prompts", "continuations")
    if reduction not in ("sum", "mean", "none"):
        raise ValueError(f"reduction must be 'sum', 'mean' or 'none'; got {reduction!r}")
    device, pad = _device(model), pad_id(tok)
    p_ids = _prompt_ids(tok, prompts)
    c_ids = tok(continuations, add_special_tokens=False)["input_ids"]
    if any(len(c) == 0 for c in c_ids):
        raise ValueError("a continuation encodes to zero tokens")
    seqs = [p + c for p, c in zip(p_ids, c_ids, strict=True)]
    per_token: list[torch.Tensor] = []
    with _eval(model):
        for sl in _batches(len(seqs), batch_size):
            ids, mask, _ = right_padded(seqs[sl], pad, device)
            logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), -1)
            tok_lp = logp[:, :-1].gather(-1, ids[:, 1:, None])[..., 0].cpu()
            for j, (p, c) in enumerate(zip(p_ids[sl], c_ids[sl], strict=True)):
                per_token.append(tok_lp[j, len(p) - 1 : len(p) - 1 + len(c)])
    if reduction == "none":
        return per_token
    stat = torch.stack([t.sum() if reduction == "sum" else t.mean() for t in per_token])
    return stat


@dataclass
class AnswerRanks:
    """Ranks of each true answer: of its first token in the vocabulary (1 = top) and, when
    candidates were given, of its whole-sequence log-prob among them (1 = most likely)."""

    first_token_rank: np.ndarray
    first_token_id: np.ndarray
    answer_logprob: np.ndarray
    sequence_rank: np.ndarray | None = None
    candidate_logprobs: list[np.ndarray] | None = field(default=None, repr=False)


def _with_space(text: str) -> str:
    return text if text[:1].isspace() else " " + text


def answer_rank(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    answers: Sequence[str],
    candidates: Sequence[str] | Sequence[Sequence[str]] | None = None,
    prefix_space: bool = True,
    batch_size: int = 64,
) -> AnswerRanks:
    """Where each (possibly multi-token) answer ranks after its prompt.

    ``candidates``: one list shared by all prompts or one list per prompt; the answer is added if
    missing. With ``prefix_space`` a leading space is added to answers and candidates that lack
    one (answers follow ``"A:"``).
    """
    prompts = _check_prompts(prompts)
    answers = _check_prompts(answers, "answers")
    _check_pair(prompts, answers, "prompts", "answers")
    fix = _with_space if prefix_space else (lambda s: s)
    answers = [fix(a) for a in answers]
    first = [ids[0] for ids in tok(answers, add_special_tokens=False)["input_ids"]]
    lp = next_token_logprobs(model, tok, prompts, batch_size)
    ranks = token_rank(lp, torch.tensor(first))
    ans_lp = sequence_logprob(model, tok, prompts, answers, batch_size)
    result = AnswerRanks(ranks.numpy(), np.asarray(first), ans_lp.numpy())
    if candidates is None:
        return result
    cands = list(candidates)
    if cands and isinstance(cands[0], str):
        per_prompt = [list(cands)] * len(prompts)
    else:
        per_prompt = [list(c) for c in cands]
        _check_pair(prompts, per_prompt, "prompts", "candidates")
    flat_p, flat_c, owner = [], [], []
    for i, (prompt, answer, cs) in enumerate(zip(prompts, answers, per_prompt, strict=True)):
        cs = [fix(c) for c in cs]
        for c in dict.fromkeys([answer, *cs]):
            if c == answer:
                continue
            flat_p.append(prompt)
            flat_c.append(c)
            owner.append(i)
    owner_arr = np.asarray(owner, dtype=int)
    cand_lp = (
        sequence_logprob(model, tok, flat_p, flat_c, batch_size).numpy() if flat_p else np.zeros(0)
    )
    own = result.answer_logprob[owner_arr]
    beats = (cand_lp > own) | np.isnan(cand_lp) | np.isnan(own)  # NaN never ranks the answer up
    higher = np.bincount(owner_arr, weights=beats, minlength=len(prompts))
    result.sequence_rank = 1 + higher.astype(int)
    result.candidate_logprobs = [cand_lp[owner_arr == i] for i in range(len(prompts))]
    return result


def _generate(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: list[str],
    **kwargs: Any,
) -> tuple[Any, int]:
    """``model.generate`` on left-padded prompts; returns the output and the prompt width."""
    device, pad = _device(model), pad_id(tok)
    seqs = _prompt_ids(tok, prompts)
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, width - len(s) :] = torch.tensor(s)
        mask[i, width - len(s) :] = 1
    with _eval(model):
        out = model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            pad_token_id=pad,
            eos_token_id=tok.eos_token_id,
            **kwargs,
        )
    return out, width


def _cut_at_eos(ids: torch.Tensor, eos: int | None) -> torch.Tensor:
    if eos is None:
        return ids
    hits = (ids == eos).nonzero()
    return ids[: int(hits[0]) + 1] if len(hits) else ids


def greedy_answer(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    max_new_tokens: int = 8,
    batch_size: int = 64,
) -> list[str]:
    """Greedy continuation of each prompt, decoded without special tokens and stripped (continuation only).

    Generation stops at the eos token or after ``max_new_tokens``.
    """
    prompts = _check_prompts(prompts)
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1; got {max_new_tokens}")
    texts = []
    for sl in _batches(len(prompts), batch_size):
        out, width = _generate(
            model, tok, prompts[sl], max_new_tokens=max_new_tokens, do_sample=False
        )
        for row in out[:, width:].cpu():
            texts.append(
                tok.decode(_cut_at_eos(row, tok.eos_token_id), skip_special_tokens=True).strip()
            )
    return texts


@dataclass
class SampleOutput:
    """``n`` samples per prompt: ``texts[i][j]``, their new ``token_ids[i][j]`` (up to and including
    eos) and the per-token ``logprobs[i][j]`` under the sampling distribution (after temperature)."""

    texts: list[list[str]]
    token_ids: list[list[torch.Tensor]]
    logprobs: list[list[torch.Tensor]]


def sample(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    n: int = 4,
    temperature: float = 1.0,
    max_new_tokens: int = 16,
    seed: int = 0,
    batch_size: int = 64,
) -> SampleOutput:
    """Sample ``n`` continuations per prompt (pure sampling: no top-k/top-p), seeded.

    Seeding uses a forked torch RNG, so the global random state is left as it was.
    """
    prompts = _check_prompts(prompts)
    if n < 1 or max_new_tokens < 1:
        raise ValueError(f"n and max_new_tokens must be >= 1; got {n}, {max_new_tokens}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 (use greedy_answer for 0); got {temperature}")
    texts: list[list[str]] = []
    token_ids: list[list[torch.Tensor]] = []
    logprobs: list[list[torch.Tensor]] = []
    device = _device(model)
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        for sl in _batches(len(prompts), max(1, batch_size // n)):
            out, width = _generate(
                model,
                tok,
                prompts[sl],
                max_new_tokens=max_new_tokens,
                do_sample=True,
                temperature=temperature,
                top_k=0,
                top_p=1.0,
                num_return_sequences=n,
                output_scores=True,
                return_dict_in_generate=True,
            )
            scores = model.compute_transition_scores(
                out.sequences, out.scores, normalize_logits=True
            )
            new = out.sequences[:, width:].cpu()
            scores = scores.cpu()
            for i in range(new.shape[0] // n):
                row_t, row_ids, row_lp = [], [], []
                for j in range(n):
                    k = i * n + j
                    ids = _cut_at_eos(new[k], tok.eos_token_id)
                    row_ids.append(ids)
                    row_lp.append(scores[k, : len(ids)].float())
                    row_t.append(tok.decode(ids, skip_special_tokens=True).strip())
                texts.append(row_t)
                token_ids.append(row_ids)
                logprobs.append(row_lp)
    return SampleOutput(texts, token_ids, logprobs)


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
