import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spherical_grokking import (
    area_between_curves,
    delay_bounds,
    first_crossing,
    grokking_metrics,
    memorisation_point,
)

STEPS = np.arange(0, 1001, 100)


def history(train, test, **extra):
    return {"step": STEPS, "train_acc": np.asarray(train), "test_acc": np.asarray(test), **extra}


def test_grokking_run_known_answer():
    train = np.minimum(1.0, np.linspace(0.0, 2.0, 11))  # 1.0 from step 500
    test = np.array([0, 0, 0, 0, 0, 0.1, 0.2, 0.5, 0.96, 0.99, 1.0])
    m = grokking_metrics(history(train, test), budget=1000)
    assert (m.t_train99, m.t_test95, m.t_test99) == (500, 800, 900)
    assert m.delay == 300
    assert not m.delay_censored
    assert m.test_at_train99 == pytest.approx(0.1)
    assert m.peak_test == 1.0
    assert m.final_train == 1.0
    assert math.isnan(m.max_logit_norm)  # not logged, not invented


def test_a_threshold_never_reached_is_censored_at_the_budget_never_zero():
    train = np.ones(11)
    test = np.full(11, 0.5)
    m = grokking_metrics(history(train, test), budget=5000)  # early end: budget beyond the log
    assert m.t_test95 == 5000
    assert m.t_test95_censored
    assert m.t_test99 == 5000
    assert m.t_test99_censored
    assert m.delay == 5000
    assert m.delay_censored
    none = grokking_metrics(history(np.zeros(11), np.zeros(11)), budget=1000)
    assert none.t_train99 == 1000
    assert none.t_train99_censored
    assert math.isnan(none.delay)
    assert math.isnan(none.test_at_train99)


def test_first_crossing_and_bad_curves():
    assert first_crossing([0, 10, 20], [0.1, 0.95, 1.0], 0.95, 20) == first_crossing(
        [0, 10, 20], [0.1, 0.96, 0.9], 0.95, 30
    )
    assert first_crossing([0, 10], [0.0, 0.5], 0.9, 10).censored
    with pytest.raises(ValueError, match="increasing"):
        first_crossing([0, 10, 10], [0, 0, 0], 0.5, 10)
    with pytest.raises(ValueError, match="budget"):
        first_crossing([0, 10], [0, 0], 0.5, 5)
    with pytest.raises(ValueError, match="same length"):
        first_crossing([0, 10], [0], 0.5, 10)
    with pytest.raises(ValueError, match="lacks"):
        grokking_metrics({"step": [0]}, 10)


def test_area_between_curves_trapezoid():
    # gap 0 -> 1 -> 1 -> 0 over steps 0, 10, 20, 40: 5 + 10 + 10
    assert area_between_curves([0, 10, 20, 40], [0, 1, 1, 1], [0, 0, 0, 1]) == pytest.approx(25.0)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.floats(0, 1), min_size=11, max_size=11),
    st.lists(st.floats(0, 1), min_size=11, max_size=11),
)
def test_metric_properties(train, test):
    m = grokking_metrics(history(train, test), budget=1000)
    assert m.t_test99 >= m.t_test95  # 99% is never reached before 95%
    assert 0 <= m.t_train99 <= 1000
    assert m.peak_test >= m.final_test
    if not m.t_test95_censored:
        assert test[list(STEPS).index(m.t_test95)] >= 0.95


def test_memorisation_point_falls_back_to_peak_training_accuracy():
    h = history(np.linspace(0, 0.6, 11), np.full(11, 0.01))
    h["train_acc"][4] = 0.7
    point = memorisation_point(h)
    assert not point["reached"]
    assert point["step"] == 400
    assert point["train_acc"] == 0.7
    h["train_acc"][6] = 1.0
    assert memorisation_point(h)["step"] == 600
    assert memorisation_point(h)["reached"]


def test_delay_bounds_cover_every_censoring_case():
    # budget 1000: (train 99 at, censored, test 95 at, censored)
    lo, hi = delay_bounds(
        [500, 900, 1000, 1000], [False, False, True, True], [800, 1000, 700, 1000],
        [False, True, False, True],
    )  # fmt: skip
    assert lo.tolist() == [300, 100, -math.inf, -math.inf]  # never generalising: at least 100
    assert hi.tolist() == [300, math.inf, -300, math.inf]  # test first: at most -300


def test_a_run_that_memorises_on_the_last_step_and_never_generalises_has_no_zero_delay():
    train = np.r_[np.zeros(10), 1.0]  # 0.99 reached at the budget's last evaluation
    m = grokking_metrics(history(train, np.zeros(11)), budget=1000)
    assert (m.t_train99, m.t_test95, m.delay) == (1000, 1000, 0.0)  # the row's recorded bound
    lo, hi = delay_bounds(
        [m.t_train99], [m.t_train99_censored], [m.t_test95], [m.t_test95_censored]
    )
    assert (lo[0], hi[0]) == (0.0, math.inf)  # a lower bound, not a delay of 0
