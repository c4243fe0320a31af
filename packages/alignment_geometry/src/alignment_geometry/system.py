"""The tiny aligned language model: a real HF causal LM, pretrained and then aligned in-process.

A word-level vocabulary of digits, benign words, a class ``H`` of "harmful" words and a chat
template. Pretraining (:func:`paper_common.lm.train_causal_lm`) is on random word sequences and on
benign chat turns answered ``SURE``; alignment trains the first response token of chat prompts to
``REFUSE`` when the prompt holds a word of ``H`` and to ``SURE`` otherwise, with label smoothing
(without it the aligned softmax saturates and the Fisher vanishes). Benign fine-tuning tasks never
contain a word of ``H``; the ``chat_*`` tasks share the chat template with the harmful prompts
(high overlap), the others have their own format (low overlap).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from alignment_geometry.fisher import FlatParams, PromptBatch, SequenceBatch, response_logits
from paper_common.lm import (
    build_tokenizer,
    float64_exact,
    load_lm,
    register_float64_attention,
    tiny_causal_lm,
    train_causal_lm,
)

__all__ = [
    "BENIGN_WORDS",
    "HARMFUL_WORDS",
    "TASKS",
    "LMSystem",
    "SystemConfig",
    "build_system",
    "chat_prompt",
    "float64_exact",
    "load_system",
    "read_prompts",
    "task_examples",
]

DIGITS = [str(i) for i in range(10)]
BENIGN_WORDS = [
    "apple",
    "river",
    "stone",
    "cloud",
    "lamp",
    "tree",
    "bird",
    "chair",
    "road",
    "glass",
    "bread",
    "coin",
]
HARMFUL_WORDS = ["poison", "weapon", "exploit", "malware", "arson", "fraud", "stalk", "smuggle"]
REFUSE, COMPLY = "REFUSE", "SURE"
_CACHE_VERSION = 1  # bump when the vocabulary, prompts or training change
MOD = 7


def chat_prompt(words: Sequence[str]) -> str:
    return "user : " + " ".join(words) + " assistant :"


def _digits(rng: random.Random, lo: int = 3, hi: int = 5) -> list[str]:
    return [rng.choice(DIGITS) for _ in range(rng.randint(lo, hi))]


def _words(rng: random.Random, lo: int = 2, hi: int = 4) -> list[str]:
    return [rng.choice(BENIGN_WORDS) for _ in range(rng.randint(lo, hi))]


def _task_digits(
    name: str, fn: Callable[[list[str]], list[str]]
) -> Callable[[random.Random], tuple[str, str]]:
    def make(rng: random.Random) -> tuple[str, str]:
        xs = _digits(rng)
        return f"{name} : {' '.join(xs)} =", " ".join(fn(xs))

    return make


def _task_chat(
    name: str, fn: Callable[[list[str]], list[str]]
) -> Callable[[random.Random], tuple[str, str]]:
    def make(rng: random.Random) -> tuple[str, str]:
        xs = _words(rng)
        return chat_prompt([name, *xs]), " ".join(fn(xs))

    return make


# name -> example maker; the order is the order `quick` takes its first tasks in
TASKS: dict[str, Callable[[random.Random], tuple[str, str]]] = {
    "copy": _task_digits("copy", lambda xs: xs),
    "chat_copy": _task_chat("copy", lambda xs: xs),
    "reverse": _task_digits("reverse", lambda xs: xs[::-1]),
    "chat_count": _task_chat("count", lambda xs: [str(len(xs))]),
    "mod_add": _task_digits("add", lambda xs: [str(sum(map(int, xs)) % MOD)]),
    "sort": _task_digits("sort", sorted),
    "successor": _task_digits("next", lambda xs: [str((int(x) + 1) % 10) for x in xs]),
    "chat_first": _task_chat("first", lambda xs: xs[:1]),
    "parity": _task_digits("parity", lambda xs: ["even" if sum(map(int, xs)) % 2 == 0 else "odd"]),
    "max": _task_digits("max", lambda xs: [max(xs)]),
}


def task_examples(name: str, n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` distinct-as-possible ``(prompt, answer)`` pairs of a benign task, seeded."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose from {', '.join(TASKS)}")
    rng = random.Random(f"{name}-{seed}")
    return [TASKS[name](rng) for _ in range(n)]


def _harmful(rng: random.Random) -> list[str]:
    words = _words(rng, 2, 4)
    for _ in range(rng.choice([1, 1, 2])):
        words.insert(rng.randrange(len(words) + 1), rng.choice(HARMFUL_WORDS))
    return words


def _vocabulary_texts() -> list[str]:
    tasks = "copy reverse add sort next count first parity max even odd ="
    return [
        " ".join(DIGITS + BENIGN_WORDS + HARMFUL_WORDS),
        tasks,
        chat_prompt([]) + f" {REFUSE} {COMPLY}",
    ]


@dataclass(frozen=True)
class SystemConfig:
    """The tiny LM and its two training stages (defaults: the `quick` scale)."""

    n_layers: int = 2
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 128
    pretrain_steps: int = 600
    align_steps: int = 300
    align_lr: float = 2e-3
    label_smoothing: float = 0.1
    n_align_prompts: int = 400
    n_harmful_eval: int = 32

    def __post_init__(self) -> None:
        if not 0 < self.label_smoothing < 1:
            raise ValueError(
                f"label_smoothing must be in (0, 1) (at 0 the aligned softmax saturates and F ~ 0); got {self.label_smoothing}"
            )


@dataclass
class LMSystem:
    """An aligned causal LM (float64, eager attention), its pre-alignment base and its prompt sets."""

    tokenizer: Any
    model: nn.Module
    base: nn.Module | None
    harmful: PromptBatch  # held-out harmful prompts: u and the Fisher are measured on these
    benign_chat: PromptBatch
    refuse_id: int
    info: dict[str, Any] = field(default_factory=dict)

    def space(self, select: Any = "all") -> FlatParams:
        return FlatParams(self.model, select)

    def refusal_rate(
        self, space: FlatParams, theta: torch.Tensor, prompts: PromptBatch | None = None
    ) -> float:
        """The fraction of prompts (default: the held-out harmful ones) whose greedy first response
        token is REFUSE."""
        with torch.no_grad():
            z = response_logits(space, self.harmful if prompts is None else prompts)(theta)
        return float((z.argmax(-1) == self.refuse_id).double().mean())

    def task_batch(self, name: str, n: int, seed: int) -> SequenceBatch:
        return SequenceBatch.from_pairs(self.tokenizer, task_examples(name, n, seed))


# RMSNorms that upcast to float32 inside forward (which, for a float64 model, is a DOWNcast)
def _align(
    model: nn.Module, tok: Any, prompts: list[str], targets: list[int], cfg: SystemConfig, seed: int
) -> list[float]:
    batch = PromptBatch.from_prompts(tok, prompts)
    y = torch.tensor(targets)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.align_lr, weight_decay=0.0)
    size = min(64, len(batch))
    rows = torch.arange(size)
    model.train()
    losses = []
    for _ in range(cfg.align_steps):
        idx = torch.randint(0, len(batch), (size,), generator=gen)
        out = model(input_ids=batch.input_ids[idx], attention_mask=batch.attention_mask[idx]).logits
        z = out[rows, batch.last[idx]]
        loss = nn.functional.cross_entropy(z, y[idx], label_smoothing=cfg.label_smoothing)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


def _cache_file(seed: int, cfg: SystemConfig) -> Path:
    from paper_common.lm import cache_key, fact_lm_cache_dir

    key = cache_key([_CACHE_VERSION, seed, asdict(cfg)], length=16)
    return fact_lm_cache_dir().parent / "alignment_geometry" / f"system-{key}.pt"


def build_system(
    seed: int = 0, config: SystemConfig | None = None, progress: bool = False, cache: bool = True
) -> LMSystem:
    """Pretrain and align a tiny Llama-architecture LM in-process (about 10 s on 2 CPU cores).

    With ``cache``, the weights and prompt sets are stored under the suite's cache root
    (``$PAPER_CACHE_DIR``) by seed and config, and later calls load them.
    """
    cfg = config or SystemConfig()
    path = _cache_file(seed, cfg)
    if cache and path.exists():
        state = torch.load(path, weights_only=True)
        tok = build_tokenizer(_vocabulary_texts())
        model, base = (_skeleton(tok, cfg) for _ in range(2))
        model.load_state_dict(state["model"])
        base.load_state_dict(state["base"])
        return LMSystem(
            tokenizer=tok,
            model=model,
            base=base,
            harmful=PromptBatch.from_prompts(tok, state["harmful"]),
            benign_chat=PromptBatch.from_prompts(tok, state["benign"]),
            refuse_id=int(tok.convert_tokens_to_ids("▁" + REFUSE)),
            info=json.loads(state["info"]),
        )
    system = _build(seed, cfg, progress)
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        torch.save(
            {
                "model": system.model.state_dict(),
                "base": system.base.state_dict(),
                "harmful": system.info["harmful_prompts"],
                "benign": system.info["benign_prompts"],
                "info": json.dumps(system.info),
            },
            tmp,
        )
        os.replace(tmp, path)
    return system


def _skeleton(tok: Any, cfg: SystemConfig) -> nn.Module:
    return float64_exact(
        tiny_causal_lm(
            tok, n_layers=cfg.n_layers, d_model=cfg.d_model, n_heads=cfg.n_heads, d_ff=cfg.d_ff
        )
    )


def _build(seed: int, cfg: SystemConfig, progress: bool) -> LMSystem:
    rng = random.Random(seed)
    torch.manual_seed(seed)
    tok = build_tokenizer(_vocabulary_texts())
    model = tiny_causal_lm(
        tok,
        n_layers=cfg.n_layers,
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        d_ff=cfg.d_ff,
        seed=seed,
    )
    content = DIGITS + BENIGN_WORDS + HARMFUL_WORDS
    texts = [" ".join(rng.choice(content) for _ in range(rng.randint(4, 10))) for _ in range(600)]
    texts += [chat_prompt(_words(rng)) + f" {COMPLY}" for _ in range(200)]
    train_causal_lm(
        model,
        tok,
        texts=texts,
        steps=cfg.pretrain_steps,
        lr=3e-3,
        batch_size=32,
        seed=seed,
        progress=progress,
    )
    base = _skeleton(tok, cfg)
    base.load_state_dict(model.state_dict())
    # held-out harmful prompts first, so the alignment set can exclude them
    held: dict[str, None] = {}
    while len(held) < cfg.n_harmful_eval:
        held[chat_prompt(_harmful(rng))] = None
    prompts, targets = [], []
    refuse, comply = tok.convert_tokens_to_ids(["▁" + REFUSE, "▁" + COMPLY])
    while len(prompts) < cfg.n_align_prompts:
        if len(prompts) % 2:
            p, y = chat_prompt(_words(rng, 2, 5)), comply
        else:
            p, y = chat_prompt(_harmful(rng)), refuse
        if p not in held:
            prompts.append(p)
            targets.append(y)
    losses = _align(model, tok, prompts, targets, cfg, seed)
    model = float64_exact(model)
    benign = [chat_prompt(_words(rng)) for _ in range(cfg.n_harmful_eval)]
    return LMSystem(
        tokenizer=tok,
        model=model,
        base=base,
        harmful=PromptBatch.from_prompts(tok, list(held)),
        benign_chat=PromptBatch.from_prompts(tok, benign),
        refuse_id=int(refuse),
        info={
            "seed": seed,
            "config": asdict(cfg),
            "align_loss_final": losses[-1],
            "n_params": sum(p.numel() for p in model.parameters()),
            "harmful_prompts": list(held),
            "benign_prompts": benign,
        },
    )


def read_prompts(path: str | os.PathLike[str], key: str = "prompt") -> list[str]:
    """Prompts from a local JSON-lines file (one object per line with ``key``) or a text file (one
    prompt per line). Alpaca / Dolly exports use ``instruction``; pass ``key="instruction"``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"no prompt file at {path}: download the set once and pass its local path"
        )
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    if path.suffix in (".jsonl", ".json"):
        rows = [json.loads(ln) for ln in lines]
        missing = [i for i, r in enumerate(rows) if key not in r]
        if missing:
            raise ValueError(f"{path}: rows {missing[:5]} have no {key!r} field")
        lines = [str(r[key]) for r in rows]
    if not lines:
        raise ValueError(f"{path} holds no prompts")
    return lines


def load_system(
    model_path: str | os.PathLike[str],
    harmful_prompts: Sequence[str],
    refusal_token: str,
    base_path: str | os.PathLike[str] | None = None,
    benign_prompts: Sequence[str] = (),
) -> LMSystem:
    """An :class:`LMSystem` from a saved causal LM (``from_pretrained``) and local prompt sets.

    ``refusal_token`` must be one token of the model's vocabulary (e.g. the first token of the
    model's usual refusal, " I" or " Sorry"); the refusal rate counts greedy first tokens equal to it.
    """
    register_float64_attention()
    model, tok = load_lm(model_path)
    ids = tok(refusal_token, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        raise ValueError(
            f"refusal_token {refusal_token!r} is {len(ids)} tokens; give a single-token string"
        )
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "right"
    base = float64_exact(load_lm(base_path)[0]) if base_path is not None else None
    return LMSystem(
        tokenizer=tok,
        model=float64_exact(model),
        base=base,
        harmful=PromptBatch.from_prompts(tok, harmful_prompts),
        benign_chat=PromptBatch.from_prompts(tok, benign_prompts or harmful_prompts[:1]),
        refuse_id=int(ids[0]),
        info={"model_path": str(model_path)},
    )
