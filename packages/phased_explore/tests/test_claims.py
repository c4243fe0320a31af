"""The claims' verdicts on planted results: each control can fail and each rule can refute."""

import numpy as np

from phased_explore.reproduce import SCALES, Frontier
from phased_explore.reproduce.claims import (
    equal_trajectory_claim,
    frontier_claim,
    monotone_claim,
    scaling_claim,
)
from phased_explore.reproduce.run import ALGORITHMS, Results

CFG = SCALES["smoke"]  # ns (50, 200), rhos (1, 2, 6), lock_H 6
NS = [2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256, 362, 512]


def _frontier(n_min_of_m, seeds: int = 4, censor: int | None = None, max_n: int = 512):
    out = []
    for rho in CFG.rhos:
        m = -(-CFG.lock_H // rho)
        f = Frontier(rho, m, enumerate_n64=m <= 6)
        for n in NS:
            if m == censor and n > max_n:
                break
            reached = n >= n_min_of_m(m) and m != censor
            f.ns.append(n)
            f.success.append([reached] * seeds)
        out.append(f)
    return out


def _results(E=None, lock=None, open_=None, eq=None) -> Results:
    seeds = [1, 2, 3, 4]
    if E is None:
        E = np.outer([1.0, 1.1, 0.9, 1.05], np.asarray(CFG.ns, float) ** -0.5)
    return Results(seeds, E, lock or _frontier(lambda m: 2**m), open_ or _frontier(lambda m: 3),
                   eq or [], [])  # fmt: skip


def test_scaling_claim():
    quick = SCALES["quick"]  # N from 100 to 3200: N^-1/2 falls 5.7x
    ns = np.asarray(quick.ns, float)
    jitter = np.random.default_rng(0).normal(0, 0.02, (4, ns.size))
    planted = np.outer([1.0, 1.1, 0.9, 1.05], ns**-0.5) * np.exp(jitter)
    assert scaling_claim(_results(E=planted), quick).verdict == "supported"
    steep = np.outer([1.0, 1.1, 0.9, 1.05], ns**-1.0) * np.exp(jitter)
    assert scaling_claim(_results(E=steep), quick).verdict == "refuted"
    flat = np.outer([1.0, 1.1, 0.9, 1.05], [1.0, 0.9])  # falls 1.1x: the rate is not measurable
    claim = scaling_claim(_results(E=flat), CFG)
    assert claim.verdict == "inconclusive"
    assert "positive control" in claim.reason
    zero = _results(E=np.array([[0.5, 0.0]] * 4))
    assert scaling_claim(zero, CFG).value is None  # log of 0: undefined, never supported


def test_frontier_claim_grid_resolution_and_censoring():
    assert frontier_claim(_results(), CFG).verdict == "supported"  # N_min = 2^m exactly
    steep = _results(lock=_frontier(lambda m: 4**m))  # slope 2
    assert frontier_claim(steep, CFG).verdict == "refuted"
    # rho = 1 (m = 6) never succeeded up to N = 91: N_min > 91 keeps the slope in the band or
    # above it, undecided; up to 512 it is above the band whatever the censored value
    censored = _results(lock=_frontier(lambda m: 2**m, censor=6, max_n=91))
    claim = frontier_claim(censored, CFG)
    assert claim.verdict == "inconclusive"
    assert claim.high == np.inf
    far = _results(lock=_frontier(lambda m: 2**m, censor=6, max_n=512))
    assert frontier_claim(far, CFG).verdict == "refuted"
    also_grows = _results(open_=_frontier(lambda m: 2**m))  # the null grows as well: a defect
    assert frontier_claim(also_grows, CFG).defect


def test_monotone_claim():
    assert monotone_claim(_results(), CFG).verdict == "supported"
    # more phases need fewer agents; reversing the order must show falls (the negative control)
    reverse = _results(lock=_frontier(lambda m: 2 ** (7 - m)))
    claim = monotone_claim(reverse, CFG)
    assert claim.verdict == "refuted"
    # its negative (the reverse order) is monotone in this world: no null here, and no defect of a
    # rule its own interval refutes; the reason says so
    assert claim.negative.verdict == "supported"
    assert not claim.defect
    assert "no case where the claim must fail" in claim.reason


def _eq(layer, uni, seq, batched) -> list[dict]:
    rows = []
    for i, jitter in enumerate((1.0, 1.05, 0.95)):
        for a, e in zip(ALGORITHMS, (layer, uni, seq, batched, layer), strict=True):
            rows.append({"seed": i, "algorithm": a, "trajectories": 100, "E_model": e * jitter})
    return rows


def test_equal_trajectory_claim():
    ok = _results(eq=_eq(0.2, 1.2, 0.2, 2.7))
    assert equal_trajectory_claim(ok, CFG).verdict == "supported"
    slow = _results(eq=_eq(0.9, 1.2, 0.2, 2.7))  # 4.5x worse than sequential
    assert equal_trajectory_claim(slow, CFG).verdict == "refuted"
    weak_ref = _results(eq=_eq(0.2, 0.3, 0.2, 2.7))  # sequential barely beats uniform
    assert "positive control" in equal_trajectory_claim(weak_ref, CFG).reason
    zero = _results(eq=_eq(0.0, 1.2, 0.0, 2.7))  # 0/0: undefined, never supported
    claim = equal_trajectory_claim(zero, CFG)
    assert claim.value is None
    assert claim.verdict == "inconclusive"
