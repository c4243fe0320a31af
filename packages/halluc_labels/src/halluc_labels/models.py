"""Our own generators, judges and NLI classifier: tiny real transformers trained on a World.

All share one word-level tokenizer (:func:`world_tokenizer`) that covers every text the World, the
answer styles and the judge prompts can produce. Each model reads the World's statements (what it
knows) and is tuned on *format* facts only, then used on held-out facts (the World's format split):

- a **generator** (:class:`GeneratorSpec`) answers "Q: ... A:" in a mix of styles: short, a full
  sentence, verbose (an extra claim), an alias, an abstention; its cutoff year sets what it knows;
- a **judge** (:class:`JudgeSpec`) answers :func:`halluc_labels.labelers.judge_prompt` (the compact
  forms of every prompt variant, JSON label 0 / 1) on answers where the two criteria *agree*
  (:func:`agreeing`), the same label under every prompt, and the plain questions too, so what it
  knows can be checked; ``knowledge`` < 1 drops the statements of some held-out subjects. It never
  sees a label that tells faithfulness from correctness;
- the **NLI classifier** (:class:`NLISpec`) is a Llama sequence classifier on premise "reference."
  and hypothesis "answer", tuned on the same agreeing answers: entailment (the reference's answer),
  contradiction (another entity) or neutral (an abstention or an extra false claim).

Trained models are cached on disk (``$PAPER_CACHE_DIR/halluc_labels``) by a hash of the World and
the spec, and loaded back with ``from_pretrained``.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
import transformers
from transformers import PreTrainedTokenizerFast

from halluc_labels.data import (
    ABSTAIN,
    DATASETS,
    AliasBook,
    LabeledAnswer,
    QAExample,
    _valid_answers,
    controlled_answers,
    make_examples,
)
from halluc_labels.labelers import PROMPTS, judge_prompt, nli_premise
from paper_common.facts import RELATIONS, World
from paper_common.lm import (
    build_tokenizer,
    cache_key,
    fact_lm_cache_dir,
    load_lm,
    load_tokenizer,
    quiet_hf_progress,
    save_lm,
    tiny_causal_lm,
    train_causal_lm,
)

__all__ = [
    "NLI_LABELS",
    "STYLES",
    "GeneratorSpec",
    "JudgeSpec",
    "NLISpec",
    "agreeing",
    "cache_dir",
    "judge_pairs",
    "nli_label",
    "style_answer",
    "train_model",
    "world_tokenizer",
]

STYLES = ("short", "sentence", "verbose", "alias", "abstain")
NLI_LABELS = {0: "entailment", 1: "neutral", 2: "contradiction"}
_NEUTRAL_TYPES = {"abstention", "verbose_correct", "extra_false", "over_specific", "unlisted_alias"}


@dataclass(frozen=True)
class GeneratorSpec:
    """A generator: architecture and size, seed, the cutoff year of its knowledge, its style mix
    (weights of :data:`STYLES`)."""

    name: str
    arch: Literal["llama", "qwen2", "gpt2"] = "llama"
    d_model: int = 64
    n_layers: int = 2
    seed: int = 0
    cutoff: int | None = None
    styles: tuple[float, ...] = (0.5, 0.2, 0.15, 0.1, 0.05)
    steps: int = 1200
    lr: float = 3e-3
    batch_size: int = 32


@dataclass(frozen=True)
class JudgeSpec:
    """A judge: architecture and size, seed, and the share of held-out subjects it read about."""

    name: str
    arch: Literal["llama", "qwen2", "gpt2"] = "llama"
    d_model: int = 64
    n_layers: int = 2
    seed: int = 0
    knowledge: float = 1.0
    steps: int = 1500
    lr: float = 3e-3
    batch_size: int = 32


@dataclass(frozen=True)
class NLISpec:
    """The reference-entailment classifier (a Llama sequence classifier)."""

    name: str = "nli"
    d_model: int = 64
    n_layers: int = 2
    seed: int = 0
    steps: int = 500
    lr: float = 2e-3
    batch_size: int = 32


def cache_dir() -> Path:
    """Where trained models are cached: next to ``paper_common``'s fact LMs."""
    return fact_lm_cache_dir().parent / "halluc_labels"


# --------------------------------------------------------------------- texts
def _examples(world: World, split: str, seed: int, t_query: int | None = None) -> list[QAExample]:
    return [
        e
        for ds in DATASETS
        for e in make_examples(world, ds, split=split, seed=seed, t_query=t_query)
    ]


def _truth(world: World, ex: QAExample, t: int) -> str:
    if ex.relation.startswith("inverse:"):
        valid = _valid_answers(world, ex.relation[8:], ex.subject, t)
        return ex.reference if ex.reference in valid else (valid[0] if valid else ex.reference)
    return world.value_at(ex.subject, ex.relation, t)


def style_answer(
    world: World, book: AliasBook, ex: QAExample, style: str, t: int | None = None
) -> str:
    """The true answer (at year ``t``, default the query year) to ``ex`` in one of :data:`STYLES`."""
    if style not in STYLES:
        raise ValueError(f"style must be one of {', '.join(STYLES)}; got {style!r}")
    t = ex.t_query if t is None else t
    truth = _truth(world, ex, t)
    kind = world.entity_type[truth]
    if style == "abstain":
        return ABSTAIN
    if style == "alias":
        return (world.aliases(truth) or (book.aka[truth],))[0]
    if style == "sentence":
        if ex.relation.startswith("inverse:"):
            return RELATIONS[ex.relation[8:]].statements[0].format(s=truth, v=ex.subject)
        return RELATIONS[ex.relation].statements[0].format(s=ex.subject, v=truth)
    if style == "verbose":
        extra = {"city": "located_in", "person": "lives_in", "company": "headquartered_in"}.get(
            kind, "capital_of"
        )
        if ex.relation.startswith("inverse:") and ex.relation[8:] == extra:
            return truth
        value = world.value_at(truth, extra, t)
        return f"{truth}. " + RELATIONS[extra].statements[0].format(s=truth, v=value)
    return truth


def agreeing(answers: list[LabeledAnswer]) -> list[LabeledAnswer]:
    """The answers on which the two criteria agree (both say hallucinated, or neither): the only
    labelled answers judges and the NLI model are tuned on, so neither learns from a label that
    tells faithfulness from correctness (the claims about which criterion they apply are then
    measured, not built in)."""
    return [a for a in answers if a.correct is not None and a.correct == a.faithful]


def judge_pairs(
    answers: list[LabeledAnswer],
    rng: np.random.Generator,
    prompts: tuple[str, ...] = tuple(PROMPTS),
    compact: bool = True,
) -> list[tuple[str, str]]:
    """(judge prompt, " 0"/" 1") pairs under every prompt of ``prompts`` for the answers on which
    the two criteria agree (:func:`agreeing`; 1 = hallucination): the same verdict under every
    prompt, so the prompt carries no label information. Per prompt the rarer verdict is resampled
    up to the count of the other."""
    pairs = []
    for prompt in prompts:
        by_verdict: dict[bool, list[tuple[str, str]]] = {True: [], False: []}
        for a in agreeing(answers):
            halluc = not a.correct
            text = judge_prompt(
                a.example.question,
                a.example.references,
                a.answer,
                prompt,
                show_question=bool(rng.random() < 0.7),
                compact=compact,
            )
            by_verdict[halluc].append((text, " 1" if halluc else " 0"))
        n = max(len(v) for v in by_verdict.values())
        for group in by_verdict.values():
            if group:
                extra = rng.integers(0, len(group), size=n - len(group))
                pairs += group + [group[i] for i in extra]
    return pairs


def nli_label(answer: LabeledAnswer) -> int:
    """Entailment (0) when the reference backs the answer's claims, neutral (1) for an
    abstention, an extra claim or an unlisted alias (the reference alone cannot tell), else
    contradiction (2): another entity."""
    if answer.answer_type == "abstention":
        return 1
    if answer.faithful:
        return 0
    return 1 if answer.answer_type in _NEUTRAL_TYPES else 2


def world_tokenizer(world: World, book: AliasBook | None = None) -> PreTrainedTokenizerFast:
    """One word-level tokenizer for every model of ``world``: World texts, "also known as"
    sentences, every question, styled answer and judge prompt (with the Unsure option)."""
    book = book or AliasBook(world)
    texts = world.vocabulary_texts() + book.statements() + [ABSTAIN, "Yes No Unsure"]
    examples = _examples(world, "all", 0)
    texts += [e.prompt for e in examples]
    answers = controlled_answers(world, examples, book=book)
    texts += [a.answer for a in answers]
    texts += [
        judge_prompt(e.question, e.references, ABSTAIN, p, True, True, compact)
        for e in examples[:3]
        for p in PROMPTS
        for compact in (False, True)
    ]
    texts += [s.format(s="x") for s in ("{s}.", "{s} (also: {s}, {s}).")]
    return build_tokenizer(texts)


# --------------------------------------------------------------------- training
def _knowledge_texts(
    world: World, book: AliasBook, t: int | None, keep: float, seed: int
) -> list[str]:
    statements = world.statements("train", t)
    if keep < 1.0:
        rng = np.random.default_rng([world.seed, seed, 11])
        dropped = {s for s in sorted(world.target_subjects) if rng.random() >= keep}
        statements = [s for s in statements if s.fact.subject not in dropped]
    return [s.text for s in statements] + book.statements()


def _generator_data(world: World, book: AliasBook, spec: GeneratorSpec) -> tuple[list[str], list]:
    t = spec.cutoff if spec.cutoff is not None else world.end_year
    texts = _knowledge_texts(world, book, t, 1.0, spec.seed)
    rng = np.random.default_rng([world.seed, spec.seed, 13])
    weights = np.asarray(spec.styles, dtype=float)
    if weights.shape != (len(STYLES),) or weights.min() < 0 or weights.sum() <= 0:
        raise ValueError(f"styles needs {len(STYLES)} non-negative weights; got {spec.styles}")
    pairs = []
    for ex in _examples(world, "train", spec.seed, t_query=t):
        for style in rng.choice(STYLES, size=2, p=weights / weights.sum()):
            pairs.append((ex.prompt, " " + style_answer(world, book, ex, str(style), t)))
    return texts, pairs


def _judge_data(world: World, book: AliasBook, spec: JudgeSpec) -> tuple[list[str], list]:
    texts = _knowledge_texts(world, book, None, spec.knowledge, spec.seed)
    rng = np.random.default_rng([world.seed, spec.seed, 14])
    train = _examples(world, "train", spec.seed)
    pairs = judge_pairs(controlled_answers(world, train, seed=spec.seed, book=book), rng)
    pairs += [(ex.prompt, " " + style_answer(world, book, ex, "short")) for ex in train]
    return texts, pairs


def _nli_data(
    world: World, book: AliasBook, spec: NLISpec
) -> tuple[list[str], list[str], list[int]]:
    train = _examples(world, "train", spec.seed)
    answers = agreeing(controlled_answers(world, train, seed=spec.seed, book=book))
    prem = [nli_premise(a.example.question, a.example.references) for a in answers]
    return prem, [a.answer for a in answers], [nli_label(a) for a in answers]


def _train_nli(tok: Any, spec: NLISpec, data: tuple[list[str], list[str], list[int]]) -> Any:
    prem, hyp, labels = data
    y = torch.tensor(labels)
    config = transformers.LlamaConfig(
        vocab_size=len(tok),
        hidden_size=spec.d_model,
        intermediate_size=4 * spec.d_model,
        num_hidden_layers=spec.n_layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=128,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        num_labels=3,
        id2label=NLI_LABELS,
        label2id={v: k for k, v in NLI_LABELS.items()},
    )
    torch.manual_seed(spec.seed)
    model = transformers.LlamaForSequenceClassification(config)
    enc = tok(prem, hyp, padding=True, return_tensors="pt")
    optim = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.01)
    sched = transformers.get_cosine_schedule_with_warmup(optim, spec.steps // 20, spec.steps)
    gen = torch.Generator().manual_seed(spec.seed)
    lengths = enc["attention_mask"].sum(1)
    model.train()
    # classes drawn equally often: entailment is the rare one
    weights = (1.0 / torch.bincount(y, minlength=3).clamp(min=1).float())[y]
    for _ in range(spec.steps):
        idx = torch.multinomial(weights, spec.batch_size, replacement=True, generator=gen)
        w = int(lengths[idx].max())
        out = model(
            input_ids=enc["input_ids"][idx, :w],
            attention_mask=enc["attention_mask"][idx, :w],
            labels=y[idx],
        )
        optim.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        sched.step()
    return model.eval()


def train_model(
    world: World,
    spec: GeneratorSpec | JudgeSpec | NLISpec,
    tokenizer: PreTrainedTokenizerFast | None = None,
    cache: bool = True,
    progress: bool | None = False,
) -> tuple[Any, PreTrainedTokenizerFast]:
    """Train (or load from the cache) the model ``spec`` describes; returns ``(model, tokenizer)``."""
    if not isinstance(spec, GeneratorSpec | JudgeSpec | NLISpec):
        raise TypeError(
            f"spec must be a GeneratorSpec, JudgeSpec or NLISpec; got {type(spec).__name__}"
        )
    if isinstance(spec, JudgeSpec) and not 0.0 <= spec.knowledge <= 1.0:
        raise ValueError(f"knowledge must be in [0, 1]; got {spec.knowledge}")
    book = AliasBook(world)
    tok = tokenizer or world_tokenizer(world, book)
    if isinstance(spec, NLISpec):
        data: Any = _nli_data(world, book, spec)
    else:
        make = _generator_data if isinstance(spec, GeneratorSpec) else _judge_data
        data = make(world, book, spec)
    # the key names everything that makes the model: the spec, the World, the tokenizer's
    # vocabulary and the training data itself (so a change to a template or a data recipe trains
    # anew instead of loading a model made from other texts)
    config = {
        "kind": type(spec).__name__,
        "spec": asdict(spec),
        "world": world.fingerprint(),
        "vocab": _digest(sorted(tok.get_vocab().items())),
        "data": _digest(data),
        "v": 3,
    }
    path = cache_dir() / cache_key(config)
    if cache and (path / "info.json").exists():
        return _load(path, spec, tok)
    start = time.perf_counter()
    if isinstance(spec, NLISpec):
        model = _train_nli(tok, spec, data)
    else:
        texts, pairs = data
        model = tiny_causal_lm(tok, spec.arch, spec.n_layers, spec.d_model, 4, seed=spec.seed)
        train_causal_lm(
            model,
            tok,
            texts,
            pairs,
            steps=spec.steps,
            lr=spec.lr,
            batch_size=spec.batch_size,
            seed=spec.seed,
            max_length=96,
            progress=progress,
        )
    info = {**config, "seconds": time.perf_counter() - start}
    model.info = info
    if cache:
        save_lm(model, tok, path, info)
    return model, tok


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, default=list).encode()).hexdigest()[:16]


def _load(path: Path, spec: Any, expected: Any) -> tuple[Any, PreTrainedTokenizerFast]:
    with quiet_hf_progress():
        if isinstance(spec, NLISpec):
            model = transformers.AutoModelForSequenceClassification.from_pretrained(path).eval()
            tok = load_tokenizer(path)
        else:
            model, tok = load_lm(path)
    if tok.get_vocab() != expected.get_vocab():
        raise RuntimeError(
            f"the cached model at {path} was saved with another vocabulary than the tokenizer "
            "passed in (the cache key hashes it, so the cache is corrupt): delete that folder"
        )
    model.info = json.loads((path / "info.json").read_text())
    return model, tok
