"""The claims of ``reproduce`` on planted rows: censored (never reached) and early times, zero
ranges, ties and NaN, decided without training anything."""

import dataclasses
import math

import numpy as np
import pytest

from diffusion_classes.reproduce import (
    SCALES,
    _censored_spearman,
    _claims,
    _delay,
    _flip_error,
    _log_crossing,
    _range_bounds,
    _slope_bounds,
)
from paper_common import Report
from paper_common.stats import Bounds

CFG = dataclasses.replace(
    SCALES["smoke"], seeds=(0,), null_ns=(32, 64, 128), unet_classes=(0, 1, 2), unet_steps=100
)


def _t(key, v):
    """Row columns of a time: a float, or ``(value, "censored" | "early")``."""
    v, kind = v if isinstance(v, tuple) else (v, "")
    return {key: float(v), f"{key}_censored": kind == "censored", f"{key}_early": kind == "early"}


def _row(base, **times):
    out = dict(base)
    for k, v in times.items():
        out |= _t(k, v)
    return out


def _by(**over):
    """A full set of rows where every claim is measurable; ``over`` replaces one job's rows."""
    pred = {"pred_gen_0": 600.0, "pred_gen_1": 300.0, "pred_mem_0": 9e4, "pred_mem_1": 2e4}
    by = {
        "null": [_row({"value": float(n), "seed": 0, "pred_gen_0": 600.0, "pred_mem_0": 1e3 * n},
                      tau_gen_0=500.0, tau_mem_0=10.0 * n) for n in CFG.null_ns],
        "variance": [_row({"value": 4.0, "seed": 0, **pred}, tau_gen_0=500.0, tau_gen_1=200.0,
                          tau_mem_0=800.0, tau_mem_1=500.0)],
        "centroid": [_row({"value": m, "seed": 0}, tau_gen_1=200.0 + m) for m in (1.0, 2.0)],
        "centroid_variance": [_row({"value": v, "seed": 0}, tau_gen_1=100.0 * v) for v in (1.0, 2.0)],
        "clone": [
            _row({"value": w, "seed": 0, "half_log_lambda": 1.0, "closed_form_0": 1.1,
                  "closed_form_1": 1.1, "closed_form_2": 0.9},
                 measured_0=1.1, measured_1=1.2, measured_2=0.8, exact_0=1.0, exact_1=1.0, exact_2=0.9)
            for w in (CFG.clone_weight, 1 / 3)
        ],
        "unet": [_row({"seed": 0, **{f"var_{c}": 1.0 + c for c in range(3)},
                       **{f"n_{c}": 10 * (c + 1) for c in range(3)}},
                      tau_mem_0=50.0, tau_mem_1=30.0, tau_mem_2=10.0)],
    }  # fmt: skip
    by.update(over)
    return by


FLIPS = [{"variance_ratio": 4.0, "measured_flip_gen": 0.2, "measured_flip_mem": math.nan,
          "predicted_flip_gen": 0.25, "log_tau_gen_ratio_by_w": "-1 +1"}]  # fmt: skip


def _run(by, flips=FLIPS):
    report = Report(package="diffusion_classes", title="t", scale="smoke", seed=0)
    _claims(report, by, flips, CFG)
    assert len(report.claims) == 7
    return report.claims


def test_planted_rows_give_supported_claims_where_the_order_is_plain():
    claims = _run(_by())
    assert [c.point_check for c in claims] == [True, True, True, True, True, True, True]


def test_a_class_that_never_memorises_is_later_than_one_that_did():
    """Class 1 memorised at 3e4, class 0 not by the grid's end 1e6: it counts for the claim
    (it counted against it when the censored time was NaN)."""
    var = [_row({"value": 4.0, "seed": 0, "pred_gen_0": 600.0, "pred_gen_1": 300.0,
                 "pred_mem_0": 9e4, "pred_mem_1": 2e4},
                tau_gen_0=500.0, tau_gen_1=200.0, tau_mem_0=(1e6, "censored"), tau_mem_1=3e4)]  # fmt: skip
    claims = _run(_by(variance=var))
    assert claims[1].point_check
    assert claims[1].value == 1.0
    assert claims[2].point_check


def test_two_censored_times_leave_the_order_undetermined_and_reported():
    base = {
        "value": 4.0,
        "pred_gen_0": 600.0,
        "pred_gen_1": 300.0,
        "pred_mem_0": 9e4,
        "pred_mem_1": 2e4,
    }
    var = [_row({**base, "seed": 0}, tau_gen_0=500.0, tau_gen_1=200.0, tau_mem_0=800.0, tau_mem_1=500.0),
           _row({**base, "seed": 1}, tau_gen_0=500.0, tau_gen_1=200.0, tau_mem_0=(1e6, "censored"),
                tau_mem_1=(1e6, "censored"))]  # fmt: skip
    claims = _run(_by(variance=var))
    assert not claims[1].point_check
    assert claims[1].value == 0.5  # the low end of [0.5, 1]
    assert "1 setting(s) undetermined" in claims[1].note
    assert "in [0.5, 1]" in claims[1].note


def test_less_on_censored_and_early_times():
    exact, cens, early = Bounds(5.0, 5.0), Bounds(100.0, math.inf), Bounds(0.0, 10.0)
    assert exact.less(cens) is True
    assert cens.less(exact) is False
    assert cens.less(Bounds(100.0, math.inf)) is None
    assert exact.less(exact) is False  # a tie is not "earlier"
    assert early.less(Bounds(20.0, 20.0)) is True
    assert early.less(exact) is None


def test_null_slope_with_the_largest_n_censored_is_a_lower_bound():
    """The largest n never memorises on the grid: that only raises the slope, so the claim is
    decided on the lower bound (the mean was NaN and the fit NaN before)."""
    null = [_row({"value": float(n), "seed": 0, "pred_gen_0": 600.0, "pred_mem_0": 1.0},
                 tau_gen_0=500.0, tau_mem_0=t)
            for n, t in zip(CFG.null_ns, (320.0, 640.0, (3e6, "censored")), strict=True)]  # fmt: skip
    c = _run(_by(null=null))[0]
    assert c.point_check
    assert c.value > 0.5
    assert math.isfinite(c.value)
    assert ">=" in c.note
    assert "1 of 3 tau_mem censored" in c.note
    # censored at the smallest n only lowers the slope: at most -5.6 here, refuted on all of it
    null[0], null[2] = _row(null[0], tau_mem_0=(3e6, "censored")), _row(null[2], tau_mem_0=1280.0)
    c = _run(_by(null=null))[0]
    assert not c.point_check
    assert c.value == pytest.approx(-5.597, abs=1e-3)  # the end nearest the target
    assert "<= -5.597" in c.note
    # censored in the middle and at the top: the slope is >= its value with both at the grid end
    null = [_row(null[0], tau_mem_0=320.0), _row(null[1], tau_mem_0=(3e6, "censored")), null[2]]
    null[2] = _row(null[2], tau_mem_0=(3e6, "censored"))
    assert _run(_by(null=null))[0].point_check


def test_slope_bounds_match_ols_when_exact():
    x = np.log([32.0, 64.0, 128.0])
    y = 0.8 * x + 1.0
    b = _slope_bounds(x, y, y)
    assert b.exact
    assert b.low == pytest.approx(0.8)
    assert not _slope_bounds(np.ones(3), y, y).defined  # one n: no slope


def test_zero_variance_sweep_range_is_not_a_division_by_zero():
    same = [_row({"value": v, "seed": 0}, tau_gen_1=300.0) for v in (1.0, 2.0)]
    c = _run(_by(centroid_variance=same))[3]  # centroid range > 0 over a range of 0: inf
    assert not c.point_check
    assert c.value == math.inf
    c = _run(_by(centroid=same, centroid_variance=same))[3]  # 0 / 0
    assert not c.point_check
    assert c.value is None
    assert "undefined" in c.note


def test_range_bounds_of_early_times_are_open():
    assert _range_bounds([Bounds(3.0, 3.0), Bounds(3.0, 3.0)]) == Bounds(0.0, 0.0)
    early = _range_bounds([Bounds(0.0, 10.0), Bounds(0.0, 10.0)])  # both before the grid
    assert early.low == 0.0
    assert early.high == math.inf


def test_minority_speciating_before_the_smallest_stop_supports_the_delay():
    """The minority is already below its level at the smallest stop (t_2 <= 0.05): the delay is
    at least min(t_0, t_1) - 0.05 > 0 (it was NaN, which counted against the claim)."""
    clone = _by()["clone"]
    clone[0] = _row(clone[0], measured_2=(0.05, "early"))
    c = _run(_by(clone=clone))[5]
    assert c.point_check
    assert c.value == pytest.approx(1.1 - 0.05)
    # a majority class never speciating on the grid still bounds the delay from below
    assert _delay(_row(clone[0], measured_0=(4.0, "censored"))).low == pytest.approx(1.2 - 0.05)
    # the minority censored at the top of the grid: it speciated before the majority, refuted
    c = _run(_by(clone=[_row(clone[0], measured_2=(4.0, "censored")), clone[1]]))[5]
    assert not c.point_check
    assert c.value == pytest.approx(1.1 - 4.0)
    # every class censored at the top: the order is open
    cens = {f"measured_{k}": (4.0, "censored") for k in range(3)}
    c = _run(_by(clone=[_row(clone[0], **cens), clone[1]]))[5]
    assert not c.point_check
    assert "undecided" in c.note


def test_log_crossing_finds_a_flip_after_a_nan_and_ignores_leading_zeros():
    x = np.array([0.5, 0.2, 0.1])
    assert _log_crossing(x, np.array([1.0, np.nan, -1.0])) == pytest.approx(math.sqrt(0.05))
    assert math.isnan(_log_crossing(x, np.array([1.0, np.nan, 2.0])))  # NaN is not a sign change
    assert math.isnan(_log_crossing(x, np.array([0.0, 1.0, 2.0])))
    assert _log_crossing(x, np.array([1.0, 0.0, -1.0])) == 0.2  # at the zero
    assert _log_crossing(x[::-1], np.array([-1.0, 0.0, 1.0])) == 0.2  # order of x is irrelevant


def test_flip_error_counts_a_measured_flip_without_prediction_as_a_mismatch():
    ok = {"variance_ratio": 2.0, "measured_flip_gen": 0.2, "predicted_flip_gen": 0.2}
    missing = {"variance_ratio": 4.0, "measured_flip_gen": 0.1, "predicted_flip_gen": math.nan}
    only_pred = {"variance_ratio": 8.0, "measured_flip_gen": math.nan, "predicted_flip_gen": 0.05}
    assert _flip_error([ok, missing]) == (math.inf, [])  # was 0.0: the unpredicted flip dropped
    assert _flip_error([missing, ok]) == (math.inf, [])
    err, unmatched = _flip_error([ok, only_pred])
    assert err == 0.0
    assert unmatched == [8.0]
    assert math.isnan(_flip_error([only_pred])[0])


def test_unet_class_that_never_memorises_is_ranked_last_not_dropped():
    unet = [_row({"seed": 0, **{f"var_{c}": 1.0 + c for c in range(3)},
                  **{f"n_{c}": 10 * (c + 1) for c in range(3)}},
                 tau_mem_0=(100.0, "censored"), tau_mem_1=30.0, tau_mem_2=10.0)]  # fmt: skip
    c = _run(_by(unet=unet))[6]
    assert c.value == pytest.approx(1.0)  # lowest variance, never memorised: ranked last
    assert "1 class run(s) never started to memorise" in c.note
    assert _censored_spearman([1.0, 2.0, 3.0], [100.0, 100.0, 100.0]) != _censored_spearman(
        [1.0, 2.0, 3.0], [100.0, 100.0, 10.0]
    )
    assert math.isnan(_censored_spearman([1.0, 2.0, 3.0], [100.0, 100.0, 100.0]))  # all censored
