"""Zeros, ties and undefined ratios in the measurements behind the report: planted cases."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from skill_commutator.compose import deployment_strength  # noqa: E402
from skill_commutator.metrics import jacobian_alignment, novelty  # noqa: E402
from skill_commutator.reproduce import (  # noqa: E402
    _alignment_angles,
    _d_ci,
    _max_defined,
    _mean_defined,
    _order,
    _ratio,
    _resolved,
    _skill_rel,
)


def _results(moves_a, moves_p, n_ctx=3, d=5, m=2, seed=0):
    rng = np.random.default_rng(seed)
    n = moves_a.shape[0]
    return [
        {"kind": kind, "seed": 0, "J": rng.normal(size=(n, n_ctx, d, m)), "moves": moves}
        for kind, moves in (("activation", moves_a), ("prefix", moves_p))
    ]


def test_a_skill_that_does_not_move_the_readout_is_left_out_of_the_field_angles():
    """J v = 0 in one context: its angles do not exist. They were NaN, and the Cohen's d of the
    angles raised "contains NaN" and aborted the report."""
    rng = np.random.default_rng(1)
    moves_a, moves_p = rng.normal(size=(3, 3, 5)), rng.normal(size=(3, 3, 5))
    moves_a[0, 1] = 0.0  # skill 0, context 1 of the activation realization
    angles, undefined = _alignment_angles(_results(moves_a, moves_p))
    same, cross = angles["field direction J v (not a claim)"]
    assert undefined["field direction J v (not a claim)"] == 3  # against each prefix skill
    assert same.size == 3 * 3 - 1
    assert cross.size == 3 * 3 * 2 - 2
    assert np.isfinite(same).all()
    assert np.isfinite(cross).all()
    d, lo, hi = _d_ci(same, cross)
    assert lo <= d <= hi
    assert all(math.isnan(x) for x in _d_ci(same[:1], cross))


def test_zero_jacobian_has_no_principal_angle():
    ja = np.random.default_rng(0).normal(size=(2, 1, 4, 2))
    jb = ja.copy()
    jb[1] = 0.0
    al = jacobian_alignment(ja, jb)  # raised on max() of an empty array before
    assert np.isnan(al["mean"][:, 1]).all()
    assert np.isnan(al["max"][:, 1]).all()
    assert al["mean"][0, 0, 0] == pytest.approx(0.0, abs=1e-7)


def test_novelty_against_a_zero_or_rank_deficient_span():
    b = np.array([0.0, 1.0, 0.0])
    assert novelty(np.zeros((3, 2)), b) == pytest.approx(math.pi / 2)  # spans nothing
    s0 = np.array([[1.0, 2.0], [0.0, 0.0], [0.0, 0.0]])  # rank 1: e_1 only
    assert novelty(s0, b) == pytest.approx(math.pi / 2)
    assert novelty(s0, np.array([1.0, 0.0, 0.0])) == pytest.approx(0.0, abs=1e-12)


def test_terciles_of_tied_commutators_do_not_depend_on_the_sort():
    """15 pairs with ties (C exactly 0 for a third): the order keeps tied pairs in pair order, the
    same on every CPU (numpy's default sort orders ties by its SIMD kernel)."""
    c = np.zeros(15)
    c[::3] = 1.0
    c[1::3] = 0.5
    expected = sorted(range(15), key=lambda i: c[i])  # Python's sort is stable
    assert _order(c).tolist() == expected


def test_ratios_are_explicit_about_zero_denominators():
    r = _ratio(torch.tensor([0.0, 1.0, 2.0]), torch.tensor([0.0, 0.0, 4.0]))
    assert math.isnan(r[0])
    assert r[1] == math.inf
    assert r[2] == 0.5
    assert _mean_defined(r[[0, 2]]) == 0.5  # the 0 / 0 context is left out, not averaged as NaN
    assert _mean_defined(r[[0, 1]]) == math.inf
    assert math.isnan(_mean_defined(r[:1]))
    assert _max_defined(torch.tensor([float("nan"), 1.0])) == _max_defined(
        torch.tensor([1.0, float("nan")])
    )
    assert math.isnan(_max_defined(torch.tensor([float("nan")])))


def test_a_skill_that_does_not_move_the_readout_is_never_resolved():
    """A's own change 0 in one context: the relative commutator is undefined there (it was inf,
    which counted as resolved)."""
    assert math.isnan(_skill_rel(torch.tensor([1e-3, 2e-3]), torch.tensor([0.0, 1.0])))
    assert _skill_rel(torch.tensor([1e-3, 2e-3]), torch.tensor([1.0, 1.0])) == pytest.approx(1e-3)
    pairs = [{"C": 1.0, "skill_rel": math.nan, "actadd_rel": 1e-16},
             {"C": 1.0, "skill_rel": 1e-3, "actadd_rel": 1e-16}]  # fmt: skip
    results = [
        {"kind": k, "seed": s, "pairs": pairs} for k in ("activation", "prefix") for s in (0, 1)
    ]
    assert _resolved(results) == (2, 4, 2)


def test_deployment_strength_needs_a_positive_rate():
    with pytest.raises(ValueError, match="positive finite rate"):
        deployment_strength(None, origin={"rate": torch.zeros(2, 3, dtype=torch.float64)})
    rate = torch.tensor([[0.5, 1.0, 2.0]], dtype=torch.float64)
    assert deployment_strength(None, origin={"rate": rate}) == pytest.approx(1.0)
