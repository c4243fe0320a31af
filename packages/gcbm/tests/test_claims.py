"""The claims' decision rules on planted numbers: interval inside, across and outside the target,
and the controls that make a claim inconclusive."""

import math

import pytest

from gcbm.logic import Rule
from gcbm.reproduce import (
    _precision,
    accuracy_claim,
    fidelity_claim,
    lm_claim,
    rule_recovery_claim,
)


def _row(ours, post, cbm, ours_acc=0.9, post_acc=0.8, rand=(0.0, 0.5), found=3):
    return {
        "GCBM concept precision": ours,
        "post-hoc tree on GIN concept precision": post,
        "CBM top-3 concept precision": cbm,
        "GCBM rule acc.": ours_acc,
        "post-hoc tree on GIN rule acc.": post_acc,
        "random rule concept precision": rand[0],
        "random rule acc.": rand[1],
        "planted found": found,
    }


def test_precision_without_a_rule_for_the_class_is_undefined():
    aligned = {"ring": "ring6", "oh": "hydroxyl", "c3": "chain3"}
    assert math.isnan(_precision([Rule(0, (("ring", True),), 1.0)], aligned))
    assert math.isnan(_precision([], aligned))
    rules = [Rule(1, (("ring", True), ("c3", False)), 1.0)]
    assert _precision(rules, aligned) == pytest.approx(0.5)


def test_a_baseline_without_rules_is_left_out_not_scored_zero():
    # seed 0: the post-hoc tree made no class-1 rule, so the better baseline is CBM (0.5), not 0
    rows = [_row(0.8, math.nan, 0.5), _row(0.8, 0.9, 0.5)]
    claim = rule_recovery_claim(rows)
    assert claim.value == pytest.approx((min(0.3, 0.1) + min(-0.1, 0.1)) / 2)
    assert "post-hoc 1/2" in claim.note
    assert claim.verdict in ("refuted", "inconclusive")


def test_rule_recovery_inside_across_outside():
    good = [
        _row(0.95, 0.6, 0.5, 0.95, 0.8),
        _row(0.9, 0.5, 0.4, 0.97, 0.8),
        _row(1, 0.6, 0.5, 0.96, 0.8),
    ]
    assert rule_recovery_claim(good).verdict == "supported"
    bad = [
        _row(0.5, 0.9, 0.5, 0.7, 0.97),
        _row(0.6, 0.95, 0.4, 0.75, 0.98),
        _row(0.5, 0.9, 0.5, 0.7, 0.96),
    ]
    assert rule_recovery_claim(bad).verdict == "refuted"
    mixed = [
        _row(1.0, 0.5, 0.5, 0.99, 0.8),
        _row(0.5, 0.9, 0.5, 0.7, 0.97),
        _row(0.9, 0.6, 0.4, 0.9, 0.8),
    ]
    assert rule_recovery_claim(mixed).verdict == "inconclusive"
    # a random rule that beats the baselines: the rule cannot fail -> flagged, not supported
    lucky = [{**r, "random rule concept precision": 1.0, "random rule acc.": 0.99} for r in good]
    claim = rule_recovery_claim(lucky)
    assert claim.defect
    assert claim.verdict == "inconclusive"
    # planted groups missing from the vocabulary: the testbed cannot show recovery
    assert rule_recovery_claim([{**r, "planted found": 2} for r in good]).verdict == "inconclusive"


def test_gcbm_without_rules_leaves_the_claim_without_an_interval():
    claim = rule_recovery_claim([_row(math.nan, 0.2, 0.1), _row(1.0, 0.2, 0.1)])
    assert claim.value is None
    assert claim.verdict == "inconclusive"
    assert claim.note.startswith("not supported: GCBM extracted no class-1 rule on 1 of 2")
    assert claim.missing_parts() == []


def test_no_measured_baseline_is_not_measured():
    claim = rule_recovery_claim([_row(0.9, math.nan, math.nan), _row(0.9, math.nan, math.nan)])
    assert claim.value is None
    assert claim.note.startswith("not measured")


def _run(gcbm, gin, gcn=0.5, majority=0.5, no_lm=None, fid=1.0, shuffled=0.5, ds="d"):
    return {"dataset": ds, "GCBM": gcbm, "GIN": gin, "GCN": gcn, "majority": majority,
            "n_test": 200, "GCBM (no LM)": gcbm if no_lm is None else no_lm,
            "GCBM fidelity": fid, "shuffled fidelity": shuffled}  # fmt: skip


def test_accuracy_claim_inside_across_outside():
    assert accuracy_claim([_run(0.99, 1.0), _run(1.0, 1.0), _run(0.995, 1.0)], "d").verdict == (
        "supported"
    )
    assert accuracy_claim([_run(0.90, 1.0), _run(0.91, 1.0), _run(0.9, 0.99)], "d").verdict == (
        "refuted"
    )
    assert accuracy_claim([_run(0.90, 1.0), _run(1.0, 1.0), _run(0.99, 1.0)], "d").verdict == (
        "inconclusive"
    )
    # black boxes at chance: positive control fails
    chance = accuracy_claim([_run(0.5, 0.5), _run(0.5, 0.52), _run(0.51, 0.5)], "d")
    assert chance.verdict == "inconclusive"
    assert not chance.positive.passed


def test_lm_claim_needs_headroom_and_a_gain():
    rows = [_run(0.95, 1, no_lm=0.85, ds=d) for d in "ab" for _ in range(3)]
    assert lm_claim(rows, 0).verdict == "supported"
    flat = [_run(0.85, 1, no_lm=0.85 + 0.01 * (i % 2), ds=d) for d in "ab" for i in range(3)]
    assert lm_claim(flat, 0).verdict == "refuted"
    ceiling = [_run(1.0, 1, no_lm=0.995, ds=d) for d in "ab" for _ in range(3)]
    claim = lm_claim(ceiling, 0)
    assert claim.verdict == "inconclusive"
    assert not claim.positive.passed


def test_fidelity_claim_and_its_shuffled_control():
    assert fidelity_claim([_run(0.95, 1, fid=0.99) for _ in range(4)]).verdict == "supported"
    assert fidelity_claim([_run(0.95, 1, fid=0.8) for _ in range(4)]).verdict == "refuted"
    # rules and model both constant: the shuffled agreement is as high, so the rule cannot fail
    const = fidelity_claim([_run(0.95, 1, fid=1.0, shuffled=1.0) for _ in range(4)])
    assert const.defect
    assert const.verdict == "inconclusive"
