import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from paper_common.stats import (
    Bounds,
    bootstrap_ci,
    censored_median,
    cohens_d,
    decide_all,
    median_bounds,
    paired_comparison,
    ratio_bounds,
)


def test_percentile_bootstrap_matches_a_hand_rolled_one():
    x = np.random.default_rng(1).exponential(size=60)
    ci = bootstrap_ci(x, np.median, method="percentile", n_resamples=4000, seed=7)
    idx = np.random.default_rng(2).integers(0, x.size, size=(4000, x.size))
    hand = np.quantile(np.median(x[idx], axis=1), [0.025, 0.975])
    assert ci.estimate == pytest.approx(np.median(x))
    # two independent bootstraps of the same sample agree to Monte-Carlo error
    assert ci.low == pytest.approx(hand[0], abs=0.06)
    assert ci.high == pytest.approx(hand[1], abs=0.06)


def test_bca_interval_covers_the_true_mean_at_about_the_nominal_rate():
    rng = np.random.default_rng(0)
    hits = sum(
        0.0 in bootstrap_ci(rng.normal(size=40), n_resamples=500, seed=i) for i in range(200)
    )
    assert 0.88 <= hits / 200 <= 0.99


def test_degenerate_sample_gives_point_interval():
    ci = bootstrap_ci([2.0, 2.0, 2.0])
    assert (ci.low, ci.estimate, ci.high) == (2.0, 2.0, 2.0)


def test_cohens_d_closed_forms():
    a, b = np.array([2.0, 4.0, 6.0]), np.array([1.0, 3.0, 5.0])
    # pooled sd = 2, mean difference = 1
    assert cohens_d(a, b) == pytest.approx(0.5)
    # every difference is exactly 1: zero spread, positive difference
    assert cohens_d(a, b, paired=True) == np.inf
    c = np.array([1.0, 2.0, 4.0])
    diff = a - c  # [1, 2, 2]
    assert cohens_d(a, c, paired=True) == pytest.approx(diff.mean() / diff.std(ddof=1))
    assert cohens_d(a, a) == 0.0


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(-1e3, 1e3), min_size=3, max_size=30), st.floats(0.1, 10), st.floats(-50, 50)
)
def test_cohens_d_is_invariant_to_affine_rescaling(values, scale, shift):
    a = np.array(values)
    assume(np.ptp(a) > 1e-3)
    b = a[::-1] + 1.0
    d = cohens_d(a, b)
    assert cohens_d(a * scale + shift, b * scale + shift) == pytest.approx(d, rel=1e-6, abs=1e-9)


def test_paired_comparison_counts_and_tests():
    rng = np.random.default_rng(3)
    b = rng.normal(size=30)
    a = b + 0.5 + 0.1 * rng.normal(size=30)
    res = paired_comparison(a, b, seed=1)
    assert res.n == 30
    assert (res.wins, res.ties, res.losses) == (30, 0, 0)
    assert res.mean_diff == pytest.approx(np.mean(a - b))
    assert res.ci.low < res.mean_diff < res.ci.high
    assert res.p_t < 1e-10
    assert res.p_wilcoxon < 1e-6
    assert set(res.as_row()) >= {"mean_diff", "ci_low", "ci_high", "p_t", "wins"}


def test_paired_comparison_of_identical_samples_has_no_p_value():
    x = [1.0, 2.0, 3.0]
    res = paired_comparison(x, x)
    assert res.ties == 3
    assert np.isnan(res.p_t)
    assert np.isnan(res.p_wilcoxon)


def test_bad_input_raises():
    with pytest.raises(ValueError, match="at least 2"):
        bootstrap_ci([1.0])
    with pytest.raises(ValueError, match="1-D"):
        bootstrap_ci(np.ones((3, 3)))
    with pytest.raises(ValueError, match="NaN"):
        cohens_d([1.0, np.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="same length"):
        paired_comparison([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci([1.0, 2.0], confidence=95)


def test_censored_median_is_exact_when_censored_values_stay_above_the_middle():
    m = censored_median([100, 200, 300, 500, 500], [False, False, False, True, True])
    assert (m.low, m.high) == (300, 300)
    assert m.exact


def test_censored_median_is_a_range_when_censored_values_reach_the_middle():
    m = censored_median([100, 200, 500, 500], [False, False, True, True])
    assert (m.low, m.high) == (350, np.inf)  # the 3rd value is >= 500, so the median is >= 350
    assert str(m) == ">= 350"
    assert m.decide(">=", 300) is True
    assert m.decide(">=", 400) is None
    assert m.decide("<", 300) is False


def test_median_bounds_of_unknown_values():
    m = median_bounds([1.0, -np.inf, -np.inf], [1.0, 5.0, np.inf])
    assert (m.low, m.high) == (-np.inf, 5.0)
    with pytest.raises(ValueError, match="NaN"):
        median_bounds([1.0, np.nan], [1.0, np.nan])
    with pytest.raises(ValueError, match="empty"):
        censored_median([], [])
    with pytest.raises(ValueError, match="lower bound"):
        median_bounds([2.0], [1.0])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.booleans()), min_size=1, max_size=15), st.data())
def test_censored_median_brackets_the_median_of_every_completion(sample, data):
    values = np.array([v for v, _ in sample], dtype=float)
    censored = np.array([c for _, c in sample])
    extra = np.array([data.draw(st.integers(0, 100)) if c else 0 for c in censored])
    m = censored_median(values, censored)
    assert m.low <= np.median(values + extra) <= m.high  # any true values consistent with the data


def test_ratio_bounds_never_divide_by_zero():
    zero = censored_median([0.0, 0.0], [False, False])
    # the LayerNorm median delay of 0 that crashed spherical_grokking: undefined without a floor
    r = ratio_bounds(zero, zero)
    assert not r.defined
    assert r.decide(">=", 3) is None
    assert str(r) == "undefined (0/0)"
    assert ratio_bounds(censored_median([5.0], [False]), zero).high == np.inf
    # with the measurement's resolution as floor, 0 counts as one interval
    r = ratio_bounds(
        censored_median([30.0], [False]), censored_median([-20.0, 40.0], [False, False]), 20
    )
    assert (r.low, r.high) == (1.5, 1.5)  # 30 / max(median 10, 20)
    censored = censored_median([600.0, 600.0], [True, True])
    r = ratio_bounds(censored, censored_median([100.0, 200.0], [False, False]))
    assert (r.low, r.high) == (4.0, np.inf)
    assert r.decide(">=", 3) is True
    with pytest.raises(ValueError, match="floor"):
        ratio_bounds(censored_median([-5.0], [False]), zero)
    with pytest.raises(ValueError, match="floor"):
        ratio_bounds(zero, zero, floor=-1)


def test_bounds_less_and_decide_all_are_three_valued():
    observed, censored = Bounds(100.0, 100.0), Bounds(300.0, np.inf)
    assert observed.less(censored) is True  # observed before a censored time
    assert censored.less(observed) is False
    assert censored.less(Bounds(200.0, np.inf)) is None  # two censored times: undecided
    assert Bounds(np.nan, np.nan).less(observed) is None
    assert decide_all([True, True]) is True
    assert decide_all([True, None]) is None
    assert decide_all([None, False]) is False
    assert decide_all([]) is True


def test_log_t_interval_is_the_geometric_interval_and_handles_exact_replicates():
    from paper_common.stats import log_t_interval

    ci = log_t_interval([514.0, 686.0, 5210.0])
    assert ci.estimate == pytest.approx((514.0 * 686.0 * 5210.0) ** (1 / 3))
    assert 0 < ci.low < 514.0
    assert ci.high > 5210.0  # a t-interval of the raw values would reach far below 0
    assert log_t_interval([3.0, 3.0]).low == 3.0
    zero = log_t_interval([0.0, 0.2, 0.1])  # a method exact in one replicate: log -inf
    assert (zero.estimate, zero.low, zero.high) == (0.1, 0.0, np.inf)
    # more extreme data never gives a narrower interval (the replicates' range did)
    finite, infinite = log_t_interval([1.2, 1.5, 1e6]), log_t_interval([1.2, 1.5, np.inf])
    assert infinite.low <= finite.low
    assert infinite.high >= finite.high
    assert log_t_interval([np.inf, np.inf]).low == np.inf
    with pytest.raises(ValueError, match="NaN"):
        log_t_interval([1.0, np.nan])
    with pytest.raises(ValueError, match="2 replicates"):
        log_t_interval([1.0])


def test_proportion_interval_is_exact_binomial():
    from paper_common.stats import proportion_interval

    ci = proportion_interval(0, 10)
    assert ci.low == 0.0
    assert ci.high == pytest.approx(1 - 0.025 ** (1 / 10))  # Clopper-Pearson closed form at 0
    assert proportion_interval(5, 10).estimate == 0.5
    with pytest.raises(ValueError, match="successes"):
        proportion_interval(11, 10)


def test_t_interval_matches_the_t_quantile():
    from paper_common.stats import t_interval

    ci = t_interval([1.0, 2.0, 3.0], confidence=0.9)
    from scipy import stats

    half = stats.t.ppf(0.95, 2) * 1.0 / np.sqrt(3)
    assert (ci.low, ci.high) == pytest.approx((2.0 - half, 2.0 + half))


def test_extreme_interval_is_the_interval_of_the_max_or_min_and_order_free():
    from paper_common.stats import ConfidenceInterval, extreme_interval

    a = ConfidenceInterval(1.0, 0.5, 1.5, 0.95)
    b = ConfidenceInterval(2.0, 1.0, 4.0, 0.95)
    top = extreme_interval([a, b])
    assert (top.estimate, top.low, top.high) == (2.0, 1.0, 4.0)
    bottom = extreme_interval([b, a], largest=False)
    assert (bottom.estimate, bottom.low, bottom.high) == (1.0, 0.5, 1.5)
    undefined = ConfidenceInterval(np.nan, np.nan, np.nan, 0.95)
    assert np.isnan(extreme_interval([undefined, b]).low)
    assert np.isnan(extreme_interval([b, undefined]).low)
    with pytest.raises(ValueError, match="at least one"):
        extreme_interval([])
