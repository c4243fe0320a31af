import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spherical_grokking import (
    discrete_log,
    is_prime,
    make_task,
    modular_inverse,
    modular_task,
    permutation_sign,
    permutation_task,
    permutations,
    primitive_root,
    split,
)

PRIMES = [2, 3, 5, 7, 11, 13, 59, 97, 113]


@pytest.mark.parametrize(
    ("op", "fn"),
    [
        ("+", lambda a, b, p: (a + b) % p),
        ("-", lambda a, b, p: (a - b) % p),
        ("*", lambda a, b, p: a * b % p),
    ],
)
def test_modular_tables_match_brute_force(op, fn):
    p = 11
    task = modular_task(op, p)
    assert len(task) == p * p
    expected = np.array([[fn(a, b, p) for b in range(p)] for a in range(p)])
    np.testing.assert_array_equal(task.table(), expected)
    # the token layout "a b =" with = the token after the elements
    assert task.equals_token == p
    assert task.vocab_size == p + 1
    assert task.n_classes == p
    assert np.all(task.inputs[:, 2] == p)


def test_division_uses_the_modular_inverse_and_skips_zero():
    p = 13
    task = modular_task("/", p)
    assert len(task) == p * (p - 1)
    assert np.all(task.inputs[:, 1] != 0)
    a, b, y = task.inputs[:, 0], task.inputs[:, 1], task.labels
    np.testing.assert_array_equal(y * b % p, a)  # (a / b) * b == a
    assert modular_inverse(5, 13) == 8  # 5 * 8 = 40 = 3 * 13 + 1


def test_commutativity_flags_match_the_tables():
    for op in "+-*/":
        task = modular_task(op, 7)
        t = task.table()
        sym = all(
            t[a, b] == t[b, a] for a in range(7) for b in range(7) if t[a, b] >= 0 and t[b, a] >= 0
        )
        assert task.commutative == sym
    assert not permutation_task(3).commutative


@pytest.mark.parametrize("n", [3, 4])
def test_permutation_composition_matches_itertools_brute_force(n):
    task = permutation_task(n)
    elems = list(itertools.permutations(range(n)))
    index = {e: i for i, e in enumerate(elems)}
    assert task.n_elements == len(elems) == len(permutations(n))
    table = task.table()
    for i, a in enumerate(elems):
        for j, b in enumerate(elems):
            ab = tuple(a[b[k]] for k in range(n))  # apply b, then a
            assert table[i, j] == index[ab]


def test_s5_is_the_default_and_has_the_full_table():
    task = make_task("perm")
    assert task.name == "perm_S5"
    assert task.n_elements == 120
    assert len(task) == 120 * 120
    t = task.table()
    # a group table is a Latin square: every row and column is a permutation of the elements
    assert all(len(set(row)) == 120 for row in t)
    assert all(len(set(col)) == 120 for col in t.T)


def test_permutation_sign_against_inversion_count():
    perms = permutations(4)
    brute = [(-1) ** sum(p[i] > p[j] for i in range(4) for j in range(i + 1, 4)) for p in perms]
    np.testing.assert_array_equal(permutation_sign(perms), brute)
    assert (permutation_sign(perms) == 1).sum() == 12  # |A_4|


@pytest.mark.parametrize("p", [3, 5, 59, 113])
def test_discrete_log_inverts_powers_of_the_primitive_root(p):
    g, log = primitive_root(p), discrete_log(p)
    x = np.arange(1, p)
    assert sorted(log[1:]) == list(range(p - 1))  # a bijection onto Z_{p-1}
    assert all(pow(g, int(log[v]), p) == v for v in x)
    assert log[0] == -1


def test_is_prime():
    assert [n for n in range(30) if is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(PRIMES[2:]), st.floats(0.05, 0.95), st.integers(0, 2**31 - 1))
def test_split_is_a_seeded_partition(p, fraction, seed):
    task = modular_task("+", p)
    s = split(task, fraction, seed=seed)
    assert len(s.train_idx) == int(fraction * len(task))
    assert np.intersect1d(s.train_idx, s.test_idx).size == 0
    assert np.union1d(s.train_idx, s.test_idx).size == len(task)
    again = split(task, fraction, seed=seed)
    np.testing.assert_array_equal(s.train_idx, again.train_idx)
    x, _y, _tx, ty = s.tensors()
    assert x.shape == (len(s.train_idx), 3)
    assert ty.shape == (len(s.test_idx),)


def test_split_differs_across_seeds():
    task = modular_task("+", 23)
    assert not np.array_equal(split(task, 0.3, 0).train_idx, split(task, 0.3, 1).train_idx)


def test_bad_input_is_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="prime"):
        modular_task("/", 12)
    with pytest.raises(ValueError, match="op must be"):
        modular_task("^", 7)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="p must be"):
        modular_task("+", 1)
    with pytest.raises(ValueError, match="task must be"):
        make_task("xor")
    with pytest.raises(ValueError, match="train_fraction"):
        split(modular_task("+", 7), 1.0)
    with pytest.raises(ValueError, match="train_fraction"):
        split(modular_task("+", 7), 0.0)
    with pytest.raises(ValueError, match="leaves 0"):
        split(modular_task("+", 3), 0.05)
    with pytest.raises(TypeError, match="Task"):
        split("add", 0.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n must be"):
        permutation_task(1)
    with pytest.raises(ValueError, match="no inverse"):
        modular_inverse(4, 12)
