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
from vepo.rl import METHODS, NULL_ARMS


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
    assert {r["method"] for r in runs} == set(METHODS) | set(NULL_ARMS)
    assert all(0 <= r["pass@1"] <= 1 for r in runs)


def test_bad_scale():
    with pytest.raises(ValueError, match="scale"):
        reproduce("medium")


def test_full_scale_names_a_real_model_and_says_it_is_not_implemented(tmp_path):
    """Review of issue 44: 'needs a GPU' suggested a GPU would run it; no code loads a hub model."""
    assert SCALES["full"].model == "Qwen/Qwen2.5-1.5B-Instruct"
    with pytest.raises(NotImplementedError, match="not implemented"):
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


NORM = "VEPO (normalised H)"


def test_blind_bonus_claim_decided_on_seeds_not_seed_means():
    """Issue 43: the old claim decided on seed means against a Monte Carlo noise floor, so one
    seed could carry it. Planted: the sequence bonus's rise is large on one seed and negative on
    two; its seed mean is positive and its share 0.8 (> 0.5: the old point check passed), but over
    seeds the rise is not established: inconclusive."""
    grpo = [3.0, 3.0, 3.0]
    clear = _runs({"GRPO": grpo, BLIND[0]: [5.0, 5.1, 4.9], BLIND[1]: [4.0, 4.1, 3.9],
                   "VEPO": [3.0, 3.1, 2.9], NORM: [4.0, 4.1, 3.9]},
                  {"VEPO": 0.3, NORM: 0.3})  # fmt: skip
    claim = _blind_bonus_claim(clear, SEEDS)
    assert claim.low > 0
    assert claim.positive.passed
    assert claim.negative.verdict == "refuted"  # the null's rise is mostly valid
    assert claim.verdict == "supported"
    one_seed = _runs({"GRPO": grpo, BLIND[0]: [5.0, 5.1, 4.9], BLIND[1]: [6.0, 2.9, 2.8],
                      "VEPO": [3.0, 3.1, 2.9], NORM: [4.0, 4.1, 3.9]},
                     {"VEPO": 0.3, NORM: 0.3})  # fmt: skip
    claim = _blind_bonus_claim(one_seed, SEEDS)
    assert claim.verdict == "inconclusive"
    assert not claim.positive.passed


def test_blind_bonus_claim_negative_control_has_teeth():
    """Review of issue 44: the negative control was absent, so the claim could never be supported.
    Now it is the same rule with normalised VEPO (which moves mass among valid samples only) in a
    blind bonus's place; where that null's rise is as invalid as the blind bonuses' the rule cannot
    tell them apart: not supported (DEFECT flag)."""
    grpo = [3.0, 3.0, 3.0]
    runs = _runs({"GRPO": grpo, BLIND[0]: [5.0, 5.1, 4.9], BLIND[1]: [4.0, 4.1, 3.9],
                  "VEPO": [4.0, 4.1, 3.9], NORM: [4.0, 4.1, 3.9]})  # fmt: skip
    claim = _blind_bonus_claim(runs, SEEDS)
    assert claim.low > 0
    assert claim.negative.verdict == "supported"
    assert claim.defect
    assert claim.verdict == "inconclusive"


def test_blind_bonus_claim_needs_valid_trajectories():
    """Planted: every trajectory invalid (share 1). The whole rise is then invalid, so the rule
    (invalid part - 0.5 x rise > 0) passes whenever entropy rises: it cannot fail. Before, with
    VEPO's rise mostly valid, this came out supported; now the positive control fails."""
    grpo = [3.0, 3.0, 3.0]
    runs = _runs({"GRPO": grpo, BLIND[0]: [5.0, 5.1, 4.9], BLIND[1]: [4.0, 4.1, 3.9],
                  "VEPO": [3.0, 3.1, 2.9], NORM: [4.0, 4.1, 3.9]},
                 {"GRPO": 1.0, BLIND[0]: 1.0, BLIND[1]: 1.0, "VEPO": 0.3, NORM: 0.3})  # fmt: skip
    claim = _blind_bonus_claim(runs, SEEDS)
    assert claim.low > 0  # the rule alone passes
    assert not claim.positive.passed
    assert "valid trajectories" in claim.positive.description
    assert claim.verdict == "inconclusive"


WARM = np.array([0.1, 0.1, 0.1])


def test_pass1_claim_decided_on_the_interval_with_a_margin():
    learns = Control.positive("planted", 1.0, ">", 0.0)
    zeros = np.zeros(3)
    claim = _pass1_claim(zeros, zeros, learns, zeros)  # 0 vs 0: was supported, on no evidence
    assert claim.value is None
    assert claim.verdict == "inconclusive"
    assert claim.note.startswith("not measured: pass@1 is 0")
    assert (
        _pass1_claim(np.array([0.2]), np.array([0.1]), learns, np.array([0.0])).value is None
    )  # one seed
    # issue 43: a wide interval of a clearly worse arm passed the old rule (CI upper end >= 0)
    b = np.array([0.3, 0.3, 0.3])
    worse = _pass1_claim(b - np.array([0.2, 0.01, 0.15]), b, learns, WARM)
    assert worse.high >= 0  # the old rule passed
    assert worse.verdict == "inconclusive"
    same = _pass1_claim(b + np.array([0.0, 0.005, -0.005]), b, learns, WARM)
    assert same.low < 0 < same.high
    assert same.negative.verdict == "refuted"  # the warm-up is worse than GRPO
    assert same.verdict == "inconclusive"
    # issue 43: a draft margin of -0.02 (set after seeing quick values) passed a VEPO that is
    # worse than GRPO on every seed; the paper's 'not worse' is a threshold of 0
    assert PASS1_MARGIN == 0.0
    slightly_worse = _pass1_claim(b - np.array([0.010, 0.011, 0.009]), b, learns, WARM)
    assert slightly_worse.low >= -0.02
    assert slightly_worse.high < 0
    assert slightly_worse.verdict == "refuted"
    far = _pass1_claim(b - 0.2, b, learns, WARM)
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


def _planted(vepo: float, null: float, grpo_p1: float = 0.3) -> list[dict]:
    """Every arm over 3 seeds: baselines at 0.3 (pass@k) / 2 (distinct) / 1 (effective entropy),
    VEPO at ``vepo`` above them, the null arm at ``null`` above them (a little seed noise)."""
    noise = np.array([0.0, 0.01, -0.01])
    up = {"VEPO": vepo, "VEPO, sign flipped (null)": null}
    runs = []
    for m in [*METHODS, *NULL_ARMS]:
        for i, s in enumerate(SEEDS):
            d = up.get(m, 0.0) + noise[i] * (m in up)
            runs.append({"method": m, "seed": s, "pass@1": grpo_p1 + d, "pass@8": 0.5 + d,
                         "pass@16": 0.6 + d, "distinct_valid": 2.0 + d, "effective_entropy": 1.0 + d,
                         "sequence_entropy": 3.0, "invalid_entropy_share": 0.5, "history": []})  # fmt: skip
    return runs


def test_every_claim_has_a_real_negative_control_that_decides():
    """Review of issue 44: every negative control was ``Control.absent``, so no claim could ever be
    supported. Planted: VEPO 0.1 above every baseline. With the null arm (VEPO's term sign-flipped)
    below them, claims 1, 2 and 4 are supported; with the null as good as VEPO, the rule cannot
    fail there: inconclusive with the DEFECT flag."""
    from vepo.reproduce.claims import decide_claims
    from vepo.reproduce.run import Results

    base = {"pass@1": 0.1}
    good = decide_claims(Results(_planted(0.1, -0.1), base, SEEDS, (1, 8, 16)))
    assert all(not c.negative.missing for c in good)
    assert [c.verdict for c in good][:2] == ["supported", "supported"]
    assert good[3].verdict == "supported"
    assert all(c.positive.passed for c in (good[0], good[1], good[3], good[4]))
    bad = decide_claims(Results(_planted(0.1, 0.1), base, SEEDS, (1, 8, 16)))
    for i in (0, 1, 3):
        assert bad[i].defect
        assert bad[i].verdict == "inconclusive"


def test_rl_learns_is_grpo_eval_pass1_against_the_warm_up():
    """Review of issue 44: the positive control compared training reward over 2 logged generations
    (-0.026 [-0.24, 0.19] at quick: noise). Now GRPO's eval pass@1 minus the warm-up model's, over
    seeds: planted GRPO 0.3 vs warm-up 0.1 passes; warm-up 0.3 (no gain) does not."""
    from vepo.reproduce.claims import _rl_learns

    runs = _planted(0.1, -0.1)
    learns = _rl_learns(runs, {"pass@1": 0.1}, SEEDS)
    assert learns.passed
    assert "warm-up" in learns.description
    assert learns.value == pytest.approx(0.2)
    noisy = [dict(r) for r in runs]
    for r, d in zip([r for r in noisy if r["method"] == "GRPO"], [0.1, -0.1, 0.0], strict=True):
        r["pass@1"] += d
    assert not _rl_learns(noisy, {"pass@1": 0.3}, SEEDS).passed
