import math

import numpy as np
import pytest

from paper_common import Control, Report
from paper_common.device import pinned_threads
from vepo.reproduce import SCALES, reproduce
from vepo.reproduce import run as rep
from vepo.reproduce.claims import (
    BLIND,
    PASS1_MARGIN,
    _blind_bonus_claim,
    _pass1_claim,
    seed_interval,
)
from vepo.rl import METHODS


def test_smoke_reproduce_writes_a_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    assert len(report.claims) == 5
    for c in report.claims:  # measured, or explicitly not measured (never a silent NaN)
        assert c.verdict in ("supported", "refuted", "inconclusive")
        assert c.missing_parts() == []
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


def test_full_scale_names_a_real_model_and_says_what_it_needs(tmp_path):
    assert SCALES["full"].model == "Qwen/Qwen2.5-1.5B-Instruct"
    with pytest.raises(RuntimeError, match="needs a GPU"):
        reproduce("full", out_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


def _runs(seq: dict[str, list[float]], share: dict[str, float] | None = None) -> list[dict]:
    """Runs of every method over len(values) seeds: per-seed sequence entropy, a fixed invalid
    share per method (default 0.8), a rising training reward."""
    share = share or {}
    hist = [{"reward": x} for x in np.linspace(0.0, 1.0, 20)]
    return [
        {"method": m, "seed": s, "sequence_entropy": h, "invalid_entropy_share": share.get(m, 0.8),
         "history": hist}
        for m, hs in seq.items() for s, h in enumerate(hs)
    ]  # fmt: skip


SEEDS = [0, 1, 2]


def test_blind_bonus_claim_decided_on_seeds_not_seed_means():
    """Issue 43: the old claim decided on seed means against a Monte Carlo noise floor, so one
    seed could carry it. Planted: the sequence bonus's rise is large on one seed and negative on
    two; its seed mean is positive and its share 0.8 (> 0.5: the old point check passed), but over
    seeds the rise is not established: inconclusive."""
    grpo = [3.0, 3.0, 3.0]
    clear = _runs({"GRPO": grpo, BLIND[0]: [5.0, 5.1, 4.9], BLIND[1]: [4.0, 4.1, 3.9],
                   "VEPO": [3.0, 3.1, 2.9]}, {"VEPO": 0.3})  # fmt: skip
    claim = _blind_bonus_claim(clear, SEEDS)
    assert claim.low > 0
    assert claim.positive.passed
    assert claim.negative.missing  # no null yet: VEPO is none (see below)
    assert claim.verdict == "inconclusive"
    one_seed = _runs({"GRPO": grpo, BLIND[0]: [5.0, 5.1, 4.9], BLIND[1]: [6.0, 2.9, 2.8],
                      "VEPO": [3.0, 3.1, 2.9]}, {"VEPO": 0.3})  # fmt: skip
    claim = _blind_bonus_claim(one_seed, SEEDS)
    assert claim.verdict == "inconclusive"
    assert not claim.positive.passed
    # the testbed's case: VEPO's rise is as invalid as the blind ones'. Before, VEPO in a blind
    # bonus's place was the negative control and came out supported (a DEFECT flag), although
    # VEPO is a place where the claim must fail only if VEPO works
    blind_vepo = _runs({"GRPO": grpo, BLIND[0]: [5.0, 5.1, 4.9], BLIND[1]: [4.0, 4.1, 3.9],
                        "VEPO": [4.0, 4.1, 3.9]})  # fmt: skip
    claim = _blind_bonus_claim(blind_vepo, SEEDS)
    assert not claim.defect
    assert claim.verdict == "inconclusive"


def test_blind_bonus_claim_needs_valid_trajectories():
    """Planted: every trajectory invalid (share 1). The whole rise is then invalid, so the rule
    (invalid part - 0.5 x rise > 0) passes whenever entropy rises: it cannot fail. Before, with
    VEPO's rise mostly valid, this came out supported; now the positive control fails."""
    grpo = [3.0, 3.0, 3.0]
    runs = _runs({"GRPO": grpo, BLIND[0]: [5.0, 5.1, 4.9], BLIND[1]: [4.0, 4.1, 3.9],
                  "VEPO": [3.0, 3.1, 2.9]},
                 {"GRPO": 1.0, BLIND[0]: 1.0, BLIND[1]: 1.0, "VEPO": 0.3})  # fmt: skip
    claim = _blind_bonus_claim(runs, SEEDS)
    assert claim.low > 0  # the rule alone passes
    assert not claim.positive.passed
    assert "valid trajectories" in claim.positive.description
    assert claim.verdict == "inconclusive"


def test_pass1_claim_decided_on_the_interval_with_a_margin():
    learns = Control.positive("planted", 1.0, ">", 0.0)
    zeros = np.zeros(3)
    claim = _pass1_claim(zeros, zeros, learns)  # 0 vs 0: was supported, on no evidence
    assert claim.value is None
    assert claim.verdict == "inconclusive"
    assert claim.note.startswith("not measured: pass@1 is 0")
    assert _pass1_claim(np.array([0.2]), np.array([0.1]), learns).value is None  # one seed
    # issue 43: a wide interval of a clearly worse arm passed the old rule (CI upper end >= 0)
    b = np.array([0.3, 0.3, 0.3])
    worse = _pass1_claim(b - np.array([0.2, 0.01, 0.15]), b, learns)
    assert worse.high >= 0  # the old rule passed
    assert worse.verdict == "inconclusive"
    same = _pass1_claim(b + np.array([0.0, 0.005, -0.005]), b, learns)
    assert same.low < 0 < same.high
    assert same.negative.missing
    assert same.verdict == "inconclusive"
    # issue 43: a draft margin of -0.02 (set after seeing quick values) passed a VEPO that is
    # worse than GRPO on every seed; the paper's 'not worse' is a threshold of 0
    assert PASS1_MARGIN == 0.0
    slightly_worse = _pass1_claim(b - np.array([0.010, 0.011, 0.009]), b, learns)
    assert slightly_worse.low >= -0.02
    assert slightly_worse.high < 0
    assert slightly_worse.verdict == "refuted"
    far = _pass1_claim(b - 0.2, b, learns)
    assert far.verdict == "refuted"


def test_seed_interval_planted():
    assert seed_interval(np.array([0.1, 0.1, 0.1])).low == pytest.approx(0.1)
    ci = seed_interval(np.array([-0.1, 0.0, 0.1]))
    assert ci.low < 0 < ci.high
    assert math.isnan(seed_interval(np.array([0.1])).low)
    assert math.isnan(seed_interval(np.array([0.1, 0.2])).low)  # 2 seeds: 1 df, no interval
    assert math.isnan(seed_interval(np.array([0.1, 0.2, math.nan])).low)


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
