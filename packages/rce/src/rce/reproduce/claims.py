"""The paper's claims as three-valued verdicts with their controls."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from paper_common import (
    Claim,
    Control,
    Report,
)
from paper_common.stats import ConfidenceInterval, extreme_interval, proportion_interval
from rce.attacks import BUDGETS
from rce.metrics import among_successful

# every defence the runner knows, by the name the report uses
from rce.reproduce.run import _rate

#: pre-declared (ours): leakage among successful edits is testable when at least this many edits
#: took, pooled over seeds (a Clopper-Pearson interval on fewer is too wide to decide anything)
MIN_SUCCESSFUL = 30

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


def _successful(pooled: dict[str, dict[str, np.ndarray]], cell: str) -> Control:
    """Positive control for a claim read among successful edits: enough of them (a count, exact)."""
    n_ok = int(np.sum(pooled[cell]["edit_success"]))
    return Control.positive(
        f"successful edits in {cell} (pooled over seeds; an erasure edit took when the true token "
        "left the top-1)",
        float(n_ok),
        ">=",
        MIN_SUCCESSFUL,
    )


def _claims(
    report: Report,
    cfg: dict[str, Any],
    pooled: dict[str, dict[str, np.ndarray]],
    summary: list[dict[str, Any]],
    n_values: int,
    models: str = "",
) -> None:
    row = {r["cell"]: r for r in summary}
    editors = cfg["editors"]
    defences = cfg["defences"]
    n = len(pooled["before"]["target_top1"])
    ok = {c: among_successful(res) for c, res in pooled.items()}
    on = f"Model: {models}. " if models else ""

    def hit(cell: str, attack: str, b: int) -> np.ndarray:
        return np.asarray(pooled[cell][f"success/{attack}/{b}"], dtype=float)

    def ci(cell: str, attack: str, b: int) -> str:
        rate, lo, hi, n = _rate(pooled[cell][f"success/{attack}/{b}"])
        return f"{rate:.2f} [{lo:.2f}, {hi:.2f}] (n={n})"

    def diff(a: np.ndarray, b: np.ndarray) -> ConfidenceInterval:
        return _boot(lambda i: a[i].mean(1) - b[i].mean(1), len(a))

    plain = [f"{e}/none" for e in editors]
    method_cp = "95% Clopper-Pearson over successful edits pooled over seeds"
    method_boot = "95% paired percentile bootstrap over edited facts pooled over seeds"
    # 1. rank leakage after plain edits, among the edits that took
    for e in editors:
        cell = f"{e}/none"
        r = row[cell]
        sub = ok[cell]
        share = _share(sub["success/output/10"])
        decoy = (
            Control.negative("a random decoy value in place of the true one (chance), same edits",
                             *_ci_args(_share(sub["chance/10"])))
            if "chance/10" in sub
            else Control.absent("negative", "decoy values for the requests (chance)")
        )  # fmt: skip
        report.add_claim(
            Claim.decide(
                f"Rank leakage: after a successful {e.upper()} edit with no defence the true token "
                "stays near the top",
                "Output ASR@10 (target excluded) among successful edits",
                share.estimate, share, ">=", 0.5,
                positive=_successful(pooled, cell), negative=decoy, method=method_cp,
                note=on + f"decided on ASR@10 >= 0.5 among the {r['n_successful']} of {r['n']} "
                f"edits that took (efficacy {r['edit_success']:.2f}); median true rank among them "
                f"{r['median_true_rank_successful']:.0f} (the paper also asks <= 5); all edits: "
                f"ASR@10 {r['output_asr@10']:.2f}; chance: decoy {r['chance_decoy@10']:.3f}, B/|V| "
                f"{10 / n_values:.3f}",
            )
        )  # fmt: skip
    # 2. the one-query Output Attack matches or beats HP, PD, IR at equal B (no defence), among the
    # successful edits (paired: the same facts for both attacks)
    gaps, nulls = [], []
    for e in editors:
        for other in ("hp", "pd", "ir"):
            for b in BUDGETS:
                cell = f"{e}/none"
                sub = ok[cell]
                if f"success/{other}/{b}" not in sub or len(sub["true_rank"]) == 0:
                    continue
                out_b = np.asarray(sub[f"success/output/{b}"], float)
                oth = np.asarray(sub[f"success/{other}/{b}"], float)
                d = diff(out_b, oth)
                gaps.append((d.estimate, e, other, b, d))
                if f"chance/{b}" in sub:
                    nulls.append(diff(np.asarray(sub[f"chance/{b}"], float), oth))
    if gaps:
        worst = min(gaps, key=lambda g: g[0])
        both = extreme_interval([g[4] for g in gaps], largest=False)
        positive = _successful(
            pooled, min(plain, key=lambda c: int(np.sum(pooled[c]["edit_success"])))
        )
        report.add_claim(Claim.decide(
            "The one-query Output Attack matches or beats HP, PD and rephrasing at equal budget",
            "min over editors, attacks and B of Output ASR - other ASR (successful edits)",
            both.estimate, both, ">=", -0.02,
            positive=positive,
            negative=Control.negative("a random decoy in place of the Output Attack",
                                      *_ci_args(extreme_interval(nulls, largest=False)))
            if len(nulls) == len(gaps) else Control.absent("negative", "decoy values (chance)"),
            method=method_boot.replace("edited facts", "successful edits")
            + "; the lowest pair's interval (every pair must meet the target)",
            note=on + f"worst: {worst[1]} vs {worst[2]} at B={worst[3]}; 'matches' = within 2 "
            "points",
        ))  # fmt: skip
    # 3. it survives Patil et al.'s defences (erasure mode, as published), among the edits that took
    measured = [d for d in ("head_projection", "max_entropy") if d in defences]
    kept = [(f"{e}/{d}", e, d) for e in editors for d in measured]
    if kept:
        low = extreme_interval([_share(ok[c]["success/output/10"]) for c, _, _ in kept],
                               largest=False)  # fmt: skip
        names = " and ".join(d.replace("_", "-") for d in measured)
        rce = (
            Control.negative("the RCE cells (which must conceal), successful edits",
                             *_ci_args(extreme_interval(
                [_share(ok[f"{e}/rce"]["success/output/10"]) for e in editors], largest=False)))
            if "rce" in defences
            else Control.absent("negative", "an RCE cell (a defence that must conceal)")
        )  # fmt: skip
        fewest = min((c for c, _, _ in kept), key=lambda c: int(np.sum(pooled[c]["edit_success"])))
        report.add_claim(Claim.decide(
            f"The Output Attack keeps ASR@10 >= 30% under the {names} defence"
            + ("s" if len(measured) > 1 else ""),
            f"min Output ASR@10 among successful edits over editors x {{{', '.join(measured)}}}",
            low.estimate, low, ">=", 0.30,
            positive=_successful(pooled, fewest), negative=rce,
            method=method_cp + "; the lowest cell's interval",
            note=on + "Patil et al.'s defences in erasure mode (no target; the attack reads the "
            "raw top-B; an edit took when the true token left the top-1); "
            + "; ".join(
                f"{c}: {row[c]['output_asr@10_successful']:.2f} among {row[c]['n_successful']} "
                f"successful" for c, _, _ in kept
            ),
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
        report.add_claim(_fidelity_claim(e, pooled))
    # every claim says which model it ran on
    report.claims[:] = [
        c if c.note.startswith("Model: ") else dataclasses.replace(c, note=on + c.note)
        for c in report.claims
    ]


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


def _fidelity_claim(editor: str, pooled: dict[str, dict[str, np.ndarray]]) -> Claim:
    """Claim 6 for one editor from the per-request results: the four conditions (target top-1 >=
    0.95, paraphrase >= ROME's without a defence − 0.05, neighbourhood drop <= 0.02, utility drop
    <= 0.01) as one margin, the smallest of the four slacks, >= 0, on a paired bootstrap over
    requests. A part that cannot be measured (no ROME cell, no paraphrases, neighbours or utility
    questions) leaves the claim inconclusive and the note says which. Positive control: the same
    margin for the editor without a defence, its whole interval >= 0 (the testbed can show
    fidelity at all: a miss plain ROME shares, e.g. top-1 0.90 at clamp 4, is not RCE's).
    Negative control: the unedited model in place of the RCE edit (fidelity to an edit that was
    never made must fail)."""
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
    plain = pooled.get(f"{editor}/none")
    positive_what = f"{editor} without a defence meets the same four conditions (its margin)"
    if plain is None:
        missing.append(f"{editor} without a defence")
    if missing:
        positive = Control.absent("positive", f"{positive_what} ({', '.join(missing)})")
        why = f"not measured: {', '.join(missing)}"
        return Claim.decide(statement, metric, None, None, ">=", 0.0, positive=positive,
                            negative=Control.absent("negative", f"{negative_what} ({why})"),
                            method=f"missing: {why}", note=f"{why}; {detail}")  # fmt: skip
    n = len(res["target_top1"])
    assert ref is not None
    assert plain is not None

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

    m, null, ok = margin(res), margin(base), margin(plain)
    positive = Control.positive(positive_what, ok.estimate, ">=", 0.0, ok)
    return Claim.decide(
        statement, metric, m.estimate, m, ">=", 0.0, positive=positive,
        negative=Control.negative(negative_what, null.estimate, null),
        method="95% paired percentile bootstrap over edited facts pooled over seeds (the utility "
        "questions are a fixed set: their own sampling error is not in the interval)",
        note="the four conditions in one margin (>= 0 iff all hold); " + detail,
    )  # fmt: skip
