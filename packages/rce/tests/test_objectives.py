"""RCE's hinge and Patil et al.'s defence terms on hand-made logits."""

import math

import pytest

torch = pytest.importorskip("torch")

from rce.objectives import (  # noqa: E402
    Defence,
    defence_term,
    head_projection_margin,
    lens_entropy,
    rank_hinge,
)


def _logits_with_true_at(rank: int, vocab: int = 100) -> torch.Tensor:
    """Logits 0, -1, -2, ... with token 0 moved to position ``rank`` (1 = top)."""
    values = -torch.arange(vocab, dtype=torch.float32)
    logits = torch.empty(vocab)
    order = [t for t in range(1, vocab)]
    order.insert(rank - 1, 0)
    logits[torch.tensor(order)] = values
    return logits


@pytest.mark.parametrize("rank", [1, 5, 30, 51, 52, 60, 80, 99, 100])
def test_hinge_is_zero_exactly_when_both_constraints_hold(rank):
    logits = _logits_with_true_at(rank)[None]
    # excluded target: token 1 (counted out of the order statistics)
    h = rank_hinge(logits, torch.tensor([0]), torch.tensor([1]), rank=50, floor_rank=90, margin=0.5)
    z = logits[0]
    others = torch.cat([z[2:]])  # neither the true token nor the target
    top = others.sort(descending=True).values
    holds = bool(z[0] <= top[49] - 0.5) and bool(z[0] >= top[89] + 0.5)
    assert (float(h) == 0.0) == holds
    if not holds:
        assert float(h) > 0


def test_hinge_gradient_lowers_the_true_logit_when_above_rank_r():
    logits = _logits_with_true_at(3)[None].requires_grad_(True)
    rank_hinge(logits, torch.tensor([0]), None, rank=50).sum().backward()
    assert logits.grad[0, 0] > 0  # gradient descent lowers z_s
    low = _logits_with_true_at(99)[None].requires_grad_(True)
    rank_hinge(low, torch.tensor([0]), None, rank=50, floor_rank=80).sum().backward()
    assert low.grad[0, 0] < 0  # a bottom outlier is pushed back up


def test_hinge_rejects_ranks_beyond_the_vocabulary():
    with pytest.raises(ValueError, match="out of range"):
        rank_hinge(torch.zeros(1, 10), torch.tensor([0]), None, rank=20)


def test_head_projection_margin_zero_outside_top_and_bottom_k():
    probs = torch.softmax(-torch.arange(20, dtype=torch.float32), 0)
    inside = head_projection_margin(probs[None], torch.tensor([1]), k=4)
    middle = head_projection_margin(probs[None], torch.tensor([10]), k=4)
    bottom = head_projection_margin(probs[None], torch.tensor([19]), k=4)
    assert float(inside) > 0
    assert float(bottom) > 0
    assert float(middle) == 0.0


def test_entropy_of_uniform_is_log_vocab():
    lp = torch.log_softmax(torch.zeros(3, 50), -1)
    assert torch.allclose(lens_entropy(lp), torch.full((3,), math.log(50)), atol=1e-5)


def test_defence_terms_shapes_and_signs():
    logits = torch.randn(6, 40)
    lens = [torch.randn(6, 40), torch.randn(6, 40)]
    true, target = torch.arange(6), torch.arange(6) + 10
    assert torch.equal(defence_term(Defence("none"), logits, lens, true, target), torch.zeros(6))
    assert (defence_term(Defence("max_entropy"), logits, lens, true, target) < 0).all()
    p = defence_term(Defence("fact_erasure"), logits, [], true, target)
    assert torch.allclose(p, torch.softmax(logits, -1)[torch.arange(6), true])
    assert (defence_term(Defence("rce", rank=5), logits, [], true, target) >= 0).all()


def test_defence_validation_and_layers():
    with pytest.raises(ValueError, match="unknown defence"):
        Defence("nonsense")
    with pytest.raises(ValueError, match="floor_rank"):
        Defence("rce", rank=50, floor_rank=10)
    assert Defence("head_projection").lens_layers(4) == [1, 2, 3, 4]
    assert Defence("max_entropy").lens_layers(4) == [1, 2, 3]
    assert Defence("rce", whitebox=True).lens_layers(6) == [5, 6]
    assert Defence("rce").lens_layers(6) == []
    with pytest.raises(ValueError, match="out of range"):
        Defence("head_projection", layers=(9,)).lens_layers(4)


def _probs_with_true_at(rank: int, vocab: int = 20) -> torch.Tensor:
    return torch.softmax(_logits_with_true_at(rank, vocab), -1)[None]


@pytest.mark.parametrize("k", [1, 3, 4])
def test_hp_defence_hinge_leaves_the_true_token_out_of_its_order_statistic(k):
    """Patil et al.'s HP defence wants the true token out of the top-k and bottom-k. With the token
    counted in its own order statistic, the top hinge was zero with the token still at rank k (and
    the bottom one with it k-th from the bottom): off by one."""
    vocab = 20
    for rank, in_top in [(k, True), (k + 1, False)]:
        h = head_projection_margin(_probs_with_true_at(rank, vocab), torch.tensor([0]), k)
        assert (float(h[0]) > 0) == in_top, (rank, float(h[0]))
    for from_bottom, in_bottom in [(k, True), (k + 1, False)]:
        rank = vocab + 1 - from_bottom
        h = head_projection_margin(_probs_with_true_at(rank, vocab), torch.tensor([0]), k)
        assert (float(h[0]) > 0) == in_bottom, (rank, float(h[0]))


def test_patil_defences_run_in_erasure_mode_as_published():
    """HP, max-entropy and input rephrasing are Patil et al.'s defences on top of *fact erasure*
    (no target likelihood); the target-NLL variants are our adaptations and must be asked for."""
    for name in ("fact_erasure", "head_projection", "max_entropy", "input_rephrasing"):
        assert Defence(name).mode == "erasure"
        assert not Defence(name).uses_target
    for name in ("head_projection", "max_entropy", "input_rephrasing"):
        assert Defence(name, mode="target").uses_target
    for name in ("none", "rce", "revs"):
        assert Defence(name).mode == "target"
        assert Defence(name).uses_target
    with pytest.raises(ValueError, match="mode"):
        Defence("rce", mode="erasure")
    with pytest.raises(ValueError, match="mode"):
        Defence("fact_erasure", mode="target")
    with pytest.raises(ValueError, match="mode"):
        Defence("none", mode="sideways")  # type: ignore[arg-type]
