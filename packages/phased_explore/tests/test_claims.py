"""The claims' verdicts on planted results: each control can fail and each rule can refute."""

import numpy as np

from phased_explore.reproduce import SCALES, Frontier
from phased_explore.reproduce.claims import (
    equal_trajectory_claim,
    frontier_claim,
    monotone_claim,
    scaling_claim,
)
from phased_explore.reproduce.run import ALGORITHMS, NULL, SEQUENTIAL, Results

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


def _results(E=None, lock=None, open_=None, eq=None, E_null=None) -> Results:
    seeds = [1, 2, 3, 4]
    if E is None:
        E = np.outer([1.0, 1.1, 0.9, 1.05], np.asarray(CFG.ns, float) ** -0.5)
    if E_null is None:  # agents beyond the smallest N switched off: flat up to noise
        noise = np.random.default_rng(1).normal(0, 0.02, E.shape)
        E_null = np.outer([1.0, 1.1, 0.9, 1.05], np.ones(E.shape[1])) * np.exp(noise)
    return Results(seeds, E, lock or _frontier(lambda m: 2**m), open_ or _frontier(lambda m: 3),
                   eq or [], [], E_null)  # fmt: skip


def test_scaling_claim():
    quick = SCALES["quick"]  # N from 100 to 3200: N^-1/2 falls 5.7x
    ns = np.asarray(quick.ns, float)
    jitter = np.random.default_rng(0).normal(0, 0.02, (4, ns.size))
    planted = np.outer([1.0, 1.1, 0.9, 1.05], ns**-0.5) * np.exp(jitter)
    claim = scaling_claim(_results(E=planted), quick)
    assert claim.verdict == "supported"
    assert claim.negative.verdict == "refuted"  # the measured null: slope ~0
    # a null that learns as fast as the explorer makes the rule unable to fail: a defect
    assert scaling_claim(_results(E=planted, E_null=planted), quick).defect
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


def _eq(layer, uni, seq, null=None) -> list[dict]:
    """Planted rows: the strongest sequential baseline at ``seq`` (RF-Express practical), the other
    sequential ones 1.5x worse; the no-adaptation null at ``null`` (default: uniform's value)."""
    null = uni if null is None else null
    value = dict.fromkeys(ALGORITHMS, layer)
    value |= {a: 1.5 * seq for a in SEQUENTIAL} | {SEQUENTIAL[3]: seq}
    value |= {ALGORITHMS[1]: uni, NULL: null}
    rows = []
    for i, jitter in enumerate((1.0, 1.05, 0.95)):
        for a in ALGORITHMS:
            rows.append(
                {"seed": i, "algorithm": a, "trajectories": 100, "E_model": value[a] * jitter}
            )
    return rows


def test_equal_trajectory_claim():
    ok = _results(eq=_eq(0.2, 1.2, 0.2))
    claim = equal_trajectory_claim(ok, CFG)
    assert claim.verdict == "supported"
    assert claim.negative.verdict == "refuted"  # no adaptation: gain 1, far below 3
    assert "RF-Express sequential, practical constants (rho = T) 3x" in claim.note
    slow = _results(eq=_eq(0.9, 1.2, 0.2))  # 4.5x worse than the strongest sequential
    assert equal_trajectory_claim(slow, CFG).verdict == "refuted"
    weak_ref = _results(eq=_eq(0.2, 0.3, 0.2))  # sequential barely beats uniform
    assert "positive control" in equal_trajectory_claim(weak_ref, CFG).reason
    # a null as good as the layerwise explorer: the rule cannot fail, a defect
    assert equal_trajectory_claim(_results(eq=_eq(0.2, 1.2, 0.2, null=0.2)), CFG).defect
    zero = _results(eq=_eq(0.0, 1.2, 0.0))  # 0/0: undefined, never supported
    claim = equal_trajectory_claim(zero, CFG)
    assert claim.value is None
    assert claim.verdict == "inconclusive"
