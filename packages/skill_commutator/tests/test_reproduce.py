"""The smoke-scale experiment end to end: claims, tables, figures."""

import json
import math

import numpy as np
import pytest

pytest.importorskip("torch")

from paper_common import Claim, Control, Report
from paper_common.claims import VERDICTS
from skill_commutator.reproduce import (
    SCALES,
    _resolved,
    _synthetic,
    auc_interval,
    largest_abs_median,
    reproduce,
    spearman_margin,
)

EPS = float(np.finfo(np.float64).eps)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("sc_smoke")
    with pytest.MonkeyPatch.context() as mp:  # the task LM is cached here, not in the user's cache
        mp.setenv("PAPER_CACHE_DIR", str(tmp_path_factory.mktemp("sc_cache")))
        return reproduce("smoke", seed=0, out_dir=out), out


def test_synthetic_null_and_ranking_hold_to_rounding():
    """The estimator on commuting fields is 0 to rounding relative to a real bracket's size, and
    ranks the Heisenberg sweep by eps (|C1| / eps constant to first order in h)."""
    syn = _synthetic(SCALES["smoke"]["synthetic"])
    sweep = np.asarray(syn["sweep"])
    assert syn["null"] <= 1e3 * EPS * sweep.max()  # measured 0.0
    ratio = sweep / np.asarray(SCALES["smoke"]["synthetic"]["eps"])
    assert np.ptp(ratio) / ratio.mean() < 0.2  # measured spread 0.005
    # common random numbers: measured 1.5e-3 paired vs 1.5e-1 unpaired (100x; theory 1/h = 20x)
    assert syn["noise_paired"] < syn["noise_unpaired"]


def test_smoke_report(smoke):
    report, out = smoke
    assert len(report.claims) == 9
    for c in report.claims:  # a claim with no measured value is never supported
        assert not c.point_check or (c.value is not None and not math.isnan(c.value))
        assert c.verdict in VERDICTS
        assert c.missing_parts() == []
        assert not c.defect, c.statement
    # the estimator checks decide on exact numbers and their negative controls are refuted
    checks = [c for c in report.claims if c.kind == "check"]
    assert len(checks) == 3
    assert all(c.negative.verdict == "refuted" for c in checks)
    # issue 43: no check's null is the mirror image of its own measurement any more
    assert "unrelated random linear system" in checks[0].negative.description
    assert "shuffled" in checks[1].negative.description
    assert "rotated" in checks[2].negative.description
    # the ActAdd claim's null is every skill with itself, never resolved; its positive control
    # (the skills move the readout) can fail, unlike the old "ActAdd floor < 1e-10"
    actadd = next(c for c in report.claims if "ActAdd" in c.statement)
    assert "(A, A)" in actadd.negative.description
    assert actadd.negative.verdict == "refuted"
    assert "move the readout" in actadd.positive.description
    assert all(r["own_rel"] >= 0 for r in report.tables["pairs"])
    cost = next(c for c in report.claims if "control costs" in c.statement)
    assert "pooled" in cost.metric
    # ActAdd's commutator is two constant additions in either order: rounding relative to the
    # composed change in every (pair, context) that moved (measured exactly 0 at smoke)
    for row in report.tables["pairs"]:
        assert math.isnan(row["actadd_rel"]) or row["actadd_rel"] <= 1e3 * EPS
        assert row["actadd_rel_undefined"] >= 0
    n_pairs = 15 * len(SCALES["smoke"]["seeds"]) * 2
    assert len(report.tables["pairs"]) == n_pairs
    for row in report.tables["pairs"]:
        assert row["C"] > 0
        assert row["o_gap"] >= 0
        assert row["h0"] > 0
        assert 0 <= row["novelty"] <= 1.5708
    synth = {r["system"]: r for r in report.tables["synthetic"]}
    assert synth["heisenberg eps=1"]["state_err"] < 1e-10
    assert {r["predictor"] for r in report.tables["spearman"]} == {
        "commutator",
        "exact bracket",
        "cosine",
        "norm_product",
        "jacobian_angle",
        "actadd",
    }
    for fig in report.figures:
        assert (out / fig).stat().st_size > 1000
    again = Report.from_json(out / "report.json")
    assert [c.value for c in again.claims] == pytest.approx([c.value for c in report.claims])
    assert json.loads((out / "report.json").read_text())["scale"] == "smoke"


def test_unknown_scale_raises():
    with pytest.raises(ValueError, match="scale"):
        reproduce("huge")


def _planted_results(self_rel: float, self_c: float) -> list[dict]:
    """Three seeds x two realizations, 2 pairs resolved far above a 1e-16 floor, 1 not, and two
    self-pairs with the given relative commutator and size."""
    out = []
    for seed in range(3):
        for kind in ("activation", "prefix"):
            pairs = [
                {"C": 1.0 + 0.01 * seed, "skill_rel": 0.1, "actadd_rel": 1e-16},
                {"C": 2.0 + 0.01 * seed, "skill_rel": 0.2, "actadd_rel": 1e-16},
                {"C": 1e-15, "skill_rel": 1e-16, "actadd_rel": 1e-16},
            ]
            own = [{"C": self_c, "skill_rel": self_rel, "actadd_rel": 1e-16}] * 2
            out.append({"kind": kind, "seed": seed, "pairs": pairs, "self_pairs": own})
    return out


def test_self_pair_null_of_the_resolved_rule():
    """Issue 43: the old null (ActAdd against its own floor, actadd_rel > 100 x actadd_rel) could
    not be resolved by construction. The null is now every skill with itself through the same rule:
    refuted when its commutator is 0 (as it is), counted when it is not (the rule can fail)."""
    results = _planted_results(0.0, 0.0)
    assert _resolved(results) == (4, 6, 0)
    assert _resolved(results, rows="self_pairs") == (0, 4, 0)
    # a planted order dependence on the self-pairs is resolved by the same rule
    assert _resolved(_planted_results(0.1, 1.0), rows="self_pairs") == (4, 4, 0)


def test_check_nulls_have_something_to_show():
    """Issue 43: the check claims' old nulls were mirror images of the measurement (the error against
    -[X, Y], always ~2; Spearman against eps reversed, exactly -rho; arms swapped, 1 / ratio). They are
    now the bracket of an unrelated system, eps shuffled, and unpaired against unpaired."""
    syn = _synthetic(SCALES["smoke"]["synthetic"])
    assert syn["unrelated_err"] > 0.05
    assert not math.isclose(syn["unrelated_err"], 2.0, rel_tol=0.05)  # not the mirror image
    assert abs(syn["rho_eps_shuffled"]) < 0.99
    assert syn["rho_eps_shuffled"] != -syn["rho_eps"]
    rot = np.asarray(syn["noise_unpaired_rotated"])
    assert np.exp(np.mean(np.log(rot))) == pytest.approx(1.0)  # around the noise seeds
    assert rot.min() > 0.5  # each unpaired error is like the next: no 2x cut from nothing


def test_old_actadd_rule_cannot_fail_and_new_rule_can():
    """Issue 43: 'ActAdd's relative commutator < 1e-10' holds even on fields that do not commute
    (two constant additions commute whatever the fields), so as a claim its negative control came
    out supported (a DEFECT). The claim now asks whether the skills are resolved above that floor;
    every skill with itself (none resolved) comes out refuted."""
    syn = _synthetic(SCALES["smoke"]["synthetic"])
    old = Claim.decide(
        "old: ActAdd commutes",
        "rel",
        0.0,
        (0.0, 0.0),
        "<",
        1e-10,
        positive=Control.positive("p", 1.0, ">", 0.0),
        negative=Control.negative(
            "ActAdd on the non-commuting Heisenberg fields", syn["actadd_heis"]
        ),
        method="exact",
    )
    assert old.defect
    assert old.verdict == "inconclusive"
    new = Claim.decide(
        "new: resolved share",
        "share",
        0.9,
        (0.8, 1.0),
        ">=",
        0.5,
        positive=Control.positive("skills move the readout", 1e-2, ">", 1e-6),
        negative=Control.negative("every skill with itself", 0.0, (0.0, 0.1)),
        method="cp",
    )
    assert new.negative.verdict == "refuted"
    assert new.verdict == "supported"


def test_spearman_margin_planted():
    row = {"rho": 0.9, "rho_low": 0.8, "rho_high": 0.95}
    exact = {"diff_vs_ref": 0, "diff_low": 0, "diff_high": 0}
    base = {"diff_vs_ref": 0.3, "diff_low": 0.1, "diff_high": 0.5}
    assert spearman_margin([row, exact, base], 0.7)[1:] == pytest.approx((0.1, 0.25))  # inside
    weak = {"diff_vs_ref": 0.1, "diff_low": -0.1, "diff_high": 0.3}
    assert spearman_margin([row, exact, weak], 0.7)[1:] == pytest.approx((-0.1, 0.25))  # across
    assert spearman_margin([row, exact, base], 0.99)[2] < 0  # outside: below the target


def test_largest_abs_median_and_auc_planted():
    rng = np.random.default_rng(0)
    shifted = [rng.normal(1.0, 0.1, 50), rng.normal(0.0, 0.1, 50)]
    ci = largest_abs_median(shifted)
    assert 0.9 < ci.low <= ci.high < 1.1  # the shifted group dominates, wholly above 0.1
    null = largest_abs_median([rng.normal(0.0, 0.1, 50)])
    assert null.low == 0.0
    assert null.high < 0.1
    hi = auc_interval(np.arange(10.0) + 100, np.arange(10.0))
    assert hi.estimate == 1.0
    assert hi.low == 1.0
    same = auc_interval(rng.normal(size=30), rng.normal(size=30))
    assert same.low < 0.5 < same.high
