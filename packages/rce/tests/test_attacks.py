"""Attacks on hand-made logits: success iff the answer is within budget; HP equals a brute-force
union; chance on random logits is B/|V|."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from scipy import stats  # noqa: E402

from rce.attacks import (  # noqa: E402
    attack_success,
    lens_candidates,
    output_candidates,
    rephrase_candidates,
)


def _with_answer_at(rank: int, vocab: int = 50, answer: int = 7) -> torch.Tensor:
    logits = -torch.arange(vocab, dtype=torch.float32)
    order = [t for t in range(vocab) if t != answer]
    order.insert(rank - 1, answer)
    out = torch.empty(vocab)
    out[torch.tensor(order)] = logits
    return torch.log_softmax(out, 0)


@pytest.mark.parametrize("rank", [1, 2, 3, 9, 10, 11, 30])
@pytest.mark.parametrize("budget", [1, 2, 5, 10, 20])
def test_output_attack_succeeds_iff_rank_within_budget(rank, budget):
    lp = _with_answer_at(rank)[None]
    cands = output_candidates(lp, budget)
    assert len(cands[0]) == budget
    assert bool(attack_success(cands, [7], budget)[0]) == (rank <= budget)


def test_excluding_the_target_moves_the_answer_up_one():
    lp = _with_answer_at(3)[None]
    top = int(lp.argmax())
    assert not attack_success(output_candidates(lp, 2), [7], 2)[0]
    assert attack_success(output_candidates(lp, 2, exclude=[top]), [7], 2)[0]


def test_head_projection_set_equals_brute_force_union():
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(5, 3, 40, generator=g)
    k = 4
    cands = lens_candidates(scores, None, k)
    for i in range(5):
        brute = set()
        for layer in range(3):
            order = np.argsort(-scores[i, layer].numpy())
            brute |= set(order[:k].tolist()) | set(order[-k:].tolist())
        assert set(cands[i]) == brute
        assert len(cands[i]) == len(brute)


@pytest.mark.parametrize("budget", [1, 2, 5, 10, 20])
def test_lens_attack_at_budget_is_a_prefix_and_fills_the_budget(budget):
    scores = torch.randn(4, 2, 60, generator=torch.Generator().manual_seed(1))
    cands = lens_candidates(scores, budget, k=4)
    assert all(len(c) == budget for c in cands)
    # j-major order: a larger budget only appends, so smaller budgets are prefixes
    widest = lens_candidates(scores, 20, k=4)
    assert all(c == f[:budget] for c, f in zip(cands, widest, strict=True))
    # the top token of the last layer is always the first candidate
    assert [c[0] for c in cands] == scores[:, -1].argmax(1).tolist()


@pytest.mark.parametrize("budget", [1, 5, 20])
def test_asr_on_random_logits_is_chance(budget):
    vocab, n = 200, 4000
    lp = torch.randn(n, vocab, generator=torch.Generator().manual_seed(budget))
    true = torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(99)).tolist()
    rate = attack_success(output_candidates(lp, budget), true, budget).mean()
    ci = stats.binomtest(int(rate * n), n).proportion_ci(0.999)
    assert ci.low <= budget / vocab <= ci.high


def test_rephrase_candidates_count_samples_and_are_seeded():
    lp = torch.full((2, 3, 10), float("-inf"))
    lp[0, :, 4] = 0.0  # every rephrasing says token 4
    lp[1, :, :] = torch.log_softmax(torch.zeros(10), 0)
    cands = rephrase_candidates(lp, n_samples=5, budget=20, seed=0)
    assert cands[0] == [4]
    assert 1 < len(cands[1]) <= 10
    assert cands == rephrase_candidates(lp, n_samples=5, budget=20, seed=0)
    assert rephrase_candidates(lp, 5, budget=1, seed=0)[1] == cands[1][:1]


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_bad_budget_raises(bad):
    with pytest.raises(ValueError, match="budget"):
        output_candidates(torch.zeros(1, 5), bad)
    with pytest.raises(ValueError, match="budget"):
        attack_success([[1]], [1], bad)


def test_attack_success_needs_one_set_per_fact():
    with pytest.raises(ValueError, match="candidate sets"):
        attack_success([[1], [2]], [1])
