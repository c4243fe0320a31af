"""``reproduce``: is temporal drift a residual-stream direction that confidence cannot see?

Per seed: a drift world (relation-specific change rates, leading cues, some subjects never shown)
and one fact LM continued through several cutoffs (:func:`drift_probe.models.snapshots`). Every
snapshot is asked about every fact of the volatile relations at the world's last year. On each
snapshot: the drift probe (layer chosen on validation, grouped by subject), the correctness and
uncertainty probes, the confidence baselines (token entropy, semantic entropy, CCS, SAPLMA), the
input-only controls and the oracle; the five orthogonality tests; MLP logit attribution of stale
recall and confabulation. Across snapshots of one seed: the cross-cutoff test on every ordered pair.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from drift_probe.baselines import CCS, SAPLMA, AliasEquivalence, SemanticEntropy
from drift_probe.crosscutoff import p_a_greater_b, transitioned
from drift_probe.data import VOLATILE, DriftItem, drift_items, drift_world, unseen_subjects
from drift_probe.features import cells, extract_features
from drift_probe.geometry import (
    cosine,
    cosine_test,
    erased_auroc_after_inlp,
    erasure_test,
    mean_difference_test,
    nullspace_test,
    probe_direction,
    score_correlations,
)
from drift_probe.mechanism import mlp_logit_attribution, profile_correlation
from drift_probe.models import SnapshotConfig, snapshots
from drift_probe.probe import (
    auroc,
    auroc_difference_bootstrap,
    fit_layer_probe,
    out_of_fold,
    permutation_band,
)
from paper_common import (
    Claim,
    Control,
    Report,
    Stopwatch,
    check_scale,
    map_jobs,
    new_figure,
    pin_threads,
    write_report,
)
from paper_common.device import pinned_threads
from paper_common.facts import RELATIONS
from paper_common.stats import ConfidenceInterval, t_interval

__all__ = ["MODEL_CUTOFFS", "SCALES", "analyse_snapshot", "describe_model", "reproduce"]

# published or estimated training cutoffs of the paper's model families, for timelines on real
# models at `full` (Llama-2: September 2022 and Llama-3.1: December 2023 from their model cards;
# Mistral-7B, Qwen2.5 and Gemma-2 publish none, the dates here are our estimates)
MODEL_CUTOFFS: dict[str, str] = {
    "meta-llama/Llama-2-7b-chat-hf": "2022-09",
    "mistralai/Mistral-7B-Instruct-v0.2": "2023-06",
    "meta-llama/Llama-3.1-8B-Instruct": "2023-12",
    "Qwen/Qwen2.5-7B-Instruct": "2024-03",
    "google/gemma-2-9b-it": "2024-06",
}

_WORLD = {"n_people": 120, "n_cities": 30, "n_companies": 30, "n_countries": 6}

SCALES: dict[str, dict[str, Any]] = {
    "smoke": {
        "seeds": [0],
        "archs": ["llama"],
        "world": {"n_people": 40, "n_cities": 12, "n_companies": 10, "n_countries": 4},
        "cutoffs": [2022, 2023],
        "model": {
            "d_model": 64,
            "n_layers": 3,
            "steps": 300,
            "continue_steps": 100,
            "batch_size": 32,
            "lr": 5e-3,
        },
        "unseen": 0.15,
        "se_samples": 4,
        "ccs": {"restarts": 2, "epochs": 200},
        "n_null": 10,
        "n_perm": 20,
        "n_perm_inlp": 4,
        "inlp_k": 4,
        "workers": 1,
    },
    "quick": {
        "seeds": [0, 1, 2],
        "archs": ["llama"],
        "world": _WORLD,
        "cutoffs": [2021, 2022, 2023],
        "model": {
            "d_model": 64,
            "n_layers": 4,
            "steps": 1000,
            "continue_steps": 300,
            "batch_size": 32,
            "lr": 5e-3,
        },
        "unseen": 0.15,
        "se_samples": 10,
        "ccs": {"restarts": 10, "epochs": 300},
        "n_null": 50,
        "n_perm": 200,
        "n_perm_inlp": 10,
        "inlp_k": 10,
        # one single-threaded worker per seed
        "workers": 3,
    },
    # the paper's grid on the fact LMs: 2 architectures x 4 cutoffs (12 ordered pairs) and 5 seeds;
    # the real-model path (timelines + MODEL_CUTOFFS) needs the models and a timeline file locally
    "full": {
        "seeds": [0, 1, 2, 3, 4],
        "archs": ["llama", "gpt2"],
        "world": {"n_people": 240, "n_cities": 40, "n_companies": 60, "n_countries": 8},
        "cutoffs": [2020, 2021, 2022, 2023],
        "model": {
            "d_model": 128,
            "n_layers": 4,
            "steps": 3000,
            "continue_steps": 800,
            "batch_size": 64,
            "lr": 3e-3,
        },
        "unseen": 0.15,
        "se_samples": 10,
        "ccs": {"restarts": 10, "epochs": 1000},
        "n_null": 200,
        "n_perm": 1000,
        "n_perm_inlp": 100,
        "inlp_k": 10,
        "workers": 2,
        # the paper's models and their cutoffs, for timeline_items on a local role-timeline file
        # (needs the checkpoints and a GPU; not run by this runner)
        "real_models": MODEL_CUTOFFS,
    },
}

BASELINES = ("token_entropy", "semantic_entropy", "semantic_entropy_weighted", "ccs", "saplma")
CONTROLS = ("control_relation", "control_changed_before", "control_both")


def _onehot(items: list[DriftItem]) -> np.ndarray:
    rels = sorted({i.relation for i in items})
    return np.array([[i.relation == r for r in rels] for i in items], dtype=float)


def _saplma_statements(world: Any, t_q: int) -> tuple[list[str], list[bool], list[str]]:
    """True/false statements of every relation at the query time (SAPLMA's training data)."""
    items = world.verification_items("all", t_q)
    return (
        [
            RELATIONS[v.fact.relation].statements[0].format(s=v.fact.subject, v=v.claimed_value)
            for v in items
        ],
        [v.label for v in items],
        [v.fact.relation for v in items],
    )


ANALYSIS_DEFAULTS: dict[str, Any] = {
    "se_samples": 10,
    "ccs": {"restarts": 10, "epochs": 300},
    "n_null": 50,
    "n_perm": 200,
    "n_perm_inlp": 10,
    "inlp_k": 10,
}
"""What :func:`analyse_snapshot` runs with unless told (the quick scale's settings)."""


def describe_model(model: Any) -> str:
    """One line naming a Hugging Face causal LM: its path or architecture, blocks and width."""
    config = getattr(model, "config", None)
    if config is None:
        raise TypeError(f"model must be a Hugging Face PreTrainedModel; got {type(model).__name__}")
    name = str(getattr(config, "_name_or_path", "") or "")
    if not name or Path(name).is_dir():  # a checkpoint directory: its name, not the machine's path
        name = Path(name).name if name else "in-process fact LM"
    layers = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", "?")
    width = getattr(config, "hidden_size", None) or getattr(config, "n_embd", "?")
    return f"{name} ({config.model_type}, {layers} blocks, d {width})"


def analyse_snapshot(
    model: Any,
    tok: Any,
    world: Any,
    items: list[DriftItem],
    held: np.ndarray | None = None,
    cfg: dict[str, Any] | None = None,
    seed: int = 0,
    model_name: str | None = None,
) -> dict[str, Any]:
    """Everything measured on one model (any Hugging Face causal LM ``model`` with its ``tok``)
    asked the drift ``items`` of ``world``: the drift, correctness and uncertainty probes, the
    input-only controls and the oracle, the confidence baselines with a permutation null band each,
    the headline (probe minus best control, cluster bootstrap over subjects) with its shuffled-label
    null, the five orthogonality tests and the MLP attribution profiles.

    ``held``: items no probe may be trained on (scored out of fold); ``cfg``: overrides of
    :data:`ANALYSIS_DEFAULTS`. The result names the model (``"model"``: ``model_name``, default
    :func:`describe_model`).
    """
    if not items:
        raise ValueError("items is empty: nothing to analyse")
    cfg = {**ANALYSIS_DEFAULTS, **(cfg or {})}
    held = np.zeros(len(items), bool) if held is None else np.asarray(held, bool)
    if held.shape != (len(items),):
        raise ValueError(f"held must have one entry per item ({len(items)}); got {held.shape}")
    name = model_name or describe_model(model)
    return {"model": name, **_analyse(model, tok, world, items, held, cfg, seed)}


def _analyse(
    model: Any,
    tok: Any,
    world: Any,
    items: list[DriftItem],
    held: np.ndarray,
    cfg: dict[str, Any],
    seed: int,
) -> dict[str, Any]:
    """Everything measured on one snapshot."""
    feats = extract_features(model, tok, items)
    groups = np.array([i.subject for i in items])
    y_d = np.array([i.drift for i in items], int)
    y_c = feats.correct.astype(int)
    y_u = (feats.entropy > np.median(feats.entropy)).astype(int)
    cell = cells(items, feats)
    for what, lab in (("drift", y_d), ("correct", y_c), ("uncertain", y_u)):
        if len(np.unique(lab)) < 2:
            raise ValueError(
                f"every item's {what!r} label is {int(lab[0])} on this model ({len(lab)} items): "
                "the probes and baselines need both classes (a model that answers none of the "
                "world's questions correctly must first be trained on the world)"
            )
    drift = fit_layer_probe(feats.hidden, y_d, groups, seed=seed, train_mask=~held)
    corr = fit_layer_probe(feats.hidden, y_c, groups, seed=seed)
    x = feats.hidden[:, drift.layer]
    scores: dict[str, np.ndarray] = {"drift_probe": drift.scores}
    # input-only controls and the oracle
    onehot = _onehot(items)
    before = np.array([[i.changed_before] for i in items], float)
    for name, feat in (
        ("control_relation", onehot),
        ("control_changed_before", before),
        ("control_both", np.hstack([onehot, before])),
    ):
        scores[name] = out_of_fold(feat, y_d, groups, seed=seed, Cs=(1.0,))
    scores["oracle"] = np.array([i.oracle for i in items])
    # confidence baselines (higher = suspect)
    scores["token_entropy"] = feats.entropy
    se = SemanticEntropy(AliasEquivalence(world), n_samples=cfg["se_samples"], seed=seed)
    both = se.score_both(model, tok, items)
    scores["semantic_entropy"], scores["semantic_entropy_weighted"] = (
        both["discrete"],
        both["weighted"],
    )
    # CCS: the contrast-pair states once, for fitting (oriented on correctness) and scoring
    ccs = CCS(seed=seed, **cfg["ccs"])
    x_pos, x_neg = ccs.pairs(model, tok, items, answers=feats.answers)
    scores["ccs"] = 1 - ccs.fit_pairs(x_pos, x_neg, y_c).p_true_pairs(x_pos, x_neg)
    saplma = SAPLMA(seed=seed).fit_statements(
        model, tok, *_saplma_statements(world, world.end_year)
    )
    scores["saplma"] = saplma.score(model, tok, items, answers=feats.answers)
    scores["correctness_probe"] = 1 - corr.scores
    aurocs = {k: auroc(y_d, v) for k, v in scores.items()}
    best_control = max(CONTROLS, key=lambda k: aurocs[k])
    # the headline: paired cluster bootstrap (subjects) of probe - best control, replicates kept
    # to pool over models; the drift signal the training text holds beyond the input (oracle -
    # best control) is its positive control; the same pipeline on shuffled drift labels its null
    diff = auroc_difference_bootstrap(
        y_d, drift.scores, scores[best_control], seed=seed, groups=groups
    )
    oracle_diff = auroc_difference_bootstrap(
        y_d, scores["oracle"], scores[best_control], seed=seed, groups=groups
    )
    headline_null = _shuffled_headline(feats.hidden, y_d, groups, held, items, seed)
    # permutation null band of every detector's AUROC (fixed scores: the labels permuted)
    bands = {
        k: permutation_band(lambda lab, v=v: auroc(lab, v), y_d, cfg["n_perm"], seed)
        for k, v in scores.items()
        if k in BASELINES or k == "oracle"
    }
    # the five orthogonality tests
    cos = cosine_test(x, y_d, {"correct": y_c, "uncertain": y_u}, n_null=cfg["n_null"], seed=seed)
    corrs = score_correlations(
        drift.scores,
        {
            "correctness_probe": corr.scores,
            "token_entropy": feats.entropy,
            "semantic_entropy": scores["semantic_entropy"],
        },
    )
    null = nullspace_test(x, y_d, y_c, groups, seed=seed)
    inlp_c = erasure_test(x, y_c, y_d, groups, k=cfg["inlp_k"], seed=seed)
    inlp_u = erasure_test(x, y_u, y_d, groups, k=cfg["inlp_k"], seed=seed)
    means = mean_difference_test(x, {"drift": y_d, "correct": y_c}, groups, seed=seed)
    # the cross-label AUROCs' chance: each direction's out-of-fold projection on permuted labels
    cross_bands = {
        ("drift", "correct"): permutation_band(
            lambda lab: auroc(lab, means["scores"]["drift"]), y_c, cfg["n_perm"], seed
        ),
        ("correct", "drift"): permutation_band(
            lambda lab: auroc(lab, means["scores"]["correct"]), y_d, cfg["n_perm"], seed
        ),
    }
    # chance of the correctness AUROC after INLP: the same pipeline on permuted correctness labels
    inlp_band = permutation_band(
        lambda lab: erased_auroc_after_inlp(x, lab, groups, k=cfg["inlp_k"], seed=seed),
        y_c,
        cfg["n_perm_inlp"],
        seed,
    )
    # negative controls of claims (1)-(4) (ours): a label planted to share the drift direction
    # (the drift labels with a quarter flipped at random) through the same tests, where
    # orthogonality must not hold
    y_s = shared_label(y_d, seed)
    shared_scores = out_of_fold(x, y_s, groups, seed=seed, train_mask=~held)
    shared = {
        "cos": abs(cosine(probe_direction(x, y_d), probe_direction(x, y_s))),
        "r": score_correlations(drift.scores, {"shared": shared_scores})["shared"][0],
        "nullspace": nullspace_test(x, y_d, y_s, groups, seed=seed),
        "inlp": erasure_test(x, y_s, y_d, groups, k=cfg["inlp_k"], seed=seed),
    }
    # mechanism: MLP logit attribution to the model's own answer token
    prompts = [i.prompt for i in items]
    dla = mlp_logit_attribution(model, tok, prompts, feats.top_token)
    stale, confab = cell == "drifted-stale", cell == "confabulation"
    profiles = {
        "stale": dla[stale].mean(0) if stale.sum() >= 5 else None,
        "confabulation": dla[confab].mean(0) if confab.sum() >= 5 else None,
    }
    measured = (
        profiles["stale"] is not None
        and profiles["confabulation"] is not None
        and dla.shape[1] >= 3
    )
    prof_r = (
        profile_correlation(profiles["stale"], profiles["confabulation"])[0]
        if measured
        else float("nan")
    )
    # the profile claim's controls (ours): positive, two random halves of the stale items (one
    # group, dynamics shared by construction) must correlate above 0.8; negative, the stale
    # profile against the confabulation items' attribution to a random other token (no answer
    # written: dynamics that differ) must not
    rng = np.random.default_rng(seed + 15485863)
    halves_r, random_r = float("nan"), float("nan")
    if measured:
        idx = rng.permutation(np.flatnonzero(stale))
        if len(idx) >= 10:
            h = len(idx) // 2
            halves_r = profile_correlation(dla[idx[:h]].mean(0), dla[idx[h:]].mean(0))[0]
        vocab = int(model.get_output_embeddings().weight.shape[0])
        top = np.asarray(feats.top_token)[confab]
        other = (top + rng.integers(1, vocab, size=len(top))) % vocab
        sel = [p for p, c in zip(prompts, confab, strict=True) if c]
        dla_other = mlp_logit_attribution(model, tok, sel, other)
        random_r = profile_correlation(profiles["stale"], dla_other.mean(0))[0]
    return {
        "n": len(items),
        "drift_rate": float(y_d.mean()),
        "accuracy": float(y_c.mean()),
        # correctness at t_q is "not drifted and known" for a model that recalls its cutoff's values,
        # so the two labels overlap by construction: their phi coefficient says how much
        "label_phi": float(np.corrcoef(y_d, y_c)[0, 1]),
        "correct_auroc": corr.auroc,
        "cells": {c: int((cell == c).sum()) for c in np.unique(cell)},
        "layer": drift.layer,
        "layer_auroc_drift": drift.layer_auroc,
        "layer_auroc_correct": corr.layer_auroc,
        "drift_ci": drift.ci,
        "aurocs": aurocs,
        "best_control": best_control,
        "diff_boot": diff,
        "oracle_diff": float(aurocs["oracle"] - aurocs[best_control]),
        "oracle_diff_boot": oracle_diff,
        "headline_null": headline_null,
        "bands": bands,
        "cross_bands": cross_bands,
        "inlp_band": inlp_band,
        "ccs_accuracy": float(ccs.accuracy_),
        "cos": cos,
        "corrs": corrs,
        "nullspace": null,
        "inlp_correct": inlp_c,
        "inlp_uncertain": inlp_u,
        "means": means,
        "profiles": profiles,
        "profile_r": prof_r,
        "profile_halves_r": halves_r,
        "profile_random_r": random_r,
        "shared": shared,
        "drift_scores": drift.scores,
        "keys": [(i.subject, i.relation) for i in items],
        "shown": np.array([i.shown for i in items]),
        "entropy_by_cell": {c: float(feats.entropy[cell == c].mean()) for c in np.unique(cell)},
    }


SHARED_FLIP = 0.25
"""Share of drift labels flipped at random in the planted shared label (ours)."""


def shared_label(y: np.ndarray, seed: int, flip: float = SHARED_FLIP) -> np.ndarray:
    """The drift labels ``y`` with a ``flip`` share flipped at random: a label that shares the drift
    direction by construction, the negative control of the orthogonality claims (1)-(4)."""
    y = np.asarray(y, int)
    flipped = np.random.default_rng(seed + 104729).random(len(y)) < flip
    return np.where(flipped, 1 - y, y)


def _shuffled_headline(
    hidden: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    held: np.ndarray,
    items: list[DriftItem],
    seed: int,
) -> dict[str, Any]:
    """The headline's null: the whole probe pipeline and the input-only controls on drift labels
    permuted over items (the mechanism switched off: no label is tied to its state)."""
    y_perm = np.random.default_rng(seed + 7919).permutation(y)
    probe = fit_layer_probe(hidden, y_perm, groups, seed=seed, train_mask=~held)
    onehot = _onehot(items)
    before = np.array([[i.changed_before] for i in items], float)
    controls = {
        name: out_of_fold(feat, y_perm, groups, seed=seed, Cs=(1.0,))
        for name, feat in (
            ("control_relation", onehot),
            ("control_changed_before", before),
            ("control_both", np.hstack([onehot, before])),
        )
    }
    best = max(controls, key=lambda k: auroc(y_perm, controls[k]))
    boot = auroc_difference_bootstrap(
        y_perm, probe.scores, controls[best], seed=seed, groups=groups
    )
    return {
        "auroc": probe.auroc,
        "diff": float(probe.auroc - auroc(y_perm, controls[best])),
        "boot": boot,
    }


def _seed_job(job: tuple[dict[str, Any], int, str]) -> dict[str, Any]:
    # one thread in a worker and in this process alike (restored after), so a seed's snapshots and
    # numbers do not depend on ``workers``
    with pinned_threads(1, torch=True):
        return _run_seed(*job)


def _run_seed(cfg: dict[str, Any], seed: int, arch: str) -> dict[str, Any]:
    watch = Stopwatch()
    world = drift_world(seed, **cfg["world"])
    unseen = unseen_subjects(world, cfg["unseen"], seed)
    cutoffs = cfg["cutoffs"]
    snaps = snapshots(
        world,
        cutoffs,
        SnapshotConfig(arch=arch, seed=seed, **cfg["model"]),
        unseen,
        progress=False,
    )
    # facts that change between the first and the last cutoff: never in any probe's training set
    moving = transitioned(world, cutoffs[0], cutoffs[-1], VOLATILE)
    watch.lap("train")
    runs = []
    for cutoff, (model, tok) in zip(cutoffs, snaps, strict=True):
        items = drift_items(world, cutoff, unseen=unseen)
        held = np.array([(i.subject, i.relation) in moving for i in items])
        shape = describe_model(model).split("(")[-1].rstrip(")")
        name = f"in-package fact LM, {shape}, seed {seed}, cutoff {cutoff}"
        result = analyse_snapshot(model, tok, world, items, held, cfg, seed, model_name=name)
        runs.append({"cutoff": cutoff, **result})
    watch.lap("analyse")
    pairs = []
    for a, b in combinations(range(len(cutoffs)), 2):
        changed = transitioned(world, cutoffs[a], cutoffs[b], VOLATILE)
        ra, rb = runs[a], runs[b]
        rows = [k for k, key in enumerate(ra["keys"]) if key in changed and ra["shown"][k]]
        assert ra["keys"] == rb["keys"]  # the same prompts to both snapshots
        if rows:
            pairs.append(
                {
                    "seed": seed,
                    "arch": arch,
                    "A": cutoffs[a],
                    "B": cutoffs[b],
                    "n_facts": len(rows),
                    "p_a_gt_b": p_a_greater_b(ra["drift_scores"][rows], rb["drift_scores"][rows]),
                    "mean_score_A": float(ra["drift_scores"][rows].mean()),
                    "mean_score_B": float(rb["drift_scores"][rows].mean()),
                }
            )
    return {
        "seed": seed,
        "arch": arch,
        "runs": runs,
        "pairs": pairs,
        "seconds": {row["stage"]: row["seconds"] for row in watch.laps},
    }


@pin_threads(torch=True)
def reproduce(scale: str = "quick", seed: int = 0, out_dir: Any = None) -> Report:
    """Run the experiment at ``scale`` and return (and, with ``out_dir``, write) the report."""
    check_scale(scale)
    cfg = SCALES[scale]
    watch = Stopwatch()
    seeds = [seed + s for s in cfg["seeds"]]
    jobs = [(cfg, s, arch) for arch in cfg["archs"] for s in seeds]
    results = map_jobs(_seed_job, jobs, workers=min(cfg["workers"], len(jobs)))
    report = Report(
        package="drift_probe",
        title="The Geometry of Forgetting: temporal drift as a residual-stream direction (Elbadry et al.)",
        scale=scale,
        seed=seed,
    )
    runs = [{"seed": r["seed"], "arch": r["arch"], **run} for r in results for run in r["runs"]]
    pairs = [p for r in results for p in r["pairs"]]
    _claims(report, runs, pairs)
    _tables(report, runs, pairs, results)
    _figures(report, runs, pairs)
    report.runtime_s = watch.elapsed_s
    report.notes = _notes(cfg, runs)
    if out_dir is not None:
        write_report(report, out_dir)
    return report


def _seed_interval(
    groups: list[Any], values: Any
) -> tuple[float | None, ConfidenceInterval | None]:
    """The mean of ``values`` (one per snapshot or pair, ``groups[i]["seed"]`` its seed) and the 95%
    t-interval over seeds of the per-seed means (snapshots of one seed share its world, so the seed
    is the replicate); ``None`` with < 2 seeds or a value not measured (NaN)."""
    v = np.asarray(values, float)
    if v.size == 0:
        return None, None
    seeds = np.array([g["seed"] for g in groups])
    per = np.array([v[seeds == s].mean() for s in np.unique(seeds)])
    value = float(v.mean()) if np.all(np.isfinite(v)) else None
    if per.size < 2 or not np.all(np.isfinite(per)):
        return value, None
    return value, t_interval(per)


def _method(groups: list[Any], what: str = "snapshots") -> str:
    n = len({g["seed"] for g in groups})
    if n < 2:
        return f"missing: {n} seed; needs >= 2 replicate seeds (quick has 3)"
    return f"95% t-interval over {n} seeds of the per-seed mean over {what}"


def _pooled(runs: list[dict[str, Any]], key: str) -> np.ndarray:
    """Bootstrap replicates ``runs[i][key]`` averaged over models (truncated to the shortest)."""
    k = min(len(r[key]) for r in runs)
    return np.mean([np.asarray(r[key])[:k] for r in runs], axis=0)


def _probe_control(runs: list[dict[str, Any]]) -> Control:
    """Positive control of every claim read off the drift probe (issue 43): the probe beats the best
    input-only control (relation, changed-before, both): otherwise what it reads is the input, not
    a residual-stream drift direction, and those claims cannot be tested."""
    boot = _pooled(runs, "diff_boot")
    diff = float(
        np.mean([r["aurocs"]["drift_probe"] - r["aurocs"][r["best_control"]] for r in runs])
    )
    lo, hi = np.nanquantile(boot, [0.025, 0.975])
    return Control.positive(
        "drift probe beats the best input-only control: AUROC(probe) − AUROC(best control), "
        "paired cluster bootstrap over subjects pooled over snapshots",
        diff,
        ">",
        0.0,
        (float(lo), float(hi)),
    )


HEADLINE_MARGIN = 0.05
"""The smallest lead of the probe over the best input-only control that counts (ours)."""


def _headline_claim(runs: list[dict[str, Any]]) -> Claim:
    """The headline (issue 46): AUROC(probe) − AUROC(best input-only control), mean over models,
    95% paired cluster bootstrap over subjects pooled over models. Positive control: the drift
    signal the training text holds beyond the input (oracle − best control) clears the same margin;
    negative control: the whole pipeline on shuffled drift labels."""

    def interval(key: str) -> tuple[float, float]:
        lo, hi = np.nanquantile(_pooled(runs, key), [0.025, 0.975])
        return float(lo), float(hi)

    probe = _probe_control(runs)
    o_diff = float(np.mean([r["oracle_diff"] for r in runs]))
    for r in runs:
        r["null_boot"] = r["headline_null"]["boot"]
    n_diff = float(np.mean([r["headline_null"]["diff"] for r in runs]))
    return Claim.decide(
        "Headline: the drift probe reads more than the input (AUROC above the best input-only "
        "control: relation, changed-before, both).",
        "AUROC(probe) − AUROC(best input-only control), mean over models",
        probe.value, (probe.low, probe.high), ">=", HEADLINE_MARGIN,
        positive=Control.positive(
            "drift signal present beyond the input: AUROC(oracle) − AUROC(best control), cluster "
            "bootstrap", o_diff, ">=", HEADLINE_MARGIN, interval("oracle_diff_boot")),
        negative=Control.negative(
            "the same pipeline (layer search, probe, controls) on shuffled drift labels", n_diff,
            interval("null_boot")),
        method="95% paired cluster bootstrap over subjects, replicates averaged over models",
        note=f"{HEADLINE_MARGIN} AUROC is the smallest lead we count (ours); best controls: "
        + ", ".join(sorted({r["best_control"] for r in runs}))
        + "; per model: "
        + ", ".join(
            f"{r['aurocs']['drift_probe'] - r['aurocs'][r['best_control']]:+.3f}" for r in runs
        ),
    )  # fmt: skip


def _baseline_claim(runs: list[dict[str, Any]]) -> Claim:
    """ "Confidence detectors stay near chance", decided against each model's permutation null band
    of each detector (issue 46), not against 0.5: per model the farthest detector's distance from
    its null's centre, target <= 0.10 (the paper's 0.49-0.57 around chance)."""
    dist = np.array([[r["bands"][b].distance(r["aurocs"][b]) for b in BASELINES] for r in runs])
    far = dist.max(axis=1)
    worst = BASELINES[int(np.argmax(dist.max(axis=0)))]
    oracle = np.array([r["aurocs"]["oracle"] for r in runs])
    o_mean, o_ci = _seed_interval(runs, oracle)
    inside = sum(all(r["bands"][b].excess(r["aurocs"][b]) == 0 for b in BASELINES) for r in runs)
    return _seed_claim(
        "Confidence-based detectors (token entropy, semantic entropy, CCS, SAPLMA) stay near "
        "chance on drift.",
        "|AUROC − centre of its permutation null| of the farthest baseline per snapshot (mean "
        "over snapshots)",
        runs, far, "<=", 0.10,
        Control.positive("the drift labels are readable: oracle AUROC (t-interval over seeds)",
                         o_mean, ">=", 0.7, o_ci),
        _negative("the oracle detector's |AUROC − centre of its permutation null|", runs,
                  np.array([r["bands"]["oracle"].distance(r["aurocs"]["oracle"]) for r in runs])),
        f"chance = the median AUROC of the same scores on permuted drift labels, per model and "
        f"detector; every baseline inside its 95% null band on {inside}/{len(runs)} models; "
        f"worst: {worst}; mean AUROCs "
        + ", ".join(f"{b} {np.mean([r['aurocs'][b] for r in runs]):.3f}" for b in BASELINES),
    )  # fmt: skip


def _seed_claim(
    statement: str,
    metric: str,
    groups: list[Any],
    values: Any,
    op: Any,
    threshold: float,
    positive: Control,
    negative: Control,
    note: str,
    kind: Any = "paper",
) -> Claim:
    value, ci = _seed_interval(groups, values)
    method = _method(groups) if ci is not None or len({g["seed"] for g in groups}) < 2 else (
        "missing: a value not measured on some snapshot (see note)"
    )  # fmt: skip
    return Claim.decide(statement, metric, value, ci, op, threshold, positive=positive,
                        negative=negative, method=method, note=note, kind=kind)  # fmt: skip


def _negative(description: str, groups: list[Any], values: Any) -> Control:
    """A negative control over seeds like :func:`_seed_interval` (absent without an interval)."""
    value, ci = _seed_interval(groups, values)
    if ci is None:
        return Control.absent("negative", f"{description}: needs >= 2 seeds, every one measured")
    return Control.negative(description, value, ci)


def _claims(report: Report, runs: list[dict[str, Any]], pairs: list[dict[str, Any]]) -> None:
    n = len(runs)
    probe = _probe_control(runs)
    report.add_claim(_headline_claim(runs))
    drift = np.array([r["aurocs"]["drift_probe"] for r in runs])
    oracle = np.array([r["aurocs"]["oracle"] for r in runs])
    report.add_claim(_seed_claim(
        "A linear probe reads drift from the residual stream (AUROC >= 0.80, below the oracle "
        "ceiling).",
        "drift-probe AUROC (mean over snapshots)",
        runs, drift, ">=", 0.80, probe,
        _negative("the same probe pipeline on shuffled drift labels (its AUROC)", runs,
                  np.array([r["headline_null"]["auroc"] for r in runs])),
        f"restated on the mean over snapshots (the paper: every model); {n} models; range "
        f"{drift.min():.3f}-{drift.max():.3f}; oracle mean {oracle.mean():.3f}; best input-only "
        f"control mean {np.mean([r['aurocs'][r['best_control']] for r in runs]):.3f}",
    ))  # fmt: skip
    report.add_claim(_baseline_claim(runs))
    shared = _shared_negatives(runs)
    cos = np.array([max(r["cos"]["cos"].values()) for r in runs])
    report.add_claim(_seed_claim(
        "(1) The drift probe's weights are nearly orthogonal to the correctness and uncertainty "
        "probes'.",
        "largest |cos(w_drift, w_other)| per snapshot (mean over snapshots)",
        runs, cos, "<=", 0.14, probe,
        shared["cos"],
        f"null 95% band mean {np.mean([r['cos']['band'] for r in runs]):.3f}; inside the band on "
        f"{sum(max(r['cos']['cos'].values()) <= r['cos']['band'] for r in runs)}/{n} models",
    ))  # fmt: skip
    names = list(runs[0]["corrs"])
    rs = np.array([[r["corrs"][k][0] for k in names] for r in runs], dtype=float)
    report.add_claim(_correlation_claim(names, rs, runs, probe, shared["r"]))
    deltas = np.array(
        [[r["nullspace"]["delta_drift"], r["nullspace"]["delta_correct"]] for r in runs]
    )
    report.add_claim(_seed_claim(
        "(3) Removing the correctness direction leaves drift probing unchanged, and vice versa.",
        "largest |delta AUROC| over the two directions per snapshot (mean over snapshots)",
        runs, np.abs(deltas).max(axis=1), "<=", 0.01, probe,
        shared["nullspace"],
        f"mean delta drift {deltas[:, 0].mean():+.4f}, delta correctness {deltas[:, 1].mean():+.4f}",
    ))  # fmt: skip
    after = np.array([r["inlp_correct"]["erased_after_inlp"] for r in runs])
    chance = np.array([r["inlp_band"].centre for r in runs])
    drop = np.array(
        [r["inlp_correct"]["kept"] - r["inlp_correct"]["kept_after_inlp"] for r in runs]
    )
    leace = np.array([r["inlp_correct"]["erased_after_leace"] for r in runs])
    report.add_claim(_seed_claim(
        "(4) INLP (k = 10) erases correctness (AUROC within 0.05 of chance) while drift AUROC "
        "drops <= 0.02.",
        "max(correctness AUROC after INLP − (chance + 0.05), drift drop − 0.02) per snapshot "
        "(mean)",
        runs, np.maximum(after - (chance + 0.05), drop - 0.02), "<=", 0.0, probe,
        shared["inlp"],
        f"both conditions in one margin (<= 0 iff both hold); chance = median of the same "
        f"pipeline on permuted correctness labels (mean {chance.mean():.3f}, the paper's 0.55 is "
        f"0.5 + 0.05); highest correctness AUROC after INLP {after.max():.3f}, largest drift drop {drop.max():+.3f}; after LEACE correctness "
        f"AUROC max {leace.max():.3f}, drift drop max "
        f"{np.max([r['inlp_correct']['kept'] - r['inlp_correct']['kept_after_leace'] for r in runs]):+.3f}",
    ))  # fmt: skip
    own = np.array(
        [
            [r["means"]["auroc"][("drift", "drift")], r["means"]["auroc"][("correct", "correct")]]
            for r in runs
        ]
    )
    cross = np.array(
        [
            [r["means"]["auroc"][("drift", "correct")], r["means"]["auroc"][("correct", "drift")]]
            for r in runs
        ]
    )
    centres = np.array(
        [[r["cross_bands"][("drift", "correct")].centre,
          r["cross_bands"][("correct", "drift")].centre] for r in runs]
    )  # fmt: skip
    report.add_claim(_seed_claim(
        "(5) Each difference-of-means direction separates its own label and not the other.",
        "min(own-label AUROC − 0.70, 0.10 − |cross-label AUROC − chance|) per snapshot (mean)",
        runs, _separation(own, cross, centres), ">=", 0.0, probe,
        _negative("swapped arms (each direction scored on the other label)", runs,
                  _separation(cross, own, centres)),
        f"both conditions in one margin (>= 0 iff own >= 0.70 and cross within 0.10 of its "
        f"permutation null's centre, mean {centres.mean():.3f}); "
        f"lowest own {own.min():.3f}, cross-label AUROC range {cross.min():.3f}-"
        f"{cross.max():.3f}; cos(mu_drift, mu_correct) mean "
        f"{np.mean([r['means']['cos'][('drift', 'correct')] for r in runs]):+.3f}",
    ))  # fmt: skip
    n_blocks = next(
        (len(r["profiles"]["stale"]) for r in runs if r["profiles"]["stale"] is not None), 0
    )
    report.add_claim(
        _profile_claim(
            np.array([r["profile_r"] for r in runs], float),
            n_blocks,
            runs,
            halves=np.array([r["profile_halves_r"] for r in runs], float),
            random_token=np.array([r["profile_random_r"] for r in runs], float),
        )
    )
    pab = np.array([p["p_a_gt_b"] for p in pairs])
    statement = ("Cross-cutoff: on the same prompts the probe fires on the snapshot trained "
                 "before a fact changed, not after.")  # fmt: skip
    metric = "P(A > B) over ordered snapshot pairs (mean over pairs)"
    if not len(pab):
        report.add_claim(Claim.decide(statement, metric, None, None, ">=", 0.9, positive=probe,
                                      negative=Control.absent("negative", "swapped snapshots: no pairs"),
                                      method="missing: no snapshot pairs with changed facts",
                                      note="no pairs"))  # fmt: skip
        return
    report.add_claim(_seed_claim(
        statement, metric, pairs, pab, ">=", 0.9, probe,
        _negative("swapped snapshots: P(B > A)", pairs, 1 - pab),
        f"restated on the mean over pairs (the paper: every pair); {len(pab)} pairs (seeds x "
        f"ordered cutoff pairs); lowest {pab.min():.3f}",
    ))  # fmt: skip


def _shared_negatives(runs: list[dict[str, Any]]) -> dict[str, Control]:
    """The negative controls of claims (1)-(4): each claim's own metric on the planted shared label
    (:func:`shared_label`: the drift labels with a quarter flipped) in place of correctness, where
    orthogonality must not hold, t-interval over seeds like the claim."""
    what = (
        f"a label sharing the drift direction (drift labels, {SHARED_FLIP:.0%} flipped at random)"
    )
    cos = np.array([r["shared"]["cos"] for r in runs], float)
    rs = np.array([abs(r["shared"]["r"]) for r in runs], float)
    ns = np.array(
        [max(abs(r["shared"]["nullspace"]["delta_drift"]),
             abs(r["shared"]["nullspace"]["delta_correct"])) for r in runs], float
    )  # fmt: skip
    chance = np.array([r["inlp_band"].centre for r in runs], float)
    after = np.array([r["shared"]["inlp"]["erased_after_inlp"] for r in runs], float)
    drop = np.array(
        [r["shared"]["inlp"]["kept"] - r["shared"]["inlp"]["kept_after_inlp"] for r in runs], float
    )
    return {
        "cos": _negative(f"|cos(w_drift, w)| of a probe on {what}", runs, cos),
        "r": _negative(f"|Pearson r| of the drift score with a probe's score on {what}", runs, rs),
        "nullspace": _negative(f"the same null-space test with {what} in place of correctness",
                               runs, ns),
        "inlp": _negative(f"the same INLP margin erasing {what} (correctness's chance kept)", runs,
                          np.maximum(after - (chance + 0.05), drop - 0.02)),
    }  # fmt: skip


def _separation(own: np.ndarray, cross: np.ndarray, chance: np.ndarray | float = 0.5) -> np.ndarray:
    """Per snapshot: >= 0 iff every own-label AUROC is >= 0.70 and every cross-label AUROC within
    0.10 of chance (``own``, ``cross``: ``(n, 2)``; ``chance``: the permutation null's centre of
    each cross-label AUROC, ``(n, 2)``, or one number)."""
    return np.minimum((own - 0.70).min(axis=1), (0.10 - np.abs(cross - chance)).min(axis=1))


def _correlation_claim(
    names: list[str],
    rs: np.ndarray,
    runs: list[dict[str, Any]],
    positive: Control,
    negative: Control | None = None,
) -> Claim:
    """Claim (2) from Pearson ``rs`` (``(n_models, n_scores)``, columns named by ``names``;
    ``runs[i]["seed"]`` the seed of model ``i``). A NaN is a score (or the drift score) that was
    constant on a model, where r is undefined: that score is not measured, so the claim is
    inconclusive; the note gives the largest |r| over the scores measured on every model."""
    statement = (
        "(2) Drift scores are uncorrelated with correctness, token entropy and semantic entropy."
    )
    metric = "largest |Pearson r| over scores per snapshot (mean over snapshots)"
    missing = np.isnan(rs).sum(0)
    measured = [j for j in range(len(names)) if missing[j] == 0]
    means = ", ".join(
        f"{k} {np.mean(rs[:, j]):+.3f}" if missing[j] == 0 else f"{k} n/a"
        for j, k in enumerate(names)
    )
    gaps = ", ".join(
        f"{k} on {missing[j]} of {len(rs)} models" for j, k in enumerate(names) if missing[j]
    )
    if negative is None:
        negative = Control.absent(
            "negative", "the drift score against a probe on a label sharing the drift direction"
        )
    if gaps:
        seen = (
            f"; largest |r| over the other scores {np.abs(rs[:, measured]).max():.3f}"
            if measured
            else ""
        )
        return Claim.decide(statement, metric, None, None, "<=", 0.20, positive=positive,
                            negative=negative,
                            method=f"missing: not measured for {gaps} (constant scores, r undefined)",
                            note=f"not measured for {gaps}{seen}; means: {means}")  # fmt: skip
    return _seed_claim(statement, metric, runs, np.abs(rs).max(axis=1), "<=", 0.20, positive,
                       negative, f"means: {means}")  # fmt: skip


def _profile_claim(
    prof: np.ndarray,
    n_blocks: int,
    runs: list[dict[str, Any]],
    halves: np.ndarray | None = None,
    random_token: np.ndarray | None = None,
) -> Claim:
    """The MLP-profile claim from the profile r of every model; NaN where a model has fewer than 5
    drifted-stale or confabulation items (or fewer than 3 blocks): then not measured.

    ``halves``: per model, r between the profiles of two random halves of the stale items (one
    group: shared dynamics, the positive control; NaN with < 10 stale items); ``random_token``: r
    between the stale profile and the confabulation items' attribution to a random other token
    (no answer written: dynamics that differ, the negative control)."""
    statement = "Stale recall and confabulation share MLP dynamics (profile correlation r > 0.8)."
    metric = "Pearson r of the mean MLP logit-attribution profiles (mean over snapshots)"
    if halves is None:
        positive = Control.absent(
            "positive", "two random halves of the stale items (shared dynamics) above r 0.8"
        )
    else:
        h_mean, h_ci = _seed_interval(runs, halves)
        positive = Control.positive(
            "shared dynamics show: r of two random halves of the drifted-stale items "
            "(t-interval over seeds; not measured with < 10 stale items)",
            h_mean, ">", 0.8, h_ci,
        )  # fmt: skip
    if random_token is None:
        negative = Control.absent(
            "negative", "the stale profile against an attribution to a random token"
        )
    else:
        negative = _negative(
            "the stale profile against the confabulation items' attribution to a random other "
            "token (no answer written)",
            runs,
            random_token,
        )
    ok = np.isfinite(prof)
    if ok.all():
        return _seed_claim(statement, metric, runs, prof, ">", 0.8, positive, negative,
                           f"r per block profile ({n_blocks} blocks); lowest r {prof.min():.3f} "
                           f"over {len(prof)} models")  # fmt: skip
    seen = (
        f"; lowest r {prof[ok].min():.3f}, mean {prof[ok].mean():.3f} over the measured ones"
        if ok.any()
        else ""
    )
    why = (
        f"{int((~ok).sum())} of {len(prof)} models have fewer than 5 drifted-stale or "
        "confabulation items (or < 3 blocks)"
    )
    return Claim.decide(statement, metric, None, None, ">", 0.8, positive=positive,
                        negative=negative, method=f"missing: not measured: {why}",
                        note=f"not measured: {why}{seen}")  # fmt: skip


def _tables(
    report: Report,
    runs: list[dict[str, Any]],
    pairs: list[dict[str, Any]],
    results: list[dict[str, Any]],
) -> None:
    methods = ["drift_probe", *CONTROLS, "oracle", *BASELINES, "correctness_probe"]
    rows = []
    for m in methods:
        v = np.array([r["aurocs"][m] for r in runs])
        rows.append(
            {
                "method": m,
                "mean_auroc": float(v.mean()),
                "min": float(v.min()),
                "max": float(v.max()),
            }
        )
    report.add_table("drift_auroc", rows)
    report.add_table(
        "models",
        [
            {
                "seed": r["seed"],
                "arch": r["arch"],
                "cutoff": r["cutoff"],
                "model": r["model"],
                "n": r["n"],
                "drift_rate": r["drift_rate"],
                "accuracy": r["accuracy"],
                "phi_drift_correct": r["label_phi"],
                "correct_auroc": r["correct_auroc"],
                "layer": r["layer"],
                "drift_auroc": r["aurocs"]["drift_probe"],
                "ci_low": r["drift_ci"][0],
                "ci_high": r["drift_ci"][1],
                "best_control": r["aurocs"][r["best_control"]],
                "probe_minus_control": r["aurocs"]["drift_probe"] - r["aurocs"][r["best_control"]],
                "shuffled_probe_minus_control": r["headline_null"]["diff"],
                "oracle": r["aurocs"]["oracle"],
                "ccs_accuracy": r["ccs_accuracy"],
                **{
                    f"n_{c}": r["cells"].get(c, 0)
                    for c in (
                        "stable-correct",
                        "drifted-stale",
                        "drifted-current",
                        "confabulation",
                        "other",
                    )
                },
            }
            for r in runs
        ],
    )
    report.add_table(
        "null_bands",
        [
            {
                "seed": r["seed"],
                "cutoff": r["cutoff"],
                "detector": b,
                "auroc": r["aurocs"][b],
                "null_centre": r["bands"][b].centre,
                "null_low": r["bands"][b].low,
                "null_high": r["bands"][b].high,
            }
            for r in runs
            for b in (*BASELINES, "oracle")
        ]
        + [
            {
                "seed": r["seed"],
                "cutoff": r["cutoff"],
                "detector": name,
                "auroc": value,
                "null_centre": band.centre,
                "null_low": band.low,
                "null_high": band.high,
            }
            for r in runs
            for name, value, band in (
                ("mu_drift on correct", r["means"]["auroc"][("drift", "correct")],
                 r["cross_bands"][("drift", "correct")]),
                ("mu_correct on drift", r["means"]["auroc"][("correct", "drift")],
                 r["cross_bands"][("correct", "drift")]),
                ("correct after INLP", r["inlp_correct"]["erased_after_inlp"], r["inlp_band"]),
            )
        ],
    )  # fmt: skip
    report.add_table(
        "orthogonality",
        [
            {
                "seed": r["seed"],
                "cutoff": r["cutoff"],
                "cos_correct": r["cos"]["cos"]["correct"],
                "cos_uncertain": r["cos"]["cos"]["uncertain"],
                "null_band": r["cos"]["band"],
                **{f"r_{k}": v[0] for k, v in r["corrs"].items()},
                "delta_drift": r["nullspace"]["delta_drift"],
                "delta_correct": r["nullspace"]["delta_correct"],
                "correct_after_inlp": r["inlp_correct"]["erased_after_inlp"],
                "drift_after_inlp": r["inlp_correct"]["kept_after_inlp"],
                "correct_after_leace": r["inlp_correct"]["erased_after_leace"],
                "uncertain_after_inlp": r["inlp_uncertain"]["erased_after_inlp"],
                "drift_after_inlp_unc": r["inlp_uncertain"]["kept_after_inlp"],
            }
            for r in runs
        ],
    )
    labels = ("drift", "correct")
    report.add_table(
        "mean_directions",
        [
            {
                "direction": d,
                **{
                    f"auroc_on_{lab}": float(np.mean([r["means"]["auroc"][(d, lab)] for r in runs]))
                    for lab in labels
                },
            }
            for d in labels
        ],
    )
    report.add_table(
        "mlp_profiles",
        [
            {
                "seed": r["seed"],
                "cutoff": r["cutoff"],
                "cell": c,
                **{f"block_{b}": float(v) for b, v in enumerate(r["profiles"][c])},
                "r": r["profile_r"],
            }
            for r in runs
            for c in ("stale", "confabulation")
            if r["profiles"][c] is not None
        ],
    )
    report.add_table("cross_cutoff", pairs)
    report.add_table(
        "timing",
        [
            {"seed": r["seed"], "arch": r["arch"], **{f"{k}_s": v for k, v in r["seconds"].items()}}
            for r in results
        ],
    )


def _figures(report: Report, runs: list[dict[str, Any]], pairs: list[dict[str, Any]]) -> None:
    fig, ax = new_figure()
    for key, label in (("layer_auroc_drift", "drift"), ("layer_auroc_correct", "correctness")):
        curves = np.array([r[key] for r in runs])
        x = np.arange(curves.shape[1])
        ax.plot(x, curves.mean(0), marker="o", label=label)
        ax.fill_between(x, curves.min(0), curves.max(0), alpha=0.2)
    ax.axhline(0.5, color="grey", ls=":")
    ax.set(xlabel="layer (0 = embeddings)", ylabel="validation AUROC", title="Probe AUROC by layer")
    ax.legend()
    report.add_figure("auroc_by_layer", fig)

    methods = ["drift_probe", *CONTROLS, "oracle", *BASELINES, "correctness_probe"]
    fig, ax = new_figure(size=(8, 4))
    means = [np.mean([r["aurocs"][m] for r in runs]) for m in methods]
    colors = ["C0"] + ["C7"] * len(CONTROLS) + ["C2"] + ["C3"] * len(BASELINES) + ["C1"]
    ax.bar(range(len(methods)), means, color=colors)
    for i, m in enumerate(methods):
        ax.scatter([i] * len(runs), [r["aurocs"][m] for r in runs], color="k", s=8, zorder=3)
    ax.axhline(0.5, color="grey", ls=":")
    ax.set_xticks(
        range(len(methods)),
        [m.replace("_", " ") for m in methods],
        rotation=40,
        ha="right",
        fontsize=8,
    )
    ax.set(
        ylabel="drift AUROC",
        title="Drift detection: probe, input-only controls, oracle, confidence baselines",
    )
    report.add_figure("methods", fig)

    fig, ax = new_figure()
    null = np.concatenate([r["cos"]["null"] for r in runs])
    ax.hist(null, bins=30, color="C7", alpha=0.7, label="shuffled-label null")
    for r in runs:
        ax.axvline(r["cos"]["cos"]["correct"], color="C1", alpha=0.6)
        ax.axvline(r["cos"]["cos"]["uncertain"], color="C3", alpha=0.6, ls="--")
    ax.axvline(0.14, color="k", ls=":", label="0.14")
    ax.set(
        xlabel="|cos(w_drift, w)|",
        ylabel="count",
        title="Probe cosines (solid: correctness, dashed: uncertainty)",
    )
    ax.legend()
    report.add_figure("cosines", fig)

    fig, ax = new_figure(size=(4.5, 4))
    labels = ("drift", "correct")
    table = np.array(
        [[np.mean([r["means"]["auroc"][(d, lab)] for r in runs]) for lab in labels] for d in labels]
    )
    im = ax.imshow(table, vmin=0.3, vmax=1.0, cmap="viridis")
    for i in range(2):
        for j in range(2):
            ax.text(j, i, f"{table[i, j]:.2f}", ha="center", va="center", color="w")
    ax.set_xticks([0, 1], [f"{lab} label" for lab in labels])
    ax.set_yticks([0, 1], [f"mu_{d}" for d in labels])
    ax.set_title("Difference-of-means projections (AUROC)")
    fig.colorbar(im, ax=ax)
    report.add_figure("mean_directions", fig)

    report.add_figure("mlp_profiles", _profile_figure(runs))

    fig, ax = new_figure()
    if pairs:
        names = [f"{p['A']}>{p['B']}" for p in pairs]
        order = sorted(set(names))
        for k, name in enumerate(order):
            vals = [p["p_a_gt_b"] for p, nm in zip(pairs, names, strict=True) if nm == name]
            ax.scatter([k] * len(vals), vals, color="C0")
        ax.set_xticks(range(len(order)), [n.replace(">", " vs ") for n in order])
    ax.axhline(0.9, color="k", ls=":", label="0.9")
    ax.axhline(0.5, color="grey", ls=":")
    ax.set(
        xlabel="snapshot pair (A before B)",
        ylabel="P(A > B)",
        ylim=(0, 1.02),
        title="Cross-cutoff test",
    )
    ax.legend()
    report.add_figure("cross_cutoff", fig)


def _profile_figure(runs: list[dict[str, Any]]) -> Any:
    """Mean MLP attribution profiles of stale recall and confabulation over the models that have
    >= 5 items of the cell; a figure that says so when no model has (not a crash after the claims)."""
    fig, ax = new_figure()
    n_blocks = 0
    for c, color in (("stale", "C0"), ("confabulation", "C3")):
        profs = np.array([r["profiles"][c] for r in runs if r["profiles"][c] is not None])
        if len(profs):
            n_blocks = profs.shape[1]
            ax.plot(
                profs.mean(0),
                marker="o",
                color=color,
                label=f"{c} (mean over {len(profs)} of {len(runs)} models)",
            )
            for p in profs:
                ax.plot(p, color=color, alpha=0.15)
    if n_blocks:
        ax.set_xticks(range(n_blocks))
        ax.legend()
    else:
        ax.text(
            0.5,
            0.5,
            "no model has >= 5 drifted-stale or confabulation items",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
    ax.set(
        xlabel="block",
        ylabel="MLP direct logit attribution",
        title="MLP attribution to the answer token",
    )
    return fig


def _notes(cfg: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    ent = {
        c: np.mean([r["entropy_by_cell"].get(c, np.nan) for r in runs])
        for c in ("stable-correct", "drifted-stale", "confabulation")
    }
    kinds = sorted({r["model"].split(", seed")[0] for r in runs})
    return (
        f"Every claim ran on: {'; '.join(kinds)} (one per seed and cutoff, named in the models "
        "table). "
        f"Models: {len(runs)} snapshots ({len(cfg['seeds'])} seeds x {len(cfg['archs'])} archs x "
        f"{len(cfg['cutoffs'])} cutoffs {cfg['cutoffs']}), each asked about the volatile relations "
        f"{', '.join(VOLATILE)} at the world's last year; {cfg['unseen']:.0%} of people and companies never "
        "shown (the confabulation cell). Probes: standardised L2 logistic regression, C by grouped CV, layer "
        "chosen on inner validation folds; every split grouped by subject and stratified by label "
        "(StratifiedGroupKFold). Near-chance claims are decided against each model's permutation null "
        "(the same scores or pipeline on permuted labels), not 0.5. Facts that change between the "
        "first and last cutoff are held out of every probe's training (scored out of sample). Mean first-"
        "token entropy by cell: " + ", ".join(f"{k} {v:.2f}" for k, v in ent.items()) + " nats. "
        f"Correctness at the query time overlaps drift by construction (a model that recalls its "
        f"cutoff's value is wrong exactly where the fact drifted): phi(drift, correct) mean "
        f"{np.mean([r['label_phi'] for r in runs]):+.2f}; the correctness probe reaches AUROC "
        f"{np.mean([r['correct_auroc'] for r in runs]):.2f} on its own labels."
    )
