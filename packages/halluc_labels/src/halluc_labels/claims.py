"""The claims, each decided on an interval with a positive and a negative control (see
:mod:`paper_common.claims` for the rule). Kappas use a percentile bootstrap over the natural pairs,
flag rates exact binomial intervals over the controlled answers; "every labeler" is decided on the
interval of the extreme (:func:`paper_common.stats.extreme_interval`).

Claims 3 and 4 (NLI and faithfulness-prompted judges follow faithfulness; the correctness prompt
moves judges to correctness) are measured: the NLI model and the judges are tuned only on answers
where the two criteria agree (:func:`halluc_labels.models.agreeing`), so no training label tells
one criterion from the other. (Before issue 46 they were tuned on both criteria's labels and a
labeler that is nothing but its training labels passed both old rules, :func:`training_label_rules`.)
Their negative controls swap the two arms item by item at random, so the arms are identical in law
and the same rule must come out refuted. Their positive controls (review of issue 46) ask that the
test is possible on the testbed: claim 3's judges know the facts where the criteria differ
(:func:`judges_know`), claim 4's judges label pairs differently under the two prompts at all
(:func:`prompt_reaction`); a judge tuned with one label under every prompt need not read the prompt.

Claim 1's negative control plants the agreement it denies (:func:`_agreeing_labelers`); ``unfaith``
stays in :func:`agreement_claim`'s signature for callers but is no longer used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from halluc_labels.analysis import _kappa_rows, bootstrap_kappa_diff, mcnemar_exact, prompt_switch
from paper_common import Claim, Control
from paper_common.stats import ConfidenceInterval, extreme_interval, proportion_interval

__all__ = [
    "agreement_claim",
    "bias_claim",
    "criteria_differ",
    "criterion_check",
    "judges_know",
    "prompt_check",
    "prompt_reaction",
    "training_label_rules",
]

KAPPA = 0.6  # "disagree": kappa below 0.6 (substantial agreement starts there)
UNSUPPORTED = 0.5  # flag most correct-unsupported answers
EXACT = 0.1  # flag few exact answers
PR_GAP = 0.05  # recall exceeds precision by at least 5 points
KAPPA_GAP = 0.1  # a criterion or prompt effect counts from a kappa difference of 0.1
DIFFER = 0.1  # positive control: the criteria disagree on at least 10% of the pairs
NOT_CONSTANT = 0.05  # positive control: every labeler flags (and passes) at least 5% of answers
AGREE_FLIP = 0.05  # negative control of claim 1: planted agreeing labelers err on 5% (ours)
REACT = 0.05  # positive control of claim 4: every judge changes >= 5% of its labels with the prompt
KNOWN = 0.5  # positive control of claim 3: judges know >= half the facts where the criteria differ


def _pct(x: np.ndarray) -> tuple[float, float]:
    lo, hi = np.quantile(x, [0.025, 0.975])
    return float(lo), float(hi)


def _agreement_stat(
    flags: Mapping[str, np.ndarray], truth: np.ndarray, lexical: Sequence[str], idx: np.ndarray
) -> np.ndarray:
    """max(mean pairwise kappa of every labeler, max lexical kappa vs ``truth``) on each row of
    resampled item indices ``idx``."""
    names = list(flags)
    resampled = {n: np.asarray(flags[n], bool)[idx] for n in names}
    pairs = [
        _kappa_rows(resampled[a], resampled[b]) for i, a in enumerate(names) for b in names[i + 1 :]
    ]
    t = np.asarray(truth, bool)[idx]
    lex = np.max([_kappa_rows(resampled[n], t) for n in lexical], axis=0)
    return np.maximum(np.mean(pairs, axis=0), lex)


def _agreeing_labelers(
    flags: Mapping[str, np.ndarray], truth: np.ndarray, seed: int
) -> dict[str, np.ndarray]:
    """The null of the agreement claim, the disagreement planted absent: every labeler is the
    truth with an independent :data:`AGREE_FLIP` share of its labels flipped (pairwise kappa
    about 0.8, kappa vs the truth about 0.9). Before the review the null put faithfulness in
    correctness's place, which leaves the mean pairwise kappa untouched: whenever that term
    decided, the null equalled the claim's value and could not come out refuted."""
    rng = np.random.default_rng([seed, 461])
    t = np.asarray(truth, bool)
    return {n: np.where(rng.random(t.size) < AGREE_FLIP, ~t, t) for n in flags}


def agreement_claim(
    flags: Mapping[str, np.ndarray],
    halluc: np.ndarray,
    unfaith: np.ndarray,
    lexical: Sequence[str],
    n_boot: int,
    seed: int,
    note: str,
) -> Claim:
    n = len(halluc)
    point = np.arange(n)[None, :]
    idx = np.random.default_rng(seed).integers(0, n, (n_boot, n))
    value = float(_agreement_stat(flags, halluc, lexical, point)[0])
    planted = _agreeing_labelers(flags, halluc, seed)
    null = float(_agreement_stat(planted, halluc, lexical, point)[0])
    rates = np.array([np.mean(f) for f in flags.values()])
    spread = float(np.min(np.minimum(rates, 1 - rates)))
    return Claim.decide(
        "Automated labelers disagree with each other and lexical labelers with the correctness "
        "labels: mean pairwise kappa < 0.6 and every lexical kappa vs correctness < 0.6",
        "max(mean pairwise kappa, max lexical kappa vs correctness), natural pairs",
        value,
        _pct(_agreement_stat(flags, halluc, lexical, idx)),
        "<",
        KAPPA,
        positive=Control.positive(
            "no labeler is constant: smallest share flagged or passed by a labeler",
            spread,
            ">=",
            NOT_CONSTANT,
        ),
        negative=Control.negative(
            f"agreeing labelers planted: every labeler replaced by the correctness labels with "
            f"{AGREE_FLIP:.0%} of them flipped at random, independently per labeler",
            null,
            _pct(_agreement_stat(planted, halluc, lexical, idx)),
        ),
        method=f"95% percentile bootstrap over {n} natural pairs ({n_boot} resamples)",
        note=note,
    )


def _rate(flags: np.ndarray, mask: np.ndarray) -> ConfidenceInterval:
    return proportion_interval(int(np.sum(flags[mask])), int(np.sum(mask)))


def _bias_margin(
    flags: Mapping[str, np.ndarray],
    names: Sequence[str],
    target: np.ndarray,
    exact: np.ndarray,
    pr: tuple[float, float, float],
) -> ConfidenceInterval:
    """The interval of min(lowest flag rate on ``target`` - 0.5, 0.1 - highest flag rate on exact
    answers, recall - precision - 0.05): the claim holds iff it is >= 0."""
    low = extreme_interval([_rate(flags[n], target) for n in names], largest=False)
    high = extreme_interval([_rate(flags[n], exact) for n in names], largest=True)
    parts = [
        ConfidenceInterval(
            low.estimate - UNSUPPORTED, low.low - UNSUPPORTED, low.high - UNSUPPORTED, 0.95
        ),
        ConfidenceInterval(EXACT - high.estimate, EXACT - high.high, EXACT - high.low, 0.95),
        ConfidenceInterval(pr[0] - PR_GAP, pr[1] - PR_GAP, pr[2] - PR_GAP, 0.95),
    ]
    return extreme_interval(parts, largest=False)


def _recall_minus_precision(
    flags: np.ndarray, halluc: np.ndarray, n_boot: int, seed: int
) -> tuple[float, float, float]:
    f, h = np.asarray(flags, bool), np.asarray(halluc, bool)
    idx = np.random.default_rng(seed).integers(0, f.size, (n_boot, f.size))
    tp = (f & h)[idx].sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = tp / h[idx].sum(1) - tp / f[idx].sum(1)
    est = (
        float(np.sum(f & h) / h.sum() - np.sum(f & h) / f.sum()) if h.any() and f.any() else np.nan
    )
    diff = diff[np.isfinite(diff)]
    if diff.size < 0.95 * n_boot or np.isnan(est):
        return est, np.nan, np.nan
    return (est, *_pct(diff))


def bias_claim(
    flags_ctrl: Mapping[str, np.ndarray],
    types: Sequence[str],
    unsupported_types: Sequence[str],
    names: Sequence[str],
    rouge: np.ndarray,
    halluc_nat: np.ndarray,
    n_boot: int,
    seed: int,
    note: str,
) -> Claim:
    t = np.asarray(types)
    unsupported, exact, wrong = np.isin(t, unsupported_types), t == "exact", t == "wrong_value"
    pr = _recall_minus_precision(rouge, halluc_nat, n_boot, seed)
    ci = _bias_margin(flags_ctrl, names, unsupported, exact, pr)
    null = _bias_margin(flags_ctrl, names, exact, exact, pr)
    caught = extreme_interval([_rate(flags_ctrl[n], wrong) for n in names], largest=False)
    return Claim.decide(
        "Lexical labelers and NLI flag most correct answers the reference lacks (>= 50%) and "
        "few exact ones (<= 10%); ROUGE-L's recall of the hallucinated class exceeds its precision",
        "min(lowest flag rate on correct-unsupported - 0.5, 0.1 - highest flag rate on exact, "
        f"ROUGE-L@0.5 recall - precision - {PR_GAP}) over lexical labelers + NLI",
        ci.estimate,
        ci,
        ">=",
        0.0,
        positive=Control.positive(
            "the labelers catch real errors: lowest flag rate on wrong-value answers",
            caught.estimate,
            ">=",
            UNSUPPORTED,
            interval=caught,
        ),
        negative=Control.negative(
            "exact answers in the correct-unsupported answers' place", null.estimate, null
        ),
        method="exact binomial 95% intervals of the flag rates (controlled set), the extreme "
        f"over labelers; recall - precision by a 95% percentile bootstrap over the natural pairs "
        f"({n_boot} resamples); the min of the three",
        note=note,
    )


def criteria_differ(unfaith: np.ndarray, halluc: np.ndarray) -> Control:
    """Positive control of the criterion claims: the two criteria label enough pairs differently
    that following one can be told from following the other."""
    ci = proportion_interval(int(np.sum(unfaith != halluc)), len(halluc))
    return Control.positive(
        "faithfulness and correctness disagree on a share of the natural pairs",
        ci.estimate,
        ">=",
        DIFFER,
        interval=ci,
    )


def _shift(ci: ConfidenceInterval, by: float) -> ConfidenceInterval:
    return ConfidenceInterval(ci.estimate - by, ci.low - by, ci.high - by, 0.95)


def _testable(description: str, parts: list[tuple[ConfidenceInterval, float]]) -> Control:
    """A positive control made of several conditions ``share >= threshold``: passes iff the
    interval of the smallest margin ``share - threshold`` lies wholly at or above 0."""
    margin = extreme_interval([_shift(ci, t) for ci, t in parts], largest=False)
    return Control.positive(description, margin.estimate, ">=", 0.0, interval=margin)


def _differ_share(unfaith: np.ndarray, halluc: np.ndarray) -> ConfidenceInterval:
    return proportion_interval(int(np.sum(unfaith != halluc)), len(halluc))


def judges_know(
    known: Mapping[str, np.ndarray], unfaith: np.ndarray, halluc: np.ndarray
) -> ConfidenceInterval:
    """The smallest share, over judges, of the pairs where the criteria differ whose fact the
    judge knows (``known[judge]``: it answers the plain question right), exact binomial interval
    of the extreme. A judge that knows no fact can only compare with the reference: that it
    follows faithfulness is then forced, not measured (ours)."""
    differ = np.asarray(unfaith, bool) != np.asarray(halluc, bool)
    if not known:
        raise ValueError("known needs at least one judge's mask")
    cis = []
    for j, k in known.items():
        k = np.asarray(k, bool)
        if k.shape != differ.shape:
            raise ValueError(f"known[{j!r}] has shape {k.shape}; the labels have {differ.shape}")
        cis.append(proportion_interval(int(np.sum(k & differ)), int(np.sum(differ))))
    return extreme_interval(cis, largest=False)


def prompt_reaction(
    flags: Mapping[str, np.ndarray], judges: Sequence[str], faith: str = "p1", corr: str = "p2"
) -> ConfidenceInterval:
    """The smallest share, over judges, of the pairs a judge labels differently under the two
    prompts (exact binomial interval of the extreme): a judge that does not react to the prompt
    cannot show a prompt effect (ours)."""
    cis = []
    for j in judges:
        a, b = np.asarray(flags[f"{j}[{faith}]"], bool), np.asarray(flags[f"{j}[{corr}]"], bool)
        cis.append(proportion_interval(int(np.sum(a != b)), a.size))
    return extreme_interval(cis, largest=False)


def _criterion_interval(
    flags: Mapping[str, np.ndarray],
    names: Sequence[str],
    unfaith: np.ndarray,
    halluc: np.ndarray,
    n_boot: int,
    seed: int,
) -> ConfidenceInterval:
    cis = []
    for n in names:
        est, low, high = bootstrap_kappa_diff(
            flags[n], unfaith, flags[n], halluc, n_boot, seed=seed
        )
        cis.append(ConfidenceInterval(est, low, high, 0.95))
    return extreme_interval(cis, largest=False)


def training_label_rules(
    unfaith: np.ndarray, halluc: np.ndarray, n_boot: int, seed: int
) -> tuple[float, float]:
    """The two old rules on a labeler that is nothing but its training labels (faithfulness under
    the faithfulness prompt and for NLI, correctness under the correctness prompt): ``(CI low of
    kappa(faith) - kappa(corr), McNemar p of the prompt switch)``. Both pass (CI low > 0, p < 0.05)
    whenever the criteria differ, with no judgement involved: the old claims held by construction."""
    _, low, _ = bootstrap_kappa_diff(unfaith, unfaith, unfaith, halluc, n_boot, seed=seed)
    _, _, p = mcnemar_exact(unfaith == halluc, halluc == halluc)
    return low, p


def _swap(a: np.ndarray, b: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The two arms exchanged on a random half of the items: identical in law (the null)."""
    mask = np.random.default_rng([seed, 46]).random(len(a)) < 0.5
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    return np.where(mask, b, a), np.where(mask, a, b)


def criterion_check(
    flags: Mapping[str, np.ndarray],
    faith_names: Sequence[str],
    corr_names: Sequence[str],
    unfaith: np.ndarray,
    halluc: np.ndarray,
    n_boot: int,
    seed: int,
    note: str,
    known: Mapping[str, np.ndarray] | None = None,
) -> Claim:
    """NLI and faithfulness-prompted judges agree more with faithfulness than with correctness.
    ``corr_names`` is unused (kept for the call signature); the null swaps the two criteria item
    by item at random. ``known`` (judge name -> which pairs' facts it knows) adds the positive
    control that the judges could follow correctness at all (:func:`judges_know` >= 0.5); without
    it the positive control is only that the criteria differ (labelers with no knowledge to
    check)."""
    ci = _criterion_interval(flags, faith_names, unfaith, halluc, n_boot, seed)
    parts = [(_differ_share(unfaith, halluc), DIFFER)]
    what = f"min(share of pairs the criteria label differently - {DIFFER}"
    if known is not None:
        parts.append((judges_know(known, unfaith, halluc), KNOWN))
        what += f", smallest share of those whose fact a judge knows - {KNOWN}"
    positive = _testable(what + ")", parts)
    su, sh = _swap(unfaith, halluc, seed)
    null = _criterion_interval(flags, faith_names, su, sh, n_boot, seed)
    return Claim.decide(
        "The NLI baseline and faithfulness-prompted judges agree more with reference faithfulness "
        "than with factual correctness",
        "min over them of kappa(faithfulness) - kappa(correctness), natural pairs",
        ci.estimate,
        ci,
        ">=",
        KAPPA_GAP,
        positive=positive,
        negative=Control.negative(
            "the two criteria swapped item by item at random (identical in law)",
            null.estimate,
            null,
        ),
        method=f"95% paired percentile bootstrap over {len(halluc)} natural pairs per labeler "
        f"({n_boot} resamples), the smallest over labelers",
        note=f"{note}. The NLI model and the judges were tuned only on answers where the two "
        "criteria agree, so which one they follow on the others is measured, not trained in",
    )


def prompt_check(
    flags: Mapping[str, np.ndarray],
    judges: Sequence[str],
    halluc: np.ndarray,
    unfaith: np.ndarray,
    n_boot: int,
    seed: int,
    note: str,
    faith: str = "p1",
    corr: str = "p2",
) -> Claim:
    """The correctness prompt raises every judge's kappa against correctness; the null swaps the
    two prompts' labels item by item at random."""

    def smallest(arms: dict[str, tuple[np.ndarray, np.ndarray]]) -> ConfidenceInterval:
        cis = []
        for j, (f, c) in arms.items():
            s = prompt_switch(j, halluc, f, c, n_boot, seed)
            cis.append(ConfidenceInterval(s.delta, s.ci_low, s.ci_high, 0.95))
        return extreme_interval(cis, largest=False)

    arms = {j: (flags[f"{j}[{faith}]"], flags[f"{j}[{corr}]"]) for j in judges}
    ci = smallest(arms)
    positive = _testable(
        f"min(share of pairs the criteria label differently - {DIFFER}, smallest share of pairs "
        f"a judge labels differently under {corr} and {faith} - {REACT})",
        [
            (_differ_share(unfaith, halluc), DIFFER),
            (prompt_reaction(flags, judges, faith, corr), REACT),
        ],
    )
    null = smallest({j: _swap(f, c, seed) for j, (f, c) in arms.items()})
    return Claim.decide(
        "Switching a judge from the faithfulness prompt to the correctness prompt raises its "
        "agreement with correctness labels",
        f"min over judges of kappa vs correctness ({corr}) - ({faith})",
        ci.estimate,
        ci,
        ">=",
        KAPPA_GAP,
        positive=positive,
        negative=Control.negative(
            "the two prompts' labels swapped item by item at random (identical in law)",
            null.estimate,
            null,
        ),
        method=f"95% paired percentile bootstrap over {len(halluc)} natural pairs per judge "
        f"({n_boot} resamples), the smallest over {len(judges)} judges",
        note=f"{note}. The judges were tuned only on answers where the two criteria agree, with "
        "the same label under every prompt: nothing in training tells the prompts apart",
    )
