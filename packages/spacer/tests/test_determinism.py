"""Planted ties, exact methods and late arrivals: results fixed by rules, not by accidents."""

import math

import numpy as np
import pytest

from spacer import SpaceR
from spacer.reproduce import claim_ratios, error_ratio
from spacer.sketch import top_k_mask
from spacer.streams import zipf_stream
from spacer.table import Table


def _tied_table(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    counts = rng.permutation(np.array([9] * 3 + [4] * 40 + [1] * 7))
    return np.arange(50) * 3, counts


def test_eviction_keeps_the_smallest_ids_among_tied_counts():
    ids, counts = _tied_table(0)
    sk = SpaceR(40)  # 20 slots: 3 items of count 9, then 17 of the 40 tied at 4
    sk.table = Table(ids, counts)
    sk._evict()
    tied = ids[counts == 4]
    expected = np.sort(np.concatenate([ids[counts == 9], np.sort(tied)[:17]]))
    assert sk.table.ids.tolist() == expected.tolist()


@pytest.mark.parametrize("seed", range(5))
def test_top_k_mask_does_not_depend_on_input_order(seed):
    ids, counts = _tied_table(0)
    ref = set(ids[top_k_mask(ids, counts, 20)].tolist())
    perm = np.random.default_rng(seed + 1).permutation(ids.size)
    got = set(ids[perm][top_k_mask(ids[perm], counts[perm], 20)].tolist())
    assert got == ref
    assert len(ref) == 20


def test_error_ratio_exact_cases():
    assert error_ratio(0.0, 0.0) == 1.0  # both exact: they match
    assert error_ratio(2.0, 0.0) == math.inf  # only the reference is exact
    assert error_ratio(0.0, 2.0) == 0.0
    assert error_ratio(3.0, 2.0) == 1.5
    with pytest.raises(ValueError, match="non-negative"):
        error_ratio(-1.0, 1.0)


def test_claim_ratios_with_exact_methods_do_not_divide_by_zero():
    # 35 distinct ids in 100 slots: every prediction-based method is exact (weighted error 0)
    from spacer.reproduce import grid as _grid

    B = 200
    grid = _grid(zipf_stream(20_000, 2_000, 3.0), B, 0, 1 << 14)
    assert grid["Learned Count-Min"]["weighted_error"] == 0.0
    by = {(3.0, B, m): r["weighted_error"] for m, r in grid.items()}
    r1, r2, r3 = claim_ratios(by, (3.0,), B)
    assert r2[3.0] == 1.0  # 0 / 0: both exact
    assert r3[3.0] == 1.0
    spacer_err = grid["SpaceR"]["weighted_error"]
    assert r1[3.0] == (1.0 if spacer_err == 0 else math.inf)


def test_late_item_is_sampled_even_with_free_slots():
    # the documented rule: p_t = min(1, alpha k / N_t) whatever the free slots, so an item first
    # seen after N_t > alpha k may start from the bias-corrected estimate, not its exact count
    stream = np.array([0] * 150 + [1] * 5)
    estimates = []
    for seed in range(20):
        sk = SpaceR(200, seed=seed)  # 100 slots, 2 distinct items
        for i in range(0, stream.size, 37):
            sk.update(stream[i : i + 37])
        assert sk.rate < 1
        estimates.append(sk.estimate([0, 1]).tolist())
    assert all(e[0] == 150 for e in estimates)  # arrived while p_t = 1: exact
    assert any(e[1] != 5 for e in estimates)
