import pytest

from gcbm.reproduce import MODELS, SCALES, reproduce
from gcbm.reproduce.run import datasets
from paper_common import Report


def test_smoke_reproduce_writes_a_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    assert len(report.claims) == 6
    for c in report.claims:
        assert c.verdict in ("supported", "refuted", "inconclusive")
        assert c.missing_parts() == []
        assert c.negative.value is not None  # every null is measured, none is absent
    loaded = Report.from_json(tmp_path / "r")
    assert loaded.package == "gcbm"
    assert (tmp_path / "r" / "graph_concepts.png").exists()
    assert (tmp_path / "r" / "rule_weights.png").exists()
    table = report.tables["Test accuracy (mean ± sd over seeds) and GCBM rule fidelity"]
    assert {r["dataset"] for r in table} == {"molecule_rules", "ba_2motifs"}
    assert all(m in table[0] for m in MODELS)
    assert report.tables["Macro-F1 and minority-class recall (mean ± sd over seeds)"]
    # the OR-of-ANDs task is reported for the reader: accuracy and read-out fidelity per seed
    (lim,) = [v for k, v in report.tables.items() if k.startswith("Limitation")]
    assert [r["seed"] for r in lim] == [0, 1]
    for r in lim:
        assert 0.0 <= r["GCBM"] <= 1.0
        assert 0.0 <= r["GCBM fidelity"] <= 1.0
        assert "GIN" in r


def test_bad_scale():
    with pytest.raises(ValueError, match="scale"):
        reproduce("medium")


def test_full_scale_needs_local_tu_files(monkeypatch, tmp_path):
    monkeypatch.delenv("GCBM_TU_ROOT", raising=False)
    with pytest.raises(FileNotFoundError, match="GCBM_TU_ROOT"):
        datasets(SCALES["full"])
    monkeypatch.setenv("GCBM_TU_ROOT", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="DHFR"):
        datasets(SCALES["full"])
    assert set(datasets(SCALES["quick"])) == {"molecule_rules", "ba_2motifs"}
