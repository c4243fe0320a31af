import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from screening import (
    NoScreening,
    OptimalPlanner,
    Oracle,
    ScreenOnly,
    ScreenRandom,
    ScreenTop,
    ScreenUncertain,
    brute_force_plan,
    is_contiguous,
    is_margin_window,
    load_scores_csv,
    local_search,
    optimal_split,
    plan_value,
)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(6, 9), st.data())
def test_structured_optimum_equals_brute_force(seed, n, data):
    p = np.random.default_rng(seed).random(n)
    k = data.draw(st.integers(1, n - 1))
    m = data.draw(st.integers(1, min(3, n)))
    brute = brute_force_plan(p, k, m)
    opt = OptimalPlanner(search="all").plan(p, k, m)
    assert opt.expected_value == pytest.approx(brute.expected_value, abs=1e-9)
    assert is_margin_window(p, opt.screened, k)
    assert OptimalPlanner().plan(p, k, m).expected_value == pytest.approx(
        brute.expected_value, abs=1e-9
    )


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_more_screening_never_lowers_the_optimum(seed):
    p = np.random.default_rng(seed).beta(1.5, 1.5, 30)
    values = [OptimalPlanner(search="all").plan(p, 8, m).expected_value for m in range(0, 8)]
    assert np.all(np.diff(values) >= -1e-12)


def test_local_search_finds_nothing_better_on_medium_n():
    p = np.random.default_rng(5).beta(2, 3, 40)
    opt = OptimalPlanner().plan(p, 10, 3)
    assert local_search(p, 10, opt).expected_value == pytest.approx(opt.expected_value, abs=1e-12)


def test_ordering_of_planners_and_bounds():
    p = np.random.default_rng(1).beta(2, 2, 200)
    k, m = 40, 10
    opt = OptimalPlanner().plan(p, k, m).expected_value
    for planner in (NoScreening(), ScreenTop(), ScreenUncertain(), ScreenRandom(0), ScreenOnly(0)):
        assert planner.plan(p, k, m).expected_value <= opt + 1e-12
    assert Oracle().plan(p, k).expected_value >= opt
    assert NoScreening().plan(p, k, m).expected_value == pytest.approx(np.sort(p)[::-1][:k].sum())
    only = ScreenOnly(0).plan(p, k, m)
    assert only.expected_value == pytest.approx(
        p[only.screened].sum()
    )  # m < K: every positive fits


def test_plan_allocation_follows_the_observations():
    p = np.array([0.95, 0.9, 0.5, 0.45, 0.1, 0.05])
    plan = OptimalPlanner().plan(p, coverage=2, screen_budget=2)
    assert set(plan.screened.tolist()) <= {1, 2, 3}
    assert plan.direct.size == 0 or plan.direct.tolist() == [0]
    y = np.ones(plan.screened.size, int)
    assert plan.allocate(y).tolist() == sorted(plan.screened.tolist())
    alloc = plan.allocate(np.zeros(plan.screened.size, int))
    assert not set(alloc.tolist()) & set(plan.screened.tolist())
    with pytest.raises(ValueError, match="one outcome"):
        plan.allocate([1])


def test_optimal_split_beats_or_equals_no_screening():
    p = np.random.default_rng(2).beta(2, 3, 300)
    split = optimal_split(p, budget=60, cost_alloc=1.0, cost_screen=0.2)
    assert split.coverage * 1.0 + split.screen_budget * 0.2 <= 60 + 1e-9
    assert split.expected_value >= split.no_screening_value - 1e-12
    assert split.no_screening_value == pytest.approx(np.sort(p)[::-1][:60].sum())
    v = plan_value(
        p, OptimalPlanner().plan(p, split.coverage, split.screen_budget).screened, split.coverage
    )
    assert v.mean == pytest.approx(split.expected_value)
    with pytest.raises(ValueError, match="positive costs"):
        optimal_split(p, 10, 0, 1)


def test_bad_input_and_csv_loader(tmp_path):
    with pytest.raises(ValueError, match="screen_budget"):
        OptimalPlanner().plan([0.5, 0.4], 1, -1)
    with pytest.raises(ValueError, match="coverage"):
        NoScreening().plan([0.5, 0.4], 3, 0)
    with pytest.raises(ValueError, match="n <= 22"):
        brute_force_plan(np.full(30, 0.5), 3, 2)
    (tmp_path / "s.csv").write_text("id,score,outcome\n1,0.8,1\n2,0.3,0\n3,0.6,1\n")
    p, y = load_scores_csv(tmp_path / "s.csv")
    assert p.tolist() == [0.8, 0.3, 0.6]
    assert y.tolist() == [1, 0, 1]
    (tmp_path / "bad.csv").write_text("score,outcome\n1.5,1\n")
    with pytest.raises(ValueError, match="probabilities"):
        load_scores_csv(tmp_path / "bad.csv")
    with pytest.raises(ValueError, match="needs columns"):
        load_scores_csv(tmp_path / "s.csv", score_col="risk")


def test_margin_window_must_touch_the_cut_off():
    # was: contiguity only, so a block at the top of the ranking (screen top) counted as a margin
    # window and claim 1 could not fail
    p = np.linspace(0.95, 0.05, 20)
    assert is_contiguous(p, [0, 1, 2])
    assert not is_margin_window(p, [0, 1, 2], coverage=8)  # the top, K = 8 > m = 3
    assert is_margin_window(p, [0, 1, 2], coverage=2)  # K <= m: the top block touches the cut-off
    assert is_margin_window(p, [6, 7, 8], coverage=8)  # straddles rank 8
    assert is_margin_window(p, [8, 9, 10], coverage=8)  # just below the cut-off
    assert is_margin_window(p, [5, 6, 7], coverage=8)  # just above it
    assert not is_margin_window(p, [12, 13, 14], coverage=8)  # far below
    assert not is_margin_window(p, [7, 9, 10], coverage=8)  # not contiguous
    tied = np.array([0.9, 0.5, 0.5, 0.5, 0.5, 0.1])  # any two of the 0.5s touch K = 3
    assert is_margin_window(tied, [3, 4], coverage=3)
    assert is_contiguous(tied, [0, 2])  # 0.9 then one of the 0.5s: was refused (plateau counted)
    assert not is_contiguous(tied, [0, 5])  # 0.5s lie strictly between
    with pytest.raises(ValueError, match="coverage"):
        is_margin_window(p, [1], coverage=-1)


def test_margin_window_checks_that_the_top_is_targeted_directly():
    # issue 45: the structure is a window touching the cut-off AND the highest-risk units targeted
    # directly; a plan whose sure-targets are not the top of the ranking is not the structure
    p = np.linspace(0.95, 0.05, 20)
    window = [6, 7, 8]  # touches K = 8
    assert is_margin_window(p, window, coverage=8, direct=[0, 1, 2, 3, 4])
    assert not is_margin_window(p, window, coverage=8, direct=[0, 1, 2, 3, 15])  # not the top
    assert not is_margin_window(p, window, coverage=8, direct=[0, 1, 2, 3])  # K - m = 5 needed
    assert not is_margin_window(p, window, coverage=8, direct=[0, 1, 2, 3, 6])  # screened too
    plan = OptimalPlanner().plan(p, 8, 3)
    assert is_margin_window(p, plan.screened, 8, direct=plan.direct)
    with pytest.raises(ValueError, match="direct"):
        is_margin_window(p, window, coverage=8, direct=[0.5])
