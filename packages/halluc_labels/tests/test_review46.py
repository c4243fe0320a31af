"""Review of issue 46: claims that could not fail, or could not be tested, on our testbed."""

import numpy as np

from halluc_labels.claims import agreement_claim, criterion_check, prompt_check

N = 1000
RNG = np.random.default_rng(5)
HALLUC = RNG.random(N) < 0.4
UNFAITH = np.where(RNG.random(N) < 0.3, ~HALLUC, HALLUC)  # the criteria differ on ~30%


def _noisy(y: np.ndarray, p: float, seed: int) -> np.ndarray:
    return np.where(np.random.default_rng(seed).random(y.size) < p, ~y, y)


def test_agreement_null_is_refuted_when_pairwise_kappa_decides():
    # noisy labelers: mean pairwise kappa about 0.1 decides the statistic. The old null (faithful-
    # ness in correctness's place) left the pairwise term unchanged, so it came out supported too
    # and the claim could not be supported (a null that is no null)
    flags = {n: _noisy(HALLUC, 0.35, s) for s, n in enumerate(("EM", "F1", "J"))}
    claim = agreement_claim(flags, HALLUC, UNFAITH, ("EM", "F1"), 500, 0, "")
    assert claim.high < 0.6
    assert claim.negative.verdict == "refuted"
    assert claim.negative.value >= 0.7  # planted agreeing labelers: kappa near 0.8
    assert claim.verdict == "supported"


def test_prompt_claim_inconclusive_when_judges_ignore_the_prompt():
    # judges whose labels hardly change with the prompt cannot show a prompt effect: the positive
    # control fails and the claim is inconclusive (it was refuted)
    flags = {}
    for j, s in (("a", 2), ("b", 3)):
        flags[f"{j}[p1]"] = _noisy(UNFAITH, 0.05, s)
        flags[f"{j}[p2]"] = _noisy(flags[f"{j}[p1]"], 0.01, s + 10)
    claim = prompt_check(flags, ["a", "b"], HALLUC, UNFAITH, 500, 0, "")
    assert not claim.positive.passed
    assert claim.positive.value < 0.05
    assert claim.verdict == "inconclusive"
    # judges that do read the prompt but do not move toward correctness: refuted
    for j, s in (("a", 4), ("b", 5)):
        flags[f"{j}[p2]"] = _noisy(UNFAITH, 0.2, s)
    claim = prompt_check(flags, ["a", "b"], HALLUC, UNFAITH, 500, 0, "")
    assert claim.positive.passed
    assert claim.verdict == "refuted"


def test_criterion_claim_inconclusive_when_judges_do_not_know_the_facts():
    # a judge that knows none of the facts can only compare with the reference: following
    # faithfulness is then forced, not measured. Positive control: judges know most facts on the
    # pairs where the criteria differ
    flags = {"NLI": _noisy(UNFAITH, 0.05, 1), "a[p1]": _noisy(UNFAITH, 0.05, 2)}
    ignorant = {"a": np.random.default_rng(9).random(N) < 0.05}
    claim = criterion_check(flags, ["NLI", "a[p1]"], [], UNFAITH, HALLUC, 500, 0, "",
                            known=ignorant)  # fmt: skip
    assert not claim.positive.passed
    assert claim.verdict == "inconclusive"
    knowing = {"a": np.random.default_rng(9).random(N) < 0.9}
    claim = criterion_check(flags, ["NLI", "a[p1]"], [], UNFAITH, HALLUC, 500, 0, "",
                            known=knowing)  # fmt: skip
    assert claim.positive.passed
    assert claim.verdict == "supported"
