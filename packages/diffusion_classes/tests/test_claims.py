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
    SCALES["smoke"], seeds=(0, 1, 2), null_ns=(32, 64, 128), unet_classes=(0, 1, 2),
    unet_steps=100,
)  # fmt: skip
SEEDS = CFG.seeds
# the agreement claim (index 2): every planted setting agrees, but a handful of settings cannot
# bound a share above the paper's 0.9; the flip (index 4): no negative control yet
SUPPORTED = (
    ["supported"] * 2 + ["inconclusive"] + ["supported"] + ["inconclusive"] + ["supported"] * 2
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


PRED = {"pred_gen_0": 600.0, "pred_gen_1": 300.0, "pred_mem_0": 9e4, "pred_mem_1": 2e4}


def _seeded(rows):
    """The same planted rows for every seed (equal seeds: a point interval)."""
    return [{**r, "seed": s} for s in SEEDS for r in rows]


def _var(**times):
    t = {"tau_gen_0": 500.0, "tau_gen_1": 200.0, "tau_mem_0": 800.0, "tau_mem_1": 500.0, **times}
    return _seeded([_row({"value": r, **PRED}, **t) for r in (2.0, 4.0)])


def _null(times):
    return _seeded([_row({"value": float(n), "pred_gen_0": 600.0, "pred_mem_0": 1e3 * n},
                         tau_gen_0=500.0, tau_mem_0=t) for n, t in zip(CFG.null_ns, times, strict=True)])  # fmt: skip


def _clone(minority=None, balanced=None):
    base = {
        "half_log_lambda": 1.0,
        "closed_form_0": 1.1,
        "closed_form_1": 1.1,
        "closed_form_2": 0.9,
    }
    exact = {"exact_0": 1.0, "exact_1": 1.0, "exact_2": 0.9}
    m = minority or {"measured_0": 1.1, "measured_1": 1.2, "measured_2": 0.8}
    b = balanced or {"measured_0": 1.1, "measured_1": 1.1, "measured_2": 1.1}
    return _seeded([_row({**base, "value": CFG.clone_weight}, **exact, **m),
                    _row({**base, "value": 1 / 3}, **exact, **b)])  # fmt: skip


def _unet(**times):
    t = {"tau_mem_0": 50.0, "tau_mem_1": 30.0, "tau_mem_2": 10.0, **times}
    return _seeded([_row({**{f"var_{c}": 1.0 + c for c in range(3)},
                          **{f"n_{c}": 10 * (c + 1) for c in range(3)}}, **t)])  # fmt: skip


def _imbalance():
    """Per seed the order flips between w = 0.5 and 0.1 at sqrt(0.05) (predicted 0.25)."""
    return _seeded([_row({"value": w, "extra": 4.0}, tau_gen_0=100.0, tau_gen_1=100.0 * f)
                    for w, f in ((0.5, 0.5), (0.1, 2.0))])  # fmt: skip


def _by(**over):
    """A full set of rows where every claim is measurable; ``over`` replaces one job's rows."""
    by = {
        "null": _null([10.0 * n for n in CFG.null_ns]),
        "variance": _var(),
        "centroid": _seeded([_row({"value": m}, tau_gen_1=200.0 + m) for m in (1.0, 2.0)]),
        "centroid_variance": _seeded([_row({"value": v}, tau_gen_1=100.0 * v) for v in (1.0, 2.0)]),
        "clone": _clone(),
        "unet": _unet(),
        "imbalance": _imbalance(),
    }  # fmt: skip
    by.update(over)
    return by


FLIPS = [{"variance_ratio": 4.0, "measured_flip_gen": 0.2, "measured_flip_mem": math.nan,
          "predicted_flip_gen": 0.25, "log_tau_gen_ratio_by_w": "-1 +1"}]  # fmt: skip


def _run(by, flips=FLIPS, cfg=CFG):
    report = Report(package="diffusion_classes", title="t", scale="smoke", seed=0)
    _claims(report, by, flips, cfg)
    assert len(report.claims) == 7
    for c in report.claims:
        assert c.missing_parts() == [], c.statement
    return report.claims


def test_planted_rows_give_supported_claims_where_the_order_is_plain():
    claims = _run(_by())
    assert [c.verdict for c in claims] == SUPPORTED
    assert all(c.point_check for c in claims)
    assert all(c.negative.verdict == "refuted" for c in claims if not c.negative.missing)
    assert "negative control not refuted (missing)" in claims[4].reason
    agree = claims[2]
    assert agree.value == 1.0  # every setting agrees ...
    assert agree.low < 0.9 <= agree.high  # ... but too few settings to bound 0.9
    assert agree.target == ">= 0.9"
    assert ">= 35 are needed" in agree.note


def test_one_seed_leaves_every_claim_inconclusive_with_what_is_missing():
    one = {k: [r for r in rows if r["seed"] == 0] for k, rows in _by().items()}
    claims = _run(one, cfg=dataclasses.replace(CFG, seeds=(0,)))
    assert [c.verdict for c in claims] == ["inconclusive"] * 7
    assert all(c.interval.startswith("missing") for i, c in enumerate(claims) if i != 2)


def test_a_null_effect_is_refuted_not_inconclusive():
    """Equal classes (no order), equal sweeps, a flat null model, no minority delay: each rule on
    a planted-absent effect comes out refuted (the targets name the smallest effect that counts)."""
    by = _by(
        null=_null([500.0] * 3),
        variance=_var(tau_gen_1=500.0, tau_mem_1=800.0),
        centroid=_seeded([_row({"value": m}, tau_gen_1=100.0 * m) for m in (1.0, 2.0)]),
        clone=_clone(minority={"measured_0": 1.1, "measured_1": 1.1, "measured_2": 1.1}),
    )
    claims = _run(by)
    assert [claims[i].verdict for i in (0, 1, 3, 5)] == ["refuted"] * 4


def test_a_class_that_never_memorises_is_later_than_one_that_did():
    """Class 1 memorised at 3e4, class 0 not by the grid's end 1e6: it counts for the claim
    (it counted against it when the censored time was NaN)."""
    claims = _run(_by(variance=_var(tau_mem_0=(1e6, "censored"), tau_mem_1=3e4)))
    assert claims[1].verdict == "supported"
    assert claims[1].high == pytest.approx(math.log(200 / 500))  # generation decides the max
    assert claims[2].value == 1.0  # the censored setting agrees: every order matches


def test_two_censored_times_leave_the_order_undetermined_and_reported():
    var = _var()
    var[-1] = _row(var[-1], tau_mem_0=(1e6, "censored"), tau_mem_1=(1e6, "censored"))
    claims = _run(_by(variance=var))
    assert claims[1].verdict == "inconclusive"
    assert claims[1].high == math.inf
    assert claims[2].value < 1.0  # the open setting is not counted as agreeing
    assert "1 setting(s) with a measured order left open" in claims[2].note


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
    c = _run(_by(null=_null((320.0, 640.0, (3e6, "censored")))))[0]
    assert c.verdict == "supported"
    assert c.low > 0.5
    assert c.high == math.inf
    assert "3 of 9 tau_mem censored" in c.note
    # censored at the smallest n only lowers the slope: at most -5.6 here, refuted on all of it
    c = _run(_by(null=_null(((3e6, "censored"), 640.0, 1280.0))))[0]
    assert c.verdict == "refuted"
    assert c.high == pytest.approx(-5.597, abs=1e-3)
    # censored in the middle and at the top: the slope is >= its value with both at the grid end
    c = _run(_by(null=_null((320.0, (3e6, "censored"), (3e6, "censored")))))[0]
    assert c.low > 0.5
    # ... but with 2 of 3 times censored the positive control (half observed) fails
    assert c.verdict == "inconclusive"
    assert "positive control did not pass" in c.reason


def test_slope_bounds_match_ols_when_exact():
    x = np.log([32.0, 64.0, 128.0])
    y = 0.8 * x + 1.0
    b = _slope_bounds(x, y, y)
    assert b.exact
    assert b.low == pytest.approx(0.8)
    assert not _slope_bounds(np.ones(3), y, y).defined  # one n: no slope


def test_zero_variance_sweep_range_is_not_a_division_by_zero():
    same = _seeded([_row({"value": v}, tau_gen_1=300.0) for v in (1.0, 2.0)])
    c = _run(_by(centroid_variance=same))[3]  # centroid range > 0 over a range of 0: inf
    assert c.verdict == "inconclusive"
    assert c.value is None
    assert c.low == math.inf  # refuted by its interval ...
    assert "positive control did not pass" in c.reason  # ... but the variance sweep moved nothing
    c = _run(_by(centroid=same, centroid_variance=same))[3]  # 0 / 0
    assert c.verdict == "inconclusive"
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
    m = {"measured_0": 1.1, "measured_1": 1.2}
    c = _run(_by(clone=_clone(minority={**m, "measured_2": (0.05, "early")})))[5]
    assert c.verdict == "supported"
    assert c.low == pytest.approx(1.1 - 0.05)
    row = _clone()[0]
    # a majority class never speciating on the grid still bounds the delay from below
    assert _delay(_row(row, measured_0=(4.0, "censored"))).low == pytest.approx(1.2 - 0.8)
    # the minority censored at the top of the grid: it speciated before the majority, refuted
    c = _run(_by(clone=_clone(minority={**m, "measured_2": (4.0, "censored")})))[5]
    assert c.verdict == "refuted"
    assert c.high == pytest.approx(1.1 - 4.0)
    # every class censored at the top: the order is open
    cens = {f"measured_{k}": (4.0, "censored") for k in range(3)}
    c = _run(_by(clone=_clone(minority=cens)))[5]
    assert c.verdict == "inconclusive"
    # no delay with balanced classes: the negative control; a delay there too is a defect
    c = _run(_by(clone=_clone(balanced={"measured_0": 1.1, "measured_1": 1.2, "measured_2": 0.8})))[
        5
    ]
    assert c.verdict == "inconclusive"
    assert c.defect


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
    c = _run(_by(unet=_unet(tau_mem_0=(100.0, "censored"))))[6]
    assert c.value == pytest.approx(1.0)  # lowest variance, never memorised: ranked last
    assert "3 class run(s) never started to memorise" in c.note
    assert c.verdict == "supported"
    assert c.negative.verdict == "refuted"  # shuffled variances: Spearman near 0
    assert abs(c.negative.value) < 0.2
    assert _censored_spearman([1.0, 2.0, 3.0], [100.0, 100.0, 100.0]) != _censored_spearman(
        [1.0, 2.0, 3.0], [100.0, 100.0, 10.0]
    )
    assert math.isnan(_censored_spearman([1.0, 2.0, 3.0], [100.0, 100.0, 100.0]))  # all censored
    # most classes never memorised: the positive control fails, whatever the order
    c = _run(_by(unet=_unet(tau_mem_0=(100.0, "censored"), tau_mem_1=(100.0, "censored"))))[6]
    assert c.verdict == "inconclusive"
    assert "positive control did not pass" in c.reason


def test_seed_ends_on_planted_bounds():
    from diffusion_classes.reproduce import _seed_ends

    assert _seed_ends([Bounds(1.0, 1.0)]) is None  # one seed
    assert _seed_ends([Bounds(1.0, 1.0)] * 3) == (1.0, 1.0)
    low, high = _seed_ends([Bounds(1.0, 2.0), Bounds(1.2, 2.2), Bounds(0.8, 1.8)])
    assert low < 0.8
    assert high > 2.2
    assert _seed_ends([Bounds(1.0, math.inf), Bounds(1.0, 2.0)]) == (1.0, math.inf)
    assert _seed_ends([Bounds(-math.inf, 1.0), Bounds(0.0, 1.0)])[0] == -math.inf
    assert _seed_ends([Bounds(math.nan, math.nan), Bounds(0.0, 1.0)]) is None
    # a ratio: the interval of its log, so it stays positive
    low, high = _seed_ends([Bounds(2.0, 2.0), Bounds(8.0, 8.0), Bounds(4.0, 4.0)], log=True)
    assert 0 < low < 2.0
    assert high > 8.0
