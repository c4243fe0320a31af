import json

import pytest

from halluc_labels.reproduce import SCALES, reproduce
from paper_common import Report


def _tables(report: Report) -> str:  # through JSON so that NaN == NaN
    skip = {"timing", "models"}
    return json.dumps({k: v for k, v in report.tables.items() if k not in skip}, sort_keys=True)


def test_smoke_reproduce_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setenv("PAPER_CACHE_DIR", str(tmp_path / "cache"))
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "a")
    assert len(report.claims) == 4
    assert all(c.value is not None for c in report.claims)
    for c in report.claims:
        assert c.verdict in ("supported", "refuted", "inconclusive")
        assert c.missing_parts() == []
    # claims 3-4 are measured again (issue 46): judges and NLI tuned where the criteria agree
    assert [c.kind for c in report.claims] == ["paper"] * 4
    for name in (
        "natural answer types",
        "agreement (natural pairs)",
        "agreement (controlled set)",
        "flag rate by answer type (controlled set)",
        "prompt switch (natural pairs, truth = correctness)",
        "detector AUROC by label source",
        "lexical thresholds per generator (natural pairs)",
        "metrics per generator (natural pairs, truth = correctness)",
        "claim models",
    ):
        assert report.tables[name], name
    assert len(report.figures) == 4
    for fig in report.figures:
        assert (tmp_path / "a" / fig).stat().st_size > 1000
    loaded = Report.from_json(tmp_path / "a")
    assert [c.statement for c in loaded.claims] == [c.statement for c in report.claims]

    # every generator answered every question once
    rows = report.tables["natural answer types"]
    per_gen = [sum(v for k, v in r.items() if k != "generator") for r in rows]
    assert per_gen == [3 * SCALES["smoke"]["n_items"]] * 3
    judges = report.tables["prompt switch (natural pairs, truth = correctness)"]
    main = [r for r in judges if r["contrast"] == "p1->p2"]
    assert len(main) == SCALES["smoke"]["n_judges"]
    assert {r["contrast"] for r in judges} == {"p1->p2", "p1s->p2t", "p1->p1s", "p2t->p2"}

    # the same seed again (models now come from the cache): the same report
    again = reproduce("smoke", seed=0)
    assert _tables(again) == _tables(report)
    assert [c.value for c in again.claims] == [c.value for c in report.claims]
    assert [c.verdict for c in again.claims] == [c.verdict for c in report.claims]


def test_bad_scale():
    with pytest.raises(ValueError, match="scale must be"):
        reproduce("huge")
