"""The claims' verdicts on planted results: each control can fail and each rule can refute."""

import numpy as np
import pytest

from screening.reproduce import application_claim, rho_interval
from screening.reproduce.claims import baseline_claim, structure_claim, uncertainty_claim
from screening.reproduce.run import Results


def _structure(windows=100, far_windows=10, valuable=90, n=100) -> Results:
    res = Results(seeds=[1, 2, 3])
    for _ in range(3):
        res.structure.append(
            {"n": n, "windows": windows, "far_windows": far_windows, "top_windows": 30,
             "valuable": valuable, "top_contiguous": 100, "gap": 0.0, "top_gap": 0.4,
             "planner_margin_plans": n}
        )  # fmt: skip
    return res


def test_structure_claim_supported_refuted_and_controlled():
    ok = structure_claim(_structure())
    assert ok.verdict == "supported"
    assert ok.negative.verdict == "refuted"
    assert "100%" in ok.note  # the old contiguity-only rule passed screen-top every time
    assert structure_claim(_structure(windows=60)).verdict == "refuted"
    useless = structure_claim(_structure(valuable=10))  # screening rarely has value: no test
    assert useless.verdict == "inconclusive"
    assert "positive control" in useless.reason
    # a block away from the cut-off does as well: the structure would say nothing
    defect = structure_claim(_structure(far_windows=100))
    assert defect.defect
    assert defect.verdict == "inconclusive"


def _sweep(gain_of) -> Results:
    res = Results(seeds=[1, 2, 3])
    unc = np.linspace(0.02, 0.2, 17)
    for rep in range(3):
        for i, u in enumerate(unc):
            res.sweep.append(
                {"population": "PMT", "level": i, "margin p(1-p)": u + 0.001 * rep,
                 "gain vs no screening": gain_of(u)}
            )  # fmt: skip
    return res


def test_uncertainty_claim_needs_a_strong_correlation_and_a_varied_cause():
    assert uncertainty_claim(_sweep(lambda u: 10 * u)).verdict == "supported"
    assert uncertainty_claim(_sweep(lambda u: -u)).verdict == "refuted"
    flat = _sweep(lambda u: 1.0)
    assert uncertainty_claim(flat).verdict == "inconclusive"  # rho undefined
    narrow = _sweep(lambda u: u)
    for r in narrow.sweep:
        r["margin p(1-p)"] = 0.1 + r["margin p(1-p)"] / 100  # spans a factor < 2
    claim = uncertainty_claim(narrow)
    assert claim.verdict == "inconclusive"
    assert "varies the cause" in claim.reason


def test_rho_interval_brackets_the_estimate():
    x = np.arange(40.0)
    y = x + np.random.default_rng(0).normal(0, 10, 40)
    rho, low, high = rho_interval(x, y)
    assert low < rho < high
    assert np.isnan(rho_interval(x, np.ones(40))[1])


def test_application_claim_controls():
    rows = [
        {"replicate": i, "application": app, "ratio": 1.4 + 0.02 * i, "auroc": auc,
         "no-uncertainty ratio": 1.0}
        for app in ("a", "b") for i, auc in enumerate((0.8, 0.82, 0.79))
    ]  # fmt: skip
    assert application_claim(rows).verdict == "supported"
    blind = [{**r, "auroc": 0.5 + 0.01 * r["replicate"]} for r in rows]
    assert application_claim(blind).verdict == "inconclusive"  # the scores carry no signal
    trivial = [{**r, "no-uncertainty ratio": 1.4} for r in rows]  # gains without uncertainty
    assert application_claim(trivial).defect


def test_a_margin_window_attains_a_tied_optimum_the_brute_force_did_not_pick():
    from screening import brute_force_plan, is_margin_window
    from screening.reproduce.run import best_margin_window

    # K = 1, m = 2: several screening sets tie; the brute force keeps the first by unit id, which
    # here is not contiguous (ranks 0 and 2), yet the block of ranks 0-1 has the same value
    p = np.array([0.618, 0.388, 0.304, 0.266, 0.248, 0.201, 0.162, 0.121, 0.009, 0.005])
    perm = np.random.default_rng(3).permutation(p.size)
    q = p[perm]
    brute = brute_force_plan(q, 1, 2)
    assert best_margin_window(q, 1, 2) == pytest.approx(brute.expected_value, abs=1e-12)
    ranks = np.argsort(np.argsort(-q))
    assert sorted(ranks[brute.screened].tolist()) == [0, 2]
    assert not is_margin_window(q, brute.screened, 1)  # the old measurement counted this a miss


def test_rho_interval_resamples_whole_groups():
    x = np.repeat(np.arange(10.0), 3)
    y = x + np.tile([0.0, 0.1, -0.1], 10)
    rho, low, high = rho_interval(x, y, groups=np.repeat(np.arange(10), 3))
    assert rho > 0.95
    assert 0.9 < low <= high <= 1.0
    with pytest.raises(ValueError, match="same size"):
        rho_interval(x[:-1], y[:-1], groups=np.repeat(np.arange(10), 3)[:-1])


def _baseline_rows(random_gap: float) -> Results:
    """Sweep rows where the optimum beats every baseline and screen random trails the best other
    baseline by ``random_gap`` in one population."""
    res = Results(seeds=[1, 2, 3])
    for i in range(6):
        row = {"no screening": 10.0, "screen top": 10.5, "screen most uncertain": 11.0,
               "screen random": 11.0 - (random_gap if i == 3 else 0.0), "screening only": 2.0,
               "optimal": 12.0, "gain vs no screening": 2.0}  # fmt: skip
        res.sweep.append(row)
    return res


def test_baseline_check_negative_control_runs_with_the_choice_switched_off():
    # issue 45 audit: the negative was the claim's own margins with the arms swapped, a number
    # that cannot be measured apart from the claim; it is now screen random (screening without
    # choosing where) under the same rule, refuted where it trails a baseline
    ok = baseline_claim(_baseline_rows(0.7))
    assert ok.verdict == "supported"
    assert ok.negative.verdict == "refuted"
    assert ok.negative.value == pytest.approx(-0.7)
    assert "screen random" in ok.negative.description
    # random never worse than the other baselines: the rule cannot tell choosing from not choosing
    flat = baseline_claim(_baseline_rows(0.0))
    assert flat.defect
    assert flat.verdict == "inconclusive"
