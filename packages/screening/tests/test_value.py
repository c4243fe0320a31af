import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from screening import (
    marginal_screening_value,
    plan_value,
    poisson_binomial_pmf,
    simulate,
    window_values,
)

probs = st.lists(st.floats(0.01, 0.99), min_size=3, max_size=9).map(np.array)


def brute_value(p, screened, k):
    """Enumerate every outcome vector: the definition of the expected value."""
    total = 0.0
    rest = sorted(set(range(p.size)) - set(screened), key=lambda i: -p[i])
    for y in itertools.product([0, 1], repeat=p.size):
        prob = np.prod([p[i] if y[i] else 1 - p[i] for i in range(p.size)])
        pos = [i for i in screened if y[i]][:k]
        alloc = pos + rest[: k - len(pos)]
        total += prob * sum(y[i] for i in alloc)
    return total


def test_hand_computed_n3():
    p = np.array([0.9, 0.5, 0.2])
    # K=1, no screening: take unit 0
    assert plan_value(p, [], 1).mean == pytest.approx(0.9)
    # K=1, screen unit 1: positive (0.5) -> 1; negative -> take unit 0 (0.9)
    assert plan_value(p, [1], 1).mean == pytest.approx(0.5 + 0.5 * 0.9)
    # K=2, screen unit 0: positive -> unit 0 + unit 1; negative -> units 1 and 2
    assert plan_value(p, [0], 2).mean == pytest.approx(0.9 * (1 + 0.5) + 0.1 * (0.5 + 0.2))


@settings(max_examples=40, deadline=None)
@given(probs, st.data())
def test_exact_value_equals_enumeration(p, data):
    k = data.draw(st.integers(1, p.size))
    m = data.draw(st.integers(0, p.size))
    s = data.draw(st.permutations(range(p.size)))[:m]
    assert plan_value(p, s, k).mean == pytest.approx(brute_value(p, list(s), k), abs=1e-12)


def test_mean_and_variance_match_monte_carlo():
    rng = np.random.default_rng(1)
    p = rng.beta(2, 2, 30)
    s, k = [3, 7, 11, 20], 8
    v = plan_value(p, s, k)
    draws = simulate(p, s, k, n_sims=200_000, seed=2)
    se = draws.std() / np.sqrt(draws.size)
    assert abs(draws.mean() - v.mean) < 4 * se
    assert draws.var() == pytest.approx(v.var, rel=0.02)


def test_poisson_binomial_against_binomial_and_enumeration():
    from scipy import stats

    assert np.allclose(
        poisson_binomial_pmf(np.full(12, 0.3)), stats.binom.pmf(np.arange(13), 12, 0.3)
    )
    p = np.array([0.1, 0.7, 0.4])
    pmf = poisson_binomial_pmf(p)
    assert pmf.sum() == pytest.approx(1.0)
    assert pmf[3] == pytest.approx(0.1 * 0.7 * 0.4)


def test_window_values_equal_plan_values():
    rng = np.random.default_rng(0)
    q = np.sort(rng.random(25))[::-1]
    starts = np.arange(0, 21)
    wv = window_values(q, 7, 5, starts)
    direct = [plan_value(q, range(s, s + 5), 7).mean for s in starts]
    assert np.allclose(wv, direct)


def test_marginal_value_formula_equals_exact_gain_and_peaks_at_the_cutoff():
    rng = np.random.default_rng(3)
    p = rng.random(40)
    k = 12
    base = plan_value(p, [], k).mean
    exact = np.array([plan_value(p, [i], k).mean - base for i in range(p.size)])
    mv = marginal_screening_value(p, k)
    assert np.allclose(mv, exact, atol=1e-12)
    order = np.argsort(-p)
    assert int(np.argmax(mv)) in set(order[k - 2 : k + 2].tolist())


def test_bad_input():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        plan_value([0.2, 1.5], [], 1)
    with pytest.raises(ValueError, match="NaN"):
        plan_value([0.2, np.nan], [], 1)
    with pytest.raises(ValueError, match="coverage"):
        plan_value([0.2, 0.3], [], 3)
    with pytest.raises(ValueError, match="screened indices"):
        plan_value([0.2, 0.3], [5], 1)
