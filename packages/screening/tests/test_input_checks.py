"""Bad input raises a ValueError naming the field; nothing is silently truncated, dropped or
coerced (issue 45: a float index 0.5 became unit 0, duplicates were dropped)."""

import numpy as np
import pytest

from screening import (
    OptimalPlanner,
    Plan,
    beta_population,
    demining_population,
    is_contiguous,
    is_margin_window,
    load_scores_csv,
    local_search,
    margin_uncertainty,
    optimal_split,
    plan_value,
    simulate,
)

P = np.array([0.9, 0.7, 0.5, 0.3, 0.1])


@pytest.mark.parametrize(
    ("screened", "match"),
    [
        ([0.5], "integer"),  # was truncated to unit 0
        (np.array([1.0, 2.0]), "integer"),  # integral floats are still floats
        ([1, 1], "duplicate"),  # was silently dropped to [1]
        ([True, False], "integer"),  # booleans are not indices
        ([-1], r"\[0, 5\)"),
        ([5], r"\[0, 5\)"),
        ([[0, 1]], "1-D"),
        ([np.nan], "integer"),
    ],
)
def test_screened_indices_are_validated_at_every_entry_point(screened, match):
    for call in (
        lambda: plan_value(P, screened, 2),
        lambda: simulate(P, screened, 2, n_sims=10),
        lambda: is_contiguous(P, screened),
        lambda: is_margin_window(P, screened, 2),
    ):
        with pytest.raises(ValueError, match=match):
            call()


def test_valid_indices_still_work_including_empty():
    assert plan_value(P, [], 2).mean == pytest.approx(1.6)
    assert plan_value(P, np.array([1, 2], np.int32), 2).mean == pytest.approx(
        plan_value(P, [2, 1], 2).mean
    )


def test_boolean_scores_are_not_probabilities():
    with pytest.raises(ValueError, match="boolean"):
        OptimalPlanner().plan(np.array([True, False, True]), 1, 1)


def test_optimal_split_rejects_silent_truncation_of_its_options():
    with pytest.raises(ValueError, match="max_candidates"):
        optimal_split(P, 3, 1.0, 0.5, max_candidates=0)  # was: an empty grid, "nothing affordable"
    with pytest.raises(ValueError, match="max_screen"):
        optimal_split(P, 3, 1.0, 0.5, max_screen=1.5)  # was truncated to 1
    with pytest.raises(ValueError, match="max_screen"):
        optimal_split(P, 3, 1.0, 0.5, max_screen=-1)


def test_margin_uncertainty_validates_coverage_and_width():
    with pytest.raises(ValueError, match="width"):
        margin_uncertainty(P, 2, width=1.5)  # was truncated to 1
    with pytest.raises(ValueError, match="width"):
        margin_uncertainty(P, 2, width=0)  # was an empty band, 0.0
    with pytest.raises(ValueError, match="coverage"):
        margin_uncertainty(P, 9)  # was an empty band, 0.0


def test_csv_outcomes_are_not_truncated(tmp_path):
    (tmp_path / "s.csv").write_text("score,outcome\n0.8,0.7\n0.3,0\n")
    with pytest.raises(ValueError, match="outcome"):
        load_scores_csv(tmp_path / "s.csv")  # was int(0.7) = 0
    (tmp_path / "e.csv").write_text("score,outcome\n")
    with pytest.raises(ValueError, match="no rows"):
        load_scores_csv(tmp_path / "e.csv")


def test_population_sizes_are_checked():
    with pytest.raises(ValueError, match="n"):
        beta_population(0)
    with pytest.raises(ValueError, match="side"):
        demining_population(2)


def test_simulate_needs_a_whole_number_of_draws():
    with pytest.raises(ValueError, match="n_sims"):
        simulate(P, [1], 2, n_sims=0)  # was an empty array of draws
    with pytest.raises(ValueError, match="n_sims"):
        simulate(P, [1], 2, n_sims=True)


@pytest.mark.parametrize("bad_p", [[0.5, 1.5, 0.2], [0.5, np.nan, 0.2], [True, False, True]])
def test_structure_checks_and_local_search_validate_the_scores(bad_p):
    # scores outside [0, 1], NaN or booleans used to be read as they came by these three
    with pytest.raises(ValueError, match="p "):
        is_contiguous(bad_p, [0, 1])
    with pytest.raises(ValueError, match="p "):
        is_margin_window(bad_p, [0, 1], coverage=2)
    bad_plan = Plan(np.asarray(bad_p, float), np.array([1]), 2, 0.0, 0.0)
    with pytest.raises(ValueError, match="p "):
        local_search(bad_p, 2, bad_plan)
