import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacer import (
    CountMin,
    CountSketch,
    CountSketchPlusPlus,
    FrequencySketch,
    LearnedCountMin,
    MisraGries,
    PredictedExact,
    PredictionCountSketch,
    SampleAndHold,
    SpaceR,
    SpaceSaving,
    perfect_oracle,
    true_counts,
    zipf_stream,
)

streams = st.lists(st.integers(0, 60), min_size=1, max_size=300).map(
    lambda x: np.array(x, np.int64)
)


def feed(sketch, stream, batch=37):
    for i in range(0, stream.size, batch):
        sketch.update(stream[i : i + batch])
    return sketch


def brute(stream):
    ids = np.arange(61)
    return ids, np.array([(stream == i).sum() for i in ids], float)


@settings(max_examples=40, deadline=None)
@given(streams)
def test_counter_sketches_are_exact_when_everything_fits(stream):
    ids, f = brute(stream)
    # SpaceR(600): k = 300 slots >= the stream length, so p_t = 1 for every batch (exactness
    # needs every item to arrive while N_t <= alpha k, not only free slots: see test_determinism)
    for sk in (SpaceR(600), MisraGries(61), SpaceSaving(61), SampleAndHold(1.0)):
        assert feed(sk, stream).estimate(ids).tolist() == f.tolist(), type(sk).__name__
    pred = perfect_oracle(stream, 5)
    est = feed(PredictedExact(20, pred), stream).estimate(pred)
    assert est.tolist() == f[pred].tolist()


@settings(max_examples=40, deadline=None)
@given(streams, st.booleans(), st.integers(0, 10))
def test_count_min_never_underestimates(stream, conservative, seed):
    ids, f = brute(stream)
    sk = feed(CountMin(7, 2, conservative=conservative, seed=seed), stream)
    assert np.all(sk.estimate(ids) >= f)
    if conservative:  # never above plain Count-Min on the same hashes
        plain = feed(CountMin(7, 2, seed=seed), stream)
        assert np.all(sk.estimate(ids) <= plain.estimate(ids))


@settings(max_examples=40, deadline=None)
@given(streams, st.integers(1, 12))
def test_misra_gries_and_spacesaving_error_bounds(stream, k):
    ids, f = brute(stream)
    n = stream.size
    mg = feed(MisraGries(k), stream).estimate(ids)
    assert np.all(mg <= f)
    assert np.all(mg >= f - n / (k + 1) - 1e-9)
    ss = feed(SpaceSaving(k, untracked="min"), stream).estimate(ids)
    assert np.all(ss >= f)
    assert np.all(ss <= f + n / k + 1e-9)


def test_count_sketch_is_unbiased_over_seeds():
    stream = zipf_stream(3000, 300, 1.0, seed=1)
    ids, f = true_counts(stream)
    q = ids[:40]
    est = np.array([CountSketch(16, 1, seed=s).update(stream).estimate(q) for s in range(300)])
    se = est.std(axis=0, ddof=1) / np.sqrt(len(est))
    z = (est.mean(axis=0) - f[:40]) / np.maximum(se, 1e-9)
    assert (
        np.mean(np.abs(z) < 3.5) >= 0.95
    )  # a few |z| > 3.5 in 40 would be expected only if biased


def test_sample_and_hold_estimate_is_unbiased():
    stream = np.repeat(np.arange(5), [1, 2, 5, 20, 80])
    ids = np.arange(5)
    est = np.array([SampleAndHold(0.2, seed=s).update(stream).estimate(ids) for s in range(3000)])
    se = est.std(axis=0, ddof=1) / np.sqrt(len(est))
    assert np.all(np.abs(est.mean(axis=0) - [1, 2, 5, 20, 80]) < 4 * se + 0.05)


@settings(max_examples=30, deadline=None)
@given(streams, streams, st.integers(0, 5))
def test_linear_sketches_merge_exactly(a, b, seed):
    for make in (lambda: CountMin(9, 3, seed=seed), lambda: CountSketch(9, 3, seed=seed)):
        merged = feed(make(), a).merge(feed(make(), b))
        whole = feed(make(), np.concatenate([a, b]))
        assert np.array_equal(merged.table, whole.table)
        assert merged.total == whole.total


@settings(max_examples=30, deadline=None)
@given(streams, streams, st.integers(1, 10))
def test_misra_gries_merge_keeps_its_bound(a, b, k):
    ids, f = brute(np.concatenate([a, b]))
    merged = feed(MisraGries(k), a).merge(feed(MisraGries(k), b))
    est = merged.estimate(ids)
    assert np.all(est <= f)
    assert np.all(est >= f - (a.size + b.size) / (k + 1) - 1e-9)


def test_sharded_spacer_merged_recovers_the_heavy_hitters():
    stream = zipf_stream(200_000, 20_000, 1.2, seed=3)
    ids, f = true_counts(stream)
    top = np.argsort(-f, kind="stable")[:10]
    shards = [
        feed(SpaceR(400, seed=i), part, 4096) for i, part in enumerate(np.array_split(stream, 4))
    ]
    merged = shards[0]
    for s in shards[1:]:
        merged.merge(s)
    whole = feed(SpaceR(400), stream, 4096)
    for sk in (merged, whole):
        rel = np.abs(sk.estimate(ids[top]) - f[top]) / f[top]
        assert rel.max() < 0.05
        assert sk.memory_words <= 400


ALL = [
    lambda: SpaceR(64, seed=2),
    lambda: SampleAndHold(0.3, seed=2),
    lambda: CountMin(16, 2, conservative=True, seed=2),
    lambda: CountSketch(16, 3, seed=2),
    lambda: MisraGries(8),
    lambda: SpaceSaving(8),
    lambda: LearnedCountMin(40, [1, 2, 3], seed=2),
    lambda: PredictionCountSketch(40, [1, 2, 3], seed=2),
    lambda: PredictedExact(10, [1, 2, 3]),
    lambda: CountSketchPlusPlus(120, [1, 2, 3], C=5, seed=2),
]


@pytest.mark.parametrize("make", ALL)
def test_serialisation_round_trip_and_determinism(make):
    stream = zipf_stream(5000, 500, 1.0, seed=0)
    a = feed(make(), stream[:2500], 512)
    b = FrequencySketch.from_bytes(a.to_bytes())
    assert type(b) is type(a)
    q = np.arange(500)
    assert np.array_equal(a.estimate(q), b.estimate(q))
    assert a.memory_words == b.memory_words
    feed(a, stream[2500:], 512)
    feed(b, stream[2500:], 512)  # the random state travels too: same future
    assert np.array_equal(a.estimate(q), b.estimate(q))
    c = feed(make(), stream, 512)
    d = feed(make(), stream, 512)
    assert np.array_equal(c.estimate(q), d.estimate(q))


def test_memory_words_are_exact():
    assert CountMin(100, 3).memory_words == 300
    assert MisraGries.with_memory(1000).memory_words == 1000
    s = SpaceR(1000).update(zipf_stream(50_000, 5000, 1.0))
    assert s.memory_words == 1000
    lcm = LearnedCountMin(1000, np.arange(250), depth=1)
    assert lcm.memory_words == 1000


def test_bad_input_gives_clear_errors():
    s = SpaceR(100)
    with pytest.raises(TypeError, match="integer ids"):
        s.update(np.array([1.5, 2.0]))
    with pytest.raises(TypeError, match="integer ids"):
        s.update(np.array(["a", 1], dtype=object))
    with pytest.raises(ValueError, match="non-negative"):
        s.update(np.array([1, -2]))
    with pytest.raises(ValueError, match="non-negative"):
        s.update(np.array([1, 2]), counts=np.array([1, -1]))
    with pytest.raises(ValueError, match="one entry per item"):
        s.update(np.array([1, 2]), counts=np.array([1]))
    with pytest.raises(ValueError, match="1-D"):
        s.update(np.ones((2, 2), np.int64))
    with pytest.raises(ValueError, match="memory_words must be >= 2"):
        SpaceR(1)
    with pytest.raises(ValueError, match="width must be a positive int"):
        CountMin(0)
    with pytest.raises(ValueError, match="k must be a positive int"):
        MisraGries(0)
    with pytest.raises(ValueError, match="over memory_words"):
        PredictedExact(4, [1, 2, 3])
    with pytest.raises(TypeError, match="cannot merge"):
        CountMin(4).merge(CountSketch(4))
    with pytest.raises(ValueError, match="different parameters"):
        CountMin(4).merge(CountMin(8))
    assert s.total == 0  # nothing half-applied
