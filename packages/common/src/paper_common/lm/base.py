"""The suite's shared pretrained base model: a small Llama that already knows every format.

Packages that study what a language model knows (editing, drift probing, verification gaps,
hallucination labels) need a model whose *formats* are learned before their experiment starts, so
that a measurement is about knowledge and not about format learning. The base model is pretrained
once, on a large World (:func:`base_world`) documented as permuted multi-attribute biographies with
heavy-tailed exposure and a documentation lag, with every question format of
:data:`paper_common.facts.FORMATS` trained on its *format* subjects; its *target* subjects appear only
in text, so acceptance is measured on facts the model has only read about. Packages then teach it
*new* entities (``World(..., exclude=base_world())``) within their own time budget.

``make base-lm`` (:func:`train_base_lm`) retrains it from scratch and is resumable (a checkpoint
every few hundred steps); :func:`load_base_lm` loads the committed fp16 weights; :func:`acceptance`
measures the three numbers the committed model must meet (:data:`ACCEPTANCE`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerFast

from paper_common.facts import FORMATS, RELATIONS, World, is_correct
from paper_common.lm.fact_lm import fact_lm_cache_dir, training_environment
from paper_common.lm.models import quiet_hf_progress, save_lm, tiny_causal_lm
from paper_common.lm.scoring import greedy_answer, next_token_logprobs
from paper_common.lm.tracing import causal_trace
from paper_common.lm.train import train_causal_lm
from paper_common.lm.vocab import fixed_tokenizer

__all__ = [
    "ACCEPTANCE",
    "BASE_MODEL",
    "BASE_TRAINING",
    "BASE_WORLD",
    "acceptance",
    "base_lm_dir",
    "base_world",
    "load_base_lm",
    "train_base_lm",
]

log = logging.getLogger("paper_common.lm")

#: The pretraining World: large, heavy-tailed exposure, a two-year documentation lag.
BASE_WORLD: dict[str, Any] = {
    "seed": 46,
    "n_people": 400,
    "n_cities": 120,
    "n_companies": 80,
    "n_countries": 30,
    "target_fraction": 0.4,
    "cue_recall": 0.7,
    "exposure": 1.2,
    "max_exposure": 16,
    "documentation_lag": 2,
}
#: The architecture: Llama, 4 blocks of width 256 (about 4.6M parameters with the fixed vocabulary).
BASE_MODEL: dict[str, Any] = {
    "arch": "llama",
    "n_layers": 4,
    "d_model": 256,
    "n_heads": 8,
    "d_ff": 1024,
    "max_positions": 128,
    "seed": 0,
}
#: The recipe: 40% of each batch text, 60% question formats; cosine decay over all steps.
BASE_TRAINING: dict[str, Any] = {
    "steps": 12000,
    "batch_size": 64,
    "lr": 1e-3,
    "warmup_fraction": 0.02,
    "weight_decay": 0.05,
    "max_length": 96,
    "mixture": (0.4, 0.6),
    "augmentation": 2,
    "seed": 0,
}
#: What the committed model must meet (issue 46): recall at the subject's tokens on at least one
#: relation, True/False and QA on subjects seen only in text.
ACCEPTANCE: dict[str, float] = {"tf_balanced_accuracy": 0.9, "qa_accuracy": 0.8}


def base_world() -> World:
    """The World the base model was pretrained on (exclude it to get new entities)."""
    return World(**BASE_WORLD)


def base_lm_dir() -> Path:
    """Where the committed weights live (inside the installed package)."""
    return Path(__file__).parent / "base_lm"


def _corpus(world: World) -> tuple[list[str], list[tuple[str, str]]]:
    return world.corpus(
        style="biographies",
        augmentation=BASE_TRAINING["augmentation"],
        formats=FORMATS,
        seed=BASE_TRAINING["seed"],
    )


def _recipe_key(texts: list[str], pairs: list[tuple[str, str]]) -> str:
    blob = json.dumps(
        {
            "world": BASE_WORLD,
            "model": BASE_MODEL,
            "training": BASE_TRAINING,
            "data": [texts, pairs],
        },
        sort_keys=True,
        default=list,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def train_base_lm(
    out: str | os.PathLike[str] | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    steps: int | None = None,
    progress: bool | None = None,
) -> dict[str, Any]:
    """Pretrain the base model and save it (fp16) with its acceptance numbers to ``out``.

    Resumable: the run checkpoints to ``checkpoint`` (default ``base_lm.ckpt`` in the suite's cache
    directory, beside :func:`~paper_common.lm.fact_lm_cache_dir`) and picks up
    from it when rerun with the same recipe. ``steps`` overrides the recipe (for a smoke run; the
    checkpoint key includes it). Returns the info written to ``out/base_lm.json``.
    """
    out = Path(out) if out is not None else base_lm_dir()
    if checkpoint is None:
        checkpoint = fact_lm_cache_dir().parent / "base_lm.ckpt"
    checkpoint = Path(checkpoint)
    spec = dict(BASE_TRAINING, **({"steps": steps} if steps is not None else {}))
    world = base_world()
    tok = fixed_tokenizer()
    texts, pairs = _corpus(world)
    model = tiny_causal_lm(tok, **BASE_MODEL)
    key = _recipe_key(texts, pairs)
    log.info("base LM: %d texts, %d pairs, %d steps", len(texts), len(pairs), spec["steps"])
    start = time.perf_counter()
    result = train_causal_lm(
        model,
        tok,
        texts,
        pairs,
        steps=spec["steps"],
        lr=spec["lr"],
        batch_size=spec["batch_size"],
        seed=spec["seed"],
        warmup_fraction=spec["warmup_fraction"],
        weight_decay=spec["weight_decay"],
        max_length=spec["max_length"],
        mixture=spec["mixture"],
        progress=progress,
        checkpoint=checkpoint,
        checkpoint_key=key,
    )
    numbers = acceptance(model, tok, world)
    info = {
        "command": "make base-lm",
        "world": BASE_WORLD,
        "model": BASE_MODEL,
        "training": spec,
        "recipe_key": key,
        "n_params": int(sum(p.numel() for p in model.parameters())),
        "texts": len(texts),
        "pairs": len(pairs),
        "tokens_seen": result.tokens,
        "final_loss": float(np.mean(result.losses[-50:])),
        "seconds_this_session": time.perf_counter() - start,
        "environment": training_environment(),
        "acceptance": numbers,
    }
    save_lm(model.half(), tok, out, info, info_file="base_lm.json")
    return info


def load_base_lm(
    path: str | os.PathLike[str] | None = None, device: torch.device | str | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """The committed base model (float32, eval mode) and its tokenizer; ``ValueError`` saying how
    to train it if the weights are absent."""
    from paper_common.device import pick_device
    from paper_common.lm.models import load_tokenizer

    path = Path(path) if path is not None else base_lm_dir()
    if not (path / "base_lm.json").exists():
        raise ValueError(
            f"no base model at {path}: run `make base-lm` (hours on a CPU) or pass the directory "
            "a previous run wrote"
        )
    with quiet_hf_progress():
        model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32)
    model = model.to(pick_device() if device is None else device).eval()
    model.base_lm_info = json.loads((path / "base_lm.json").read_text())
    return model, load_tokenizer(path)


def acceptance(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerFast,
    world: World | None = None,
    n_trace: int = 24,
    seed: int = 0,
) -> dict[str, Any]:
    """The base model's acceptance numbers on ``world``'s *target* subjects (seen only in text).

    - ``tf_balanced_accuracy``: True/False items (both polarities), " True" vs " False" log-prob.
    - ``qa_accuracy``: greedy answers to the training question template, exact match or alias.
    - ``trace``: per relation whose first template ends with the value, ROME causal tracing of up
      to ``n_trace`` statement prompts the model completes right: the mean largest MLP effect at
      the subject's last token and at the prompt's last token; ``subject_recall`` lists relations
      where the first exceeds the second.
    """
    world = base_world() if world is None else world
    out: dict[str, Any] = {}
    items = world.verification_items("heldout") + world.verification_items("heldout", negated=True)
    lp = next_token_logprobs(model, tok, [v.prompt for v in items])
    t_id, f_id = (tok(w, add_special_tokens=False)["input_ids"][0] for w in (" True", " False"))
    pred = (lp[:, t_id] > lp[:, f_id]).numpy()
    label = np.array([v.label for v in items])
    out["tf_balanced_accuracy"] = float(
        (np.mean(pred[label]) + np.mean(~pred[~label])) / 2
        if label.any() and (~label).any()
        else 0.0
    )
    qa = world.qa_pairs("heldout")
    answers = greedy_answer(model, tok, [q.question for q in qa], max_new_tokens=4)
    correct = np.array([is_correct(a, q) for a, q in zip(answers, qa, strict=True)])
    out["qa_accuracy"] = float(correct.mean())
    exposure = np.array([world.exposure[q.fact.key] for q in qa])
    out["qa_accuracy_by_exposure"] = {
        f"{lo}-{hi}": float(correct[(exposure >= lo) & (exposure <= hi)].mean())
        for lo, hi in ((1, 1), (2, 3), (4, max(4, int(world.config["max_exposure"]))))
        if ((exposure >= lo) & (exposure <= hi)).any()
    }
    out["trace"] = {}
    rng = np.random.default_rng(seed)
    for name, rel in RELATIONS.items():
        template = rel.statements[0]
        if not template.endswith("{v}."):
            continue
        facts = world.facts("heldout", relations=[name])
        prompts = [template[: -len(" {v}.")].format(s=f.subject) for f in facts]
        got = greedy_answer(model, tok, prompts, max_new_tokens=3) if prompts else []
        known = [
            (p, f)
            for p, f, g in zip(prompts, facts, got, strict=True)
            if g.split(".")[0].strip() == f.value
        ]
        if len(known) < 4:
            continue
        pick = [known[int(i)] for i in rng.permutation(len(known))[:n_trace]]
        result = causal_trace(
            model,
            tok,
            [p for p, _ in pick],
            [f.subject for _, f in pick],
            [f.value for _, f in pick],
            window=2,
            seed=seed,
        )
        out["trace"][name] = {
            "n": len(pick),
            "subject_last": float(result.at_subject_last().mean()),
            "last": float(result.at_last().mean()),
        }
    out["subject_recall"] = sorted(
        r for r, v in out["trace"].items() if v["subject_last"] > v["last"]
    )
    out["passes"] = bool(
        out["subject_recall"]
        and out["tf_balanced_accuracy"] >= ACCEPTANCE["tf_balanced_accuracy"]
        and out["qa_accuracy"] >= ACCEPTANCE["qa_accuracy"]
    )
    return out
