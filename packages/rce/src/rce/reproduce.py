"""``reproduce``: rank leakage after ROME and MEMIT edits, the one-query Output Attack against the
head-projection, probability-delta and rephrasing attacks, and RCE, on tiny GPT-2 fact LMs.

Per seed: a :class:`paper_common.facts.World` (``born_in``: people to one-word cities) and a
``fact_lm`` trained on it; ``n_edits`` facts the model knows are edited to a random other city
(Error Injection's target), each ROME edit on its own (the weights are restored between edits),
MEMIT's as one batch; every (editor, defence) cell is attacked with every attack at
B in {1, 2, 5, 10, 20}. The fact token and layer come from causal tracing.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

from paper_common import (
    Claim,
    Report,
    Stopwatch,
    check_scale,
    map_jobs,
    new_figure,
    pin_threads,
    write_report,
)
from paper_common.device import pinned_threads
from paper_common.facts import RELATIONS, World
from paper_common.lm import fact_lm
from rce.attacks import BUDGETS
from rce.editing import (
    FTConfig,
    MEMITConfig,
    ROMEConfig,
    apply_rank_one,
    context_templates,
    edit,
    first_argmax,
    revs_demote,
    rome_updates,
    second_moment,
    trace_layers,
)
from rce.metrics import ATTACKS, concat, evaluate_requests, wilson
from rce.objectives import Defence
from rce.requests import utility_prompts, world_requests

__all__ = ["DEFENCE_SPECS", "SCALES", "reproduce"]

# every defence the runner knows, by the name the report uses
DEFENCE_SPECS: dict[str, Defence] = {
    "none": Defence("none"),
    "fact_erasure": Defence("fact_erasure"),
    "input_rephrasing": Defence("input_rephrasing"),
    "head_projection": Defence("head_projection"),
    "max_entropy": Defence("max_entropy"),
    "revs": Defence("revs"),
    "rce": Defence("rce"),
    # ablation fixed in advance: a band of ranks [R, 2R] instead of "below R, above |V|/2"
    "rce_band": Defence("rce", floor_rank=100),
    "rce_whitebox": Defence("rce", whitebox=True),
}

_WORLD = {"n_people": 160, "n_cities": 200, "n_companies": 20, "n_countries": 8}

SCALES: dict[str, dict[str, Any]] = {
    "smoke": {
        "seeds": [0],
        "world": {"n_people": 40, "n_cities": 30, "n_companies": 6, "n_countries": 4},
        "size": "tiny4",
        "steps": 300,
        "arch": "gpt2",
        "n_edits": 8,
        "n_utility": 20,
        "editors": ["rome", "memit"],
        "defences": ["none", "rce"],
        "ablations": [],
        "rome": {"steps": 5, "clamp_norm_factor": 10.0, "contexts": ((3, 2),)},
        "memit": {
            "steps": 5,
            "clamp_norm_factor": 4.0,
            "mom2_weight": 100.0,
            "contexts": ((3, 2),),
        },
        "workers": 1,
    },
    "quick": {
        "seeds": [0, 1, 2],
        "world": _WORLD,
        "size": "tiny4",
        "steps": None,
        "arch": "gpt2",
        "n_edits": 100,
        "n_utility": 100,
        "editors": ["rome", "memit"],
        "defences": ["none", "head_projection", "rce"],
        "ablations": [("rome", "rce_band")],
        "rome": {"steps": 20, "clamp_norm_factor": 10.0, "contexts": ((5, 3),)},
        "memit": {
            "steps": 25,
            "clamp_norm_factor": 4.0,
            "mom2_weight": 100.0,
            "contexts": ((5, 3),),
        },
        # one single-threaded worker per seed: three processes share the two cores evenly
        "workers": 3,
    },
    # the paper's grid on the fact LMs; GPT-J-6B / Llama-2-7b on CounterFact need a GPU and the
    # local file (rce.requests.load_counterfact) and are not wired into this runner
    "full": {
        "seeds": [0, 1, 2, 3, 4],
        "world": _WORLD,
        "size": "tiny4",
        "steps": None,
        "arch": "gpt2",
        "n_edits": 100,
        "n_utility": 200,
        "editors": ["rome", "memit", "ft"],
        "defences": [
            "none",
            "fact_erasure",
            "input_rephrasing",
            "head_projection",
            "max_entropy",
            "revs",
            "rce",
        ],
        "ablations": [("rome", "rce_band"), ("rome", "rce_whitebox"), ("memit", "rce_whitebox")],
        "rome": {"steps": 20, "clamp_norm_factor": 10.0, "contexts": ((5, 10), (10, 10))},
        "memit": {
            "steps": 25,
            "clamp_norm_factor": 4.0,
            "mom2_weight": 100.0,
            "contexts": ((5, 10),),
        },
        "ft": {"steps": 25, "lr": 5e-4, "norm_bound": 5e-4},
        "workers": 2,
    },
}

# display names of the attacks rce.metrics scores, in its order
ATTACK_LABELS = dict(
    zip(
        ATTACKS,
        (
            "Output (target excluded)",
            "Output (raw top-B)",
            "Head Projection",
            "Probability Delta",
            "Input Rephrasing",
        ),
        strict=True,
    )
)


def _cells(cfg: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e, d) for e in cfg["editors"] for d in cfg["defences"]] + [
        tuple(a) for a in cfg["ablations"]
    ]


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
    texts, _ = world.corpus(None, history=False, cues=False)
    # where does this model recall facts? trace both lookup tokens, keep the stronger
    traces = {
        ft: trace_layers(model, tok, requests[:20], seed=seed, fact_token=ft)
        for ft in ("subject_last", "last")
    }
    fact_token = _pick_fact_token(traces)
    layer = traces[fact_token].best  # the lowest block within TRACE_TIE_TOL of the largest effect
    memit_layers = tuple(sorted({max(0, layer - 1), layer}))
    C = {lay: second_moment(model, tok, texts, lay) for lay in memit_layers}
    rome_cfg = ROMEConfig(layer=layer, fact_token=fact_token, **cfg["rome"])
    memit_cfg = MEMITConfig(layers=memit_layers, fact_token=fact_token, **cfg["memit"])
    contexts = context_templates(model, tok, rome_cfg.contexts, seed)
    m_contexts = context_templates(model, tok, memit_cfg.contexts, seed)
    before = evaluate_requests(model, tok, requests, utility, seed=seed)
    watch.lap("tracing, statistics, baseline")
    state = {k: v.clone() for k, v in model.state_dict().items()}
    results: dict[str, dict[str, np.ndarray]] = {}
    for editor, name in _cells(cfg):
        defence = DEFENCE_SPECS[name]
        if editor == "rome":
            updates, _ = rome_updates(model, tok, requests, defence, rome_cfg, C[layer], contexts)
            parts = []
            for update, request in zip(updates, requests, strict=True):
                handle = apply_rank_one(model, update)
                if defence.name == "revs":
                    revs_demote(
                        model, tok, [request], layer, saved=handle.saved, fact_token=fact_token
                    )
                parts.append(evaluate_requests(model, tok, [request], utility, seed=seed))
                handle.restore()
            results[f"{editor}/{name}"] = concat(parts)
        elif editor == "memit":
            handle = edit(
                model, tok, requests, "memit", defence, memit_cfg, C=C, contexts=m_contexts
            )
            results[f"{editor}/{name}"] = evaluate_requests(
                model, tok, requests, utility, seed=seed
            )
            handle.restore()
        else:  # norm-bounded fine-tuning of the traced block's MLP on all edits at once
            ft_cfg = FTConfig(layer=layer, fact_token=fact_token, **cfg.get("ft", {}))
            handle = edit(model, tok, requests, "ft", defence, ft_cfg, contexts=["{}"])
            results[f"{editor}/{name}"] = evaluate_requests(
                model, tok, requests, utility, seed=seed
            )
            handle.restore()
        watch.lap(f"{editor}/{name}")
    restored = all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())
    return {
        "seed": seed,
        "before": before,
        "results": results,
        "fact_token": fact_token,
        "layer": layer,
        "trace": {ft: t.effect.tolist() for ft, t in traces.items()},
        "n_values": len(world.entities[RELATIONS["born_in"].value]),
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


@pin_threads(torch=True)
def reproduce(
    scale: str = "quick", seed: int = 0, out_dir: str | os.PathLike[str] | None = None
) -> Report:
    """Run the experiment at ``scale`` (smoke / quick / full); write the report to ``out_dir``.

    ``seed`` offsets the fact-LM seeds (``seed + s`` for each of the scale's seeds).
    """
    scale = check_scale(scale)
    cfg = dict(SCALES[scale])
    watch = Stopwatch()
    jobs = [(cfg, seed + s) for s in cfg["seeds"]]
    runs = map_jobs(_seed_job, jobs, workers=min(cfg["workers"], len(jobs)))
    watch.lap("edits and attacks")
    report = Report(
        package="rce",
        title="Rank leakage after knowledge editing, the one-query Output Attack, and RCE",
        scale=scale,
        seed=seed,
    )
    cells = [f"{e}/{d}" for e, d in _cells(cfg)]
    pooled = {c: _pool(runs, c) for c in ["before", *cells]}
    n_values = runs[0]["n_values"]
    asr_rows, summary = [], []
    base = pooled["before"]
    for cell in ["before", *cells]:
        res = pooled[cell]
        for attack in ATTACK_LABELS:
            for b in BUDGETS:
                key = f"success/{attack}/{b}"
                if key not in res:
                    continue
                rate, lo, hi, n = _rate(res[key])
                asr_rows.append(
                    {
                        "cell": cell,
                        "attack": attack,
                        "B": b,
                        "asr": rate,
                        "ci_low": lo,
                        "ci_high": hi,
                        "n": n,
                    }
                )
        chance10 = float(np.mean(res["chance/10"])) if "chance/10" in res else float("nan")
        summary.append(
            {
                "cell": cell,
                "target_top1": float(np.mean(res["target_top1"])),
                "paraphrase": float(np.nanmean(res["paraphrase"])),
                "neighbour_drop": float(
                    np.nanmean(base["neighbour_acc"]) - np.nanmean(res["neighbour_acc"])
                ),
                "utility_drop": float(
                    np.nanmean(base["utility_acc"]) - np.nanmean(res["utility_acc"])
                ),
                "median_true_rank": float(np.median(res["true_rank"])),
                "output_asr@10": float(np.mean(res["success/output/10"])),
                "hp_asr@10": float(np.mean(res["success/hp/10"])),
                "pd_asr@10": float(np.mean(res["success/pd/10"])),
                "ir_asr@20": float(np.mean(res["success/ir/20"]))
                if "success/ir/20" in res
                else float("nan"),
                "chance_decoy@10": chance10,
                "chance_B_over_V@10": 10 / n_values,
                "n": len(res["true_rank"]),
            }
        )
    report.add_table("summary", summary)
    report.add_table("asr", asr_rows)
    report.add_table(
        "tracing",
        [
            {
                "seed": r["seed"],
                "fact_token": ft,
                **{f"block {i}": e for i, e in enumerate(eff)},
                "chosen": ft == r["fact_token"],
                "layer": r["layer"],
            }
            for r in runs
            for ft, eff in r["trace"].items()
        ],
    )
    _claims(report, cfg, pooled, summary, n_values)
    _figures(report, cfg, pooled, cells, n_values)
    watch.lap("report")
    per_seed = [{"seed": r["seed"], **lap} for r in runs for lap in r["laps"]]
    report.add_table("timing", [{"seed": "all", **lap} for lap in watch.laps] + per_seed)
    report.runtime_s = watch.elapsed_s
    restored = sum(bool(r["restored"]) for r in runs)
    report.notes = (
        _notes(cfg, runs)
        + f" Weights restored bit for bit after every edit in {restored} of {len(runs)} seeds."
    )
    if out_dir is not None:
        write_report(report, out_dir)
    return report


def _claims(
    report: Report,
    cfg: dict[str, Any],
    pooled: dict[str, dict[str, np.ndarray]],
    summary: list[dict[str, Any]],
    n_values: int,
) -> None:
    row = {r["cell"]: r for r in summary}
    editors = cfg["editors"]
    defences = cfg["defences"]

    def asr(cell: str, attack: str, b: int) -> float:
        return float(np.mean(pooled[cell][f"success/{attack}/{b}"]))

    def ci(cell: str, attack: str, b: int) -> str:
        rate, lo, hi, n = _rate(pooled[cell][f"success/{attack}/{b}"])
        return f"{rate:.2f} [{lo:.2f}, {hi:.2f}] (n={n})"

    # 1. rank leakage after plain edits
    for e in editors:
        cell = f"{e}/none"
        r = row[cell]
        ok = (
            r["median_true_rank"] <= 5
            and r["output_asr@10"] >= 0.5
            and max(r["chance_decoy@10"], 10 / n_values) <= 0.10
        )
        report.add_claim(
            Claim(
                f"Rank leakage: after {e.upper()} with no defence the true token stays near the top",
                "Output ASR@10 (target excluded)",
                r["output_asr@10"],
                "median rank <= 5, ASR@10 >= 0.5, chance <= 0.10",
                bool(ok),
                f"median true rank {r['median_true_rank']:.0f}; ASR@10 {ci(cell, 'output', 10)}; "
                f"chance: decoy {r['chance_decoy@10']:.3f}, B/|V| {10 / n_values:.3f}; edit efficacy {r['target_top1']:.2f}",
            )
        )
    # 2. the one-query Output Attack matches or beats HP, PD, IR at equal B (no defence)
    gaps = []
    for e in editors:
        for other in ("hp", "pd", "ir"):
            for b in BUDGETS:
                key = f"success/{other}/{b}"
                if key in pooled[f"{e}/none"]:
                    gaps.append(
                        (asr(f"{e}/none", "output", b) - asr(f"{e}/none", other, b), e, other, b)
                    )
    worst = min(gaps)
    report.add_claim(
        Claim.threshold(
            "The one-query Output Attack matches or beats HP, PD and rephrasing at equal budget",
            "min over editors, attacks and B of Output ASR - other ASR",
            worst[0],
            ">=",
            -0.02,
            f"worst: {worst[1]} vs {worst[2]} at B={worst[3]}; 'matches' = within 2 points",
        )
    )
    # 3. it survives the HP and max-entropy defences
    measured = [d for d in ("head_projection", "max_entropy") if d in defences]
    kept = [(asr(f"{e}/{d}", "output", 10), e, d) for e in editors for d in measured]
    if kept:
        low = min(kept)
        names = " and ".join(d.replace("_", "-") for d in measured)
        report.add_claim(
            Claim.threshold(
                f"The Output Attack keeps ASR@10 >= 30% under the {names} defence"
                + ("s" if len(measured) > 1 else ""),
                f"min Output ASR@10 over editors x {{{', '.join(measured)}}}",
                low[0],
                ">=",
                0.30,
                "; ".join(f"{e}/{d} {ci(f'{e}/{d}', 'output', 10)}" for _, e, d in kept),
            )
        )
    if "rce" not in defences:
        return
    # 4. RCE conceals from the Output Attack: ASR@10 within 5 points of chance
    excess = [
        (asr(f"{e}/rce", "output", 10) - max(row[f"{e}/rce"]["chance_decoy@10"], 10 / n_values), e)
        for e in editors
    ]
    top = max(excess)
    report.add_claim(
        Claim.threshold(
            "RCE brings the Output Attack down to chance",
            "max over editors of Output ASR@10 - chance",
            top[0],
            "<=",
            0.05,
            "; ".join(
                f"{e}: ASR@10 {ci(f'{e}/rce', 'output', 10)}, chance {max(row[f'{e}/rce']['chance_decoy@10'], 10 / n_values):.3f}"
                for _, e in excess
            ),
        )
    )
    # 5. and generalises: HP, PD and IR succeed less often than against the same editor without RCE
    pairs = [
        (asr(f"{e}/rce", attack, b), asr(f"{e}/none", attack, b), e, attack, b)
        for e in editors
        for attack, b in (("hp", 10), ("pd", 10), ("ir", 20))
        if f"success/{attack}/{b}" in pooled[f"{e}/rce"]
    ]
    report.add_claim(_lowers_claim(pairs))
    # 6. fidelity with RCE
    rome_para = row["rome/none"]["paraphrase"] if "rome/none" in row else float("nan")
    for e in editors:
        report.add_claim(_fidelity_claim(e, row[f"{e}/rce"], rome_para))


def _lowers_claim(pairs: list[tuple[float, float, str, str, int]]) -> Claim:
    """Claim 5 from ``(ASR with RCE, ASR without defence, editor, attack, B)`` per pair.

    An attack that never succeeds without a defence (ASR 0 there and 0 with RCE) gives nothing to
    lower: the strict ``<`` would count it as a failure although nothing got worse, so such a pair
    is reported as undecided and the claim cannot be supported; the value is the largest difference
    over the other pairs (``None`` if there are none)."""
    statement = "RCE also lowers the head-projection, probability-delta and rephrasing attacks"
    metric = "max over editors and attacks of ASR(RCE) - ASR(no defence) (HP, PD at B=10; IR at 20)"
    undecided = [(e, a, b) for rce, none, e, a, b in pairs if rce == 0 and none == 0]
    decided = [(rce - none, e, a, b) for rce, none, e, a, b in pairs if rce != 0 or none != 0]
    detail = "; ".join(f"{e} {a}@{b}: {rce - none:+.2f}" for rce, none, e, a, b in pairs)
    if not decided:
        return Claim(
            statement,
            metric,
            None,
            "< 0",
            False,
            "not measured: every attack has ASR 0 with and without RCE, nothing to lower; "
            + detail,
        )
    worst = max(decided)
    claim = Claim.threshold(statement, metric, worst[0], "<", 0.0, detail)
    if not undecided:
        return claim
    names = ", ".join(f"{e} {a}@{b}" for e, a, b in undecided)
    return Claim(
        statement,
        metric,
        worst[0],
        claim.target,
        False,
        f"undecided: {len(undecided)} of {len(pairs)} pairs ({names}) have ASR 0 with and without "
        f"RCE, so there was nothing to lower; max over the other pairs {worst[0]:+.2f}"
        + (" (already >= 0, refuted)" if not claim.point_check else "")
        + f"; {detail}",
    )


def _fidelity_claim(editor: str, r: dict[str, Any], rome_para: float) -> Claim:
    """Claim 6 for one editor from its ``editor/rce`` summary row; ``rome_para`` is ROME's
    paraphrase rate without a defence, the reference. A part that is NaN (no ROME cell in the run,
    no paraphrase prompts, no neighbours, no utility questions) is not measured, so the claim is
    not supported, and the note says which part."""
    parts = {
        "target top-1": r["target_top1"],
        "paraphrase": r["paraphrase"],
        "paraphrase reference (ROME, no defence)": rome_para,
        "neighbourhood drop": r["neighbour_drop"],
        "utility drop": r["utility_drop"],
    }
    missing = [name for name, v in parts.items() if v is None or np.isnan(v)]
    detail = (
        f"top-1 {r['target_top1']:.2f}; paraphrase {r['paraphrase']:.2f} (ROME no defence {rome_para:.2f}); neighbourhood drop "
        f"{r['neighbour_drop']:+.3f}; utility drop {r['utility_drop']:+.3f}"
    )
    ok = not missing and (
        r["target_top1"] >= 0.95
        and r["paraphrase"] >= rome_para - 0.05
        and r["neighbour_drop"] <= 0.02
        and r["utility_drop"] <= 0.01
    )
    return Claim(
        f"{editor.upper()} + RCE keeps edit fidelity and utility",
        "sanitized target top-1 on the edit prompt",
        None if missing else r["target_top1"],
        "top-1 >= 0.95, paraphrase >= ROME's - 0.05, neighbourhood drop <= 0.02, utility drop <= 0.01",
        bool(ok),
        (f"not measured: {', '.join(missing)}; " if missing else "") + detail,
    )


def _figures(
    report: Report,
    cfg: dict[str, Any],
    pooled: dict[str, dict[str, np.ndarray]],
    cells: list[str],
    n_values: int,
) -> None:
    editors = cfg["editors"]
    # rank histograms, before and after, per defence
    fig, axes = new_figure(1, len(editors), size=(5.0 * len(editors), 3.4), squeeze=False)
    bins = np.logspace(
        0,
        np.log10(
            max(
                int(pooled["before"]["true_rank"].max()),
                *(int(pooled[c]["true_rank"].max()) for c in cells),
            )
            + 1
        ),
        25,
    )
    for ax, e in zip(axes[0], editors, strict=True):
        ax.hist(
            pooled["before"]["true_rank"],
            bins=bins,
            histtype="step",
            label="before editing",
            color="black",
        )
        for c in cells:
            if c.startswith(e + "/"):
                ax.hist(pooled[c]["true_rank"], bins=bins, histtype="step", label=c.split("/")[1])
        ax.axvline(10.5, ls=":", color="grey")
        ax.set(
            xscale="log",
            xlabel="rank of the true token (final layer)",
            ylabel="facts",
            title=e.upper(),
        )
        ax.legend(fontsize=7)
    report.add_figure("rank_histograms", fig)
    # ASR@B per attack x defence, chance line
    defs = [c.split("/")[1] for c in cells if c.startswith(editors[0] + "/")]
    fig, axes = new_figure(
        len(editors),
        len(defs),
        size=(3.2 * len(defs), 2.8 * len(editors)),
        squeeze=False,
        sharey=True,
    )
    for i, e in enumerate(editors):
        for j, d in enumerate(defs):
            ax = axes[i][j]
            cell = f"{e}/{d}"
            if cell not in pooled:
                ax.set_visible(False)
                continue
            for attack, label in ATTACK_LABELS.items():
                ys = [
                    np.mean(pooled[cell][f"success/{attack}/{b}"])
                    for b in BUDGETS
                    if f"success/{attack}/{b}" in pooled[cell]
                ]
                if ys:
                    ax.plot(BUDGETS[: len(ys)], ys, marker="o", ms=3, label=label)
            ax.plot(
                BUDGETS,
                [np.mean(pooled[cell][f"chance/{b}"]) for b in BUDGETS],
                color="black",
                ls=":",
                label="chance (decoy)",
            )
            ax.set(xscale="log", title=f"{e.upper()} / {d}", ylim=(0, 1.02))
            if i == len(editors) - 1:
                ax.set_xlabel("budget B")
            if j == 0:
                ax.set_ylabel("attack success rate")
    axes[0][0].legend(fontsize=6)
    report.add_figure("asr_by_budget", fig)
    # concealment vs fidelity
    fig, ax = new_figure(size=(5.0, 3.6))
    for c in cells:
        ax.scatter(np.mean(pooled[c]["success/output/10"]), np.mean(pooled[c]["target_top1"]), s=25)
        ax.annotate(
            c,
            (np.mean(pooled[c]["success/output/10"]), np.mean(pooled[c]["target_top1"])),
            fontsize=6,
        )
    ax.axvline(
        np.mean(pooled[cells[0]]["chance/10"]), ls=":", color="grey", label="chance@10 (decoy)"
    )
    ax.set(
        xlabel="Output Attack ASR@10 (lower conceals)", ylabel="sanitized target top-1 (fidelity)"
    )
    ax.legend(fontsize=7)
    report.add_figure("concealment_vs_fidelity", fig)
    # per-layer logit-lens rank of the true token
    fig, axes = new_figure(1, len(editors), size=(5.0 * len(editors), 3.4), squeeze=False)
    for ax, e in zip(axes[0], editors, strict=True):
        layers = np.arange(pooled["before"]["lens_rank"].shape[1])
        ax.plot(
            layers,
            np.median(pooled["before"]["lens_rank"], 0),
            color="black",
            marker="o",
            label="before editing",
        )
        for c in cells:
            if c.startswith(e + "/"):
                ax.plot(
                    layers,
                    np.median(pooled[c]["lens_rank"], 0),
                    marker="o",
                    ms=3,
                    label=c.split("/")[1],
                )
        ax.axhline(4, ls=":", color="grey")
        ax.set(
            yscale="log",
            xlabel="residual layer (logit lens)",
            ylabel="median rank of the true token",
            title=e.upper(),
        )
        ax.legend(fontsize=7)
    report.add_figure("lens_rank_by_layer", fig)


def _notes(cfg: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    picks = ", ".join(
        f"seed {r['seed']}: {r['fact_token']} token, block {r['layer']}" for r in runs
    )
    return (
        f"Fact LMs: `fact_lm` size {cfg['size']} ({cfg['arch']}), World {cfg['world']}; "
        f"{cfg['n_edits']} edits per seed to a random other city. Causal tracing chose ({picks}); "
        "these tiny models recall facts at the prompt's last token, not the subject's, so the "
        "editors read keys there (ROME's fact_token='last'). Editor settings differ from ROME's "
        f"GPT-2 XL defaults for edit efficacy only (chosen before any attack was run): ROME {cfg['rome']}, "
        f"MEMIT {cfg['memit']} (ROME's clamp 4 gives about 55% efficacy here, MEMIT's lambda 15000 "
        "almost none for 100 edits). RCE: R=50, R'=|V|/2, m=1, lambda=1; rce_band: R'=100. "
        "Chance is the Output Attack scored against a random city the subject was never paired "
        "with (decoy) and B/|cities|; claims use the larger."
    )
