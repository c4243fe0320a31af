"""A synthetic agent language, six skills on it, and the frozen tiny LM trained on it.

A context describes an agent's state and ends where the next action is written::

    note note note note east rock hammer fresh plain right :

(goal ``east``/``west``/``here``, path ``rock``/``clear``, tool ``hammer``/``none``, energy
``fresh``/``tired``, register ``plain``/``formal``, the last action ``left``/``right``/``use``)

and the continuation is the action (``left``, ``right``, ``use``, ``stop``, ``again``), preceded by
``kindly`` in formal mode. The policy that writes the training texts is stochastic (each rule fires
with a probability), so the LM learns a graded next-token distribution and every skill has room to
move it. The four ``note`` fillers precede half the training texts: they are the positions a soft
prefix replaces.

A :class:`Skill` is what a realization needs on any model: its target tokens (the objective is their
log-probability) and contrast prompts (contexts where the skill's action is / is not what comes
next) for the CAA direction. :func:`agent_skills` builds the six skills of the language.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "ACTIONS",
    "SKILL_NAMES",
    "AgentLanguage",
    "Skill",
    "TaskConfig",
    "TaskSpec",
    "agent_skills",
    "agent_task",
    "build_task_lm",
    "check_targets",
    "load_task_spec",
]

ACTIONS = ("left", "right", "use", "stop", "again")
SKILL_NAMES = ("go_left", "go_right", "use_tool", "stop_early", "repeat", "formal")
_TARGETS = {
    "go_left": ["left"],
    "go_right": ["right"],
    "use_tool": ["use"],
    "stop_early": ["stop"],
    "repeat": ["again"],
    "formal": ["kindly"],
}
FILLER = "note"
GOALS = ("east", "west", "here")
N_FILLER = 4


@dataclass(frozen=True)
class Skill:
    """A skill on a language model.

    Attributes:
        name: a label.
        targets: the tokens (words, each one token of the tokenizer) whose next-token log-probability
            the skill raises: ``O_s = log sum_{t in targets} p(t | context)``.
        positive: contexts where the skill's behaviour is what comes next.
        negative: contexts where it is not (paired with ``positive`` by index for the principal
            components of the differences; the lists may differ in length, the pairing then cycles).
    """

    name: str
    targets: tuple[str, ...]
    positive: tuple[str, ...]
    negative: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.targets:
            raise ValueError(f"skill {self.name!r} needs at least one target token")
        if len(self.positive) < 2 or len(self.negative) < 2:
            raise ValueError(
                f"skill {self.name!r} needs >= 2 positive and >= 2 negative contexts; got "
                f"{len(self.positive)} and {len(self.negative)}"
            )


@dataclass(frozen=True)
class State:
    goal: str
    rock: bool
    hammer: bool
    tired: bool
    formal: bool
    last: str


class AgentLanguage:
    """The agent language: states, contexts and the stochastic policy that writes actions."""

    def __init__(self, p_rule: float = 0.75) -> None:
        if not 0.5 <= p_rule <= 1.0:
            raise ValueError(f"p_rule must be in [0.5, 1]; got {p_rule}")
        self.p_rule = p_rule

    def state(self, rng: np.random.Generator) -> State:
        return State(
            goal=str(rng.choice(GOALS, p=[0.4, 0.4, 0.2])),
            rock=bool(rng.random() < 0.4),
            hammer=bool(rng.random() < 0.5),
            tired=bool(rng.random() < 0.25),
            formal=bool(rng.random() < 0.3),
            last=str(rng.choice(ACTIONS[:3])),
        )

    @staticmethod
    def context(s: State, filler: bool = True) -> str:
        head = " ".join([FILLER] * N_FILLER) + " " if filler else ""
        return (
            f"{head}{s.goal} {'rock' if s.rock else 'clear'} {'hammer' if s.hammer else 'none'} "
            f"{'tired' if s.tired else 'fresh'} {'formal' if s.formal else 'plain'} {s.last} :"
        )

    def action_probs(self, s: State) -> dict[str, float]:
        """The policy's distribution over the next action (before the formal prefix)."""
        p = self.p_rule
        base = {"east": "right", "west": "left", "here": "stop"}[s.goal]
        probs = dict.fromkeys(ACTIONS, 0.0)
        rest = 1.0
        if s.rock and s.hammer:  # clear the rock first
            probs["use"] += p * rest
            rest *= 1 - p
        if s.tired:
            probs["stop"] += 0.6 * rest
            rest *= 0.4
        if s.last == base and not s.rock:  # keep going: say "again"
            probs["again"] += 0.5 * rest
            rest *= 0.5
        probs[base] += p * rest
        for a in ACTIONS:  # the remainder spread over every action
            probs[a] += (1 - p) * rest / len(ACTIONS)
        return probs

    def sample_text(self, rng: np.random.Generator) -> str:
        s = self.state(rng)
        probs = self.action_probs(s)
        action = str(rng.choice(ACTIONS, p=np.array([probs[a] for a in ACTIONS])))
        formal = "kindly " if s.formal and rng.random() < self.p_rule else ""
        return f"{self.context(s, filler=bool(rng.random() < 0.5))} {formal}{action} ."

    def texts(self, n: int, seed: int) -> list[str]:
        rng = np.random.default_rng(seed)
        return [self.sample_text(rng) for _ in range(n)]

    def contexts(self, n: int, seed: int) -> list[str]:
        """``n`` evaluation contexts (with the filler), distinct from nothing in particular: drawn
        from the same state distribution as training."""
        rng = np.random.default_rng(seed)
        return [self.context(self.state(rng)) for _ in range(n)]

    def vocabulary_texts(self) -> list[str]:
        words = [" ".join(GOALS), "rock clear hammer none tired fresh formal plain"]
        words += ["last left right use stop again kindly . :", FILLER]
        return words

    def skill_contexts(self, name: str, n: int, seed: int) -> tuple[list[str], list[str]]:
        """Contexts where skill ``name``'s behaviour is the most likely continuation (positive) and
        where it is not (negative), ``n`` each."""
        if name not in SKILL_NAMES:
            raise ValueError(f"unknown skill {name!r}; choose from {SKILL_NAMES}")
        rng = np.random.default_rng(seed)
        pos: list[str] = []
        neg: list[str] = []
        while len(pos) < n or len(neg) < n:
            s = self.state(rng)
            if name == "formal":
                hit = s.formal
            else:
                probs = self.action_probs(s)
                target = _TARGETS[name][0]
                hit = max(probs, key=probs.__getitem__) == target
            (pos if hit else neg).append(self.context(s))
        return pos[:n], neg[:n]


def agent_skills(language: AgentLanguage, n_contrast: int = 48, seed: int = 0) -> list[Skill]:
    """The six skills of the language with ``n_contrast`` positive and negative contexts each."""
    out = []
    for i, name in enumerate(SKILL_NAMES):
        pos, neg = language.skill_contexts(name, n_contrast, seed + 7919 * i)
        out.append(Skill(name, tuple(_TARGETS[name]), tuple(pos), tuple(neg)))
    return out


# ============================================================================ the frozen LM
@dataclass(frozen=True)
class TaskConfig:
    """The frozen task LM: ``tiny_causal_lm`` trained by ``train_causal_lm`` on the language."""

    arch: str = "llama"
    n_layers: int = 4
    d_model: int = 128
    n_heads: int = 4
    n_texts: int = 6000
    steps: int = 1500
    batch_size: int = 64
    lr: float = 3e-3
    p_rule: float = 0.75

    def __post_init__(self) -> None:
        if self.arch not in ("llama", "qwen2", "gpt2"):
            raise ValueError(f"arch must be 'llama', 'qwen2' or 'gpt2'; got {self.arch!r}")
        for name in ("n_layers", "d_model", "n_heads", "n_texts", "steps", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int; got {value!r}")

    def language(self) -> AgentLanguage:
        return AgentLanguage(self.p_rule)


def _cache_dir() -> Path:
    from paper_common.lm import fact_lm_cache_dir

    return fact_lm_cache_dir().parent / "skill_commutator"


def build_task_lm(
    cfg: TaskConfig | None = None, seed: int = 0, cache: bool = True, progress: bool | None = None
) -> tuple[Any, Any, dict[str, Any]]:
    """Train (or load from the cache) the frozen task LM; returns ``(model, tokenizer, info)``.

    The model comes back in float64 throughout (:func:`paper_common.lm.float64_exact`), in eval mode
    with gradients off: the commutator divides rollout differences by ``h^2``. ``info`` holds the
    final training loss and the training seconds.

    Cached under ``$PAPER_CACHE_DIR/skill_commutator`` by the config, the seed, a hash of the
    training texts and the vocabulary, and :func:`paper_common.lm.cache_key`'s environment (torch's
    thread count included: train and load under the same :func:`paper_common.device.pinned_threads`).
    Concurrent calls are serialised by a file lock: one trains, the others load.
    """
    import filelock

    from paper_common.lm import (
        build_tokenizer,
        cache_key,
        float64_exact,
        load_lm,
        register_float64_attention,
        save_lm,
        tiny_causal_lm,
        train_causal_lm,
    )

    cfg = cfg or TaskConfig()
    lang = cfg.language()
    tok = build_tokenizer(lang.vocabulary_texts())
    texts = lang.texts(cfg.n_texts, seed=10_000 + seed)
    register_float64_attention()

    def train() -> tuple[Any, dict[str, Any]]:
        model = tiny_causal_lm(
            tok,
            cfg.arch,
            n_layers=cfg.n_layers,
            d_model=cfg.d_model,
            n_heads=cfg.n_heads,
            seed=seed,
        )
        res = train_causal_lm(
            model, tok, texts=texts, steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr,
            seed=seed, progress=progress,
        )  # fmt: skip
        return model, {"final_loss": float(np.mean(res.losses[-50:])), "train_s": res.seconds}

    if not cache:
        model, info = train()
    else:
        # the data themselves, so a change to the policy, the templates or the tokenizer trains anew
        blob = json.dumps([texts, sorted(tok.get_vocab().items())]).encode()
        data = hashlib.sha256(blob).hexdigest()[:16]
        key = cache_key({**asdict(cfg), "seed": seed, "v": 1, "data": data}, length=12)
        path = _cache_dir() / f"task_lm_{key}"
        path.parent.mkdir(parents=True, exist_ok=True)
        # one process trains, concurrent ones wait and load; info.json is saved with the model
        # (atomically, by save_lm), so a model without it is never read
        with filelock.FileLock(str(path) + ".lock"):
            if (path / "info.json").exists():
                model, tok = load_lm(path)
                info = json.loads((path / "info.json").read_text())
            else:
                model, info = train()
                save_lm(model, tok, path, info=info)
    model = float64_exact(model)
    model.requires_grad_(False)
    return model, tok, info


def check_targets(tok: Any, skill: Skill) -> list[int]:
    """Token ids of ``skill.targets``; each must be a single token (with a leading space)."""
    ids = []
    for t in skill.targets:
        enc = tok(" " + t, add_special_tokens=False)["input_ids"]
        if len(enc) != 1:
            raise ValueError(
                f"target {t!r} of skill {skill.name!r} is {len(enc)} tokens; give single-token targets"
            )
        ids.append(int(enc[0]))
    return ids


# ============================================================================ real models
@dataclass(frozen=True)
class TaskSpec:
    """Skills and evaluation contexts for any model: what ``reproduce`` needs beyond the weights.

    ``contexts`` are written without the filler; the activation realization reads
    ``filler * p + context`` and the soft prefix replaces those ``p`` filler tokens (so at ``z = 0``
    both run the same prompt). ``filler`` must be one token of the model's tokenizer.
    """

    skills: tuple[Skill, ...]
    contexts: tuple[str, ...]
    filler: str = FILLER
    p: int = N_FILLER

    def __post_init__(self) -> None:
        if len(self.skills) < 2:
            raise ValueError(f"a task needs >= 2 skills to form pairs; got {len(self.skills)}")
        if not self.contexts:
            raise ValueError("a task needs at least one context")
        if not isinstance(self.p, int) or self.p < 1:
            raise ValueError(f"p must be a positive int; got {self.p!r}")

    def with_filler(self, contexts: Sequence[str] | None = None) -> list[str]:
        head = " ".join([self.filler] * self.p)
        return [f"{head} {c}" for c in (self.contexts if contexts is None else contexts)]


def agent_task(language: AgentLanguage, n_contexts: int, n_contrast: int, seed: int) -> TaskSpec:
    """The agent language's six skills and ``n_contexts`` evaluation contexts as a :class:`TaskSpec`."""
    rng = np.random.default_rng(seed + 104_729)
    contexts = tuple(language.context(language.state(rng), filler=False) for _ in range(n_contexts))
    return TaskSpec(tuple(agent_skills(language, n_contrast, seed)), contexts)


def load_task_spec(path: str | os.PathLike[str]) -> TaskSpec:
    """A :class:`TaskSpec` from JSON: ``{"contexts": [...], "filler": " ...", "p": 4, "skills":
    [{"name", "targets": [...], "positive": [...], "negative": [...]}, ...]}`` (e.g. tool-use
    prompts for an instruct model). Missing keys raise ``ValueError`` naming them."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"no task file at {path}")
    data = json.loads(path.read_text())
    for key in ("contexts", "skills"):
        if key not in data:
            raise ValueError(f"{path}: missing key {key!r}")
    skills = []
    for i, s in enumerate(data["skills"]):
        missing = [k for k in ("name", "targets", "positive", "negative") if k not in s]
        if missing:
            raise ValueError(f"{path}: skill {i} misses {missing}")
        skills.append(
            Skill(s["name"], tuple(s["targets"]), tuple(s["positive"]), tuple(s["negative"]))
        )
    return TaskSpec(
        tuple(skills),
        tuple(data["contexts"]),
        data.get("filler", FILLER),
        int(data.get("p", N_FILLER)),
    )
