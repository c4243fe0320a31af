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
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

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
from paper_common.facts import RELATIONS, World
from paper_common.lm import fact_lm
from paper_common.stats import ConfidenceInterval, extreme_interval, proportion_interval
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


#: pre-declared: an editor's edits "work" (the testbed can show leakage and concealment at all) when
#: the new target is top-1 on at least 80% of the edit prompts over the whole interval
EFFICACY_MIN = 0.8
_N_BOOT = 2000


def _boot(stat: Callable[[np.ndarray], np.ndarray], n: int, seed: int = 0) -> ConfidenceInterval:
    """Percentile 95% bootstrap over the ``n`` requests (pooled over seeds) of ``stat``, which maps
    an index array ``(n_resamples, n)`` to one value per row (paired: every array it reads is
    indexed alike). The estimate is ``stat`` on the requests as they are."""
    idx = np.random.default_rng(seed).integers(0, n, size=(_N_BOOT, n))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nanmean of an all-NaN resample
        values = stat(idx)
        estimate = float(stat(np.arange(n)[None])[0])
    if np.isnan(values).any():
        return ConfidenceInterval(estimate, np.nan, np.nan, 0.95)
    low, high = np.quantile(values, [0.025, 0.975])
    return ConfidenceInterval(estimate, float(low), float(high), 0.95)


def _share(x: np.ndarray) -> ConfidenceInterval:
    """Clopper-Pearson interval of the share of ``True`` in ``x``."""
    x = np.asarray(x, dtype=bool)
    return proportion_interval(int(x.sum()), len(x))


def _efficacy(pooled: dict[str, dict[str, np.ndarray]], cells: list[str]) -> Control:
    """Positive control: the edits of every cell in ``cells`` took (new target top-1 on the edit
    prompt, the lowest cell's Clopper-Pearson interval); a failed edit conceals trivially and
    leaks nothing."""
    ci = extreme_interval([_share(pooled[c]["target_top1"]) for c in cells], largest=False)
    return Control.positive(
        f"edits took: new target top-1 on the edit prompt ({', '.join(cells)}; lowest, "
        "Clopper-Pearson)",
        ci.estimate,
        ">=",
        EFFICACY_MIN,
        ci,
    )


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
    n = len(pooled["before"]["target_top1"])

    def hit(cell: str, attack: str, b: int) -> np.ndarray:
        return np.asarray(pooled[cell][f"success/{attack}/{b}"], dtype=float)

    def ci(cell: str, attack: str, b: int) -> str:
        rate, lo, hi, n = _rate(pooled[cell][f"success/{attack}/{b}"])
        return f"{rate:.2f} [{lo:.2f}, {hi:.2f}] (n={n})"

    def diff(a: np.ndarray, b: np.ndarray) -> ConfidenceInterval:
        return _boot(lambda i: a[i].mean(1) - b[i].mean(1), n)

    plain = [f"{e}/none" for e in editors]
    method_cp = "95% Clopper-Pearson over edited facts pooled over seeds"
    method_boot = "95% paired percentile bootstrap over edited facts pooled over seeds"
    # 1. rank leakage after plain edits
    for e in editors:
        cell = f"{e}/none"
        r = row[cell]
        share = _share(pooled[cell]["success/output/10"])
        decoy = (
            Control.negative("a random decoy value in place of the true one (chance)",
                             *_ci_args(_share(pooled[cell]["chance/10"])))
            if "chance/10" in pooled[cell]
            else Control.absent("negative", "decoy values for the requests (chance)")
        )  # fmt: skip
        report.add_claim(
            Claim.decide(
                f"Rank leakage: after {e.upper()} with no defence the true token stays near the top",
                "Output ASR@10 (target excluded)",
                share.estimate, share, ">=", 0.5,
                positive=_efficacy(pooled, [cell]), negative=decoy, method=method_cp,
                note=f"decided on ASR@10 >= 0.5; median true rank {r['median_true_rank']:.0f} "
                f"(the paper also asks <= 5); chance: decoy {r['chance_decoy@10']:.3f}, B/|V| "
                f"{10 / n_values:.3f}",
            )
        )  # fmt: skip
    # 2. the one-query Output Attack matches or beats HP, PD, IR at equal B (no defence)
    gaps, nulls = [], []
    for e in editors:
        for other in ("hp", "pd", "ir"):
            for b in BUDGETS:
                cell = f"{e}/none"
                if f"success/{other}/{b}" not in pooled[cell]:
                    continue
                d = diff(hit(cell, "output", b), hit(cell, other, b))
                gaps.append((d.estimate, e, other, b, d))
                if f"chance/{b}" in pooled[cell]:
                    chance = np.asarray(pooled[cell][f"chance/{b}"], float)
                    nulls.append(diff(chance, hit(cell, other, b)))
    worst = min(gaps, key=lambda g: g[0])
    both = extreme_interval([g[4] for g in gaps], largest=False)
    report.add_claim(Claim.decide(
        "The one-query Output Attack matches or beats HP, PD and rephrasing at equal budget",
        "min over editors, attacks and B of Output ASR - other ASR",
        both.estimate, both, ">=", -0.02,
        positive=_efficacy(pooled, plain),
        negative=Control.negative("a random decoy in place of the Output Attack",
                                  *_ci_args(extreme_interval(nulls, largest=False)))
        if len(nulls) == len(gaps) else Control.absent("negative", "decoy values (chance)"),
        method=method_boot + "; the lowest pair's interval (every pair must meet the target)",
        note=f"worst: {worst[1]} vs {worst[2]} at B={worst[3]}; 'matches' = within 2 points",
    ))  # fmt: skip
    # 3. it survives the HP and max-entropy defences
    measured = [d for d in ("head_projection", "max_entropy") if d in defences]
    kept = [(f"{e}/{d}", e, d) for e in editors for d in measured]
    if kept:
        low = extreme_interval([_share(pooled[c]["success/output/10"]) for c, _, _ in kept],
                               largest=False)  # fmt: skip
        names = " and ".join(d.replace("_", "-") for d in measured)
        rce = (
            Control.negative("the RCE cells (which must conceal)", *_ci_args(extreme_interval(
                [_share(pooled[f"{e}/rce"]["success/output/10"]) for e in editors], largest=False)))
            if "rce" in defences
            else Control.absent("negative", "an RCE cell (a defence that must conceal)")
        )  # fmt: skip
        report.add_claim(Claim.decide(
            f"The Output Attack keeps ASR@10 >= 30% under the {names} defence"
            + ("s" if len(measured) > 1 else ""),
            f"min Output ASR@10 over editors x {{{', '.join(measured)}}}",
            low.estimate, low, ">=", 0.30,
            positive=_efficacy(pooled, [c for c, _, _ in kept]), negative=rce,
            method=method_cp + "; the lowest cell's interval",
            note="; ".join(f"{e}/{d} {ci(f'{e}/{d}', 'output', 10)}" for _, e, d in kept),
        ))  # fmt: skip
    if "rce" not in defences:
        return

    # 4. RCE conceals from the Output Attack: ASR@10 within 5 points of chance
    def excess(cell: str) -> ConfidenceInterval:
        out = hit(cell, "output", 10)
        dec = np.asarray(pooled[cell].get("chance/10", np.zeros(n)), float)
        return _boot(lambda i: out[i].mean(1) - np.maximum(dec[i].mean(1), 10 / n_values), n)

    top = extreme_interval([excess(f"{e}/rce") for e in editors])
    report.add_claim(Claim.decide(
        "RCE brings the Output Attack down to chance",
        "max over editors of Output ASR@10 - chance",
        top.estimate, top, "<=", 0.05,
        positive=_efficacy(pooled, [f"{e}/rce" for e in editors]),
        negative=Control.negative("no defence (the leak RCE must remove)",
                                  *_ci_args(extreme_interval([excess(c) for c in plain]))),
        method=method_boot + "; the highest editor's interval",
        note="; ".join(
            f"{e}: ASR@10 {ci(f'{e}/rce', 'output', 10)}, chance "
            f"{max(row[f'{e}/rce']['chance_decoy@10'], 10 / n_values):.3f}"
            for e in editors
        ),
    ))  # fmt: skip
    # 5. and generalises: HP, PD and IR succeed less often than against the same editor without RCE
    pairs = [
        (hit(f"{e}/rce", attack, b), hit(f"{e}/none", attack, b), e, attack, b)
        for e in editors
        for attack, b in (("hp", 10), ("pd", 10), ("ir", 20))
        if f"success/{attack}/{b}" in pooled[f"{e}/rce"]
    ]
    report.add_claim(_lowers_claim(pairs))
    # 6. fidelity with RCE
    for e in editors:
        report.add_claim(_fidelity_claim(e, pooled, _efficacy(pooled, [f"{e}/none"])))


def _ci_args(ci: ConfidenceInterval) -> tuple[float, ConfidenceInterval]:
    return ci.estimate, ci


def _lowers_claim(pairs: list[tuple[np.ndarray, np.ndarray, str, str, int]]) -> Claim:
    """Claim 5 from ``(success with RCE, success without defence, editor, attack, B)`` per pair
    (per-request arrays, the same requests in both). Decided on the highest pair's paired bootstrap
    interval of ASR(RCE) − ASR(no defence) against <= −0.02. Positive control: every attack
    succeeds without a defence (a pair with nothing to lower is untestable, not refuted); negative
    control: the arms swapped."""
    statement = "RCE also lowers the head-projection, probability-delta and rephrasing attacks"
    metric = "max over editors and attacks of ASR(RCE) - ASR(no defence) (HP, PD at B=10; IR at 20)"
    if not pairs:
        return Claim.decide(statement, metric, None, None, "<=", -0.02,
                            positive=Control.absent("positive", "an attack with a success rate"),
                            negative=Control.absent("negative", "swapped arms"),
                            method="missing: no attack pairs", note="")  # fmt: skip
    n = len(pairs[0][0])

    def diff(a: np.ndarray, b: np.ndarray) -> ConfidenceInterval:
        return _boot(lambda i: a[i].mean(1) - b[i].mean(1), n)

    base = extreme_interval([_share(none.astype(bool)) for _, none, *_ in pairs], largest=False)
    top = extreme_interval([diff(rce, none) for rce, none, *_ in pairs])
    swapped = extreme_interval([diff(none, rce) for rce, none, *_ in pairs])
    detail = "; ".join(
        f"{e} {a}@{b}: {rce.mean() - none.mean():+.2f} (no defence {none.mean():.2f})"
        for rce, none, e, a, b in pairs
    )
    return Claim.decide(
        statement, metric, top.estimate, top, "<=", -0.02,
        positive=Control.positive("every attack succeeds without a defence (lowest ASR, "
                                  "Clopper-Pearson)", base.estimate, ">=", 0.05, base),
        negative=Control.negative("swapped arms (no defence minus RCE)", swapped.estimate,
                                  swapped),
        method="95% paired percentile bootstrap over edited facts pooled over seeds; the highest "
        "pair's interval (every pair must meet the target)",
        note="restated: a drop of >= 2 points is the smallest that counts (the paper: < 0); "
        + detail,
    )  # fmt: skip


def _fidelity_claim(
    editor: str, pooled: dict[str, dict[str, np.ndarray]], positive: Control
) -> Claim:
    """Claim 6 for one editor from the per-request results: the four conditions (target top-1 >=
    0.95, paraphrase >= ROME's without a defence − 0.05, neighbourhood drop <= 0.02, utility drop
    <= 0.01) as one margin, the smallest of the four slacks, >= 0, on a paired bootstrap over
    requests. A part that cannot be measured (no ROME cell, no paraphrases, neighbours or utility
    questions) leaves the claim inconclusive and the note says which. Negative control: the
    unedited model in place of the RCE edit (fidelity to an edit that was never made must fail)."""
    statement = f"{editor.upper()} + RCE keeps edit fidelity and utility"
    metric = "min slack of (top-1 − 0.95, paraphrase − (ROME's − 0.05), 0.02 − neighbourhood drop, 0.01 − utility drop)"
    res, base = pooled[f"{editor}/rce"], pooled["before"]
    ref = pooled.get("rome/none")
    parts = {
        "target top-1": res["target_top1"],
        "paraphrase": res["paraphrase"],
        "paraphrase reference (ROME, no defence)": None if ref is None else ref["paraphrase"],
        "neighbourhood drop": res["neighbour_acc"],
        "utility drop": res["utility_acc"],
    }
    missing = [k for k, v in parts.items() if v is None or np.isnan(np.asarray(v, float)).all()]

    def means(r: dict[str, np.ndarray]) -> str:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # nanmean of a part not measured
            return _means(r)

    def _means(r: dict[str, np.ndarray]) -> str:
        return (
            f"top-1 {np.mean(r['target_top1']):.2f}; paraphrase {np.nanmean(r['paraphrase']):.2f}; "
            f"neighbourhood drop {np.nanmean(base['neighbour_acc']) - np.nanmean(r['neighbour_acc']):+.3f}; "
            f"utility drop {np.nanmean(base['utility_acc']) - np.nanmean(r['utility_acc']):+.3f}"
        )

    detail = means(res) + (
        "" if ref is None else f" (ROME no defence paraphrase {np.nanmean(ref['paraphrase']):.2f})"
    )
    negative_what = "the unedited model in place of the RCE edit"
    if missing:
        why = f"not measured: {', '.join(missing)}"
        return Claim.decide(statement, metric, None, None, ">=", 0.0, positive=positive,
                            negative=Control.absent("negative", f"{negative_what} ({why})"),
                            method=f"missing: {why}", note=f"{why}; {detail}")  # fmt: skip
    n = len(res["target_top1"])
    assert ref is not None

    def margin(r: dict[str, np.ndarray]) -> ConfidenceInterval:
        top1, para = np.asarray(r["target_top1"], float), np.asarray(r["paraphrase"], float)
        neigh, util = np.asarray(r["neighbour_acc"], float), np.asarray(r["utility_acc"], float)
        ref_p = np.asarray(ref["paraphrase"], float)
        b_neigh, b_util = (
            np.asarray(base["neighbour_acc"], float),
            np.asarray(base["utility_acc"], float),
        )

        def stat(i: np.ndarray) -> np.ndarray:
            return np.minimum.reduce([
                top1[i].mean(1) - 0.95,
                np.nanmean(para[i], 1) - (np.nanmean(ref_p[i], 1) - 0.05),
                0.02 - (np.nanmean(b_neigh[i], 1) - np.nanmean(neigh[i], 1)),
                0.01 - (np.nanmean(b_util[i], 1) - np.nanmean(util[i], 1)),
            ])  # fmt: skip

        return _boot(stat, n)

    m, null = margin(res), margin(base)
    return Claim.decide(
        statement, metric, m.estimate, m, ">=", 0.0, positive=positive,
        negative=Control.negative(negative_what, null.estimate, null),
        method="95% paired percentile bootstrap over edited facts pooled over seeds (the utility "
        "questions are a fixed set: their own sampling error is not in the interval)",
        note="the four conditions in one margin (>= 0 iff all hold); " + detail,
    )  # fmt: skip


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
