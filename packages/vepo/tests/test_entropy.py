import math

import pytest
import torch

from vepo import (
    entropy_weights,
    estimate_entropies,
    exact_effective_entropy_gradient,
    exact_entropies,
)

LOGITS = torch.tensor([2.0, 0.5, -1.0, 1.0, -0.5, 0.0], dtype=torch.float64)
VALID = torch.tensor([1, 1, 0, 0, 1, 0])


def test_exact_entropies_by_hand():
    p = torch.softmax(LOGITS, 0)
    out = exact_entropies(torch.log(p), VALID)
    h = float(-(p * p.log()).sum())
    h_eff = float(-(p * p.log() * VALID).sum())
    pv = p[VALID.bool()] / p[VALID.bool()].sum()
    assert out["sequence_entropy"] == pytest.approx(h)
    assert out["effective_entropy"] == pytest.approx(h_eff)
    assert out["valid_mass"] == pytest.approx(float(p[VALID.bool()].sum()))
    assert out["valid_entropy"] == pytest.approx(float(-(pv * pv.log()).sum()))
    assert out["invalid_entropy_share"] == pytest.approx(1 - h_eff / h)


def test_estimator_matches_exact_enumeration():
    p = torch.softmax(LOGITS, 0)
    gen = torch.Generator().manual_seed(0)
    draws = torch.multinomial(p, 200_000, replacement=True, generator=gen)
    est = estimate_entropies(torch.log(p)[draws], VALID[draws])
    exact = exact_entropies(torch.log(p), VALID)
    for key in ("sequence_entropy", "effective_entropy", "valid_mass", "valid_entropy"):
        assert est[key] == pytest.approx(exact[key], abs=0.01), key


def test_gradient_form_equals_autograd():
    p = torch.softmax(LOGITS, 0)
    w = VALID * (-torch.log(p) - 1)  # per-trajectory weight
    # E_pi[w(y) grad log pi(y)] with grad_logits log pi(y) = e_y - p
    score = torch.eye(len(p), dtype=torch.float64) - p
    expected = (p[:, None] * w[:, None] * score).sum(0)
    assert torch.allclose(exact_effective_entropy_gradient(LOGITS, VALID), expected, atol=1e-12)


def test_gradient_raises_the_rarer_valid_trajectory_and_never_an_invalid_one():
    logits = torch.log(torch.tensor([0.3, 0.05, 0.65], dtype=torch.float64))
    valid = torch.tensor([1, 1, 0])
    new = logits + 0.5 * exact_effective_entropy_gradient(logits, valid)
    before, after = torch.log_softmax(logits, 0), torch.log_softmax(new, 0)
    delta = after - before
    assert delta[1] > 0  # the rare valid trajectory gains
    assert delta[1] > delta[0]
    # the invalid trajectory's weight is exactly 0: it moves only through normalisation
    w = entropy_weights(torch.log(torch.tensor([[0.3, 0.05, 0.65]])), valid[None], baseline=False)
    assert w[0, 2] == 0
    assert w[0, 1] > w[0, 0] > 0


def test_leave_one_out_baseline():
    logp = torch.tensor([[-1.0, -3.0, -5.0, -2.0]])
    valid = torch.tensor([[1, 1, 0, 0]])
    raw = entropy_weights(logp, valid, baseline=False)
    assert raw.tolist() == [[0.0, 2.0, 0.0, 0.0]]
    loo = entropy_weights(logp, valid)
    expected = raw - (raw.sum() - raw) / 3
    assert torch.allclose(loo, expected)
    blind = entropy_weights(logp, None, baseline=False)
    assert blind.tolist() == [[0.0, 2.0, 4.0, 1.0]]


def test_bad_input():
    with pytest.raises(ValueError, match="shape"):
        estimate_entropies(torch.zeros(3), torch.ones(2))
    with pytest.raises(ValueError, match="<= 0"):
        estimate_entropies(torch.tensor([0.5]), torch.tensor([1]))
    with pytest.raises(ValueError, match="0/1"):
        estimate_entropies(torch.tensor([-1.0]), torch.tensor([2]))
    with pytest.raises(ValueError, match="sum to 1"):
        exact_entropies(torch.log(torch.tensor([0.5, 0.2])), torch.tensor([1, 0]))
    with pytest.raises(ValueError, match="groups"):
        entropy_weights(torch.zeros(4))
    with pytest.raises(ValueError, match="at least 2"):
        entropy_weights(torch.zeros(3, 1))
    assert math.isnan(estimate_entropies(torch.tensor([-1.0]), torch.tensor([0]))["valid_entropy"])


def test_standardized_weights_have_unit_scale_and_zero_for_flat_groups():
    logp = torch.tensor([[-1.0, -3.0, -5.0, -2.0], [-2.0, -2.0, -2.0, -2.0]])
    w = entropy_weights(logp, None, standardize=True)
    raw = entropy_weights(logp, None, baseline=True)
    assert torch.allclose(w[0], raw[0] / (-logp[0] - 1).std())
    assert torch.equal(w[1], torch.zeros(4))
    none_valid = entropy_weights(logp, torch.zeros(2, 4), standardize=True)
    assert torch.equal(none_valid, torch.zeros(2, 4))


def test_normalised_valid_entropy_gradient_form():
    from vepo.entropy import exact_valid_entropy_gradient, valid_entropy_weights

    p = torch.softmax(LOGITS, 0)
    v = VALID.double()
    pv_mass = float((p * v).sum())
    lv = torch.log(p) - math.log(pv_mass)
    h_v = float(-(p * v / pv_mass * lv).sum())
    w = v * (-torch.log(p) + math.log(pv_mass) - h_v) / pv_mass
    score = torch.eye(len(p), dtype=torch.float64) - p
    expected = (p[:, None] * w[:, None] * score).sum(0)
    assert torch.allclose(exact_valid_entropy_gradient(LOGITS, VALID), expected, atol=1e-12)
    # the group estimator: zero for invalid samples, zero-sum over the valid ones
    logp = torch.tensor([[-1.0, -2.0, -4.0, -3.0]])
    wv = valid_entropy_weights(logp, torch.tensor([[1, 1, 0, 1]]))
    assert wv[0, 2] == 0
    assert float(wv.sum()) == pytest.approx(0.0, abs=1e-12)
    assert wv[0, 3] > 0 > wv[0, 0]  # the rarest valid sample gains, the commonest loses
    assert torch.equal(valid_entropy_weights(logp, torch.tensor([[1, 0, 0, 0]])), torch.zeros(1, 4))


def _expected_group_gradient(p, valid, weights_fn, g):
    """Exact expectation over every group of ``g`` draws from ``p`` (enumeration) of the group
    estimate ``(1/g) sum_i w_i grad_logits log pi(y_i)``, and the probability of >= 2 valid draws."""
    import itertools

    n = len(p)
    score = torch.eye(n, dtype=torch.float64) - p  # grad_logits log pi(y) = e_y - p
    total, p_two = torch.zeros(n, dtype=torch.float64), 0.0
    for ys in itertools.product(range(n), repeat=g):
        prob = float(torch.prod(p[list(ys)]))
        logp = torch.log(p[list(ys)])[None]
        w = weights_fn(logp, valid[list(ys)][None])[0]
        total += prob * (w[:, None] * score[list(ys)]).sum(0) / g
        p_two += prob * (int(valid[list(ys)].sum()) >= 2)
    return total, p_two


def test_group_weights_are_unbiased_by_enumeration():
    """Issue 44: the normalised-H weights centred each valid sample on a mean that included
    itself, which shrinks them by (k-1)/k: half their size with 2 valid samples. Enumerating every
    group of 4 draws: the expected group estimate equals the exact gradient (times P(>= 2 valid),
    since a group with fewer valid samples says nothing about H(pi_V) and gets 0); VEPO's plain
    weights are unbiased for grad H_eff."""
    from vepo.entropy import exact_valid_entropy_gradient, valid_entropy_weights

    logits = torch.tensor([1.0, 0.2, -0.5, 0.4], dtype=torch.float64)
    valid = torch.tensor([1, 1, 0, 1])
    p = torch.softmax(logits, 0)
    est, p_two = _expected_group_gradient(p, valid, valid_entropy_weights, 4)
    exact = exact_valid_entropy_gradient(logits, valid)
    assert torch.allclose(est, p_two * exact, atol=1e-12)
    est, _ = _expected_group_gradient(
        p, valid, lambda lp, v: entropy_weights(lp, v, baseline=False), 4
    )
    assert torch.allclose(est, exact_effective_entropy_gradient(logits, valid), atol=1e-12)


@pytest.mark.parametrize(
    "fn", ["entropy_weights", "valid_entropy_weights", "differential_smoothing"]
)
def test_weight_functions_reject_positive_logp_and_non_binary_validity(fn):
    """Review of issue 44: the weight functions took ``log pi > 0`` (a probability above 1) and
    validity values such as 0.5 or 2 silently, scaling the term by them. Each now raises a
    ValueError naming the input."""
    from vepo.entropy import differential_smoothing_weights, valid_entropy_weights

    call = {
        "entropy_weights": lambda lp, v: entropy_weights(lp, v, baseline=False),
        "valid_entropy_weights": valid_entropy_weights,
        "differential_smoothing": lambda lp, v: differential_smoothing_weights(lp, v, 0.1, 0.1),
    }[fn]
    good_lp, good_v = torch.tensor([[-1.0, -2.0, -3.0]]), torch.tensor([[1, 0, 1]])
    call(good_lp, good_v)
    call(good_lp, good_v.bool())
    with pytest.raises(ValueError, match="logp"):
        call(torch.tensor([[-1.0, 0.5, -3.0]]), good_v)
    with pytest.raises(ValueError, match="logp"):
        call(torch.tensor([[-1.0, float("nan"), -3.0]]), good_v)
    for bad in ([[1.0, 0.5, 1.0]], [[1, 2, 0]], [[1, -1, 0]]):
        with pytest.raises(ValueError, match="valid"):
            call(good_lp, torch.tensor(bad))
