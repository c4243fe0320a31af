"""The claims' verdicts on planted results: each control can fail, and each rule can refute."""

import math

import pytest

from spacer.reproduce import SCALES
from spacer.reproduce.claims import decide_claims, seed_interval, worst_over
from spacer.reproduce.run import (
    CS_PP,
    LEARNED,
    LEARNED_CS_PP,
    LITERATURE_CLAIM_MULTIPLIER,
    ORACLE_METHODS,
    PREDICTION_BASED,
    TRIVIAL,
    TRIVIAL_NOISY,
    Results,
)

CFG = SCALES["smoke"]
B = CFG.budget
A = CFG.exponents


def planted(
    spacer=1.0,
    learned=1.0,
    plain=3.0,
    cu=3.0,
    ss_blogb=0.5,
    ss=3.0,
    trivial=0.9,
    noisy=4.0,
    lit_spacer=None,
    lit_plain=None,
) -> Results:
    """Errors for three replicates with a little seed-to-seed jitter (so intervals have width)."""
    res = Results(seeds=[1, 2, 3], a0=A[0])
    for rep, jitter in enumerate((0.98, 1.0, 1.02)):
        for a in A:
            errs = {
                "SpaceR": spacer,
                "Count-Min": plain,
                "Count-Sketch": plain,
                "Count-Min (CU)": cu,
                "SpaceSaving at B log B": ss_blogb,
                "SpaceSaving": ss,
                **{m: plain for m in CS_PP},
                TRIVIAL: trivial,
                TRIVIAL_NOISY: noisy,
                **{m: learned for m in PREDICTION_BASED},
            }
            for m, e in errs.items():
                res.errors[(rep, a, B, m)] = e * jitter
            lit = {
                "SpaceR": spacer if lit_spacer is None else lit_spacer,
                "Count-Sketch": plain,
                **{m: plain if lit_plain is None else lit_plain for m in CS_PP},
                **{m: learned for m in LEARNED_CS_PP},
            }
            for m, e in lit.items():
                res.lit_errors[(rep, a, LITERATURE_CLAIM_MULTIPLIER, m)] = e * jitter
        for noise, scale in ((0.0, 1.0), (0.5, 5.0)):
            for m in ORACLE_METHODS:
                res.noise_errors[(rep, noise, m)] = learned * scale * jitter
            res.noise_errors[(rep, noise, "SpaceR")] = spacer * (1.0 + 0.01 * rep)
    return res


def verdicts(res: Results) -> list[str]:
    return [c.verdict for c in decide_claims(res, CFG)]


def test_planted_effects_are_supported():
    claims = decide_claims(planted(), CFG)
    assert [c.verdict for c in claims] == ["supported"] * 5
    assert all(c.positive.passed and c.negative.verdict == "refuted" for c in claims)


def test_planted_misses_are_refuted():
    # SpaceR and SpaceSaving(B log B) err twice as much as the learned methods, the trivial three
    # times, and SpaceR is as bad as the learned methods under noise
    res = planted(spacer=2.0, ss_blogb=2.0, trivial=3.0)
    for rep in range(3):
        res.noise_errors[(rep, 0.5, "SpaceR")] = 5.0
    assert verdicts(res) == ["refuted"] * 5


def test_useless_predictions_leave_claims_1_to_3_inconclusive():
    # the sketches without predictions are as good as with them: matching them shows nothing
    claims = decide_claims(planted(plain=1.0), CFG)
    for c in claims[:3]:
        assert c.verdict == "inconclusive"
        assert "positive control did not pass" in c.reason
    assert claims[3].verdict == "supported"  # its own control (noise hurts) still passes


def test_literature_claim_needs_predictions_to_help_at_its_budget():
    # CountSketch++ without predictions as good as with them: matching them shows nothing
    claim = decide_claims(planted(lit_plain=1.0), CFG)[4]
    assert claim.verdict == "inconclusive"
    assert "positive control did not pass" in claim.reason


def test_negative_control_that_matches_is_a_defect():
    # SpaceSaving already matches at memory B: "with B log B" cannot fail
    claim = decide_claims(planted(ss=0.5), CFG)[1]
    assert claim.defect
    assert claim.verdict == "inconclusive"
    assert claim.reason.startswith("DEFECT")


def test_noise_claim_needs_noise_to_hurt():
    res = planted()
    for rep in range(3):
        for m in ORACLE_METHODS:
            res.noise_errors[(rep, 0.5, m)] = res.noise_errors[(rep, 0.0, m)]
    claim = decide_claims(res, CFG)[3]
    assert claim.verdict == "inconclusive"
    assert "wrong predictions hurt" in claim.reason


def test_intervals_over_seeds_are_on_the_log_scale_and_handle_exact_references():
    assert seed_interval([1.0, 1.0, 1.0]) == (1.0, 1.0, 1.0)
    est, low, high = seed_interval([514.0, 686.0, 5210.0])  # a spread over an order of magnitude
    assert est == pytest.approx((514.0 * 686.0 * 5210.0) ** (1 / 3))
    assert 0 < low < 514.0
    assert high > 5210.0
    assert seed_interval([2.0, 8.0, 4.0])[0] == pytest.approx(4.0)
    assert seed_interval([1.0, math.inf, 2.0]) == (2.0, 0.0, math.inf)  # only the reference exact
    assert seed_interval([0.0, 0.0, 0.5]) == (0.0, 0.0, math.inf)  # the method exact in two seeds
    assert math.isnan(seed_interval([1.0, math.nan, 1.0])[0])
    est, low, high = worst_over({0.5: [1.0, 1.1, 1.2], 1.0: [3.0, 3.0, 3.0]})
    assert (est, low, high) == (3.0, 3.0, 3.0)
    est, low, high = worst_over({0.5: [1.0, 1.1, 1.2], 1.0: [3.0, 3.0, 3.0]}, larger_is_worse=False)
    assert est == pytest.approx((1.0 * 1.1 * 1.2) ** (1 / 3))
    assert low < 1.1 < high
    assert set(LEARNED) <= set(PREDICTION_BASED)


def test_worst_over_is_undefined_when_any_exponent_is_whatever_the_order():
    a = worst_over({0.5: [math.nan, 1.0, 1.0], 1.0: [2.0, 2.1, 2.2]})
    b = worst_over({1.0: [2.0, 2.1, 2.2], 0.5: [math.nan, 1.0, 1.0]})
    assert all(math.isnan(x) for x in a + b)


def test_literature_claim_reports_a_degenerate_countsketch_pp_and_every_multiplier():
    # learned CountSketch++ answering exactly what the trivial mechanism answers (every id
    # without a prediction below tau) must be said, and the ratio at every multiplier reported
    res = planted()
    for rep in range(3):
        for a in A:
            lit = res.lit_errors
            lit[(rep, a, LITERATURE_CLAIM_MULTIPLIER, TRIVIAL)] = min(
                lit[(rep, a, LITERATURE_CLAIM_MULTIPLIER, m)] for m in LEARNED_CS_PP
            )
            for m in ("SpaceR", *LEARNED_CS_PP):  # a second multiplier, SpaceR 4x worse there
                lit[(rep, a, 20, m)] = (4.0 if m == "SpaceR" else 1.0) * (1 + 0.01 * rep)
    claim = decide_claims(res, CFG)[4]
    cells = 3 * len(A)
    assert f"equals the trivial mechanism's in {cells} of {cells}" in claim.note
    assert "x20: 4" in claim.note
    assert f"x{LITERATURE_CLAIM_MULTIPLIER}: 1" in claim.note
