"""The claims, each decided on an interval with a positive and a negative control (see
:mod:`paper_common.claims` for the rule). Kappas use a percentile bootstrap over the natural pairs,
flag rates exact binomial intervals over the controlled answers; "every labeler" is decided on the
interval of the extreme (:func:`paper_common.stats.extreme_interval`).

Claims 3 and 4 (NLI and faithfulness-prompted judges follow faithfulness; the correctness prompt
moves judges to correctness) hold by construction here: the NLI model is tuned on entailment
against the reference and our judges on both prompts with World labels for each criterion. A
labeler that is nothing but its training labels passes both old rules (:func:`training_label_rules`),
so they are reported as checks of our training (``kind="check"``), not as findings about judges.
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
    "prompt_check",
    "training_label_rules",
]

KAPPA = 0.6  # "disagree": kappa below 0.6 (substantial agreement starts there)
UNSUPPORTED = 0.5  # flag most correct-unsupported answers
EXACT = 0.1  # flag few exact answers
PR_GAP = 0.05  # recall exceeds precision by at least 5 points
KAPPA_GAP = 0.1  # a criterion or prompt effect counts from a kappa difference of 0.1
DIFFER = 0.1  # positive control: the criteria disagree on at least 10% of the pairs
NOT_CONSTANT = 0.05  # positive control: every labeler flags (and passes) at least 5% of answers


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
    null = float(_agreement_stat(flags, unfaith, lexical, point)[0])
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
            "faithfulness (what lexical labelers measure) in correctness's place",
            null,
            _pct(_agreement_stat(flags, unfaith, lexical, idx)),
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


def criterion_check(
    flags: Mapping[str, np.ndarray],
    faith_names: Sequence[str],
    corr_names: Sequence[str],
    unfaith: np.ndarray,
    halluc: np.ndarray,
    n_boot: int,
    seed: int,
    note: str,
) -> Claim:
    ci = _criterion_interval(flags, faith_names, unfaith, halluc, n_boot, seed)
    null = _criterion_interval(flags, corr_names, unfaith, halluc, n_boot, seed)
    old_low, _ = training_label_rules(unfaith, halluc, n_boot, seed)
    return Claim.decide(
        "Our NLI model and faithfulness-prompted judges learned the criterion they were tuned on: "
        "they agree more with faithfulness than with correctness",
        "min over them of kappa(faithfulness) - kappa(correctness), natural pairs",
        ci.estimate,
        ci,
        ">=",
        KAPPA_GAP,
        positive=criteria_differ(unfaith, halluc),
        negative=Control.negative(
            "the correctness-prompted judges (tuned on correctness) in their place",
            null.estimate,
            null,
        ),
        method=f"95% paired percentile bootstrap over {len(halluc)} natural pairs per labeler "
        f"({n_boot} resamples), the smallest over labelers",
        kind="check",
        note=f"{note}. The paper's claim (NLI and judges follow faithfulness) holds here by "
        "construction: the NLI model is tuned on entailment against the reference and the judges "
        "on World labels for each prompt; the old rule (CI low of the difference > 0) is met by a "
        f"labeler that is only its training labels (CI low {old_low:+.2f}), so this is a check "
        "of our training. Testing the paper needs real judges (full scale)",
    )


def prompt_check(
    flags: Mapping[str, np.ndarray],
    judges: Sequence[str],
    halluc: np.ndarray,
    unfaith: np.ndarray,
    n_boot: int,
    seed: int,
    note: str,
) -> Claim:
    def smallest(first: str, second: str) -> ConfidenceInterval:
        cis = []
        for j in judges:
            s = prompt_switch(
                j, halluc, flags[f"{j}[{first}]"], flags[f"{j}[{second}]"], n_boot, seed
            )
            cis.append(ConfidenceInterval(s.delta, s.ci_low, s.ci_high, 0.95))
        return extreme_interval(cis, largest=False)

    ci, null = smallest("fait", "corr"), smallest("corr", "fait")
    _, old_p = training_label_rules(unfaith, halluc, n_boot, seed)
    return Claim.decide(
        "Our judges follow the prompt they are given: the correctness prompt raises their "
        "agreement with correctness labels",
        "min over judges of kappa vs correctness (correctness prompt) - (faithfulness prompt)",
        ci.estimate,
        ci,
        ">=",
        KAPPA_GAP,
        positive=criteria_differ(unfaith, halluc),
        negative=Control.negative(
            "swapped prompts (faithfulness - correctness)", null.estimate, null
        ),
        method=f"95% paired percentile bootstrap over {len(halluc)} natural pairs per judge "
        f"({n_boot} resamples), the smallest over {len(judges)} judges",
        kind="check",
        note=f"{note}. The judges are tuned on both prompts, so they follow them by construction: "
        "the old rule (most judges with a significant McNemar gain) is met by a labeler that is "
        f"only its training labels (p = {old_p:.2g}). Now every judge, decided on its kappa "
        "interval; testing the paper needs real judges (full scale)",
    )
