"""The three training phases in one runner: acquisition, continual learning, updating.

Everything runs on :func:`paper_common.lm.train_causal_lm` (AdamW, one continuous run per phase)
with an evaluation of the target facts before training and after every epoch, and checkpoints kept:

* **acquisition**: a tiny model from scratch on a :class:`~paper_common.facts.World`'s format split
  at year ``t_old``. Target facts T appear only as statements (every paraphrase); format facts F
  (other subjects) as statements, QA pairs and verification pairs (answer and controls, both
  polarities). Evaluated on T, which the model is never asked about in training.
* **continual learning**: from the acquisition checkpoint at saturation + N epochs, training on
  statements about the subjects of a second world only (nothing about T); T evaluated every epoch.
* **updating**: from an acquisition checkpoint, training on statements of the T facts whose value
  changed by ``t_new`` (new values), with or without replay of F's data; the old and new values
  are both evaluated (multi-verse).

An *epoch* is ``ceil(n_examples / batch_size)`` steps of uniformly drawn batches.
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gv_gap.curves import learning_time
from gv_gap.items import GVItem, format_pairs, statement_texts, vocabulary_texts, world_items
from gv_gap.measure import GVResult, evaluate_gv, measure_song_gap
from paper_common.facts import World
from paper_common.lm import build_tokenizer, save_lm, tiny_causal_lm, train_causal_lm

__all__ = ["PHASES", "GVConfig", "GVRun", "run_gv", "saturation", "saturation_epoch"]

log = logging.getLogger(__name__)

PHASES: tuple[str, ...] = ("acquisition", "continual", "updating")


@dataclass(frozen=True)
class GVConfig:
    """One architecture, one world, the three phases. Defaults are the `quick` scale.

    World: ``n_people`` etc. size the world whose target (T) and format (F) facts are learned at
    ``t_old`` (half of the subjects are targets); ``n_new_people`` etc. size the second world used
    for continual learning. Schedules: ``constant`` (after warm-up) for acquisition and updating,
    ``cosine`` for continual learning, as in the paper.
    """

    arch: str = "llama"
    n_layers: int = 2
    d_model: int = 64
    n_heads: int = 4
    n_people: int = 60
    n_cities: int = 16
    n_companies: int = 12
    n_countries: int = 6
    target_fraction: float = 0.5
    n_new_people: int = 40
    n_new_companies: int = 8
    n_controls: int = 2
    t_old: int = 2000
    t_new: int = 2024
    epochs: int = 40
    lr: float = 3e-3
    batch_size: int = 32
    warmup_fraction: float = 0.05
    weight_decay: float = 0.05
    continual_offsets: tuple[int, ...] = (0, 6)
    continual_epochs: int = 20
    continual_lr: float = 1e-3
    update_epochs: int = 20
    update_lr: float = 1.5e-3
    update_from: int | None = None  # acquisition epoch; None = saturation
    replay: tuple[bool, ...] = (False, True)
    song_samples: int = 8
    song_temperature: float = 1.0
    format_eval: int = 40  # F items evaluated each acquisition epoch (format learning), 0 = none

    def __post_init__(self) -> None:
        for name in ("epochs", "continual_epochs", "update_epochs"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1; got {value!r}")
        if self.n_controls < 1:
            raise ValueError(f"n_controls must be >= 1; got {self.n_controls}")
        if any(n < 0 for n in self.continual_offsets):
            raise ValueError(f"continual_offsets must be >= 0; got {self.continual_offsets}")
        if not self.t_old < self.t_new:
            raise ValueError(f"t_old ({self.t_old}) must precede t_new ({self.t_new})")
        for name in ("lr", "continual_lr", "update_lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")
        if self.update_from is not None and not 0 <= self.update_from <= self.epochs:
            raise ValueError(
                f"update_from must be an acquisition epoch in [0, epochs={self.epochs}]; "
                f"got {self.update_from}"
            )


@dataclass
class GVRun:
    """What one seed's run measured.

    ``curves[phase]``: one summary dict per evaluation (``epoch`` 0 = before the phase's training);
    phases are ``acquisition``, ``continual+N`` and ``updating`` / ``updating+replay``.
    ``results[phase]``: the per-fact :class:`GVResult` of every evaluation. ``song[phase]``: Song et
    al.'s gap at the end of the phase. ``checkpoints``: acquisition state dicts by epoch.
    """

    seed: int
    config: GVConfig
    curves: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    results: dict[str, list[GVResult]] = field(default_factory=dict)
    song: dict[str, dict[str, float]] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    checkpoints: dict[int, dict[str, torch.Tensor]] = field(default_factory=dict, repr=False)
    #: the per-fact result on the format facts at the last acquisition evaluation (None: not run)
    format_result: GVResult | None = field(default=None, repr=False)

    def curve(self, phase: str, metric: str) -> np.ndarray:
        if phase not in self.curves:
            raise ValueError(f"no phase {phase!r}; have {', '.join(self.curves)}")
        return np.array([row[metric] for row in self.curves[phase]])

    def metrics(self) -> dict[str, Any]:
        """Everything measured as plain numbers (for JSON and for comparing runs)."""
        return {"curves": self.curves, "song": self.song, "info": self.info}


def saturation(run: GVRun, fraction: float = 0.8) -> dict[str, Any]:
    """The first acquisition epoch by which generation and verification have both reached
    ``fraction`` of their plateaus, and why it is what it is.

    A capability that never rises (flat: nothing to wait for) is left out and listed under
    ``"flat"``; one still rising at the last epoch has not saturated within the budget, so the
    saturation epoch is the last one, listed under ``"censored"``. The last epoch also when every
    capability is flat. Returns ``{"epoch", "flat", "censored"}``.
    """
    last = len(run.curves["acquisition"]) - 1
    times = {
        m: learning_time(run.curve("acquisition", m), fraction=fraction)
        for m in ("gen_acc", "balanced_acc")
    }
    flat = [m for m, t in times.items() if t.censored == "no rise"]
    censored = [m for m, t in times.items() if t.censored == "still rising"]
    observed = [t.epoch for t in times.values() if not t.censored]
    epoch = last if censored or not observed else int(max(observed))
    return {"epoch": epoch, "flat": flat, "censored": censored}


def saturation_epoch(run: GVRun, fraction: float = 0.8) -> int:
    """The epoch of :func:`saturation`."""
    return saturation(run, fraction)["epoch"]


class _Setup:
    """The worlds, the tokenizer and the item sets of one run."""

    def __init__(self, config: GVConfig, seed: int, tokenizer: Any = None) -> None:
        c = config
        places = {
            "n_cities": c.n_cities,
            "n_countries": c.n_countries,
            "start_year": c.t_old,
            "end_year": c.t_new,
        }
        self.world = World(
            seed=seed,
            n_people=c.n_people,
            n_companies=c.n_companies,
            target_fraction=c.target_fraction,
            **places,
        )
        # new subjects for continual learning: another world (same sizes of places, new people)
        self.new_world = World(
            seed=seed + 10_000, n_people=c.n_new_people, n_companies=c.n_new_companies, **places
        )
        texts = vocabulary_texts(self.world, self.new_world)
        self.tok = build_tokenizer(texts) if tokenizer is None else tokenizer
        if self.tok.unk_token_id is not None:
            ids = self.tok(texts, add_special_tokens=False)["input_ids"]
            if any(self.tok.unk_token_id in row for row in ids):
                raise ValueError(
                    "the tokenizer maps words of the synthetic worlds to its unknown token; use a "
                    "subword tokenizer or build one with gv_gap.items.vocabulary_texts(...)"
                )
        w = self.world
        self.target_facts = w.facts("heldout", c.t_old)
        self.format_facts = w.facts("train", c.t_old)
        if not self.target_facts or not self.format_facts:
            raise ValueError("the world has no target or no format facts; enlarge it")
        self.targets = world_items(
            w, self.target_facts, c.n_controls, seed, control_subjects=self.format_facts
        )
        self.formats = world_items(w, self.format_facts, c.n_controls, seed + 1)
        self.acquisition_texts = statement_texts(w, self.target_facts + self.format_facts)
        self.format_data = format_pairs(self.formats)
        # updating: the target facts whose value changed between t_old and t_new
        new = {(f.subject, f.relation): f for f in w.facts("heldout", c.t_new)}
        changed = [
            (f, new[(f.subject, f.relation)])
            for f in self.target_facts
            if new[(f.subject, f.relation)].value != f.value
        ]
        old, updated = [o for o, _ in changed], [n for _, n in changed]
        self.updates = world_items(w, updated, c.n_controls, seed + 2, old_facts=old)
        self.update_texts = statement_texts(w, updated)
        self.continual_texts = statement_texts(self.new_world, self.new_world.facts("all", c.t_old))


def _epoch_steps(n_examples: int, batch_size: int) -> int:
    return max(1, math.ceil(n_examples / batch_size))


def _train_phase(
    model: Any,
    setup: _Setup,
    run: GVRun,
    phase: str,
    items: list[GVItem],
    texts: Sequence[str],
    pairs: Sequence[tuple[str, str]],
    epochs: int,
    lr: float,
    schedule: str,
    seed: int,
    on_epoch: Any = None,
    format_items: list[GVItem] | None = None,
    progress: bool | None = None,
) -> None:
    c = run.config
    rows: list[dict[str, float]] = []
    results: list[GVResult] = []

    def evaluate(epoch: int) -> None:
        res = evaluate_gv(model, setup.tok, items)
        row = {"epoch": float(epoch), **res.summary()}
        if format_items:
            fmt = evaluate_gv(model, setup.tok, format_items, choices=False, likelihood=False)
            s = fmt.summary()
            row["format_gen_acc"], row["format_ver_acc"] = s["gen_acc"], s["ver_acc"]
            row["format_balanced_acc"] = s["balanced_acc"]
            run.format_result = fmt
        rows.append(row)
        results.append(res)
        if on_epoch is not None:
            on_epoch(epoch)

    evaluate(0)
    steps = _epoch_steps(len(texts) + len(pairs), c.batch_size)
    train_causal_lm(
        model,
        setup.tok,
        list(texts),
        list(pairs),
        steps=steps * epochs,
        lr=lr,
        batch_size=c.batch_size,
        seed=seed,
        warmup_fraction=c.warmup_fraction,
        weight_decay=c.weight_decay,
        schedule=schedule,
        callback=lambda step: evaluate(step // steps),
        callback_every=steps,
        progress=progress,
    )
    run.curves[phase], run.results[phase] = rows, results
    log.info("%s: %d epochs of %d steps", phase, epochs, steps)


def _song(
    model: Any, setup: _Setup, run: GVRun, phase: str, items: list[GVItem], seed: int
) -> None:
    if run.config.song_samples > 0 and items:
        gap = measure_song_gap(
            model,
            setup.tok,
            items,
            n=run.config.song_samples,
            temperature=run.config.song_temperature,
            seed=seed,
        )
        run.song[phase] = gap.as_row()


def run_gv(
    config: GVConfig,
    seed: int = 0,
    phases: Sequence[str] = PHASES,
    out_dir: str | Path | None = None,
    model: Any = None,
    tokenizer: Any = None,
    progress: bool | None = None,
) -> GVRun:
    """Run the phases for one seed (the seed draws the world, the split, the controls, the
    initialisation and the batches). ``continual`` and ``updating`` need ``acquisition``.

    By default acquisition starts from a tiny model of ``config``'s architecture, from scratch.
    Pass a causal LM and its ``tokenizer`` (e.g. ``AutoModelForCausalLM.from_pretrained(path)``) to
    fine-tune that model instead; it is copied, not changed, and the config's architecture fields
    are then unused. With ``out_dir``, every acquisition checkpoint and each phase's final model are
    saved there (``from_pretrained`` folders); in memory, acquisition state dicts are kept in
    ``run.checkpoints``. ``progress``: a bar per phase (default: when stderr is a terminal).
    """
    if (model is None) != (tokenizer is None):
        raise ValueError("pass both model and tokenizer, or neither (a tiny model from scratch)")
    phases = list(phases)
    for p in phases:
        if p not in PHASES:
            raise ValueError(f"unknown phase {p!r}; choose from {', '.join(PHASES)}")
    if phases and "acquisition" not in phases:
        raise ValueError("continual learning and updating start from acquisition checkpoints")
    setup = _Setup(config, seed, tokenizer)
    run = GVRun(seed=seed, config=config)
    run.info.update(
        n_targets=len(setup.targets),
        n_formats=len(setup.formats),
        n_updates=len(setup.updates),
        n_continual_texts=len(setup.continual_texts),
        vocab=len(setup.tok),
        config=asdict(config),
    )
    out = Path(out_dir) if out_dir is not None else None
    if model is None:
        model = tiny_causal_lm(
            setup.tok, config.arch, config.n_layers, config.d_model, config.n_heads, seed=seed
        )
    else:
        model = copy.deepcopy(model)
    run.info["pretrained"] = tokenizer is not None
    run.info["model"] = (
        str(getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__)
        + " (given, fine-tuned)"
        if tokenizer is not None
        else f"tiny {config.arch} d{config.d_model} L{config.n_layers}, from scratch in-package"
    )
    run.info["parameters"] = sum(p.numel() for p in model.parameters())

    def keep(epoch: int) -> None:
        run.checkpoints[epoch] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        if out is not None:
            save_lm(model, setup.tok, out / "acquisition" / f"epoch_{epoch}")

    fmt = setup.formats[: config.format_eval] if config.format_eval else None
    _train_phase(
        model,
        setup,
        run,
        "acquisition",
        setup.targets,
        setup.acquisition_texts,
        setup.format_data,
        config.epochs,
        config.lr,
        "constant",
        seed,
        on_epoch=keep,
        format_items=fmt,
        progress=progress,
    )
    _song(model, setup, run, "acquisition", setup.targets, seed)
    sat_info = saturation(run)
    sat = sat_info["epoch"]
    run.info["saturation_epoch"] = sat
    run.info["saturation_flat"] = sat_info["flat"]
    run.info["saturation_censored"] = sat_info["censored"]

    def branch(
        name: str,
        start: int,
        items: list[GVItem],
        texts: Sequence[str],
        pairs: Sequence[tuple[str, str]],
        epochs: int,
        lr: float,
        schedule: str,
        phase_seed: int,
    ) -> None:
        """Train a copy of the acquisition checkpoint at ``start`` as phase ``name``."""
        m = copy.deepcopy(model)
        m.load_state_dict(run.checkpoints[start])
        _train_phase(
            m,
            setup,
            run,
            name,
            items,
            texts,
            pairs,
            epochs,
            lr,
            schedule,
            phase_seed,
            progress=progress,
        )
        _song(m, setup, run, name, items, seed)
        if out is not None:
            save_lm(m, setup.tok, out / name)

    last = config.epochs
    if "continual" in phases:
        for n in config.continual_offsets:
            start = min(sat + n, last)
            run.info[f"continual+{n}_from_epoch"] = start
            # saturation + n is past the acquisition budget: this branch starts from the last
            # checkpoint, as another offset may, so it does not measure "saturation + n"
            run.info[f"continual+{n}_clamped"] = sat + n > last
            branch(
                f"continual+{n}",
                start,
                setup.targets,
                setup.continual_texts,
                (),
                config.continual_epochs,
                config.continual_lr,
                "cosine",
                seed + 1,
            )
    if "updating" in phases:
        if not setup.updates:
            raise ValueError("no target fact changed between t_old and t_new: nothing to update")
        start = sat if config.update_from is None else config.update_from
        run.info["update_from_epoch"] = start
        replay_texts = statement_texts(setup.world, setup.format_facts)
        for replay in config.replay:
            branch(
                "updating+replay" if replay else "updating",
                start,
                setup.updates,
                setup.update_texts + (replay_texts if replay else []),
                setup.format_data if replay else (),
                config.update_epochs,
                config.update_lr,
                "constant",
                seed + 2,
            )
    return run
