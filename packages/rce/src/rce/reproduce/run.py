"""The measurements: one seed's fact LM and requests, and :func:`measure_leakage` on any model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from paper_common import (
    Stopwatch,
)
from paper_common.device import pinned_threads
from paper_common.facts import RELATIONS, World
from paper_common.lm import fact_lm, num_layers
from rce.editing import (
    FTConfig,
    MEMITConfig,
    ROMEConfig,
    apply_rank_one,
    check_stats_texts,
    context_templates,
    edit,
    first_argmax,
    revs_demote,
    rome_updates,
    scaled_window,
    second_moment,
    trace_layers,
)
from rce.metrics import among_successful, concat, evaluate_requests, wilson
from rce.objectives import Defence

# every defence the runner knows, by the name the report uses
from rce.reproduce.scales import DEFENCE_SPECS, _cells
from rce.requests import EditRequest, stats_corpus, utility_prompts, world_requests


def _seed_job(job: tuple[dict[str, Any], int]) -> dict[str, Any]:
    # one thread whether the job runs in a worker or in this process, so a seed's numbers (and the
    # fact LM's cache key) do not depend on ``workers``
    with pinned_threads(1, torch=True):
        return _run_seed(*job)


def _run_seed(cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    watch = Stopwatch()
    world = World(seed=seed, **cfg["world"])
    model, tok = fact_lm(
        world,
        size=cfg["size"],
        seed=seed,
        arch=cfg["arch"],
        steps=cfg["steps"],
        history=False,
        cues=False,
        progress=False,
    )
    watch.lap("fact LM")
    requests = world_requests(world, model, tok, "born_in", cfg["n_edits"], seed=seed)
    utility = utility_prompts(world, ("born_in",), cfg["n_utility"], seed)
    # C from text that is not the edit corpus: the training text without the edited people
    texts = stats_corpus(world.corpus(None, history=False, cues=False)[0], requests)
    out = measure_leakage(
        model,
        tok,
        requests,
        utility,
        texts,
        _cells(cfg),
        rome=cfg["rome"],
        memit=cfg["memit"],
        ft=cfg.get("ft"),
        clamps=cfg.get("clamps", ()),
        seed=seed,
        name=f"fact_lm {cfg['size']} ({cfg['arch']}, seed {seed}, in-process)",
    )
    out["laps"] = watch.laps + out["laps"]
    out["n_values"] = len(world.entities[RELATIONS["born_in"].value])
    return out


#: the keys kept per request for the clamp frontier
_FRONTIER_KEYS = ("target_top1", "edit_success", "true_rank", "success/output/10", "chance/10")


def model_name(model: Any) -> str:
    """How a report names a model: its hub name or path when it has one, else its architecture
    and size (``"gpt2 4x128"``)."""
    cfg = getattr(model, "config", None)
    path = getattr(cfg, "_name_or_path", "") if cfg is not None else ""
    if path:
        return str(path)
    arch = getattr(cfg, "model_type", type(model).__name__)
    return f"{arch} {num_layers(model)}x{getattr(cfg, 'hidden_size', '?')}"


def measure_leakage(
    model: Any,
    tok: Any,
    requests: Sequence[EditRequest],
    utility: Sequence[tuple[str, str]] = (),
    stats_texts: Sequence[str] | None = None,
    cells: Sequence[tuple[str, str]] = (("rome", "none"),),
    rome: dict[str, Any] | None = None,
    memit: dict[str, Any] | None = None,
    ft: dict[str, Any] | None = None,
    clamps: Sequence[float] = (),
    seed: int = 0,
    name: str | None = None,
    trace_requests: int = 20,
) -> dict[str, Any]:
    """Edit ``requests`` on ``model`` (any Hugging Face causal LM and its tokenizer; true answers one
    token, targets any length) with every ``(editor, defence)`` of ``cells`` (defences by their
    :data:`DEFENCE_SPECS` name), attack and score each, and restore the weights after each.

    The fact token and block come from ROME's causal tracing (both lookup tokens, the window scaled
    to the depth, :func:`rce.editing.scaled_window`); ``stats_texts`` (general text, not the edited
    facts) give C. ``rome`` / ``memit`` / ``ft``: config overrides (:class:`ROMEConfig` fields...).
    ``clamps``: ROME's clamp factors at which the plain ROME edit is also run (the efficacy-leakage
    frontier). Returns per-request arrays (``"before"``, ``"results"[cell]``, ``"frontier"[clamp]``)
    and what was chosen; ``"model"`` names the model (``name`` or :func:`model_name`).
    """
    reqs = list(requests)
    if not reqs:
        raise ValueError("requests must not be empty")
    bad = [c for c in cells if c[0] not in ("rome", "memit", "ft") or c[1] not in DEFENCE_SPECS]
    if bad:
        raise ValueError(
            f"unknown cell(s) {bad}: editors rome/memit/ft, defences {', '.join(DEFENCE_SPECS)}"
        )
    if any(not c > 0 for c in clamps):
        raise ValueError(f"clamps must be > 0; got {list(clamps)}")
    editors = {e for e, _ in cells} | ({"rome"} if clamps else set())
    if editors - {"ft"} and stats_texts is None:
        raise ValueError("ROME and MEMIT need stats_texts (general text) for C")
    watch = Stopwatch()
    # where does this model recall facts? trace both lookup tokens, keep the stronger
    window = scaled_window(num_layers(model))
    traces = {
        ft_: trace_layers(model, tok, reqs[:trace_requests], seed=seed, fact_token=ft_,
                          window=window)
        for ft_ in ("subject_last", "last")
    }  # fmt: skip
    fact_token = _pick_fact_token(traces)
    layer = traces[fact_token].best  # the lowest block within TRACE_TIE_TOL of the largest effect
    memit_layers = tuple(sorted({max(0, layer - 1), layer}))
    rome_cfg = ROMEConfig(layer=layer, fact_token=fact_token, **(rome or {}))
    memit_cfg = MEMITConfig(layers=memit_layers, fact_token=fact_token, **(memit or {}))
    C = {}
    if editors - {"ft"}:
        C = {lay: second_moment(model, tok, list(stats_texts or []), lay) for lay in memit_layers}
        check_stats_texts(list(stats_texts or []), reqs)
    contexts = context_templates(model, tok, rome_cfg.contexts, seed)
    m_contexts = context_templates(model, tok, memit_cfg.contexts, seed)
    before = evaluate_requests(model, tok, reqs, utility, seed=seed)
    watch.lap("tracing, statistics, baseline")
    state = {k: v.clone() for k, v in model.state_dict().items()}

    def rome_cell(defence: Defence, cfg: ROMEConfig) -> dict[str, np.ndarray]:
        erasure = not defence.uses_target
        updates, _ = rome_updates(model, tok, reqs, defence, cfg, C[layer], contexts)
        parts = []
        for update, request in zip(updates, reqs, strict=True):
            handle = apply_rank_one(model, update)
            if defence.name == "revs":
                revs_demote(model, tok, [request], layer, saved=handle.saved, fact_token=fact_token)
            parts.append(
                evaluate_requests(model, tok, [request], utility, seed=seed, erasure=erasure)
            )
            handle.restore()
        return concat(parts)

    results: dict[str, dict[str, np.ndarray]] = {}
    for editor, dname in cells:
        defence = DEFENCE_SPECS[dname]
        erasure = not defence.uses_target
        if editor == "rome":
            results[f"{editor}/{dname}"] = rome_cell(defence, rome_cfg)
        elif editor == "memit":
            handle = edit(model, tok, reqs, "memit", defence, memit_cfg, C=C, contexts=m_contexts)
            results[f"{editor}/{dname}"] = evaluate_requests(
                model, tok, reqs, utility, seed=seed, erasure=erasure
            )
            handle.restore()
        else:  # norm-bounded fine-tuning of the traced block's MLP on all edits at once
            ft_cfg = FTConfig(layer=layer, fact_token=fact_token, **(ft or {}))
            handle = edit(model, tok, reqs, "ft", defence, ft_cfg, contexts=["{}"])
            results[f"{editor}/{dname}"] = evaluate_requests(
                model, tok, reqs, utility, seed=seed, erasure=erasure
            )
            handle.restore()
        watch.lap(f"{editor}/{dname}")
    frontier: dict[float, dict[str, np.ndarray]] = {}
    for clamp in sorted(
        {float(c) for c in clamps} | ({rome_cfg.clamp_norm_factor} if clamps else set())
    ):
        if clamp == rome_cfg.clamp_norm_factor and "rome/none" in results:
            res = results["rome/none"]
        else:
            res = rome_cell(DEFENCE_SPECS["none"], replace(rome_cfg, clamp_norm_factor=clamp))
            watch.lap(f"rome/none clamp {clamp:g}")
        frontier[clamp] = {k: res[k] for k in _FRONTIER_KEYS if k in res}
    restored = all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())
    return {
        "seed": seed,
        "model": name if name is not None else model_name(model),
        "before": before,
        "results": results,
        "frontier": frontier,
        "fact_token": fact_token,
        "layer": layer,
        "window": window,
        "trace": {ft_: t.effect.tolist() for ft_, t in traces.items()},
        "restored": restored,
        "vocab": len(tok),
        "laps": watch.laps,
    }


def _pick_fact_token(traces: dict[str, Any]) -> str:
    """The lookup token whose strongest block has the larger causal effect; within
    ``TRACE_TIE_TOL`` it is a tie and the first in ``traces``' order (``subject_last``) wins."""
    names = list(traces)
    return names[first_argmax([float(traces[ft].effect.max()) for ft in names])]


def _pool(runs: list[dict[str, Any]], cell: str) -> dict[str, np.ndarray]:
    return concat([r["results"][cell] if cell != "before" else r["before"] for r in runs])


def _rate(x: np.ndarray) -> tuple[float, float, float, int]:
    x = np.asarray(x, dtype=bool)
    lo, hi = wilson(int(x.sum()), len(x))
    return float(x.mean()), lo, hi, len(x)


def _frontier_rows(runs: list[dict[str, Any]], n_values: int) -> list[dict[str, Any]]:
    """Efficacy and leakage (among successful edits) of plain ROME per clamp factor, pooled."""
    clamps = sorted({c for r in runs for c in r.get("frontier", {})})
    rows = []
    for c in clamps:
        res = concat([r["frontier"][c] for r in runs])
        ok = among_successful(res)
        n_ok = len(ok["true_rank"])
        eff, e_lo, e_hi, n = _rate(res["edit_success"])
        leak = _rate(ok["success/output/10"]) if n_ok else (np.nan, np.nan, np.nan, 0)
        rows.append(
            {
                "clamp_norm_factor": c,
                "efficacy": eff,
                "efficacy_ci_low": e_lo,
                "efficacy_ci_high": e_hi,
                "n": n,
                "n_successful": n_ok,
                "output_asr@10_successful": leak[0],
                "asr_ci_low": leak[1],
                "asr_ci_high": leak[2],
                "median_true_rank_successful": float(np.median(ok["true_rank"]))
                if n_ok
                else float("nan"),
                "chance@10": max(float(np.mean(ok["chance/10"])) if n_ok and "chance/10" in ok
                                 else 0.0, 10 / n_values),
            }
        )  # fmt: skip
    return rows
