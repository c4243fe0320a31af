import itertools

import numpy as np
import pytest

from spherical_grokking import coset_labels, coset_probe, permutations


@pytest.mark.parametrize("n", [3, 4])
def test_coset_labels_are_the_cosets_of_the_point_stabiliser(n):
    perms = [tuple(p) for p in permutations(n)]
    labels = coset_labels(n)
    x = n - 1

    def compose(a, b):  # apply b, then a
        return tuple(a[b[i]] for i in range(n))

    def inverse(a):
        return tuple(np.argsort(a))

    left, right = labels["left cosets of S_{n-1}"], labels["right cosets of S_{n-1}"]
    for (i, g), (j, h) in itertools.product(enumerate(perms), repeat=2):
        # same left coset g S  <=>  g^-1 h fixes x;  same right coset S g  <=>  h g^-1 fixes x
        assert (left[i] == left[j]) == (compose(inverse(g), h)[x] == x)
        assert (right[i] == right[j]) == (compose(h, inverse(g))[x] == x)
    assert np.bincount(labels["sign (cosets of A_n)"]).tolist() == [len(perms) // 2] * 2


def test_probe_reads_a_planted_coset_and_not_a_random_embedding():
    rng = np.random.default_rng(0)
    labels = coset_labels(5)["sign (cosets of A_n)"]
    planted = rng.standard_normal((121, 8))  # 120 elements and the '=' token
    planted[:120, 0] += 4.0 * (2 * labels - 1)
    rows = {r["structure"]: r for r in coset_probe(planted, 5)}
    assert rows["sign (cosets of A_n)"]["cv_accuracy"] > 0.95
    assert rows["left cosets of S_{n-1}"]["chance"] == pytest.approx(0.2)
    noise = {r["structure"]: r for r in coset_probe(rng.standard_normal((120, 8)), 5)}
    assert noise["sign (cosets of A_n)"]["cv_accuracy"] < 0.75
    assert noise["left cosets of S_{n-1}"]["cv_accuracy"] < 0.45


def test_probe_bad_input():
    with pytest.raises(ValueError, match="embedding must be"):
        coset_probe(np.ones((10, 4)), 5)
    with pytest.raises(ValueError, match="folds"):
        coset_probe(np.ones((6, 4)), 3, folds=1)
