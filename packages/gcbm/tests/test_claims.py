"""Claim 2's concept precision when a method extracts no rule for the class (planted rows)."""

import math

import pytest

from gcbm.logic import Rule
from gcbm.reproduce import _precision, rule_recovery_claim


def _row(ours: float, post: float, cbm: float, ours_acc=0.9, post_acc=0.8) -> dict[str, float]:
    return {
        "GCBM concept precision": ours,
        "post-hoc tree on GIN concept precision": post,
        "CBM top-3 concept precision": cbm,
        "GCBM rule acc.": ours_acc,
        "post-hoc tree on GIN rule acc.": post_acc,
    }


def test_precision_without_a_rule_for_the_class_is_undefined():
    aligned = {"ring": "ring6", "oh": "hydroxyl", "c3": "chain3"}
    assert math.isnan(_precision([Rule(0, (("ring", True),), 1.0)], aligned))
    assert math.isnan(_precision([], aligned))
    rules = [Rule(1, (("ring", True), ("c3", False)), 1.0)]
    assert _precision(rules, aligned) == pytest.approx(0.5)


def test_a_baseline_without_rules_is_left_out_not_scored_zero():
    # the post-hoc tree made no class-1 rule on seed 0: before, it counted as precision 0 and
    # lowered the better-baseline mean; now it is left out (post-hoc mean 0.9 from seed 1)
    rows = [_row(0.8, math.nan, 0.5), _row(0.8, 0.9, 0.5)]
    claim = rule_recovery_claim(rows)
    assert not claim.point_check  # 0.8 - 0.9 < 0
    assert claim.value == pytest.approx(-0.1)
    assert "post-hoc 1/2" in claim.note
    ok = rule_recovery_claim([_row(0.9, math.nan, 0.5), _row(0.9, 0.6, 0.5)])
    assert ok.point_check
    assert ok.value == pytest.approx(min(0.9 - 0.6, 0.1))


def test_gcbm_without_rules_leaves_the_claim_unsupported():
    claim = rule_recovery_claim([_row(math.nan, 0.2, 0.1), _row(1.0, 0.2, 0.1)])
    assert claim.value is None
    assert not claim.point_check
    assert claim.note.startswith("not supported: GCBM extracted no class-1 rule on 1 of 2")


def test_no_measured_baseline_is_not_measured():
    claim = rule_recovery_claim([_row(0.9, math.nan, math.nan)])
    assert claim.value is None
    assert claim.note.startswith("not measured")
