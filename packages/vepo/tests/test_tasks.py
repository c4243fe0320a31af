from fractions import Fraction

import pytest

from vepo import ParseError, Problem, addition, countdown, evaluate, solutions
from vepo.tasks import normalize


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


def test_checker_survives_odd_model_output():
    """Issue 44: a 5,000-digit number made ``int()`` raise ValueError (Python's digit limit) inside
    the reward function. Odd output is invalid, never an exception; non-ASCII digits are no
    numbers, and a number's spelling (leading zeros) is one solution, not two."""
    p = Problem("nums 2 3 4 target 10 :", (2, 3, 4), 10)
    for odd in ["1" * 5000, "2 * 3 + " + "4" * 5000, "( " * 3000 + "2", "٢ * ٣ + ٤", "２ * ３ + ４",
                "\x00", "2 * 3 + 4" + " " * 5000 + "+ 1"]:  # fmt: skip
        assert not p.check(odd)
    assert p.check("2 * 3 + 04")
    assert normalize("2 * 3 + 04") == normalize("2 * 3 + 4")
    with pytest.raises(ParseError, match="digits"):
        evaluate("1" * 50)


def test_reward_function_on_odd_and_conversational_output():
    from vepo import reward_function

    p = Problem("nums 2 3 4 target 10 :", (2, 3, 4), 10)
    reward = reward_function([p])
    assert reward([p.prompt] * 3, ["2 * 3 + 4", "9" * 5000, "unknown"]) == [1.0, 0.0, 0.0]
    chat = [
        [{"role": "assistant", "content": "2 * 3 + 4"}],
        [{"role": "assistant", "content": "1"}],
    ]
    assert reward([p.prompt] * 2, chat) == [1.0, 0.0]
    with pytest.raises(TypeError, match="completion"):
        reward([p.prompt], [42])
