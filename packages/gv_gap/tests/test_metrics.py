"""Verification rates, learning times, the 2 x 2 table, the multi-verse rate and Song's gap on
constructed inputs with known answers."""

import numpy as np
import pytest

from gv_gap import (
    GVResult,
    discordance_test,
    learning_epoch,
    plateau,
    retention,
    song_gap,
    two_by_two,
    verification_rates,
)
from gv_gap.curves import retention_gap


def _result(margin, gen_ok, gen_old=None):
    margin = np.asarray(margin, dtype=float)
    return GVResult(
        keys=[str(i) for i in range(len(margin))],
        n_controls=2,
        generated=[""] * len(margin),
        gen_ok=np.asarray(gen_ok, dtype=bool),
        margin=margin,
        gen_old=None if gen_old is None else np.asarray(gen_old, dtype=bool),
    )


def test_a_verifier_that_always_says_true():
    """Always "True": accepts everything when asked "correct?", rejects everything when asked
    "incorrect?"; balanced accuracy is exactly one half and no fact is verified."""
    res = _result(np.ones((5, 3, 2)), gen_ok=np.zeros(5))
    rates = verification_rates(res.accept, 2)
    assert rates["true_accept_correct"] == 1.0
    assert rates["false_reject_correct"] == 0.0
    assert rates["true_accept_incorrect"] == 0.0
    assert rates["false_reject_incorrect"] == 1.0
    assert rates["balanced_acc"] == 0.5
    assert rates["ver_acc"] == 0.0
    assert not res.ver_ok.any()


def test_a_perfect_verifier_and_a_partial_one():
    good = np.empty((4, 3, 2))
    good[:, 0] = [1.0, -1.0]  # answer: True to "correct?", False to "incorrect?"
    good[:, 1:] = [-1.0, 1.0]  # controls: the reverse
    res = _result(good, gen_ok=[1, 0, 1, 0])
    s = res.summary()
    assert s["ver_acc"] == 1.0
    assert s["balanced_acc"] == 1.0
    good[0, 2, 1] = -1.0  # fact 0 accepts one control when asked "incorrect?"
    res = _result(good, gen_ok=[1, 0, 1, 0])
    assert res.ver_ok.tolist() == [False, True, True, True]
    assert res.summary()["false_reject_incorrect"] == pytest.approx(7 / 8)


def test_two_by_two_and_discordance_known_counts():
    gen = np.array([1, 1, 0, 0, 0, 0, 0, 1], bool)
    ver = np.array([1, 0, 1, 1, 1, 1, 0, 1], bool)
    assert two_by_two(gen, ver) == {"gen+ver+": 2, "gen+ver-": 1, "gen-ver+": 4, "gen-ver-": 1}
    d = discordance_test(gen, ver)
    assert (d.ver_only, d.gen_only) == (4, 1)
    assert d.p_value == pytest.approx(6 / 32)  # P(X >= 4), X ~ Bin(5, 1/2)
    assert discordance_test(gen, gen).p_value == 1.0
    with pytest.raises(ValueError, match="one entry per fact"):
        two_by_two(gen, ver[:3])


def test_multiverse_rate_on_a_constructed_update():
    """Values: new, two controls, old. Fact 0 accepts new and old (multi-verse), fact 1 only the
    new value, fact 2 accepts old and new but also a control (not multi-verse)."""
    acc, rej = [1.0, -1.0], [-1.0, 1.0]
    margin = np.array(
        [
            [acc, rej, rej, acc],
            [acc, rej, rej, rej],
            [acc, acc, rej, acc],
        ]
    )
    res = _result(margin, gen_ok=[0, 1, 0], gen_old=[1, 0, 0])
    assert res.multiverse.tolist() == [True, False, False]
    s = res.summary()
    assert s["multiverse"] == pytest.approx(1 / 3)
    assert s["old_accept"] == pytest.approx(2 / 3)
    assert s["new_accept"] == 1.0
    assert s["gen_old"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="old value"):
        _ = _result(margin[:, :3], gen_ok=[0, 0, 0]).multiverse


def test_plateau_and_learning_epochs_on_hand_made_curves():
    ver = [0.5, 0.6, 0.9, 0.95, 1.0, 1.0, 1.0]  # starts at chance 0.5
    gen = [0.0, 0.0, 0.1, 0.3, 0.7, 0.85, 0.9, 0.9, 0.9]
    assert plateau(gen) == pytest.approx(0.9)
    # 80% of the rise from 0.5 to 1.0 is 0.9 -> epoch 2; from 0 to 0.9 is 0.72 -> epoch 5
    assert learning_epoch(ver) == 2
    assert learning_epoch(gen) == 5
    assert learning_epoch(gen, fraction=0.5) == 4
    assert learning_epoch(gen, epochs=np.arange(9) * 2) == 10
    assert np.isnan(learning_epoch([0.5, 0.5, 0.51, 0.5]))  # nothing learned
    r = retention([0.8, 0.6, 0.4])
    assert r.tolist() == pytest.approx([1.0, 0.75, 0.5])
    assert np.isnan(retention([0.0, 0.3])).all()
    with pytest.raises(ValueError, match="at least 2"):
        learning_epoch([0.3])


def test_retention_gap_known_answer_and_interval():
    n = 100
    g0 = np.ones(n, bool)
    g1 = np.arange(n) < 50  # generation keeps 50%
    v0 = np.ones(n, bool)
    v1 = np.arange(n) < 90  # verification keeps 90%
    value, lo, hi, dropped = retention_gap(g0, g1, v0, v1, seed=1)
    assert dropped == 0.0  # every fact starts learned: every resample defines the gap
    assert value == pytest.approx(0.4)
    assert lo < 0.4 < hi
    assert hi - lo < 0.35
    assert np.isnan(retention_gap(g0, g1, ~v0, v1)[0])  # verification never learned


def test_song_gap_equals_a_hand_computation():
    correct = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0]])
    weights = np.array([[0.9, 0.1, 0.1, 0.1], [0.5, 0.5, 0.5, 0.5], [0.0, 0.0, 0.0, 0.0]])
    g = song_gap(correct, weights)
    plain = (0.25 + 0.5 + 0.0) / 3
    reweighted = (0.9 / 1.2 + 0.5 + 0.0) / 3
    assert g.accuracy == pytest.approx(plain)
    assert g.reweighted_accuracy == pytest.approx(reweighted)
    assert g.gap == pytest.approx(reweighted - plain)
    assert g.relative_gap == pytest.approx((reweighted - plain) / (1 - plain))
    assert np.isnan(song_gap(np.ones((2, 2)), np.ones((2, 2))).relative_gap)
    with pytest.raises(ValueError, match=">= 0"):
        song_gap(correct, -weights)


def test_a_curve_still_rising_at_the_budget_is_censored_not_early():
    from gv_gap import LearningTime, learning_time

    gen = [0, 0, 0, 0, 0.02, 0.04, 0.2, 0.4, 0.6, 0.8, 1.0]
    # the mean of the last 3 (0.8) is not a plateau: the old rule gave t_G = 9 as if it were
    assert np.isnan(learning_epoch(gen))
    t = learning_time(gen)
    assert t == LearningTime(9.0, "still rising")  # 80% of the highest value seen: a lower bound
    assert (t.bounds.low, t.bounds.high) == (9.0, np.inf)
    assert str(t) == ">= 9 (still rising)"
    # within the tolerance the curve has settled: an observed time
    flat_end = [0, 0.2, 0.6, 0.9, 0.92, 0.94, 0.93]
    assert learning_time(flat_end) == LearningTime(3.0)
    assert learning_time(flat_end, rise_tol=0.0).censored == "still rising"
    # never learned: censored past the last evaluation (the next one, 4 epochs after 12)
    never = learning_time([0.1, 0.1, 0.12, 0.1], epochs=[0, 4, 8, 12])
    assert never == LearningTime(16.0, "no rise")
    assert np.isnan(never.value)
    with pytest.raises(ValueError, match="rise_tol"):
        learning_time(gen, rise_tol=-1)


def test_retention_gap_reports_the_resamples_it_drops():
    n = 30
    g0 = np.ones(n, bool)
    g1 = np.arange(n) < 15
    v0 = (
        np.arange(n) == 0
    )  # one fact verified at the start: 1 - (29/30)^30 = 64% of resamples keep it
    v1 = v0.copy()
    res = retention_gap(g0, g1, v0, v1, seed=0)
    assert res.value == pytest.approx(1.0 - 0.5)
    assert res.dropped == pytest.approx((29 / 30) ** 30, abs=0.03)  # about 36%
    assert res.low <= res.value <= res.high
    assert np.isnan(retention_gap(g0, g1, ~g0, v1).dropped)  # undefined gap: nothing resampled
