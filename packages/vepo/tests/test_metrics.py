import itertools

import numpy as np
import pytest

from vepo import Problem, distinct_valid, pass_at_k


def test_pass_at_k_known_values_and_brute_force():
    assert pass_at_k([2], [1], 1)[0] == pytest.approx(0.5)
    assert pass_at_k([16], [0], 8)[0] == 0
    assert pass_at_k([16], [16], 16)[0] == 1
    n, c, k = 7, 3, 3
    combos = list(itertools.combinations(range(n), k))
    brute = np.mean([any(i < c for i in s) for s in combos])
    assert pass_at_k([n], [c], k)[0] == pytest.approx(brute)


def test_pass_at_k_bad_input():
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k([4], [1], 5)
    with pytest.raises(ValueError, match=r"c must be in \[0, n\]"):
        pass_at_k([4], [5], 1)


def test_distinct_valid_counts_spellings_once():
    p = Problem("nums 2 3 4 target 10 :", (2, 3, 4), 10)
    outs = ["2 * 3 + 4", "2  *  3 +   4", "4 + 2 * 3", "2 * 3 + 5", "garbage"]
    assert distinct_valid(outs, p) == 2
