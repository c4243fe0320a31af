"""Agreement between label sources: Cohen's kappa, precision/recall of the hallucinated class, flag
rates by error type, the exact McNemar test of a prompt switch with a bootstrap CI of the kappa
change, and detector AUROC under each label source.

Labels are boolean arrays, ``True`` = hallucinated, one per answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.stats import binomtest
from sklearn.metrics import cohen_kappa_score, precision_score, recall_score, roc_auc_score

if TYPE_CHECKING:
    from halluc_labels.data import LabeledAnswer
    from halluc_labels.labelers import Labeler

__all__ = [
    "JudgeEvaluation",
    "LabelerComparison",
    "PromptSwitch",
    "ThresholdLabels",
    "agreement_table",
    "bootstrap_kappa_diff",
    "compare_labelers",
    "detector_auroc",
    "evaluate_judge",
    "flag_rates_by_type",
    "kappa",
    "kappa_matrix",
    "label_metrics",
    "mcnemar_exact",
    "metrics_by_generator",
    "prompt_switch",
    "select_threshold",
    "threshold_labels",
]


def _labels(y: Sequence[bool] | np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {arr.shape}")
    if arr.dtype != bool:
        if not np.isin(arr, (0, 1)).all():
            raise ValueError(f"{name} must be boolean (True = hallucinated)")
        arr = arr.astype(bool)
    return arr


def _pair(a: np.ndarray, b: np.ndarray, na: str, nb: str) -> tuple[np.ndarray, np.ndarray]:
    x, y = _labels(a, na), _labels(b, nb)
    if x.shape != y.shape:
        raise ValueError(f"{na} and {nb} must have the same length; got {x.size} and {y.size}")
    if x.size == 0:
        raise ValueError(f"{na} and {nb} are empty")
    return x, y


def kappa(a: Sequence[bool] | np.ndarray, b: Sequence[bool] | np.ndarray) -> float:
    """Cohen's kappa (``sklearn.metrics.cohen_kappa_score``); 1 for identical raters, also when
    both are one constant (where scikit-learn returns NaN)."""
    x, y = _pair(a, b, "a", "b")
    if (x == y).all():
        return 1.0
    return float(cohen_kappa_score(x, y))


def kappa_matrix(labels: Mapping[str, np.ndarray]) -> tuple[list[str], np.ndarray]:
    """Pairwise kappa of every label source: ``(names, (k, k) matrix)`` with 1 on the diagonal."""
    names = list(labels)
    k = np.eye(len(names))
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            k[i, j] = k[j, i] = kappa(labels[names[i]], labels[names[j]])
    return names, k


def agreement_table(
    labels: Mapping[str, np.ndarray], hallucinated: np.ndarray, unfaithful: np.ndarray | None = None
) -> list[dict[str, float | str]]:
    """Per labeler: kappa against correctness (and faithfulness), flag rate, precision and recall
    of the hallucinated class (correctness as the truth)."""
    truth = _labels(hallucinated, "hallucinated")
    rows = []
    for name, y in labels.items():
        y = _labels(y, name)
        row: dict[str, float | str] = {
            "labeler": name,
            "kappa_correctness": kappa(y, truth),
        }
        if unfaithful is not None:
            row["kappa_faithfulness"] = kappa(y, unfaithful)
        row.update(
            flag_rate=float(y.mean()),
            precision=float(precision_score(truth, y, zero_division=0.0)),
            recall=float(recall_score(truth, y, zero_division=0.0)),
        )
        rows.append(row)
    return rows


def flag_rates_by_type(
    flags: np.ndarray, types: Sequence[str], order: Sequence[str] | None = None
) -> dict[str, float]:
    """P(flagged | type): the share of answers of each type a labeler flags (NaN-free: only
    types present)."""
    y = _labels(flags, "flags")
    t = np.asarray(types)
    if t.shape != y.shape:
        raise ValueError(f"flags and types must have the same length; got {y.size} and {t.size}")
    keys = [k for k in (order or sorted(set(t.tolist()))) if (t == k).any()]
    return {k: float(y[t == k].mean()) for k in keys}


def mcnemar_exact(a_right: np.ndarray, b_right: np.ndarray) -> tuple[int, int, float]:
    """Exact McNemar test of two paired raters against one truth: ``(b, c, p)`` with ``b`` items
    only ``a`` gets right, ``c`` only ``b``, and ``p`` the two-sided binomial test of ``b`` in
    ``b + c`` at 1/2 (``scipy.stats.binomtest``); ``p = 1`` when they never disagree."""
    x, y = _pair(a_right, b_right, "a_right", "b_right")
    b, c = int(np.sum(x & ~y)), int(np.sum(~x & y))
    if b + c == 0:
        return b, c, 1.0
    return b, c, float(binomtest(b, b + c, 0.5, alternative="two-sided").pvalue)


def bootstrap_kappa_diff(
    a: np.ndarray,
    truth_a: np.ndarray,
    b: np.ndarray,
    truth_b: np.ndarray,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """kappa(a, truth_a) - kappa(b, truth_b) on the same items, with a paired percentile bootstrap
    CI over items: ``(estimate, low, high)``. Two raters against one truth (``truth_a is truth_b``)
    or one rater against two criteria (``a is b``)."""
    arrays = [
        _labels(x, n) for x, n in ((a, "a"), (truth_a, "truth_a"), (b, "b"), (truth_b, "truth_b"))
    ]
    if len({x.size for x in arrays}) != 1:
        raise ValueError("a, truth_a, b and truth_b must have the same length")
    if arrays[0].size < 2:
        raise ValueError("need at least 2 items to bootstrap")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got {confidence}")
    if n_resamples < 100:
        raise ValueError(f"n_resamples must be >= 100; got {n_resamples}")
    x, tx, y, ty = arrays
    est = kappa(x, tx) - kappa(y, ty)
    idx = np.random.default_rng(seed).integers(0, x.size, size=(n_resamples, x.size))
    diffs = _kappa_rows(x[idx], tx[idx]) - _kappa_rows(y[idx], ty[idx])
    alpha = (1 - confidence) / 2
    low, high = np.quantile(diffs, [alpha, 1 - alpha])
    return float(est), float(low), float(high)


def _kappa_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(p_o - p_e) / (1 - p_e) of two boolean raters along the last axis (1 where identical, as
    :func:`kappa`)."""
    po = np.mean(a == b, axis=-1)
    pa, pb = a.mean(-1), b.mean(-1)
    pe = pa * pb + (1 - pa) * (1 - pb)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = (po - pe) / (1 - pe)
    return np.where(po == 1, 1.0, k)


@dataclass(frozen=True)
class PromptSwitch:
    """One judge under the faithfulness and the correctness prompt, against a truth."""

    judge: str
    kappa_faithfulness_prompt: float
    kappa_correctness_prompt: float
    delta: float
    ci_low: float
    ci_high: float
    b: int
    c: int
    p_mcnemar: float
    n: int

    @property
    def significant_gain(self) -> bool:
        return self.delta > 0 and self.p_mcnemar < 0.05

    def as_row(self) -> dict[str, float | int | str | bool]:
        return {
            "judge": self.judge,
            "n": self.n,
            "kappa_faith_prompt": self.kappa_faithfulness_prompt,
            "kappa_corr_prompt": self.kappa_correctness_prompt,
            "delta_kappa": self.delta,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "only_corr_right": self.c,
            "only_faith_right": self.b,
            "p_mcnemar": self.p_mcnemar,
            "significant_gain": self.significant_gain,
        }


def prompt_switch(
    judge: str,
    truth: np.ndarray,
    faith_prompt: np.ndarray,
    corr_prompt: np.ndarray,
    n_resamples: int = 2000,
    seed: int = 0,
) -> PromptSwitch:
    """Does the correctness prompt agree better with ``truth`` than the faithfulness prompt?
    Δkappa (correctness − faithfulness prompt) with its bootstrap CI, and the exact McNemar test
    on the items the two prompts label differently."""
    t = _labels(truth, "truth")
    f, c = _pair(faith_prompt, corr_prompt, "faith_prompt", "corr_prompt")
    est, low, high = bootstrap_kappa_diff(c, t, f, t, n_resamples, seed=seed)
    b, cc, p = mcnemar_exact(f == t, c == t)
    return PromptSwitch(judge, kappa(f, t), kappa(c, t), est, low, high, b, cc, p, int(t.size))


def detector_auroc(scores: np.ndarray, labels: Mapping[str, np.ndarray]) -> dict[str, float]:
    """AUROC of one detector score (higher = more likely hallucinated) under each label source;
    NaN where a source has only one class."""
    s = np.asarray(scores, dtype=float)
    out = {}
    for name, y in labels.items():
        y = _labels(y, name)
        if y.shape != s.shape:
            raise ValueError(f"scores and {name} must have the same length")
        out[name] = float(roc_auc_score(y, s)) if 0 < y.sum() < y.size else float("nan")
    return out


@dataclass
class LabelerComparison:
    """Every labeler on one set of labelled answers: its ``flags``, the ``agreement`` rows (kappa
    against correctness and, where known, faithfulness; precision and recall), the pairwise
    ``kappa`` matrix over ``names``, flag rates by answer type, and prompt switches."""

    flags: dict[str, np.ndarray]
    agreement: list[dict[str, Any]]
    names: list[str]
    kappa: np.ndarray
    flag_rates: dict[str, dict[str, float]]
    switches: list[PromptSwitch] = field(default_factory=list)


def compare_labelers(
    answers: Sequence[LabeledAnswer],
    labelers: Sequence[Labeler],
    switches: Sequence[tuple[str, str]] = (),
    type_order: Sequence[str] | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
) -> LabelerComparison:
    """Run ``labelers`` on answers with known correctness (human labels, or the World's) and
    compare them. ``switches``: ``(faithfulness-prompt labeler, correctness-prompt labeler)`` name
    pairs to test with :func:`prompt_switch`. Faithfulness columns appear only when every answer has
    a faithfulness label. Flag rates are by answer type (``"untyped"`` where none), in
    ``type_order`` if given."""
    from halluc_labels.data import labeler_inputs

    answers = list(answers)
    if not answers:
        raise ValueError("answers is empty")
    if any(a.correct is None for a in answers):
        raise ValueError("every answer needs a correctness label (drop the unparsable ones)")
    names = [lab.name for lab in labelers]
    if len(set(names)) != len(names):
        raise ValueError(f"labeler names must be unique; got {names}")
    truth = np.array([not a.correct for a in answers])
    unfaithful = (
        np.array([not a.faithful for a in answers])
        if all(a.faithful is not None for a in answers)
        else None
    )
    inputs = labeler_inputs(answers)
    flags = {lab.name: lab.label(*inputs) for lab in labelers}
    types = [a.answer_type or "untyped" for a in answers]
    known = set(flags)
    rows = []
    for faith, corr in switches:
        if faith not in known or corr not in known:
            raise ValueError(f"switch ({faith!r}, {corr!r}) names a labeler not in {names}")
        rows.append(prompt_switch(corr, truth, flags[faith], flags[corr], n_resamples, seed))
    order, matrix = kappa_matrix(flags)
    return LabelerComparison(
        flags=flags,
        agreement=agreement_table(flags, truth, unfaithful),
        names=order,
        kappa=matrix,
        flag_rates={n: flag_rates_by_type(f, types, type_order) for n, f in flags.items()},
        switches=rows,
    )


# --------------------------------------------------------------------- the paper's metrics
def label_metrics(pred: np.ndarray, truth: np.ndarray) -> dict[str, float | int]:
    """One label source against the truth (True = hallucination), as Valjakka et al. report it:
    Cohen's kappa, bias (share flagged minus share truly hallucinated: > 0 over-flags), false
    positives and negatives, FP share of the errors (0 when there are none), FPR = FP / (FP + TN)
    and FNR = FN / (FN + TP) (NaN where the denominator is 0)."""
    p, t = _pair(pred, truth, "pred", "truth")
    tp, fp = int(np.sum(p & t)), int(np.sum(p & ~t))
    fn, tn = int(np.sum(~p & t)), int(np.sum(~p & ~t))
    return {
        "n": int(t.size),
        "kappa": kappa(p, t),
        "bias": float(p.mean() - t.mean()),
        "fp": fp,
        "fn": fn,
        "fp_share": fp / max(fp + fn, 1),
        "fpr": fp / (fp + tn) if fp + tn else float("nan"),
        "fnr": fn / (fn + tp) if fn + tp else float("nan"),
    }


def metrics_by_generator(
    flags: Mapping[str, np.ndarray], truth: np.ndarray, generators: Sequence[str]
) -> list[dict[str, Any]]:
    """:func:`label_metrics` of every label source per generator (the paper's unit) and over all
    (``generator = "all"``)."""
    t = _labels(truth, "truth")
    g = np.asarray(generators)
    if g.shape != t.shape:
        raise ValueError(f"generators and truth must have the same length; got {g.size}, {t.size}")
    rows = []
    for name, y in flags.items():
        y = _labels(y, name)
        for gen in [*dict.fromkeys(g.tolist()), "all"]:
            m = np.ones_like(t) if gen == "all" else g == gen
            rows.append({"labeler": name, "generator": gen, **label_metrics(y[m], t[m])})
    return rows


def select_threshold(scores: np.ndarray, truth: np.ndarray) -> float:
    """The threshold ``t`` (hallucinated = ``score < t``) that maximises Cohen's kappa with
    ``truth`` (True = hallucination), over the midpoints between distinct scores and the two ends;
    ties go to the smallest ``t`` (fewest flagged). Scores may be unbounded (log-likelihoods)."""
    s = np.asarray(scores, dtype=float)
    t = _labels(truth, "truth")
    if s.shape != t.shape:
        raise ValueError(f"scores and truth must have the same length; got {s.size}, {t.size}")
    if s.size == 0 or not np.isfinite(s).all():
        raise ValueError("scores must be a non-empty array of finite numbers")
    u = np.unique(s)
    gap = max(float(u[-1] - u[0]), 1.0)
    cands = np.concatenate([[u[0] - gap], (u[:-1] + u[1:]) / 2, [u[-1] + gap]])
    k = _kappa_rows(s[None, :] < cands[:, None], np.broadcast_to(t, (cands.size, t.size)))
    return float(cands[int(np.argmax(np.nan_to_num(k, nan=-np.inf)))])


@dataclass(frozen=True)
class ThresholdLabels:
    """Per-generator thresholds of one score: ``oracle`` labels (threshold chosen on each
    generator's full set, an optimistic bound), ``cv`` labels (out-of-fold: chosen on the other
    folds of the same generator), ``thresholds[generator] = {"oracle": t, "cv": [t per fold]}``."""

    oracle: np.ndarray
    cv: np.ndarray
    thresholds: dict[str, dict[str, Any]]


def threshold_labels(
    scores: np.ndarray,
    truth: np.ndarray,
    groups: Sequence[str] | np.ndarray,
    n_folds: int = 3,
    seed: int = 0,
) -> ThresholdLabels:
    """Valjakka et al.'s lexical-baseline protocol: per generator (``groups``), the kappa-maximising
    threshold on the full set (oracle) and, in a shuffled ``n_folds``-fold split, on the training
    folds applied to the held-out fold (CV, concatenated out-of-fold labels)."""
    from sklearn.model_selection import KFold

    if int(n_folds) != n_folds or n_folds < 2:
        raise ValueError(f"n_folds must be an integer >= 2; got {n_folds}")
    s = np.asarray(scores, dtype=float)
    t = _labels(truth, "truth")
    g = np.asarray(groups)
    if not s.shape == t.shape == g.shape:
        raise ValueError("scores, truth and groups must have the same length")
    oracle, cv = np.zeros(t.size, bool), np.zeros(t.size, bool)
    table: dict[str, dict[str, Any]] = {}
    for gen in dict.fromkeys(g.tolist()):
        idx = np.flatnonzero(g == gen)
        if idx.size < n_folds:
            raise ValueError(
                f"generator {gen!r} has {idx.size} items, fewer than n_folds={n_folds}"
            )
        tau = select_threshold(s[idx], t[idx])
        oracle[idx] = s[idx] < tau
        taus = []
        folds = KFold(int(n_folds), shuffle=True, random_state=seed).split(idx)
        for train, test in folds:
            tau_f = select_threshold(s[idx[train]], t[idx[train]])
            cv[idx[test]] = s[idx[test]] < tau_f
            taus.append(tau_f)
        table[str(gen)] = {"oracle": tau, "cv": taus}
    return ThresholdLabels(oracle, cv, table)


@dataclass
class JudgeEvaluation:
    """:func:`evaluate_judge`'s result: the ``model`` it ran on, per-prompt per-generator metric
    ``rows``, the ``flags`` per prompt, and the prompt ``switch`` (first faithfulness prompt ->
    first correctness prompt, truth = the human / World correctness labels)."""

    model: str
    rows: list[dict[str, Any]]
    flags: dict[str, np.ndarray]
    switch: PromptSwitch | None


def evaluate_judge(
    model: Any,
    tokenizer: Any,
    answers: Sequence[LabeledAnswer],
    prompts: Sequence[str] = ("p1", "p2", "p3"),
    n_resamples: int = 2000,
    seed: int = 0,
    **judge_kwargs: Any,
) -> JudgeEvaluation:
    """Run any HF causal LM + tokenizer as a judge under each of ``prompts`` on answers with a
    correctness label (the LPHB pairs from :func:`halluc_labels.data.load_lphb`, or World
    answers) and report the paper's metrics per generator and the prompt switch.
    ``judge_kwargs`` go to :class:`halluc_labels.labelers.JudgeLabeler`."""
    from halluc_labels.data import labeler_inputs
    from halluc_labels.labelers import JudgeLabeler

    answers = list(answers)
    if not answers:
        raise ValueError("answers is empty")
    if any(a.correct is None for a in answers):
        raise ValueError("every answer needs a correctness label (drop the unparsable ones)")
    truth = np.array([not a.correct for a in answers])
    inputs = labeler_inputs(answers)
    gens = [a.source or "unknown" for a in answers]
    flags, rows = {}, []
    for p in prompts:
        judge = JudgeLabeler(model, tokenizer, p, name=p, **judge_kwargs)
        flags[p] = judge.label(*inputs)
        for r in metrics_by_generator({p: flags[p]}, truth, gens):
            rows.append(
                {"prompt": p, "criterion": judge.criterion, **r, "unparsed": judge.unparsed}
            )
    from halluc_labels.labelers import PROMPT_CRITERION, _prompt_key

    keys = {_prompt_key(p): p for p in prompts}
    faith = next((p for k, p in keys.items() if PROMPT_CRITERION[k] == "faithfulness"), None)
    corr = next((p for k, p in keys.items() if PROMPT_CRITERION[k] == "correctness"), None)
    switch = (
        prompt_switch(corr, truth, flags[faith], flags[corr], n_resamples, seed)
        if faith is not None and corr is not None
        else None
    )
    name = getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
    return JudgeEvaluation(str(name), rows, flags, switch)
