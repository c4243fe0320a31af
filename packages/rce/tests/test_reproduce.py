"""The smoke-scale experiment end to end: report, claims, figures, determinism."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from paper_common import Report  # noqa: E402
from paper_common.device import pinned_threads  # noqa: E402
from rce.reproduce import SCALES, reproduce  # noqa: E402
from rce.reproduce.run import _seed_job  # noqa: E402


@pytest.fixture(scope="module")
def smoke(tmp_path_factory, fact_model):  # fact_model: the same cached fact LM
    out = tmp_path_factory.mktemp("rce_smoke")
    return reproduce("smoke", seed=0, out_dir=out), out


def test_smoke_report_has_claims_tables_and_figures(smoke):
    report, out = smoke
    statements = [c.statement for c in report.claims]
    assert len(statements) == 7  # no HP defence at smoke, so no claim 3
    for c in report.claims:
        assert c.verdict in ("supported", "refuted", "inconclusive")
        assert c.missing_parts() == [], c.statement
        assert c.negative is not None
        assert c.positive is not None
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
    import rce.reproduce.run as rr

    seen = []
    monkeypatch.setattr(rr, "_run_seed", lambda cfg, seed: seen.append(torch.get_num_threads()))
    with pinned_threads(2, torch=True):
        for workers in (1, 3):
            rr._seed_job(({**SCALES["smoke"], "workers": workers}, 0))
        assert torch.get_num_threads() == 2  # restored for the parent
    assert seen == [1, 1]


def test_fact_token_ties_go_to_the_first_lookup_token():
    from rce.editing import TRACE_TIE_TOL, TraceResult
    from rce.reproduce.run import _pick_fact_token

    def trace(top):
        return TraceResult(np.array([0.0, top]), 0.9, 0.1)

    tied = {"subject_last": trace(0.2), "last": trace(0.2 + TRACE_TIE_TOL / 10)}
    assert _pick_fact_token(tied) == "subject_last"
    clear = {"subject_last": trace(0.2), "last": trace(0.25)}
    assert _pick_fact_token(clear) == "last"


N = 200


def _cell(rng, top1=1.0, asr=0.5, chance=0.02, para=0.8, neigh=0.9, util=0.9):
    from rce.attacks import BUDGETS

    def draw(p):
        return rng.random(N) < p

    out = {"target_top1": draw(top1), "paraphrase": np.full(N, para),
           "neighbour_acc": np.full(N, neigh), "utility_acc": np.full(N, util),
           "true_rank": np.full(N, 3)}  # fmt: skip
    out["edit_success"] = out["target_top1"].copy()
    for b in BUDGETS:
        for attack in ("output", "hp", "pd", "ir"):
            out[f"success/{attack}/{b}"] = draw(asr if attack == "output" else asr / 2)
        out[f"chance/{b}"] = draw(chance)
    return out


def _verdicts(pooled):
    from paper_common import Report
    from rce.reproduce.claims import _claims

    rows = [
        {
            "cell": c,
            "median_true_rank": 3.0,
            "chance_decoy@10": 0.02,
            "n": N,
            "n_successful": int(res["edit_success"].sum()),
            "edit_success": float(res["edit_success"].mean()),
            "median_true_rank_successful": 3.0,
            "output_asr@10": float(res["success/output/10"].mean()),
            "output_asr@10_successful": float(res["success/output/10"][res["edit_success"]].mean()),
        }
        for c, res in pooled.items()
    ]
    cfg = {"editors": ["rome"], "defences": ["none", "rce"]}
    report = Report(package="rce", title="t", scale="smoke", seed=0)
    _claims(report, cfg, pooled, rows, 1000)
    return _Claims(report.claims)


class _Claims(list):
    def __getitem__(self, text):
        (claim,) = [c for c in self if c.statement.startswith(text)]
        return claim


def test_concealment_by_an_edit_that_did_not_take_is_not_supported():
    """Audit (issue 43): "RCE brings the Output Attack down to chance" passed whatever the reason
    the attack fails, even when the sanitized edit itself did not take (MEMIT + RCE top-1 0.61 at
    quick). Now the edit's efficacy is its positive control and no defence its negative one."""
    rng = np.random.default_rng(0)
    before = {**_cell(rng, top1=0.0, asr=1.0), "paraphrase": np.zeros(N)}
    ok = {"before": before, "rome/none": _cell(rng), "rome/rce": _cell(rng, asr=0.0)}
    claim = _verdicts(ok)["RCE brings the Output Attack do"]
    assert claim.verdict == "supported"
    assert claim.negative.verdict == "refuted"
    broken = {**ok, "rome/rce": _cell(rng, top1=0.3, asr=0.0)}
    claim = _verdicts(broken)["RCE brings the Output Attack do"]
    assert claim.point_check  # what the old two-valued claim reported: supported
    assert claim.verdict == "inconclusive"
    assert "edits took" in claim.reason
    # without a leak to remove (no defence at chance too) the rule cannot fail: not supported
    quiet = {**ok, "rome/none": _cell(rng, asr=0.0)}
    claim = _verdicts(quiet)["RCE brings the Output Attack do"]
    assert claim.verdict == "inconclusive"
    assert claim.defect


def test_smoke_sized_claims_on_planted_cells():
    rng = np.random.default_rng(1)
    before = {**_cell(rng, top1=0.0, asr=1.0), "paraphrase": np.zeros(N)}
    claims = _verdicts({"before": before, "rome/none": _cell(rng, asr=0.9),
                        "rome/rce": _cell(rng, asr=0.0)})  # fmt: skip
    assert claims["Rank leakage"].verdict == "supported"
    assert claims["The one-query Output Attack ma"].verdict == "supported"
    assert claims["RCE also lowers the head-proje"].verdict == "supported"
    assert claims["ROME + RCE keeps edit fidelity"].verdict == "supported"
    weak = _verdicts({"before": before, "rome/none": _cell(rng, asr=0.1),
                      "rome/rce": _cell(rng, asr=0.1, neigh=0.5)})  # fmt: skip
    assert weak["Rank leakage"].verdict == "refuted"
    assert weak["ROME + RCE keeps edit fidelity"].verdict == "refuted"


def test_rank_leakage_is_read_among_successful_edits():
    """Issue 46: a failed edit leaves the true answer at top-1, which the Output Attack (target
    excluded) counts as a leak; pooled over all edits, half failing edits made leakage "supported"
    although the successful ones leak at 10%."""
    rng = np.random.default_rng(2)
    before = {**_cell(rng, top1=0.0, asr=1.0), "paraphrase": np.zeros(N)}
    half = _cell(rng, top1=0.5, asr=0.1)
    took = half["edit_success"]
    half["success/output/10"] = np.where(took, half["success/output/10"], True)
    assert half["success/output/10"].mean() > 0.5  # all edits: what the old claim read
    claims = _verdicts({"before": before, "rome/none": half, "rome/rce": _cell(rng, asr=0.0)})
    claim = claims["Rank leakage"]
    assert claim.verdict == "refuted"
    assert claim.value == pytest.approx(half["success/output/10"][took].mean())
    assert claim.positive.verdict == "supported"  # enough successful edits to decide
    few = _cell(rng, top1=0.05, asr=0.9)
    claims = _verdicts({"before": before, "rome/none": few, "rome/rce": _cell(rng, asr=0.0)})
    assert claims["Rank leakage"].verdict == "inconclusive"  # too few edits took to read leakage


def test_claim5_with_nothing_to_lower_is_inconclusive_not_refuted():
    from rce.reproduce.claims import _lowers_claim

    rng = np.random.default_rng(0)

    def arr(p):
        return (rng.random(300) < p).astype(float)

    lowered = [(arr(0.1), arr(0.5), "rome", "hp", 10), (arr(0.0), arr(0.3), "rome", "pd", 10)]
    assert _lowers_claim(lowered).verdict == "supported"
    # IR never succeeded with or without RCE: nothing to lower, the positive control fails
    nothing = _lowers_claim([*lowered, (arr(0.0), arr(0.0), "rome", "ir", 20)])
    assert nothing.verdict == "inconclusive"
    assert "every attack succeeds without a defence" in nothing.reason
    # an attack RCE made worse refutes
    worse = _lowers_claim([*lowered, (arr(0.6), arr(0.3), "rome", "ir", 20)])
    assert worse.verdict == "refuted"
    same = _lowers_claim([(arr(0.3), arr(0.3), "rome", "hp", 10)])
    assert same.verdict in ("refuted", "inconclusive")
    assert _lowers_claim([]).missing_parts() == []


def test_claim6_without_a_rome_reference_is_not_measured():
    from rce.reproduce.claims import _fidelity_claim

    rng = np.random.default_rng(2)
    before = {**_cell(rng, top1=0.0), "paraphrase": np.zeros(N)}
    pooled = {"before": before, "rome/none": _cell(rng), "rome/rce": _cell(rng),
              "memit/none": _cell(rng), "memit/rce": _cell(rng)}  # fmt: skip
    claim = _fidelity_claim("rome", pooled)
    assert claim.verdict == "supported"
    assert claim.negative.verdict == "refuted"  # the unedited model has no fidelity to the edit
    # MEMIT alone: no ROME paraphrase reference. Before, `0.9 >= nan - 0.05` was silently False
    alone = {k: v for k, v in pooled.items() if not k.startswith("rome")}
    claim = _fidelity_claim("memit", alone)
    assert claim.value is None
    assert claim.verdict == "inconclusive"
    assert "not measured: paraphrase reference" in claim.note
    assert claim.missing_parts() == []
    nan = {**pooled, "rome/rce": {**pooled["rome/rce"], "neighbour_acc": np.full(N, np.nan)}}
    claim = _fidelity_claim("rome", nan)
    assert claim.verdict == "inconclusive"
    assert "not measured: neighbourhood drop" in claim.note


def test_measure_leakage_takes_any_model_and_tokenizer(random_lm, small_tok, small_world):
    """The measurement is a function of (model, tok): any HF causal LM, here a random tiny one."""
    from rce.reproduce import measure_leakage, model_name
    from rce.requests import EditRequest, stats_corpus

    people, cities = small_world.entities["person"], small_world.entities["city"]
    reqs = [
        EditRequest("{} was born in", people[i], cities[i], cities[i + 1], decoy=cities[i + 2])
        for i in range(3)
    ]
    corpus = small_world.corpus(history=False, cues=False)[0]
    texts = stats_corpus(corpus, reqs)
    small = {"steps": 2, "contexts": ((2, 1),)}
    out = measure_leakage(
        random_lm, small_tok, reqs, (), texts, [("rome", "none"), ("memit", "rce")],
        rome=small, memit={**small, "mom2_weight": 10.0}, clamps=[2.0], trace_requests=2,
    )  # fmt: skip
    assert set(out["results"]) == {"rome/none", "memit/rce"}
    assert set(out["frontier"]) == {2.0, 4.0}  # the extra clamp and ROME's own
    assert out["restored"]
    assert out["model"] == model_name(random_lm)
    assert str(num := random_lm.config.n_layer if hasattr(random_lm.config, "n_layer") else
               random_lm.config.num_hidden_layers) in out["model"]  # fmt: skip
    assert num == 3
    for res in out["results"].values():
        assert len(res["edit_success"]) == 3
    with pytest.raises(ValueError, match="unknown cell"):
        measure_leakage(random_lm, small_tok, reqs, (), texts, [("rome", "nothing")])
    with pytest.raises(ValueError, match="edit prompt"):
        measure_leakage(random_lm, small_tok, reqs, (), corpus, [("rome", "none")], rome=small,
                        trace_requests=2)  # fmt: skip


def test_smoke_report_has_the_clamp_frontier_and_names_the_model(smoke):
    report, _ = smoke
    rows = report.tables["clamp_frontier"]
    assert [r["clamp_norm_factor"] for r in rows] == [4.0, 10.0]
    for r in rows:
        assert 0.0 <= r["efficacy"] <= 1.0
        assert r["n"] == SCALES["smoke"]["n_edits"]
    for c in report.claims:
        assert c.note.startswith("Model: fact_lm"), c.note
    assert all(row["model"].startswith("fact_lm") for row in report.tables["summary"])


def test_claim6_is_not_refuted_on_a_miss_the_plain_editor_shares():
    """Review (issue 46): at ROME's clamp 4 plain ROME's edits take on 0.90 of the prompts, below
    the claim's own top-1 >= 0.95; its positive control only asked >= 0.8, so ROME + RCE was
    "refuted" on a condition the editor without RCE misses too. The positive control is now the
    plain editor meeting the same four conditions (the testbed can show fidelity at all)."""
    rng = np.random.default_rng(3)
    before = {**_cell(rng, top1=0.0), "paraphrase": np.zeros(N)}
    both_miss = {"before": before, "rome/none": _cell(rng, top1=0.9),
                 "rome/rce": _cell(rng, top1=0.9)}  # fmt: skip
    claim = _verdicts(both_miss)["ROME + RCE keeps edit fidelity"]
    assert claim.value < 0  # the point misses the target ...
    assert claim.positive.verdict != "supported"  # ... but so does the editor without RCE
    assert claim.verdict == "inconclusive"
    # the plain editor meets the conditions and RCE breaks them: refuted, as before
    rce_breaks = {**both_miss, "rome/none": _cell(rng, top1=1.0)}
    claim = _verdicts(rce_breaks)["ROME + RCE keeps edit fidelity"]
    assert claim.positive.verdict == "supported"
    assert claim.verdict == "refuted"
