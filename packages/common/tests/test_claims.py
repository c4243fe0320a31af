"""The three-valued verdict: the interval rule, both controls, defects, and old reports."""

import dataclasses
import json

import numpy as np
import pytest

from paper_common import Claim, Control, Report
from paper_common.claims import combine, decide
from paper_common.stats import Bounds, ConfidenceInterval, t_interval


def passed_positive() -> Control:
    return Control.positive("format learned", 0.95, ">=", 0.75)


def refuted_negative() -> Control:
    return Control.negative("shuffled labels", 0.01, (-0.02, 0.03))


def claim(interval, positive=None, negative=None, value=None) -> Claim:
    low, high = interval
    return Claim.decide(
        "Ours beats the baseline.",
        "accuracy gap",
        (low + high) / 2 if value is None else value,
        interval,
        ">",
        0.05,
        positive=passed_positive() if positive is None else positive,
        negative=refuted_negative() if negative is None else negative,
        method="95% t-interval over 3 seeds",
    )


def test_interval_rule_inside_across_outside():
    assert decide(0.06, 0.2, ">", 0.05) == "supported"
    assert decide(0.0, 0.2, ">", 0.05) == "inconclusive"
    assert decide(-0.1, 0.05, ">", 0.05) == "refuted"  # the upper end only touches: misses
    assert decide(0.05, 0.05, ">=", 0.05) == "supported"
    assert decide(None, None, "<", 1.0) == "inconclusive"
    assert decide(np.nan, np.nan, "<", 1.0) == "inconclusive"
    with pytest.raises(ValueError, match="low <= high"):
        decide(0.3, 0.1, ">", 0.0)
    with pytest.raises(ValueError, match="op"):
        decide(0.1, 0.3, "==", 0.0)  # type: ignore[arg-type]


def test_claim_verdict_follows_the_interval_when_both_controls_pass():
    ok = claim((0.08, 0.2))
    assert (ok.verdict, ok.supported, ok.reason) == ("supported", True, "")
    assert ok.negative.verdict == "refuted"
    assert ok.negative.target == "> 0.05"
    assert (ok.low, ok.high) == (0.08, 0.2)
    across = claim((0.01, 0.2), value=0.1)  # the point passes, the interval does not decide
    assert across.point_check is True
    assert across.verdict == "inconclusive"
    assert "straddles" in across.reason
    outside = claim((-0.1, 0.02))
    assert outside.verdict == "refuted"


def test_failing_or_missing_positive_control_makes_it_inconclusive():
    failed = Control.positive("format learned", 0.50, ">=", 0.75)
    for interval in ((0.08, 0.2), (-0.1, 0.02)):  # neither a pass nor a miss counts
        c = claim(interval, positive=failed)
        assert c.verdict == "inconclusive"
        assert "positive control did not pass" in c.reason
        assert "0.5" in c.reason
    across = Control.positive("probe above chance", 0.8, ">", 0.7, interval=(0.6, 0.9))
    assert not across.passed  # the control's own interval must clear it
    absent = claim(
        (0.08, 0.2), positive=Control.absent("positive", "a model that learns the format")
    )
    assert absent.verdict == "inconclusive"
    assert "missing" in absent.reason
    no_control = Claim.decide(
        "s",
        "m",
        0.1,
        (0.08, 0.2),
        ">",
        0.05,
        positive=None,
        negative=refuted_negative(),
        method="m",
    )
    assert no_control.verdict == "inconclusive"
    assert no_control.reason == "positive control missing"


def test_negative_control_that_passes_is_a_defect():
    null_also_passes = Control.negative("adding two constant vectors", 0.3, (0.25, 0.35))
    c = claim((0.08, 0.2), negative=null_also_passes)
    assert c.negative.verdict == "supported"
    assert c.defect
    assert c.verdict == "inconclusive"
    assert c.reason.startswith("DEFECT")
    report = Report(
        package="demo", title="t", scale="smoke", seed=0, claims=[c, claim((0.08, 0.2))]
    )
    assert report.verdicts()["defect"] == 1
    assert "1 DEFECT" in report.verdict_line()
    check = dataclasses.replace(claim((0.08, 0.2)), kind="check")
    both = Report(
        package="demo", title="t", scale="smoke", seed=0, claims=[check, claim((0.08, 0.2))]
    )
    assert both.verdicts()["supported"] == 1  # the check is counted apart from paper claims
    assert (
        "1 supported, 0 refuted, 0 inconclusive of 1 paper claims; 1 of 1 checks"
        in both.verdict_line()
    )
    assert "**DEFECT** inconclusive" in report.to_markdown()


def test_a_refuted_claim_stays_refuted_when_its_negative_control_passes():
    c = claim((-0.1, 0.02), negative=Control.negative("null", 0.3, (0.25, 0.35)))
    assert c.verdict == "refuted"
    assert not c.defect  # the rule did fail here, so it can: the control was just no null here
    assert "no case where the claim must fail" in c.reason
    # the same supported negative on a claim its interval does not refute is a defect, even when
    # the positive control fails (the rule cannot fail whatever the testbed)
    failed_positive = Control.positive("format learned", 0.5, ">=", 0.75)
    c = claim((0.2, 0.4), positive=failed_positive, negative=Control.negative("null", 0.3))
    assert c.verdict == "inconclusive"
    assert c.defect


def test_negative_control_undecided_or_missing_blocks_support_but_not_refutation():
    undecided = claim((0.08, 0.2), negative=Control.negative("null", 0.04, (0.0, 0.08)))
    assert undecided.verdict == "inconclusive"
    assert "not refuted" in undecided.reason
    missing = claim((0.08, 0.2), negative=Control.absent("negative", "a null model"))
    assert missing.verdict == "inconclusive"
    assert "missing" in missing.reason
    refuted = claim((-0.1, 0.02), negative=Control.absent("negative", "a null model"))
    assert refuted.verdict == "refuted"  # the rule did fail here: refutation needs no negative


def test_intervals_from_stats_objects():
    ci = t_interval([0.1, 0.12, 0.14])
    assert isinstance(ci, ConfidenceInterval)
    assert ci.low < 0.12 < ci.high
    c = Claim.decide(
        "s", "m", ci.estimate, ci, ">", 0.05, positive=passed_positive(),
        negative=refuted_negative(), method="t over 3 seeds",
    )  # fmt: skip
    assert c.verdict == "supported"
    censored = Claim.decide(
        "s", "m", 4.0, Bounds(4.0, np.inf), ">", 3.0, positive=passed_positive(),
        negative=Control.negative("swapped arms", 1.0), method="censoring bounds",
    )  # fmt: skip
    assert censored.verdict == "supported"
    assert censored.high == np.inf
    with pytest.raises(ValueError, match="method"):
        Claim.decide("s", "m", 1.0, (0.5, 1.5), ">", 0, positive=None, negative=None, method="")
    assert t_interval([2.0, 2.0, 2.0]).low == 2.0
    with pytest.raises(ValueError, match="at least 2"):
        t_interval([1.0])


def test_combine_refuses_swapped_controls():
    with pytest.raises(ValueError, match="positive"):
        combine("supported", refuted_negative(), None)


def test_round_trip_and_old_two_valued_reports(tmp_path):
    report = Report(package="demo", title="t", scale="smoke", seed=0)
    report.add_claim(claim((0.08, 0.2)))
    report.add_claim(claim((0.08, 0.2), negative=Control.negative("null", 0.3, (0.25, 0.35))))
    report.add_claim(Claim.threshold("two-valued", "m", 1.0, ">", 0.0))
    loaded = Report.from_json(report.to_json())
    assert loaded.claims == report.claims
    data = json.loads(report.to_json())
    assert [c["verdict"] for c in data["claims"]] == ["supported", "inconclusive", "inconclusive"]
    assert data["claims"][1]["defect"] is True
    assert data["verdicts"]["supported"] == 1
    # a report.json written before verdicts: "supported" is read as the point check
    old = {
        "package": "demo", "title": "t", "scale": "quick", "seed": 0, "supported": True,
        "claims": [{"statement": "s", "metric": "m", "value": 2.0, "target": "> 1",
                    "supported": True, "note": "n"}],
    }  # fmt: skip
    (tmp_path / "report.json").write_text(json.dumps(old))
    claim_old = Report.from_json(tmp_path).claims[0]
    assert claim_old.point_check is True
    assert claim_old.verdict == "inconclusive"
    assert "before verdicts" in claim_old.reason


def test_a_supported_verdict_cannot_be_asserted_without_its_evidence():
    # a control holding no number cannot claim to have passed (it used to be trusted)
    with pytest.raises(ValueError, match="without a measured value"):
        Control("negative", "x", None, "-", "refuted")
    with pytest.raises(ValueError, match="without a measured value"):
        Control("positive", "x", None, "-", "supported")
    with pytest.raises(ValueError, match="interval_verdict"):
        combine("Supported", passed_positive(), refuted_negative())  # type: ignore[arg-type]
    ok = claim((0.08, 0.2))
    assert (ok.op, ok.target_value) == (">", 0.05)
    # an interval outside its own target cannot be stored as supported, nor one without a rule
    for bad in ({"low": 0.0, "high": 0.0}, {"low": np.nan, "high": np.nan}, {"op": None}):
        with pytest.raises(ValueError, match="wholly inside"):
            dataclasses.replace(ok, **bad)
    data = ok.to_dict()
    data["low"], data["high"] = 0.01, 0.02  # an edited report.json: the verdict no longer follows
    with pytest.raises(ValueError, match="wholly inside"):
        Claim.from_dict(data)


def test_numpy_numbers_are_accepted():
    c = Claim.decide(
        "s", "m", np.float32(0.1), (np.float64(0.08), np.float32(0.2)), ">", np.int64(0),
        positive=passed_positive(), negative=refuted_negative(), method="m",
    )  # fmt: skip
    assert c.value == pytest.approx(0.1)
    assert isinstance(c.low, float)


def test_undecided_negative_says_why():
    nan_null = claim((0.08, 0.2), negative=Control.negative("null", float("nan")))
    assert "undefined" in nan_null.reason
    across = claim((0.08, 0.2), negative=Control.negative("null", 0.04, (0.0, 0.08)))
    assert "straddles" in across.reason


def test_missing_parts_names_what_a_claim_lacks():
    two_valued = Claim.threshold("s", "m", 1.0, ">", 0.5)
    assert two_valued.missing_parts() == [
        "rule",
        "interval method",
        "positive control",
        "negative control",
    ]
    pos = Control.positive("learned", 0.9, ">=", 0.75)
    half = Claim.decide(
        "s", "m", 0.7, (0.6, 0.8), ">", 0.5, positive=pos, negative=None, method="b"
    )
    assert half.missing_parts() == ["negative control"]
    named = Claim.decide(
        "s",
        "m",
        0.7,
        None,
        ">",
        0.5,
        positive=Control.absent("positive", "a trained model"),
        negative=Control.absent("negative", "a shuffled-label run"),
        method="missing: one seed; needs >= 3",
    )
    assert named.missing_parts() == []  # absent controls and an unmeasured interval are named
    assert named.verdict == "inconclusive"
    assert Claim.from_dict(named.to_dict()).missing_parts() == []
