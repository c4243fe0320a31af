import numpy as np
import pytest

from spacer import (
    adversarial_order,
    heavy_hitter_scores,
    noisy_oracle,
    perfect_oracle,
    read_items,
    stdlib_words,
    true_counts,
    unweighted_error,
    weighted_error,
    zipf_stream,
)
from spacer.sketch import truncated_geometric


def test_weighted_and_unweighted_error_closed_form():
    f, f_hat = np.array([10, 1, 1]), np.array([8, 2, 1])
    assert weighted_error(f, f_hat) == pytest.approx((10 * 2 + 1 * 1) / 12)
    assert unweighted_error(f, f_hat) == pytest.approx(1.0)
    assert heavy_hitter_scores(f, f_hat, 2) == (0.5, 1.0)
    with pytest.raises(ValueError, match="one shape"):
        weighted_error([1, 2], [1])


def test_truncated_geometric_matches_its_distribution():
    rng = np.random.default_rng(0)
    p, n = 0.1, 12
    x = truncated_geometric(rng, p, np.full(200_000, n))
    assert x.min() >= 0
    assert x.max() <= n - 1
    q = 1 - p
    pmf = p * q ** np.arange(n) / (1 - q**n)
    emp = np.bincount(x, minlength=n) / x.size
    assert np.abs(emp - pmf).max() < 0.005


def test_zipf_stream_is_seeded_and_skewed():
    a, b = zipf_stream(50_000, 1000, 1.5, seed=4), zipf_stream(50_000, 1000, 1.5, seed=4)
    assert np.array_equal(a, b)
    _, f = true_counts(a)
    top = np.sort(f)[::-1]
    assert top[0] / top[9] == pytest.approx(10**1.5, rel=0.25)


def test_adversarial_order_puts_heavy_items_last():
    s = zipf_stream(10_000, 200, 1.0, seed=0)
    adv = adversarial_order(s)
    assert np.array_equal(np.sort(adv), np.sort(s))
    ids, f = true_counts(s)
    heaviest = ids[np.argmax(f)]
    assert np.all(adv[-int(f.max()) :] == heaviest)


def test_oracles():
    s = np.repeat(np.arange(10), np.arange(10, 0, -1))
    assert perfect_oracle(s, 3).tolist() == [0, 1, 2]
    noisy = noisy_oracle(s, 4, 0.5, seed=0)
    assert len(set(noisy.tolist()) & {0, 1, 2, 3}) == 2
    with pytest.raises(ValueError, match="noise"):
        noisy_oracle(s, 3, 1.5)


def test_read_items_from_text_csv_and_npy(tmp_path):
    (tmp_path / "s.txt").write_text("a\nb\na\n")
    ids, vocab = read_items(tmp_path / "s.txt")
    assert vocab[ids].tolist() == ["a", "b", "a"]
    (tmp_path / "s.csv").write_text("user,item\n1,x\n2,y\n3,x\n")
    ids, vocab = read_items(tmp_path / "s.csv", column="item")
    assert vocab[ids].tolist() == ["x", "y", "x"]
    np.save(tmp_path / "s.npy", np.array([7, 7, 9]))
    ids, vocab = read_items(tmp_path / "s.npy")
    assert vocab[ids].tolist() == [7, 7, 9]
    with pytest.raises(ValueError, match="column"):
        read_items(tmp_path / "s.csv", column="nope")
    with pytest.raises(FileNotFoundError):
        read_items(tmp_path / "missing.txt")


def test_stdlib_words_is_a_real_skewed_stream():
    ids, vocab = stdlib_words(max_files=20)
    _, f = true_counts(ids)
    assert ids.size > 5_000
    assert "self" in set(vocab.tolist()) or "def" in set(vocab.tolist()) or f.max() > 100


def test_binary_words_is_a_second_real_skewed_stream():
    from spacer import binary_words

    ids, vocab = binary_words()
    again, vocab2 = binary_words(max_items=1000)
    assert np.array_equal(vocab2[again], vocab[ids[:1000]])  # the same words, in file order
    _, f = true_counts(ids)
    assert ids.size > 100_000
    share = np.sort(f)[::-1] / ids.size
    assert share[0] > 0.02  # skewed: the commonest word alone is over 2% of the stream
    assert vocab.size > 10_000  # and a long tail
    with pytest.raises(ValueError, match="max_items"):
        binary_words(max_items=0)
