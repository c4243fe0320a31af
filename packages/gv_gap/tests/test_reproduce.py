"""The smoke reproduction writes a complete, honest report."""

import json
from types import SimpleNamespace

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
        assert c.point_check is False or (c.value is not None and c.value == c.value)
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
    from gv_gap.reproduce import _before, _first_claim

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
    claim = _first_claim({"c": None}, [None, True], "detail")
    assert claim.value is None
    assert not claim.point_check
    assert claim.note.startswith("not measured")
    assert _first_claim({"c": True}, [True, True], "detail").point_check


def test_continual_claims_not_measured_when_clamped_or_undefined():
    from gv_gap.reproduce import _continual_claim

    base = {
        "config": "c", "phase": "continual+6", "seeds": 3, "clamped": 0, "retention_gap": 0.2,
        "ci_low": 0.1, "ci_high": 0.3, "dropped": 0.0, "gen_start": 0.9, "gen_end": 0.5,
        "ver_start": 0.8, "ver_end": 0.8, "ll_start": 1.0, "ll_end": 0.9,
        "ll_retention_gap": 0.3, "ll_ci_low": 0.2, "ll_ci_high": 0.4,
    }  # fmt: skip
    assert _continual_claim(base).point_check
    clamped = _continual_claim({**base, "seeds": 0, "clamped": 3})
    assert clamped.value is None
    assert "past the acquisition budget" in clamped.note
    some = _continual_claim({**base, "seeds": 2, "clamped": 1})
    assert some.note.startswith("1 seed(s) left out")
    undefined = _continual_claim({**base, "retention_gap": float("nan"), "ver_start": 0.0})
    assert undefined.value is None
    assert undefined.note.startswith("not measured: verification starts at 0")


def test_song_means_count_the_seeds_they_average():
    from gv_gap.reproduce import _song_means

    song = [{"relative_gap": 0.1, "gap": 0.01}, {"relative_gap": float("nan"), "gap": 0.0}]
    out = _song_means(song)
    assert out["relative_gap"] == pytest.approx(0.1)  # nanmean, but now said
    assert out["seeds_relative_gap"] == 1
    assert out["seeds_gap"] == 2
