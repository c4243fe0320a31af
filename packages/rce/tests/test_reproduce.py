"""The smoke-scale experiment end to end: report, claims, figures, determinism."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from paper_common import Report  # noqa: E402
from paper_common.device import pinned_threads  # noqa: E402
from rce.reproduce import SCALES, _seed_job, reproduce  # noqa: E402


@pytest.fixture(scope="module")
def smoke(tmp_path_factory, fact_model):  # fact_model: the same cached fact LM
    out = tmp_path_factory.mktemp("rce_smoke")
    return reproduce("smoke", seed=0, out_dir=out), out


def test_smoke_report_has_claims_tables_and_figures(smoke):
    report, out = smoke
    statements = [c.statement for c in report.claims]
    assert len(statements) == 7  # no HP defence at smoke, so no claim 3
    assert any("Rank leakage" in s for s in statements)
    assert any("down to chance" in s for s in statements)
    for name in ("summary", "asr", "tracing", "timing"):
        assert report.tables[name]
    cells = {row["cell"] for row in report.tables["summary"]}
    assert cells == {"before", "rome/none", "rome/rce", "memit/none", "memit/rce"}
    for row in report.tables["summary"]:
        assert 0.0 <= row["output_asr@10"] <= 1.0
        assert row["n"] == SCALES["smoke"]["n_edits"]
    # before any edit the true answer is the top-1 of every known fact
    before = next(r for r in report.tables["summary"] if r["cell"] == "before")
    assert before["median_true_rank"] == 1
    assert before["output_asr@10"] == 1.0
    assert "restored bit for bit after every edit in 1 of 1 seeds" in report.notes
    for fig in report.figures:
        assert (out / fig).stat().st_size > 5000
    loaded = Report.from_json(out)
    assert [c.statement for c in loaded.claims] == statements


def test_same_seed_same_report(smoke, tmp_path):
    report, _ = smoke
    again = reproduce("smoke", seed=0, out_dir=tmp_path)
    assert json.dumps([c.to_dict() for c in again.claims]) == json.dumps(
        [c.to_dict() for c in report.claims]
    )
    assert again.tables["summary"] == report.tables["summary"]


def test_the_ft_editor_runs_in_the_experiment(fact_model):
    cfg = {**SCALES["smoke"], "editors": ["ft"], "defences": ["none", "rce"]}
    cfg["ft"] = {"steps": 10, "lr": 1e-2, "norm_bound": 5e-2}
    run = _seed_job((cfg, 0))
    assert set(run["results"]) == {"ft/none", "ft/rce"}
    assert run["restored"]
    none = run["results"]["ft/none"]
    # measured (1 thread, torch 2.15): top-1 0.875 after vs 0.0 before; true ranks after the edit
    # [2, 3, 4, 7, 7, 20, 37, 40], median 7 against the threshold 1: wide margins, not a knife edge
    assert none["target_top1"].mean() > run["before"]["target_top1"].mean()
    assert np.median(none["true_rank"]) > 1  # the edit moved the true answer off the top


def test_the_seed_job_runs_with_one_thread_whatever_the_workers(monkeypatch):
    import rce.reproduce as rr

    seen = []
    monkeypatch.setattr(rr, "_run_seed", lambda cfg, seed: seen.append(torch.get_num_threads()))
    with pinned_threads(2, torch=True):
        for workers in (1, 3):
            rr._seed_job(({**SCALES["smoke"], "workers": workers}, 0))
        assert torch.get_num_threads() == 2  # restored for the parent
    assert seen == [1, 1]


def test_fact_token_ties_go_to_the_first_lookup_token():
    from rce.editing import TRACE_TIE_TOL, TraceResult
    from rce.reproduce import _pick_fact_token

    def trace(top):
        return TraceResult(np.array([0.0, top]), 0.9, 0.1)

    tied = {"subject_last": trace(0.2), "last": trace(0.2 + TRACE_TIE_TOL / 10)}
    assert _pick_fact_token(tied) == "subject_last"
    clear = {"subject_last": trace(0.2), "last": trace(0.25)}
    assert _pick_fact_token(clear) == "last"


def test_claim5_with_nothing_to_lower_is_undecided_not_refuted():
    from rce.reproduce import _lowers_claim

    # HP and PD lowered, but IR never succeeded with or without RCE: 0 - 0 is not "< 0"
    pairs = [
        (0.1, 0.5, "rome", "hp", 10),
        (0.0, 0.3, "rome", "pd", 10),
        (0.0, 0.0, "rome", "ir", 20),
    ]
    claim = _lowers_claim(pairs)
    assert not claim.point_check
    assert claim.value == pytest.approx(-0.3)
    assert claim.note.startswith("undecided: 1 of 3 pairs (rome ir@20)")
    # the same pairs without the 0-0 one: supported
    assert _lowers_claim(pairs[:2]).point_check
    # a pair that got worse refutes, whatever else is undecided
    worse = _lowers_claim([(0.2, 0.1, "rome", "hp", 10), (0.0, 0.0, "rome", "ir", 20)])
    assert not worse.point_check
    assert "refuted" in worse.note
    # nothing to lower anywhere: not measured
    none = _lowers_claim([(0.0, 0.0, "memit", "hp", 10)])
    assert none.value is None
    assert not none.point_check
    assert none.note.startswith("not measured")


def test_claim6_without_a_rome_reference_is_not_measured():
    from rce.reproduce import _fidelity_claim

    row = {"target_top1": 1.0, "paraphrase": 0.9, "neighbour_drop": 0.0, "utility_drop": 0.0}
    assert _fidelity_claim("rome", row, 0.9).point_check
    # MEMIT alone: no ROME paraphrase reference. Before, `0.9 >= nan - 0.05` was silently False
    claim = _fidelity_claim("memit", row, float("nan"))
    assert claim.value is None
    assert not claim.point_check
    assert "not measured: paraphrase reference" in claim.note
    claim = _fidelity_claim("rome", {**row, "neighbour_drop": float("nan")}, 0.9)
    assert not claim.point_check
    assert "not measured: neighbourhood drop" in claim.note
