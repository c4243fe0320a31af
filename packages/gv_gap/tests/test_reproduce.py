"""The smoke reproduction writes a complete, honest report."""

import json
from types import SimpleNamespace

import numpy as np
import pytest

from gv_gap.reproduce import SCALES, reproduce
from paper_common import Report


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return reproduce("smoke", seed=0, out_dir=out), out


def test_smoke_report_has_every_claim_table_and_figure(report):
    rep, out = report
    statements = " ".join(c.statement for c in rep.claims)
    for word in ("before its generation", "verified-not-generated", "matched generation",
                 "continual learning", "both the old and the new"):  # fmt: skip
        assert word in statements
    assert len(rep.claims) == 3 + 2 + 2  # two continual offsets, two update variants at smoke
    for c in rep.claims:
        assert c.verdict in ("supported", "refuted", "inconclusive")
        assert c.missing_parts() == [], c.statement
        # the format is not learned at smoke: every claim is inconclusive on that control, none
        # is refuted by a testbed that cannot show the effect
        assert c.verdict == "inconclusive", c.statement
        assert not c.positive.passed, c.statement
        # every claim rests on the format being learned: its positive control is that number
        assert c.positive is not None
        assert "format learned" in c.positive.description
    for name in ("learning_epochs", "discordance", "continual", "updating", "curves", "song_gap"):
        assert rep.tables[name], name
    assert sorted(rep.figures) == [
        "acquisition.png",
        "continual.png",
        "two_by_two.png",
        "updating.png",
    ]
    for f in rep.figures:
        assert (out / f).stat().st_size > 5_000
    loaded = Report.from_json(out / "report.json")
    assert [c.statement for c in loaded.claims] == [c.statement for c in rep.claims]
    assert json.loads((out / "report.json").read_text())["scale"] == "smoke"


def test_quick_and_full_keep_the_issue_settings():
    quick = SCALES["quick"]
    assert len(quick["seeds"]) >= 3
    (cfg,) = quick["configs"].values()
    assert (cfg.arch, cfg.d_model, cfg.n_layers, cfg.continual_offsets) == ("llama", 64, 2, (0, 6))
    full = SCALES["full"]["configs"]
    assert {(c.arch, c.d_model, c.n_layers) for c in full.values()} == {
        (a, d, n) for a in ("gpt2", "llama") for d, n in ((64, 2), (128, 4))
    }
    assert all(c.continual_offsets == (0, 3, 6, 12) for c in full.values())


def test_job_runs_with_one_thread_whatever_the_workers(monkeypatch):
    import torch

    import gv_gap.reproduce as gr
    from paper_common.device import pinned_threads

    seen = []

    def fake(config, seed, progress):
        seen.append(torch.get_num_threads())
        return SimpleNamespace(checkpoints={})

    monkeypatch.setattr(gr, "run_gv", fake)
    (cfg,) = SCALES["smoke"]["configs"].values()
    with pinned_threads(2, torch=True):
        gr._job(("x", cfg, 0, 1))
        assert torch.get_num_threads() == 2
    assert seen == [1]


def test_censored_times_are_lower_bounds_in_the_order_claims():
    from gv_gap.curves import LearningTime
    from gv_gap.reproduce import _before

    exact, rising, never = (
        LearningTime(5.0),
        LearningTime(9.0, "still rising"),
        LearningTime(25.0, "no rise"),
    )
    assert _before(exact, rising) is True  # 5 < every time >= 9
    assert _before(LearningTime(10.0), rising) is None  # t_G >= 9 may be below or above 10
    assert _before(rising, exact) is False  # t_V >= 9 cannot be before 5
    assert _before(never, exact) is False  # censored t_V is not "before"
    assert _before(rising, never) is None  # both censored: undecided
    assert _before(never, never) is None


def _result(n: int, learned: bool):
    """A planted format result: ``n`` facts, 2 controls; ``learned``: answer accepted and controls
    rejected in both polarities; else the model says True to everything (balanced accuracy 0.5)."""
    from gv_gap.measure import GVResult

    margin = np.ones((n, 3, 2))
    if learned:
        margin[:, 0, 1] = -1.0
        margin[:, 1:, 0] = -1.0
    return GVResult([str(i) for i in range(n)], 2, [""] * n, np.ones(n, bool), margin)


def _runs(learned: bool):
    return {"c": [SimpleNamespace(format_result=_result(20, learned)) for _ in range(3)]}


def test_format_control_reads_balanced_accuracy_on_format_facts():
    from gv_gap.reproduce import _format_control, _item_balanced

    assert _item_balanced(_result(4, False)).tolist() == [0.5] * 4
    assert _result(4, False).summary()["balanced_acc"] == 0.5
    assert _format_control(_runs(True)).passed
    failed = _format_control(_runs(False))
    assert not failed.passed
    assert failed.value == 0.5
    # one config that did not learn the format fails the control for all
    mixed = _format_control({**_runs(True), "d": _runs(False)["c"]})
    assert not mixed.passed
    assert _format_control({"c": [SimpleNamespace(format_result=None)]}).missing


BASE = {
    "config": "c", "phase": "continual+6", "seeds": 3, "clamped": 0, "retention_gap": 0.2,
    "ci_low": 0.15, "ci_high": 0.3, "dropped": 0.0, "gen_start": 0.9, "gen_end": 0.5,
    "ver_start": 0.8, "ver_end": 0.8, "conjunction_start": 0.6, "conjunction_end": 0.5,
    "ll_start": 1.0, "ll_end": 0.9,
    "ll_retention_gap": 0.3, "ll_ci_low": 0.2, "ll_ci_high": 0.4,
}  # fmt: skip


def test_unlearned_format_makes_claims_inconclusive_not_refuted():
    """Issue 43: with balanced accuracy 0.5 on trained format facts the old claims read "no";
    now a miss is inconclusive, with the format's number, and refuted only once it is learned."""
    from gv_gap.reproduce import _continual_claim, _format_control

    miss = {**BASE, "retention_gap": -0.05, "ci_low": -0.1, "ci_high": 0.0}
    bad, good = _format_control(_runs(False)), _format_control(_runs(True))
    claim = _continual_claim(miss, bad)
    assert claim.point_check is False  # what the old two-valued claim reported as "no"
    assert claim.verdict == "inconclusive"
    assert "positive control did not pass" in claim.reason
    assert "0.5" in claim.reason
    assert _continual_claim(miss, good).verdict == "refuted"
    assert _continual_claim(BASE, good).verdict == "supported"
    assert _continual_claim({**BASE, "ci_low": 0.05}, good).verdict == "inconclusive"


def test_continual_claims_not_measured_when_clamped_or_undefined():
    from gv_gap.reproduce import _continual_claim, _format_control

    good = _format_control(_runs(True))
    clamped = _continual_claim({**BASE, "seeds": 0, "clamped": 3}, good)
    assert clamped.value is None
    assert clamped.verdict == "inconclusive"
    assert "past the acquisition budget" in clamped.note
    assert clamped.missing_parts() == []
    some = _continual_claim({**BASE, "seeds": 2, "clamped": 1}, good)
    assert some.note.startswith("1 seed(s) left out")
    undefined = _continual_claim({**BASE, "retention_gap": float("nan"), "ver_start": 0.5}, good)
    assert undefined.value is None
    assert undefined.verdict == "inconclusive"
    assert undefined.note.startswith("not measured: verification starts at chance")


def test_lead_claim_on_planted_times():
    from gv_gap.curves import LearningTime as T
    from gv_gap.reproduce import _format_control, _lead, _lead_claim

    good = _format_control(_runs(True))

    def claim(v, g):
        return _lead_claim("s", "m", [T(x) for x in v], [[T(x) for x in g]], good, "")

    assert claim([2, 3, 2], [8, 9, 8]).verdict == "supported"  # leads by ~6 epochs
    assert claim([5, 6, 7], [5, 6, 7]).verdict == "refuted"  # a null: no lead of >= 1 epoch
    assert claim([2, 3, 9], [8, 9, 3]).verdict == "inconclusive"  # across
    assert claim([8, 9, 8], [2, 3, 2]).verdict == "refuted"  # generation first
    one = claim([2], [8])
    assert one.verdict == "inconclusive"
    assert one.missing_parts() == []
    # a censored generation time is a lower bound: the lead's high end is infinite
    value, (low, high) = _lead([T(2.0), T(3.0), T(2.0)], [[T(9.0, "no rise"), T(8.0), T(8.0)]])
    assert value is None
    assert high == np.inf
    assert low > 1
    # a censored verification time: the low end is -inf, never supported
    _, (low, _) = _lead([T(9.0, "no rise"), T(3.0)], [[T(10.0), T(8.0)]])
    assert low == -np.inf


def test_share_claim_on_planted_counts():
    from gv_gap.reproduce import _format_control, _share_claim
    from paper_common import Control

    good = _format_control(_runs(True))

    def claim(k, n, k0=0):
        neg = Control.negative("before", k0 / max(n, 1), (0.0, 0.05))
        return _share_claim("s", "m", k, n, 0.2, good, neg, "cp", "")

    assert claim(40, 100).verdict == "supported"
    assert claim(2, 100).verdict == "refuted"
    assert claim(3, 12).verdict == "inconclusive"
    empty = claim(0, 0)
    assert empty.verdict == "inconclusive"
    assert empty.missing_parts() == []


def test_song_means_count_the_seeds_they_average():
    from gv_gap.reproduce import _song_means

    song = [{"relative_gap": 0.1, "gap": 0.01}, {"relative_gap": float("nan"), "gap": 0.0}]
    out = _song_means(song)
    assert out["relative_gap"] == pytest.approx(0.1)  # nanmean, but now said
    assert out["seeds_relative_gap"] == 1
    assert out["seeds_gap"] == 2


def _planted_run(seed: int, n: int = 12, epochs: int = 16, t_ver: int = 2, t_gen: int = 8):
    """A planted acquisition: from ``t_ver`` on the model accepts the answer and rejects the first
    control in both polarities, and rejects the second only in the "correct?" polarity (5 of its 6
    prompts right: balanced accuracy 0.875, the six-way conjunction never); generation, rank and
    MC from ``t_gen`` on. Before, it says True to
    everything (balanced accuracy 0.5)."""
    from gv_gap.measure import GVResult

    rows, results = [], []
    for e in range(epochs + 1):
        margin = np.ones((n, 3, 2))
        if e >= t_ver:
            margin[:, 0, 1] = -1.0  # the answer accepted in both polarities
            margin[:, 1, 0] = -1.0  # control 1 rejected in both
            margin[:, 2, 0] = -1.0  # control 2 rejected when asked "correct?" only
            margin[:, 2, 1] = -1.0
        gen = np.full(n, e >= t_gen)
        res = GVResult([str(i) for i in range(n)], 2, [""] * n, gen, margin,
                       first_token_rank=np.where(gen, 1, 50), mc_ok=gen, ll_ok=gen)  # fmt: skip
        rows.append({"epoch": float(e), **res.summary()})
        results.append(res)
    return SimpleNamespace(
        seed=seed,
        curves={"acquisition": rows},
        results={"acquisition": results},
        info={"saturation_epoch": t_gen},
        format_result=_result(20, True),
        curve=lambda phase, m, rows=rows: np.array([r[m] for r in rows]),
    )


def test_the_headline_is_per_prompt_balanced_verification():
    """Issue 46: verification is read per prompt, as factgap reports it (balanced accuracy of
    target and control prompts); the per-fact six-way conjunction stays secondary. On a planted
    run where every prompt but one of six per fact is right from epoch 2 and generation comes at
    epoch 8, verification leads; the conjunction (never reached) made the claim undecidable."""
    from gv_gap.reproduce import _analyse, _claims

    runs = {"c": [_planted_run(s) for s in range(3)]}
    first = runs["c"][0].results["acquisition"][4].summary()
    assert first["balanced_acc"] == pytest.approx((1 + 0.75) / 2)
    assert first["ver_acc"] == 0.0
    analysis = {"c": _analyse("c", runs["c"])}
    report = Report(package="gv_gap", title="t", scale="smoke", seed=0)
    _claims(report, runs, analysis)
    lead = report.claims[0]
    assert "before its generation" in lead.statement
    assert lead.verdict == "supported", lead.reason
    assert "balanced" in lead.metric
    assert lead.value == pytest.approx(6.0, abs=1.0)
    matched = report.claims[2]
    assert "matched generation" in matched.statement
    assert matched.verdict == "supported"
