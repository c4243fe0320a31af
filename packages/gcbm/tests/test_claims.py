"""The claims' decision rules on planted numbers: interval inside, across and outside the target,
and the controls that make a claim inconclusive."""

import numpy as np
import pytest

from gcbm.reproduce.claims import (
    accuracy_claim,
    decide_claims,
    fidelity_claim,
    intervention_claim,
    lm_claim,
    recovery_claim,
)
from gcbm.reproduce.run import precision, top_concepts


def _run(seed, gcbm=0.95, gin=0.96, shuf=0.5, dataset="molecule_rules", **kw):
    row = {
        "dataset": dataset, "seed": seed, "n_test": 200, "GIN": gin, "GCN": gin - 0.05,
        "GCBM": gcbm, "GCBM-E": gcbm + 0.02, "GCBM-E, shuffled embeddings (null)": gcbm - 0.03,
        "GCBM, shuffled labels (null)": shuf, "logistic regression on concepts": 0.9,
        "GCBM fidelity": 0.99, "GCBM fidelity, rule on permuted concepts (null)": 0.6,
        "GCBM t-norm (ablation) fidelity": 0.8, "intervention net": 0.02,
        "intervention random edit (null) net": -0.02, "intervention corrected": 5,
        "intervention introduced": 1, "planted found": 3, "GCBM concept precision": 1.0,
        "GCBM-E concept precision": 1.0, "logistic regression concept precision": 1.0,
        "post-hoc tree on GIN concept precision": 0.5,
        "GCBM, shuffled labels (null) concept precision": 0.0,
    }  # fmt: skip
    row.update(kw)
    return row


def test_accuracy_claim_inside_across_outside():
    inside = accuracy_claim([_run(s, gcbm=0.95 + 0.001 * s) for s in range(3)], "d")
    assert inside.verdict == "supported"
    assert inside.negative.verdict == "refuted"  # the shuffled-label pipeline is far below
    across = accuracy_claim([_run(s, gcbm=g) for s, g in enumerate((0.99, 0.90, 0.95))], "d")
    assert across.verdict == "inconclusive"
    outside = accuracy_claim([_run(s, gcbm=0.80 + 0.001 * s) for s in range(3)], "d")
    assert outside.verdict == "refuted"


def test_recovery_claim_needs_fidelity_and_a_failing_null():
    ok = recovery_claim([_run(s) for s in range(3)])
    assert ok.verdict == "supported"
    low_fid = recovery_claim([_run(s, **{"GCBM fidelity": 0.7}) for s in range(3)])
    assert low_fid.verdict == "inconclusive"  # the positive control (fidelity) fails
    null_ok = recovery_claim([_run(s, **{"GCBM, shuffled labels (null) concept precision": 1.0})
                              for s in range(3)])  # fmt: skip
    assert null_ok.verdict == "inconclusive"  # a null that also recovers: the test cannot fail
    wrong = recovery_claim([_run(s, **{"GCBM concept precision": 1 / 3}) for s in range(3)])
    assert wrong.verdict == "refuted"
    missing = recovery_claim([_run(0), _run(1, **{"GCBM concept precision": float("nan")})])
    assert missing.value is None
    assert missing.verdict == "inconclusive"


def test_lm_fidelity_and_intervention_claims():
    rows = [_run(s, gcbm=0.9 + 0.001 * s) for s in range(4)]
    assert lm_claim(rows).verdict == "supported"
    assert fidelity_claim(rows).verdict == "supported"
    assert fidelity_claim(rows).negative.verdict == "refuted"
    moved = [_run(s, **{"GCBM fidelity, rule on permuted concepts (null)": 0.99}) for s in range(4)]
    assert fidelity_claim(moved).verdict == "inconclusive"  # a null that also agrees: no test
    assert intervention_claim(rows).verdict == "supported"
    none = [_run(s, **{"intervention net": 0.0}) for s in range(4)]
    assert intervention_claim(none).verdict == "refuted"
    perfect = [_run(s, gcbm=1.0) for s in range(4)]
    assert intervention_claim(perfect).verdict == "inconclusive"  # no errors to correct
    claims = decide_claims(rows + [_run(s, dataset="ba_2motifs") for s in range(3)])
    assert len(claims) == 6
    assert all(c.missing_parts() == [] for c in claims)


def test_top_concepts_and_precision():
    assert top_concepts(np.array([0.1, 0.9, -1.0, 0.5]), list("abcd")) == ["b", "d", "a"]
    assert top_concepts(np.array([-0.1, 0.2]), list("ab")) == ["b"]
    aligned = {"a": "ring6", "b": "ring6", "c": "nitro", "d": "amine"}
    assert precision(["a", "b", "c"], aligned) == pytest.approx(2 / 3)  # a group counts once
    assert precision(["c", "d"], aligned) == 0.5
    assert np.isnan(precision([], aligned))
