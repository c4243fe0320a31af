import itertools
import math

import numpy as np
import pytest
import torch

from vepo import Problem, build_tokenizer_for, countdown, distinct_valid, pass_at_k
from vepo.metrics import evaluate_policy, invalid_share


def test_pass_at_k_known_values_and_brute_force():
    assert pass_at_k([2], [1], 1)[0] == pytest.approx(0.5)
    assert pass_at_k([16], [0], 8)[0] == 0
    assert pass_at_k([16], [16], 16)[0] == 1
    n, c, k = 7, 3, 3
    combos = list(itertools.combinations(range(n), k))
    brute = np.mean([any(i < c for i in s) for s in combos])
    assert pass_at_k([n], [c], k)[0] == pytest.approx(brute)


def test_pass_at_k_bad_input():
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k([4], [1], 5)
    with pytest.raises(ValueError, match=r"c must be in \[0, n\]"):
        pass_at_k([4], [5], 1)


def test_distinct_valid_counts_spellings_once():
    p = Problem("nums 2 3 4 target 10 :", (2, 3, 4), 10)
    outs = ["2 * 3 + 4", "2  *  3 +   4", "4 + 2 * 3", "2 * 3 + 5", "garbage"]
    assert distinct_valid(outs, p) == 2


def test_invalid_share_of_a_collapsed_policy_is_nan():
    assert invalid_share(1.0, 4.0) == pytest.approx(0.75)
    assert math.isnan(invalid_share(0.0, 0.0))  # was ZeroDivisionError


def test_evaluate_policy_on_a_collapsed_policy(monkeypatch):
    """Planted: every sample has probability 1 (log-probs exactly 0 in float32), so the sequence
    entropy is 0 and its invalid share undefined: NaN, not a ZeroDivisionError."""
    import paper_common.lm
    from paper_common.lm import SampleOutput, tiny_causal_lm

    problems = countdown(3, seed=0)
    tok = build_tokenizer_for(problems)
    model = tiny_causal_lm(tok, "llama", 1, 16, 2, seed=0)
    ids = torch.tensor(tok(" 1 + 2", add_special_tokens=False)["input_ids"])

    def collapsed(model, tok, prompts, n, **kw):
        return SampleOutput(
            [["1 + 2"] * n for _ in prompts],
            [[ids] * n for _ in prompts],
            [[torch.zeros(len(ids))] * n for _ in prompts],
        )

    monkeypatch.setattr(paper_common.lm, "sample", collapsed)
    res = evaluate_policy(model, tok, problems, n=4, ks=(1,))
    assert res["sequence_entropy"] == 0.0
    assert res["sequence_entropy_se"] == 0.0
    assert math.isnan(res["invalid_entropy_share"])
