from fractions import Fraction

import pytest

from vepo import ParseError, Problem, addition, countdown, evaluate, solutions


def test_checker_accepts_every_enumerated_solution():
    problems = countdown(40, seed=3)
    assert len({(p.numbers, p.target) for p in problems}) == 40
    for p in problems:
        assert len(p.solutions) >= 2
        assert all(p.check(s) for s in p.solutions)
        assert set(p.solutions) == set(solutions(p.numbers, p.target))


def test_checker_rejects_wrong_and_malformed():
    p = Problem("nums 2 3 4 target 10 :", (2, 3, 4), 10)
    assert p.check("2 * 3 + 4")
    assert p.check(" ( 4 + 3 * 2 ) \n trailing text")
    for bad in ["2 * 3 + 5", "2 * 3 + 4 + 0", "2 * 3 * 4", "3 + 3 + 4", "2 * 3", "2 * 3 +", "( 2 * 3 + 4",
                "2 ** 3", "__import__('os').system('x')", "", "2 3 4", "- 2 + 12", "4 / 0 + 2 * 3",
                "2 * 3 + 4 )"]:  # fmt: skip
        assert not p.check(bad), bad


def test_evaluate_is_exact():
    assert evaluate("8 / 3 * 3") == (Fraction(8), [8, 3, 3])
    assert evaluate("( 1 + 2 ) * ( 3 - 5 )")[0] == -6
    with pytest.raises(ParseError, match="division by zero"):
        evaluate("1 / ( 2 - 2 )")
    with pytest.raises(ParseError):
        evaluate("1 + x")


def test_countdown_is_deterministic_and_validates():
    assert countdown(5, seed=1) == countdown(5, seed=1)
    assert countdown(5, seed=1) != countdown(5, seed=2)
    with pytest.raises(ValueError, match="n_numbers"):
        countdown(3, n_numbers=1)
    with pytest.raises(ValueError, match="distinct problems"):
        countdown(50, n_numbers=2, max_number=2, max_target=2)


def test_addition_checker():
    p = addition(3, digits=2, seed=0)[0]
    assert p.check(p.solutions[0])
    assert p.check(" " + str(p.target))
    assert not p.check(str(p.target + 1))
