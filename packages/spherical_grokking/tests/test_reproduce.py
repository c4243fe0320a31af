import pytest

from paper_common import Report
from spherical_grokking.reproduce import SCALES, _timing_claims, reproduce


def test_smoke_reproduce_writes_a_complete_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    assert len(report.claims) == 5
    assert Report.from_json(tmp_path / "r").package == "spherical_grokking"
    for fig in ("accuracy_curves", "grokking_times", "norms", "fourier_spectrum"):
        assert (tmp_path / "r" / f"{fig}.png").exists()
    cfg = SCALES["smoke"]
    runs = report.tables["runs"]
    arms = {(r["task"], r["arm"]) for r in runs}
    assert {("add_mod_13", a) for a in cfg.add_arms} <= arms
    assert ("perm_S3", "sphere") in arms
    for r in runs:
        # the head each arm used is recorded; the sphere always reads out through the cosine head
        assert r["head"] == ("cosine" if r["variant"].startswith("sphere") else "linear")
        budget = cfg.perm_steps if r["task"].startswith("perm") else cfg.steps
        if r["t_test95_censored"]:
            assert r["t_test95"] == budget  # censored at the budget, never zero
    assert {r["seed"] for r in runs} == {0, 1}
    assert {r["arm"] for r in report.tables["baselines"]} >= {"layernorm", "layernorm + grokfast"}
    assert {r["trained"] for r in report.tables["cosets"]} == {True, False}
    fourier = report.tables["fourier"]
    assert fourier
    assert all(0 <= r["fve_key"] <= 1 for r in fourier)


def test_bad_arguments():
    with pytest.raises(ValueError, match="scale"):
        reproduce("medium")
    with pytest.raises(ValueError, match="seed"):
        reproduce("smoke", seed=-1)


def _row(task, arm, seed, tr, te, budget=120):
    """One run's row: train reaches 0.99 at ``tr`` and test 0.95 at ``te`` (None: never)."""
    return {
        "task": task, "arm": arm, "seed": seed,
        "t_train99": budget if tr is None else tr, "t_train99_censored": tr is None,
        "t_test95": budget if te is None else te, "t_test95_censored": te is None,
    }  # fmt: skip


def test_timing_claims_handle_zero_and_censored_delays():
    """Planted: LayerNorm memorises on the last step and never generalises (its recorded delay is
    120 - 120 = 0, which the old code divided by); the sphere's delay is a true 0."""
    cfg = SCALES["smoke"]  # p = 13, budget 120, evaluated every 20 steps
    add, mul = f"add_mod_{cfg.p}", f"mul_mod_{cfg.p}"
    rows = [
        *(_row(add, "layernorm", s, 120, None) for s in (0, 1)),
        *(_row(add, "sphere", s, 40, 40) for s in (0, 1)),
        *(_row(add, "layernorm+uniform", s, 60, 100) for s in (0, 1)),
        *(_row(add, "sphere+uniform", s, 40, 20) for s in (0, 1)),  # test leads: delay -20
        *(_row(mul, "layernorm", s, None, None) for s in (0, 1)),  # neither memorised nor grokked
        *(_row(mul, "sphere", s, 60, 60) for s in (0, 1)),
    ]
    grok, delay, uniform, grok_mul = _timing_claims(rows, cfg)
    # LayerNorm's time is >= 120 against the sphere's 40: at least 3x, whatever the censored runs do
    assert grok.point_check
    assert grok.value == pytest.approx(3.0)
    # LayerNorm's delay is >= 0, raised to one eval interval (20), over the sphere's 0 (also 20):
    # the ratio is [1, inf), undecided, so not supported; its low end is shown
    assert not delay.point_check
    assert delay.value == pytest.approx(1.0)
    assert "undecided" in delay.note
    # uniform: 40 / [20, inf) = (0, 2], straddles 1: not supported, shown at its high end
    assert not uniform.point_check
    assert uniform.value == pytest.approx(2.0)
    # a * b: [120, inf) / 60 = [2, inf), straddles 3
    assert not grok_mul.point_check
    assert grok_mul.value == pytest.approx(2.0)


def test_timing_claims_need_every_arm_measured():
    cfg = SCALES["smoke"]
    claims = _timing_claims([_row(f"add_mod_{cfg.p}", "sphere", 0, 40, 40)], cfg)
    assert not any(c.point_check for c in claims)
    assert all(c.value is None and "undefined" in c.note for c in claims)
