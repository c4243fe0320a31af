import numpy as np
import pytest

from paper_common import Report
from screening import (
    beta_population,
    calibrated_scores,
    demining_population,
    margin_uncertainty,
    pmt_population,
)
from screening.reproduce import reproduce


def test_pmt_sigma_controls_aleatoric_uncertainty():
    low, high = pmt_population(3000, 0.1, seed=0), pmt_population(3000, 1.5, seed=0)
    assert abs(low.y.mean() - 0.3) < 0.03
    assert abs(high.p.mean() - 0.3) < 0.01
    k = 600
    assert margin_uncertainty(high.p, k) > margin_uncertainty(low.p, k)
    assert np.mean(low.p * (1 - low.p)) < np.mean(high.p * (1 - high.p))


def test_beta_population_keeps_its_mean():
    for c in (0.5, 20):
        pop = beta_population(20_000, 0.3, c, seed=1)
        assert pop.p.mean() == pytest.approx(0.3, abs=0.01)


def test_calibrated_scores_are_calibrated_on_held_out_units():
    pop = demining_population(40, seed=2)
    idx = np.random.default_rng(0).permutation(pop.p.size)
    tr, te = idx[:800], idx[800:]
    s = calibrated_scores(pop.X[tr], pop.y[tr], pop.X[te])
    assert s.shape == (te.size,)
    assert abs(s.mean() - pop.p[te].mean()) < 0.05
    assert np.corrcoef(s, pop.p[te])[0, 1] > 0.5


def test_smoke_reproduce(tmp_path):
    report = reproduce("smoke", out_dir=tmp_path / "r")
    assert len(report.claims) == 5
    for c in report.claims:  # a verdict on an interval, with both controls
        assert c.verdict in ("supported", "refuted", "inconclusive")
        assert c.missing_parts() == [], c.statement
        assert c.interval
        assert c.positive is not None
        assert c.negative is not None
    # the planner against brute force, and the optimum against the baselines: checks of our code
    assert [c.kind for c in report.claims] == ["paper", "check", "check", "paper", "paper"]
    assert Report.from_json(tmp_path / "r").package == "screening"
    assert (tmp_path / "r" / "gain_vs_uncertainty.png").exists()
    with pytest.raises(ValueError, match="scale"):
        reproduce("huge")
