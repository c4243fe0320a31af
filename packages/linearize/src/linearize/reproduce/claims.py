"""Verdicts with their controls: the intervals over seeds, the nulls, and the six claims.

The negative controls run through the data: an independent replicate of an arm (the same config on
other linearization seeds, paired with the originals by seed) against the original, the control
update with another initial direction, and for the state claim a placebo (the state's read-out
scaled by 0.999). The positive controls are comparisons in the grid with a known effect: the
Hedgehog feature map against ELU+1 on MSE, LoLCATs against ELU+1 on 4x MQAR, and, for the rank
correlation, the per-head MSE of two updates. Their rules were fixed before the rerun."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

from linearize.reproduce.run import ACCUMULATION, DELTA_ARMS, OURS, PLACEBO_SCALE
from paper_common import (
    Claim,
    Control,
)
from paper_common.stats import (
    ConfidenceInterval,
    bootstrap_ci,
    extreme_interval,
    log_t_interval,
    t_interval,
)


# ============================================================================ report
def _values(runs: list[dict[str, Any]], name: str, key: str) -> list[float]:
    """``key`` of every run of variant ``name`` (one per seed, in seed order)."""
    return [r[key] for r in runs if r["variant"] == name and key in r]


def _head_errors(runs: list[dict[str, Any]], name: str) -> np.ndarray:
    """``(layers, heads)`` relative MSE of variant ``name``, mean over seeds."""
    return np.mean(_values(runs, name, "mse_by_head"), 0)


def _delta_gain(runs: list[dict[str, Any]]) -> np.ndarray:
    """Per head (flattened), gated's error minus delta's: delta's error reduction over gated."""
    return (_head_errors(runs, "gated_scalar") - _head_errors(runs, "deltanet")).ravel()


def _mean_ci(x: list[float]) -> tuple[float, float, float]:
    """Mean and 95% bootstrap CI; the CI is NaN with fewer than 2 values, everything is NaN when a
    value is not finite (a run that was not measured: no interval is made up around it)."""
    a = np.asarray(x, dtype=float)
    if len(a) == 0 or not np.isfinite(a).all():
        return math.nan, math.nan, math.nan
    if len(a) < 2:
        return float(a.mean()), float("nan"), float("nan")
    ci = bootstrap_ci(a, seed=0)
    return float(a.mean()), ci.low, ci.high


GAP_MIN_ITEMS = 4  # a gap to close must be worth at least this many eval items (half: 2 items)
MSE_RATIO = 0.9  # "lower MSE": at least a 10% reduction (a null ratio sits at 1)
ISSUE44 = (
    "issue 44 fixed: transfer and layer_errors pass the padding mask, task_scores locates the graded "
    "words by the tokenizer's offsets, the hybrids run in linear time"
)
MIN_SEEDS = 3  # a t-interval over seeds needs >= 3 (with 2: one degree of freedom)
NAN_CI = ConfidenceInterval(math.nan, math.nan, math.nan, 0.95)


def seed_interval(values: Any) -> ConfidenceInterval:
    """95% t-interval over seeds; NaN (undefined) with fewer than ``MIN_SEEDS`` values or a
    non-finite one."""
    a = np.asarray(values, dtype=float)
    if a.size < MIN_SEEDS or not np.isfinite(a).all():
        return NAN_CI
    return t_interval(a)


def _defined(ci: ConfidenceInterval) -> ConfidenceInterval | None:
    return None if math.isnan(ci.low) or math.isnan(ci.high) else ci


def _method(ci: ConfidenceInterval | None, what: str, n: int) -> str:
    if ci is None:
        return f"missing: {n} linearization seed(s) or an unmeasured run; needs >= {MIN_SEEDS}"
    return f"95% t-interval over {n} seeds of {what}"


def ratio_interval(num: Any, den: Any) -> ConfidenceInterval:
    """Geometric mean of per-seed ratios ``num / den`` with the t-interval of their logs; NaN
    (undefined) with fewer than ``MIN_SEEDS`` seeds or a non-finite or non-positive value."""
    a, b = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if (
        a.size < MIN_SEEDS
        or a.size != b.size
        or not np.isfinite([*a, *b]).all()
        or (a <= 0).any()
        or (b <= 0).any()
    ):
        return NAN_CI
    return log_t_interval(a / b)


def _null(ci: ConfidenceInterval, description: str, needs: str) -> Control:
    """A negative control from a null measured on the data (``description``); absent, saying what
    it ``needs``, when its interval is undefined."""
    if _defined(ci) is None:
        return Control.absent("negative", needs)
    return Control.negative(description, ci.estimate, ci)


def _known(ci: ConfidenceInterval, description: str, op: str, target: float, needs: str) -> Control:
    """A positive control from a comparison with a known effect: passes iff its whole interval
    satisfies ``op target``; absent, saying what it ``needs``, when the interval is undefined."""
    if _defined(ci) is None:
        return Control.absent("positive", needs)
    return Control.positive(description, ci.estimate, op, target, ci)  # type: ignore[arg-type]


def rho_interval(
    x: np.ndarray, y: np.ndarray, seed: int = 0, n_boot: int = 1000
) -> tuple[ConfidenceInterval, float]:
    """Spearman rho over heads with its 95% percentile bootstrap interval (heads resampled), and
    the share of resamples where rho is defined; the interval is NaN when below 95%."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0 or not np.isfinite([*x, *y]).all():
        return NAN_CI, 0.0
    idx = np.random.default_rng(seed).integers(0, x.size, (n_boot, x.size))
    rx, ry = stats.rankdata(x[idx], axis=1), stats.rankdata(y[idx], axis=1)
    rx, ry = rx - rx.mean(1, keepdims=True), ry - ry.mean(1, keepdims=True)
    den = np.sqrt((rx**2).sum(1) * (ry**2).sum(1))
    ok = den > 0
    rho = float(stats.spearmanr(x, y).statistic)
    if ok.mean() < 0.95:
        return ConfidenceInterval(rho, math.nan, math.nan, 0.95), float(ok.mean())
    low, high = np.quantile((rx * ry).sum(1)[ok] / den[ok], [0.025, 0.975])
    return ConfidenceInterval(rho, float(low), float(high), 0.95), float(ok.mean())


def shuffled_rho(x: np.ndarray, y: np.ndarray, seed: int = 0) -> ConfidenceInterval:
    """The null of a rank correlation: the claim's own measurement (rho with its bootstrap
    interval over heads) on one seeded shuffle of ``x`` over heads. (The mean rho of many shuffles,
    with a t-interval, sits at 0 within a few hundredths whatever the data: refuted by
    construction.)"""
    return rho_interval(np.random.default_rng(seed).permutation(x), y, seed=seed)[0]


def _gap_claim(
    teacher_4x: float,
    delta_by_seed: list[float],
    steps: dict[str, list[float]],
    n_eval: int,
    extra_note: str = "",
    replicate_by_seed: list[float] | None = None,
    positive_gain: ConfidenceInterval = NAN_CI,
) -> Claim:
    """Share of the delta model's 4x MQAR gap to the teacher that ``steps[OURS]`` closes, per seed
    (``(ours_s - delta_s) / (teacher - delta_s)``), decided on its t-interval over seeds.

    Positive control: the gap is resolvable, at least ``GAP_MIN_ITEMS`` items' worth
    (``GAP_MIN_ITEMS / n_eval``) and more than twice the delta model's standard deviation over
    seeds (below that the share is a ratio of noise), and ``positive_gain`` (a known 4x MQAR gain,
    seed-paired) is resolved above one item. Negative control: the share closed by an independent
    replicate of delta (``replicate_by_seed``, paired by seed; it closes nothing but noise). The
    note gives every step's absolute gain over delta in points."""
    d = np.asarray(delta_by_seed, dtype=float)
    base = float(d.mean())
    gap = teacher_4x - base
    spread = float(np.std(d, ddof=1)) if len(d) > 1 else 0.0
    min_gap = max(GAP_MIN_ITEMS / n_eval, 2 * spread)
    resolvable = bool(gap >= min_gap)  # False for a NaN gap too
    means = {k: float(np.mean(v)) for k, v in steps.items()}
    gains = ", ".join(f"{k} {100 * (v - base):+.1f}" for k, v in means.items())
    note = (
        f"teacher {teacher_4x:.3f}, delta {base:.3f} (gap {100 * gap:.1f} points, minimum "
        f"{100 * min_gap:.1f}: {GAP_MIN_ITEMS} of {n_eval} items or 2 seed SDs); gain over delta "
        f"(points): {gains}"
    )
    if resolvable:
        note += "; closed: " + ", ".join(f"{k} {(v - base) / gap:+.2f}" for k, v in means.items())
    else:
        note = f"not measured: the gap to close is below its minimum; {note}"
    per_gap = teacher_4x - d
    ours = np.asarray(steps[OURS], dtype=float)
    share = (
        (ours - d) / np.where(per_gap > 0, per_gap, math.nan)
        if ours.size == d.size
        else d * math.nan
    )
    ci = _defined(seed_interval(share)) if resolvable else None
    rep = np.asarray(replicate_by_seed if replicate_by_seed is not None else [], dtype=float)
    null = (
        seed_interval((rep - d) / np.where(per_gap > 0, per_gap, math.nan))
        if rep.size == d.size
        else NAN_CI
    )
    known = _defined(positive_gain)
    known_ok = known is not None and known.low >= 1 / n_eval
    if known is not None:
        note += (
            f"; known gain (lolcats - elu_linear, 4x MQAR): {known.estimate:+.3f} "
            f"[{known.low:+.3f}, {known.high:+.3f}] (needs > one item, {1 / n_eval:.3f})"
        )
    return Claim.decide(
        "Sinks, short convolutions and routing together close at least half of the delta model's "
        "4x-length MQAR gap to softmax.",
        "share of the gap closed by all three",
        (means[OURS] - base) / gap if resolvable else None,
        ci, ">=", 0.5,
        positive=Control.positive(
            "the gap is resolvable (gap - its minimum of 4 items or 2 seed SDs, points) and the "
            "known lolcats - elu_linear 4x MQAR gain is above one item (else -1)",
            100 * (gap - min_gap) if math.isfinite(gap) and known_ok else -1.0, ">=", 0.0,
        ),
        negative=_null(null, "independent replicate: share closed by deltanet on other "
                       "linearization seeds (paired by seed)",
                       f"deltanet's replicate on >= {MIN_SEEDS} seeds"),
        method=_method(ci, "the seed-paired share", len(d)) if resolvable
        else "missing: the gap is not resolvable (positive control)",
        note=note + extra_note,
    )  # fmt: skip


def _equal_budget_claim(
    ours: dict[str, list[float]], lola: dict[str, list[float]], null: dict[str, list[float]]
) -> Claim:
    """Ours within 2 points of LoLA on MQAR@4x and passkey@4x (``{task: accuracy per seed}``
    each), decided on the smaller of the two tasks' seed-paired t-intervals. Both caches at 0 on
    both tasks recall nothing to compare: the positive control (the caches recall something)
    fails. Negative control: ``null`` (a linear map without an exact cache) in ours' place."""

    def worst(a: dict[str, list[float]]) -> ConfidenceInterval:
        cis = [seed_interval(100 * (np.asarray(a[k]) - np.asarray(lola[k]))) for k in a]
        return extreme_interval(cis, largest=False)

    d_m = 100 * float(np.mean(ours["mqar_4x"]) - np.mean(lola["mqar_4x"]))
    d_p = 100 * float(np.mean(ours["passkey_4x"]) - np.mean(lola["passkey_4x"]))
    note = f"MQAR@4x {d_m:+.1f}, passkey@4x {d_p:+.1f} points"
    values = np.array([*ours.values(), *lola.values()], dtype=float)
    unmeasured = bool(np.isnan(values).any() or (values == 0).all())
    if np.isnan(values).any():
        note = f"not measured: an accuracy is NaN; {note}"
    elif unmeasured:
        note = f"not measured: both caches score 0 on both tasks at 4x; {note}"
    ci, neg = worst(ours), worst(null)
    ok = _defined(ci)
    return Claim.decide(
        "At an equal exact-KV budget our routed cache is within 2 points of the LoLA-style "
        "sparse cache on passkey and MQAR (4x length).",
        "worst of (ours - LoLA) over MQAR@4x and passkey@4x (points)",
        None if unmeasured else min(d_m, d_p), None if unmeasured else ok, ">=", -2.0,
        positive=Control.positive("the caches recall something: best accuracy of both at 4x",
                                  float(np.nan_to_num(values.max(), nan=0.0)), ">", 0.0),
        negative=Control.negative("a linear map without an exact cache (elu_linear) in ours' place",
                                  neg.estimate, neg) if _defined(neg) else
        Control.absent("negative", "elu_linear over >= 2 seeds"),
        method=_method(ok, "the seed-paired difference; the worse task", values.shape[-1]),
        note=note,
    )  # fmt: skip


def _pick_best(runs: list[dict[str, Any]], ours: list[str], n_eval: int) -> tuple[str, list[str]]:
    """The variant tested on facts: the highest mean 4x MQAR, where variants within one eval
    item's worth (``1 / n_eval``) of the top are tied and the tie goes to the lowest mean MSE (then
    the name), never to the grid's order. Returns it and the tied variants. A NaN mean counts as
    the lowest accuracy / highest MSE."""

    def mean_or(name: str, key: str, fallback: float) -> float:
        vals = np.asarray(_values(runs, name, key), dtype=float)
        m = float(vals.mean()) if len(vals) else math.nan
        return m if math.isfinite(m) else fallback

    acc = {n: mean_or(n, "mqar_4x", -math.inf) for n in ours}
    top = max(acc.values())
    tied = [n for n in ours if acc[n] >= top - 1 / n_eval]
    best = min(tied, key=lambda n: (mean_or(n, "mse", math.inf), n))
    return best, tied


def _claims(report, grid, runs, teacher_row, fact_rows, best, baselines, n_eval, n_facts) -> None:  # type: ignore[no-untyped-def]
    def by_seed(name: str, key: str, rows: list[dict[str, Any]] = runs) -> dict[int, float]:
        return {r["seed"]: r[key] for r in rows if r["variant"] == name and key in r}

    def arr(name: str, key: str, rows: list[dict[str, Any]] = runs) -> np.ndarray:
        return np.array(list(by_seed(name, key, rows).values()), dtype=float)

    def mean(name: str, key: str) -> float:
        return float(np.mean(_values(runs, name, key)))

    def paired(a: str, b: str, key: str, rows: list[dict[str, Any]] = runs) -> ConfidenceInterval:
        xa, xb = by_seed(a, key, rows), by_seed(b, key, rows)
        return seed_interval([xa[s] - xb[s] for s in xa if s in xb])

    def ratio(a: str, b: str, key: str) -> ConfidenceInterval:
        xa, xb = by_seed(a, key), by_seed(b, key)
        common = [s for s in xa if s in xb]
        return ratio_interval([xa[s] for s in common], [xb[s] for s in common])

    n = len({r["seed"] for r in runs})
    needs = f"the arm on >= {MIN_SEEDS} seeds (not in this grid)"
    # positive controls: comparisons in the grid with a known effect (rules fixed before the rerun)
    known_mse = _known(
        ratio("hedgehog", "elu_linear", "mse"),
        "known MSE gap: hedgehog / elu_linear feature map MSE ratio (seed-paired)",
        "<=", MSE_RATIO, "hedgehog and elu_linear " + needs,
    )  # fmt: skip
    known_gain = paired("lolcats", "elu_linear", "mqar_4x")
    known_recall = _known(
        known_gain, "known recall gain: lolcats - elu_linear 4x MQAR (seed-paired)",
        ">=", 1 / n_eval, "lolcats and elu_linear " + needs,
    )  # fmt: skip
    rep = "independent replicate: deltanet on other linearization seeds vs deltanet (seed-paired)"
    # 1. delta rules beat linear and gated at equal state size (MSE lower, 4x MQAR higher)
    pairs = [(d, g) for d in DELTA_ARMS for g in ACCUMULATION if d in grid and g in grid]
    if pairs:
        ratios = {f"{d} vs {g}": ratio(d, g, "mse") for d, g in pairs}
        gains = {f"{d} vs {g}": paired(d, g, "mqar_4x") for d, g in pairs}
        worst = extreme_interval(ratios.values())
        ci = _defined(worst)
        report.add_claim(Claim.decide(
            "DeltaNet and Gated DeltaNet reach a lower layerwise MSE than Hedgehog linear attention "
            "and gated accumulation (scalar gate, GLA) at equal state size.",
            f"largest over the {len(pairs)} pairs of the MSE ratio delta rule / accumulation (relative MSE)",
            None if ci is None else worst.estimate, ci, "<=", MSE_RATIO,
            positive=known_mse,
            negative=_null(ratio("deltanet@replicate", "deltanet", "mse"), rep + ": MSE ratio",
                           "deltanet's replicate " + needs),
            method=_method(ci, f"the log of each seed-paired ratio; the largest of the {len(pairs)} pairs", n),
            note="; ".join(f"{k}: {c.estimate:.3f} [{c.low:.3f}, {c.high:.3f}]" for k, c in ratios.items())
            + f"; target: a 10% reduction, harder than the paper's 'lower' (< 1), so a null ratio of 1 can be refuted; before: one point check of the MSE and "
            f"the MQAR part together; {ISSUE44}",
        ))  # fmt: skip
        worst = extreme_interval(gains.values(), largest=False)
        ci = _defined(worst)
        report.add_claim(Claim.decide(
            "DeltaNet and Gated DeltaNet reach a higher 4x-length MQAR accuracy than Hedgehog linear "
            "attention and gated accumulation (scalar gate, GLA) at equal state size.",
            f"smallest over the {len(pairs)} pairs of the 4x MQAR gain delta rule - accumulation",
            None if ci is None else worst.estimate, ci, ">=", 1 / n_eval,
            positive=known_recall,
            negative=_null(paired("deltanet@replicate", "deltanet", "mqar_4x"), rep + ": 4x MQAR gain",
                           "deltanet's replicate " + needs),
            method=_method(ci, f"each seed-paired gain; the smallest of the {len(pairs)} pairs", n),
            note="; ".join(f"{k}: {c.estimate:+.3f} [{c.low:+.3f}, {c.high:+.3f}]" for k, c in gains.items())
            + f"; target: one eval item ({n_eval} items), the smallest resolvable gain, harder than the "
            f"paper's 'higher' (> 0), so a null gain of 0 can be refuted; {ISSUE44}",
        ))  # fmt: skip
    # 2. key-tied erase beats the key-independent control; KDI vs delta's advantage over gated
    if "control" in grid and "deltanet" in grid:
        m = ratio("deltanet", "control", "mse")
        ci = _defined(m)
        report.add_claim(Claim.decide(
            "The key-tied rank-1 erase beats the same erase along a learned key-independent "
            "direction (lower layerwise MSE).",
            "MSE ratio delta / control (relative MSE, seed-paired)",
            None if math.isnan(m.estimate) else m.estimate, ci, "<=", MSE_RATIO,
            positive=known_mse,
            negative=_null(ratio("control@direction1", "control", "mse"),
                           "the control with another initial direction (seed 1) / the control "
                           "(seed-paired MSE ratio)", "control@direction1 " + needs),
            method=_method(ci, "the log of the seed-paired ratio", n),
            note="target: a 10% reduction, harder than the paper's 'lower' (< 1), so a null ratio of 1 can be refuted; split from the key-dependence claim "
            f"(before: one point check of both); {ISSUE44}",
        ))  # fmt: skip
        kdi = np.asarray(teacher_row["key_dependence"]).ravel()
        adv = _delta_gain(runs)
        rho, defined = rho_interval(kdi, adv)
        null = shuffled_rho(kdi, adv) if kdi.size > 2 and np.ptp(adv) > 0 else NAN_CI
        ci = _defined(rho)
        # a rank correlation over these heads that must be high: two updates' per-head MSEs
        pos = (
            rho_interval(_head_errors(runs, "deltanet").ravel(),
                         _head_errors(runs, "gated_scalar").ravel())[0]
            if "gated_scalar" in grid else NAN_CI
        )  # fmt: skip
        report.add_claim(Claim.decide(
            "Heads whose softmax erase is more key-dependent gain more from delta over gated.",
            "Spearman rho (key-dependence index vs gated-minus-delta MSE, per head)",
            None if math.isnan(rho.estimate) else rho.estimate, ci, ">=", 0.5,
            positive=_known(
                pos, "known rank correlation: per-head MSE of deltanet vs gated_scalar, rho "
                f"(bootstrap over heads; rho of the claim defined in {100 * defined:.0f}% of resamples)",
                ">=", 0.5, "deltanet and gated_scalar per-head MSEs over >= 3 heads",
            ),
            negative=Control.negative("key-dependence shuffled over heads (one seeded shuffle): rho",
                                      null.estimate, null) if _defined(null)
            else Control.absent("negative", "a defined rho over >= 3 heads"),
            method=f"95% percentile bootstrap over {kdi.size} heads (1000 resamples; the MSE gain "
            "is the mean over seeds)" if ci is not None
            else f"missing: rho undefined or too few heads ({kdi.size}) to bootstrap",
            note=f"{kdi.size} heads; {ISSUE44}",
        ))  # fmt: skip
    # 3. interventions close the delta model's 4x MQAR gap
    if OURS in grid:
        heads_err = _head_errors(runs, "deltanet").ravel()
        sink = np.asarray(teacher_row["sink_mass"]).ravel()
        recent = np.asarray(teacher_row["recent_mass"]).ravel()
        rho_s = float(stats.spearmanr(sink, heads_err).statistic)
        rho_r = float(stats.spearmanr(recent, heads_err).statistic)
        steps = [
            n for n in ("deltanet+sinks", "deltanet+conv", "deltanet+routing", OURS) if n in grid
        ]
        report.add_claim(
            _gap_claim(
                teacher_row["mqar_4x"],
                list(arr("deltanet", "mqar_4x")),
                {s: list(arr(s, "mqar_4x")) for s in steps},
                n_eval,
                f"; per-head delta error vs sink mass rho {rho_s:+.2f}, vs last-4 mass rho {rho_r:+.2f}"
                f"; {ISSUE44}",
                replicate_by_seed=list(arr("deltanet@replicate", "mqar_4x")),
                positive_gain=known_gain,
            )
        )
    # 4. routing within 2 points of the LoLA-style cache at equal budget
    if OURS in grid and "lola" in grid:
        keys = ("mqar_4x", "passkey_4x")
        null = "elu_linear" if "elu_linear" in grid else "hedgehog"
        report.add_claim(_equal_budget_claim(
            {k: list(arr(OURS, k)) for k in keys}, {k: list(arr("lola", k)) for k in keys},
            {k: list(arr(null, k)) for k in keys},
        ))  # fmt: skip
    # 5. best frozen variant beats every post-hoc baseline on fact accuracy
    fa = {n: np.mean(_values(fact_rows, n, "fact_acc")) for n in [best, *baselines]}
    margin = fa[best] - max(fa[n] for n in baselines)
    worst = extreme_interval(
        [paired(best, b, "fact_acc", fact_rows) for b in baselines], largest=False
    )
    ci = _defined(worst)
    t_fact = fact_rows[0]["fact_acc"]
    report.add_claim(Claim.decide(
        "The best frozen variant beats every post-hoc baseline on knowledge retention "
        "(multiple-choice fact accuracy, the MMLU stand-in).",
        "best variant - best baseline fact accuracy",
        float(margin), ci, ">=", 1 / n_facts,
        positive=Control.positive("the teacher knows the facts: its fact accuracy", t_fact, ">=", 0.9),
        negative=_null(paired(f"{best}@replicate", best, "fact_acc", fact_rows),
                       f"independent replicate: {best} on other linearization seeds - {best} "
                       "(seed-paired fact accuracy)", f"{best}'s replicate " + needs),
        method=_method(ci, "each seed-paired difference; the smallest over baselines", n),
        note=f"best (chosen on recall) = {best}: {fa[best]:.3f}; teacher {t_fact:.3f}; "
        + ", ".join(f"{n} {fa[n]:.3f}" for n in baselines)
        + f"; target: one item ({n_facts} items), harder than the paper's 'beats' (> 0), so a null "
        f"difference of 0 can be refuted; {ISSUE44}",
    ))  # fmt: skip
    # 6. no bypass: zeroing the state costs >= 10 points of 4x MQAR
    hybrids = [
        n for n, (g, c) in grid.items() if g == "intervention" and c.budget and c.update != "none"
    ]
    costs = {
        n: 100 * np.array([r["mqar_4x"] - r["mqar_4x_zeroed"] for r in runs if r["variant"] == n])
        for n in hybrids
    }
    placebo = {
        n: 100 * np.array([r["mqar_4x"] - r["mqar_4x_placebo"] for r in runs if r["variant"] == n])
        for n in hybrids
    }
    if costs:
        worst = extreme_interval([seed_interval(c) for c in costs.values()], largest=False)
        ci = _defined(worst)
        recall = min(mean(h, "mqar_4x") for h in hybrids)
        report.add_claim(Claim.decide(
            "Our hybrids use their state: zeroing it costs at least 10 points of 4x-length MQAR.",
            "smallest cost of zeroing the state (points)",
            float(min(c.mean() for c in costs.values())), ci, ">=", 10.0,
            positive=Control.positive(
                "the cost can reach 10 points: smallest mean 4x MQAR of the hybrids (points)",
                100 * recall, ">=", 10.0,
            ),
            negative=_null(
                extreme_interval([seed_interval(c) for c in placebo.values()], largest=False),
                f"placebo: the state's read-out scaled by {PLACEBO_SCALE} instead of zeroed; the "
                "smallest cost over hybrids (points)", "the placebo " + needs,
            ),
            method=_method(ci, "each hybrid's cost; the smallest over hybrids", n),
            note="zeroing: " + ", ".join(f"{k} {v.mean():.1f}" for k, v in costs.items())
            + "; placebo: " + ", ".join(f"{k} {v.mean():.1f}" for k, v in placebo.items())
            + f"; {ISSUE44}",
        ))  # fmt: skip
