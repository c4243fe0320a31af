import math

import numpy as np
import pytest

from paper_common import Report
from paper_common.device import pinned_threads
from vepo import reproduce as rep
from vepo.reproduce import BLIND, _blind_bonus_claim, _pass1_claim, reproduce
from vepo.rl import METHODS


def test_smoke_reproduce_writes_a_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    assert len(report.claims) == 4
    for c in report.claims:  # measured, or explicitly not measured (never a silent NaN)
        if c.value is None or math.isnan(c.value):
            assert not c.point_check
            assert c.note.startswith("not measured")
    assert Report.from_json(tmp_path / "r").package == "vepo"
    for fig in ("curves", "pass_at_k"):
        assert (tmp_path / "r" / f"{fig}.png").exists()
    runs = report.tables["runs"]
    assert {r["method"] for r in runs} == set(METHODS)
    assert all(0 <= r["pass@1"] <= 1 for r in runs)


def test_bad_scale():
    with pytest.raises(ValueError, match="scale"):
        reproduce("medium")


def _means(seq: dict[str, float], share: float = 0.8, eff_gain: float = 0.1) -> dict:
    """Seed means of the entropy keys: sequence entropy per method, one invalid share for all."""
    mean = {}
    for m, h in seq.items():
        mean[(m, "sequence_entropy")] = h
        mean[(m, "invalid_entropy_share")] = share
        mean[(m, "effective_entropy")] = h * (1 - share)
    mean[("VEPO", "effective_entropy")] = mean[("GRPO", "effective_entropy")] + eff_gain
    return mean


SE = dict.fromkeys(METHODS, 0.05)  # noise floor of a rise: 2 * hypot(0.05, 0.05) = 0.14 nats


def test_blind_bonus_claim_needs_both_bonuses_to_raise_entropy():
    both = _means({"GRPO": 3.0, BLIND[0]: 5.0, BLIND[1]: 4.0, "VEPO": 3.0})
    claim = _blind_bonus_claim(both, SE)
    assert claim.value == pytest.approx(0.8)  # (5 * 0.8 - 3 * 0.8) / 2 = (4 - 3) * 0.8 / 1
    assert claim.point_check
    # planted: the sequence bonus lowered entropy (the smoke run's case). Before, its share was
    # dropped as NaN and the verdict rested on the token bonus alone
    lowered = _means({"GRPO": 3.0, BLIND[0]: 5.0, BLIND[1]: 2.0, "VEPO": 3.0})
    claim = _blind_bonus_claim(lowered, SE)
    assert claim.value is None
    assert not claim.point_check
    assert claim.note.startswith(f"not measured: {BLIND[1]} did not raise")
    # planted: a rise within noise, where inval / rise is an unbounded ratio
    tiny = _means({"GRPO": 3.0, BLIND[0]: 5.0, BLIND[1]: 3.001, "VEPO": 3.0})
    assert _blind_bonus_claim(tiny, SE).value is None
    undefined = dict(both)
    undefined[(BLIND[0], "invalid_entropy_share")] = math.nan
    assert _blind_bonus_claim(undefined, SE).value is None


def test_pass1_claim_with_nothing_solved_is_not_measured():
    zeros = np.zeros(3)
    claim = _pass1_claim(zeros, zeros)  # 0 vs 0: was supported, on no evidence
    assert claim.value is None
    assert not claim.point_check
    assert claim.note.startswith("not measured: pass@1 is 0")
    assert _pass1_claim(np.array([0.2]), np.array([0.1])).value is None  # one seed: no interval
    claim = _pass1_claim(np.array([0.2, 0.3, 0.25]), np.array([0.1, 0.3, 0.2]))
    assert claim.value == pytest.approx(0.05)
    assert claim.point_check


def test_job_pins_torch_and_blas_to_one_thread(monkeypatch):
    """A spawned worker inherits no thread limit: the job pins torch and BLAS itself."""
    import torch
    from threadpoolctl import threadpool_info

    def threads(args):
        blas = {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}
        return torch.get_num_threads(), blas

    monkeypatch.setattr(rep, "_run", threads)
    with pinned_threads(2, torch=True):
        torch_threads, blas = rep._job(())
        assert torch.get_num_threads() == 2  # restored
    assert torch_threads == 1
    assert blas <= {1}
