"""The estimators against closed-form brackets: linear fields, Heisenberg, the commuting null."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from skill_commutator.commutator import (  # noqa: E402
    commutator_sweep,
    lie_bracket,
    loglog_slope,
    loop_commutator,
    noisy_flow,
    ordered_commutator,
    richardson,
    rk4_flow,
)
from skill_commutator.synthetic import Commuting, Heisenberg, LinearSystem, MLPReadout  # noqa: E402


def _points(m, n=5, seed=1):
    return torch.randn(n, m, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("m", [4, 9, 16])
def test_exact_bracket_of_linear_fields_is_ba_minus_ab(m):
    sys = LinearSystem.random(m, seed=m)
    x = _points(m)
    expected = x @ (sys.b @ sys.a - sys.a @ sys.b).T
    torch.testing.assert_close(
        lie_bracket(sys.field_x, sys.field_y, x), expected, rtol=1e-12, atol=1e-12
    )
    torch.testing.assert_close(sys.bracket(x), expected)


def test_heisenberg_bracket_and_c1_exact_at_every_h():
    sys = Heisenberg(eps=0.7)
    x = _points(3)
    truth = torch.zeros_like(x)
    truth[:, 2] = 0.7
    torch.testing.assert_close(lie_bracket(sys.field_x, sys.field_y, x), truth, rtol=0, atol=1e-15)
    for h in [1.0, 0.3, 0.05]:
        c1 = ordered_commutator(sys.flow_x(), sys.flow_y(), x, h)
        torch.testing.assert_close(c1, truth, rtol=0, atol=1e-12)
        # the loop is exact for Heisenberg too (its BCH series stops at the bracket)
        torch.testing.assert_close(
            loop_commutator(sys.flow_x(), sys.flow_y(), x, h), truth, rtol=0, atol=1e-11
        )


def test_commuting_null_is_zero():
    sys = Commuting(dim=3)
    x = _points(3)
    for est in (ordered_commutator, loop_commutator):
        assert float(est(sys.flow_x(), sys.flow_y(), x, 0.05).abs().max()) < 1e-12


@pytest.mark.parametrize("kind", ["ordered", "loop"])
def test_first_order_error_halves_with_h_and_richardson_is_second_order(kind):
    sys = LinearSystem.random(6, seed=0)
    x = _points(6, n=1)
    truth = sys.bracket(x)
    hs = [0.2, 0.1, 0.05, 0.025]
    est = commutator_sweep(sys.flow_x(), sys.flow_y(), x, hs, kind=kind)
    err = [float((c - truth).norm() / truth.norm()) for c in est]
    assert loglog_slope(hs, err) == pytest.approx(1.0, abs=0.1)
    assert err[1] / err[0] == pytest.approx(0.5, abs=0.05)
    fn = {"ordered": ordered_commutator, "loop": loop_commutator}[kind]
    rich = [
        float((richardson(lambda h: fn(sys.flow_x(), sys.flow_y(), x, h), h) - truth).norm())
        / float(truth.norm())
        for h in hs
    ]
    assert loglog_slope(hs, rich) == pytest.approx(2.0, abs=0.2)
    assert rich[-1] < err[-1] / 10


def test_rk4_flow_matches_expm():
    sys = LinearSystem.random(5, seed=2)
    x = _points(5)
    for h in [0.3, -0.2]:
        torch.testing.assert_close(
            rk4_flow(sys.field_x, n_steps=40)(x, h), sys.flow_x()(x, h), rtol=0, atol=1e-10
        )


def test_readout_commutator_recovers_the_pushforward_of_the_bracket():
    sys = LinearSystem.random(8, seed=3)
    f = MLPReadout(8, out=32, seed=0)
    x = _points(8, n=4)
    truth = f.pushforward(x, sys.bracket(x))
    est = richardson(
        lambda h: ordered_commutator(sys.flow_x(), sys.flow_y(), x, h, readout=f), 0.02
    )
    cos = torch.nn.functional.cosine_similarity(est, truth, dim=-1)
    assert float(cos.min()) > 0.9999
    assert float((est - truth).norm() / truth.norm()) < 1e-3


def test_common_random_numbers_cut_the_noise():
    sys = Heisenberg(eps=1.0)
    x = _points(3, n=200)
    a, b = noisy_flow(sys.flow_x(), 1e-4), noisy_flow(sys.flow_y(), 1e-4)
    truth = sys.bracket(x)
    paired = ordered_commutator(a, b, x, 0.05, seed=0, paired=True)
    unpaired = ordered_commutator(a, b, x, 0.05, seed=0, paired=False)
    err_p = float((paired - truth).norm(dim=-1).mean())
    err_u = float((unpaired - truth).norm(dim=-1).mean())
    # paired: the noise enters as O(sigma / h) = 2e-3; unpaired: O(sigma / h^2) = 4e-2
    assert 2e-4 < err_p < 1e-2
    assert err_u > 5 * err_p
    same = ordered_commutator(a, b, x, 0.05, seed=0, paired=False)
    assert torch.equal(same, unpaired)  # the same seed, the same numbers


def test_bad_input_raises():
    sys = Heisenberg()
    x = _points(3)
    for h in [0.0, -0.1, float("nan")]:
        with pytest.raises(ValueError, match="h must be"):
            ordered_commutator(sys.flow_x(), sys.flow_y(), x, h)
    with pytest.raises(ValueError, match="non-finite"):
        ordered_commutator(sys.flow_x(), lambda p, h, seed=None: p * float("nan"), x, 0.1)
    with pytest.raises(ValueError, match="shape"):
        ordered_commutator(sys.flow_x(), lambda p, h, seed=None: p[:, :2], x, 0.1)
    with pytest.raises(ValueError, match="square"):
        LinearSystem(np.zeros((3, 3)), np.zeros((4, 4)))
    with pytest.raises(ValueError, match="kind"):
        commutator_sweep(sys.flow_x(), sys.flow_y(), x, [0.1], kind="other")
    with pytest.raises(ValueError, match="n_steps"):
        rk4_flow(sys.field_x, n_steps=0)
