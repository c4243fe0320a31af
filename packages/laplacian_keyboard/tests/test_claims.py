"""The claims' rules on planted numbers: inside, across and outside the target, and the controls."""

import numpy as np

from laplacian_keyboard.reproduce.claims import (
    bound_check,
    continuous_claim,
    inspan_check,
    return_claim,
)


def test_return_claim_inside_across_outside():
    rng = np.random.default_rng(0)
    zs = rng.uniform(0.0, 0.5, 40)
    claim = return_claim(zs + 0.3 + rng.normal(0, 0.05, 40), zs, 0)
    assert claim.verdict == "supported"
    assert claim.negative.verdict == "refuted"
    assert return_claim(zs - 0.3, zs, 0).verdict == "refuted"
    noisy = return_claim(zs + rng.normal(0.05, 0.5, 40), zs, 0)
    assert noisy.low < 0.05 < noisy.high
    assert noisy.verdict == "inconclusive"
    # a zero-shot projection already at the optimum leaves nothing to gain: positive control fails
    top = np.ones(40)
    assert return_claim(top + 0.1, top, 0).verdict == "inconclusive"


def test_exact_checks_and_their_negative_controls():
    check = inspan_check(np.array([0.0, 1e-12]), np.array([0.3, 0.1]), 12, "")
    assert check.kind == "check"
    assert check.verdict == "supported"
    assert check.negative.verdict == "refuted"
    assert inspan_check(np.array([0.0, 0.01]), np.array([0.3]), 12, "").verdict == "refuted"
    bound = bound_check(np.array([0.5, 1.0]), np.array([2.0, 4.0]), 0.95, "")
    assert bound.kind == "check"
    assert bound.verdict == "supported"
    assert bound.negative.verdict == "refuted"  # 1.0 / (4.0 * 0.025) = 10 > 1
    assert bound_check(np.array([5.0]), np.array([4.0]), 0.95, "").verdict == "refuted"


def test_continuous_claim_needs_three_seeds():
    one = continuous_claim(np.array([0.5]), np.array([0.2]), np.array([0.3]), "")
    assert one.verdict == "inconclusive"
    assert one.missing_parts() == []
    assert one.interval.startswith("missing")
    three = continuous_claim(
        np.array([0.6, 0.62, 0.65]), np.array([0.2, 0.21, 0.19]), np.array([0.3] * 3), ""
    )
    assert three.verdict == "supported"
    assert three.negative.verdict == "refuted"


def _rows(lk, td3, rand, lk_final=0.8, td3_final=0.8):
    return [
        {
            "LK mean over curve": a,
            "TD3 mean over curve": b,
            "random-basis LK mean over curve": c,
            "LK final": lk_final + 0.01 * i,
            "TD3 final": td3_final + 0.01 * i,
        }
        for i, (a, b, c) in enumerate(zip(lk, td3, rand, strict=True))
    ]


def test_control_claim_rule_and_controls():
    from laplacian_keyboard.reproduce.claims import control_claim

    td3 = [0.50, 0.52, 0.48, 0.51]
    good = control_claim(_rows([0.8, 0.82, 0.79, 0.81], td3, [0.5, 0.49, 0.52, 0.5]), 8)
    assert good.verdict == "supported"
    assert good.negative.verdict == "refuted"
    assert control_claim(_rows([0.2, 0.22, 0.19, 0.21], td3, td3), 8).verdict == "refuted"
    # the random basis does as well: the rule cannot separate the mechanism -> flagged, inconclusive
    same = control_claim(_rows([0.8, 0.82, 0.79, 0.81], td3, [0.8, 0.81, 0.8, 0.79]), 8)
    assert same.negative.verdict == "supported"
    assert same.verdict == "inconclusive"
    # LK never left the random policy's level: nothing is tested
    flat = _rows([0.8, 0.82, 0.79, 0.81], td3, td3, lk_final=0.0)
    assert control_claim(flat, 8).verdict == "inconclusive"
    assert control_claim(flat, 8).missing_parts() == []
