"""The claims' rules on planted labels: inside, across and outside the target, the controls, and
the named defect (claims 3-4 held by construction)."""

import numpy as np
import pytest

from halluc_labels.claims import (
    agreement_claim,
    bias_claim,
    criterion_check,
    prompt_check,
    training_label_rules,
)

N = 400
RNG = np.random.default_rng(0)
HALLUC = RNG.random(N) < 0.4
UNFAITH = np.where(RNG.random(N) < 0.35, ~HALLUC, HALLUC)  # the criteria differ on ~35%


def _noisy(y: np.ndarray, p: float, seed: int) -> np.ndarray:
    return np.where(np.random.default_rng(seed).random(y.size) < p, ~y, y)


def test_old_rules_pass_for_a_labeler_that_is_only_its_training_labels():
    # issue 43: claims 3-4 held by construction. A "labeler" returning its training criterion
    # (faithfulness under the faithfulness prompt, correctness under the other) passes both old
    # rules: CI low of kappa(faith) - kappa(corr) > 0, and a significant McNemar gain
    low, p = training_label_rules(UNFAITH, HALLUC, 500, 0)
    assert low > 0
    assert p < 0.05
    # issue 46: judges and NLI are tuned only where the criteria agree, so the claims are paper
    # claims again, decided on intervals; the null swaps the two arms item by item at random
    flags = {"NLI": _noisy(UNFAITH, 0.05, 1)}
    for j, s in (("a", 2), ("b", 3)):
        flags[f"{j}[p1]"] = _noisy(UNFAITH, 0.05, s)
        flags[f"{j}[p2]"] = _noisy(HALLUC, 0.05, s + 10)
    check = criterion_check(flags, ["NLI", "a[p1]", "b[p1]"], ["a[p2]", "b[p2]"],
                            UNFAITH, HALLUC, 500, 0, "planted")  # fmt: skip
    assert check.kind == "paper"
    assert check.verdict == "supported"
    assert check.negative.verdict == "refuted"
    switch = prompt_check(flags, ["a", "b"], HALLUC, UNFAITH, 500, 0, "planted")
    assert switch.kind == "paper"
    assert switch.verdict == "supported"
    assert switch.negative.verdict == "refuted"
    # judges that ignore the prompt (both prompts give the same labels): they cannot show a
    # prompt effect, so the positive control fails and the claim is inconclusive (review 46)
    same = flags | {"a[p2]": flags["a[p1]"]}
    ignored = prompt_check(same, ["a", "b"], HALLUC, UNFAITH, 500, 0, "")
    assert not ignored.positive.passed
    assert ignored.verdict == "inconclusive"
    # labelers that follow correctness: the criterion check is refuted
    corr = flags | {"NLI": _noisy(HALLUC, 0.05, 7)}
    assert criterion_check(corr, ["NLI", "a[p1]"], ["a[p2]"], UNFAITH, HALLUC, 500, 0,
                           "").verdict == "refuted"  # fmt: skip


def test_criterion_checks_need_criteria_that_differ():
    flags = {"NLI": HALLUC.copy(), "a[p1]": HALLUC.copy(), "a[p2]": HALLUC.copy()}
    check = criterion_check(flags, ["NLI", "a[p1]"], ["a[p2]"], HALLUC, HALLUC, 200, 0, "")
    assert check.verdict == "inconclusive"
    assert not check.positive.passed


LEX = ("EM", "F1")


def test_agreement_claim_inside_across_outside():
    # labelers that follow faithfulness only: low kappa vs correctness, faithfulness control high
    apart = {"EM": UNFAITH.copy(), "F1": _noisy(UNFAITH, 0.05, 1), "J": _noisy(HALLUC, 0.5, 2)}
    claim = agreement_claim(apart, HALLUC, UNFAITH, LEX, 500, 0, "")
    assert claim.verdict == "supported"
    assert claim.negative.verdict == "refuted"
    # everyone agrees with correctness: refuted
    agree = {n: _noisy(HALLUC, 0.02, s) for s, n in enumerate(("EM", "F1", "J"))}
    assert agreement_claim(agree, HALLUC, UNFAITH, LEX, 500, 0, "").verdict == "refuted"
    # a constant labeler fails the positive control
    const = apart | {"J": np.zeros(N, bool)}
    assert agreement_claim(const, HALLUC, UNFAITH, LEX, 500, 0, "").verdict == "inconclusive"


def test_bias_claim_on_planted_flag_rates():
    types = np.repeat(["exact", "unlisted_alias", "wrong_value"], 100)
    ok = {n: np.isin(types, ["unlisted_alias", "wrong_value"]) for n in ("EM", "NLI")}
    rouge = HALLUC | (RNG.random(N) < 0.5)  # recall 1, precision about 0.57
    claim = bias_claim(ok, types, ["unlisted_alias"], ["EM", "NLI"], rouge, HALLUC, 500, 0, "")
    assert claim.verdict == "supported"
    assert claim.negative.verdict == "refuted"
    # a labeler flags 30% of exact answers: refuted
    bad = ok | {"NLI": ok["NLI"] | ((types == "exact") & (np.arange(300) % 10 < 3))}
    assert bias_claim(bad, types, ["unlisted_alias"], ["EM", "NLI"], rouge, HALLUC, 500, 0,
                      "").verdict == "refuted"  # fmt: skip
    # a labeler flags about half of the unsupported answers: the interval straddles
    half = ok | {"NLI": ok["NLI"] & ~((types == "unlisted_alias") & (np.arange(300) % 2 == 0))}
    claim = bias_claim(half, types, ["unlisted_alias"], ["EM", "NLI"], rouge, HALLUC, 500, 0, "")
    assert claim.verdict == "inconclusive"
    assert claim.low < 0 < claim.high


def test_training_labels_pass_nothing_when_the_criteria_agree():
    low, pval = training_label_rules(HALLUC, HALLUC, 200, 0)
    assert low == pytest.approx(0.0)
    assert pval == 1.0
