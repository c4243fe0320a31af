import pytest

from gcbm.reproduce import METHODS, reproduce
from paper_common import Report


def test_smoke_reproduce_writes_a_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    assert len(report.claims) == 5
    for c in report.claims:
        assert c.verdict in ("supported", "refuted", "inconclusive")
        assert c.missing_parts() == []
        assert c.value is not None or c.note.startswith(("not measured", "not supported"))
    loaded = Report.from_json(tmp_path / "r")
    assert loaded.package == "gcbm"
    assert (tmp_path / "r" / "graph_concepts.png").exists()
    runs = report.tables["Every run"]
    assert {r["dataset"] for r in runs} == {"molecule_rules", "ba_2motifs"}
    assert all(0 <= r[m] <= 1 for r in runs for m in METHODS)
    assert set(runs[0]) == {"dataset", "seed", "concepts", *METHODS, "GCBM (no LM) fidelity",
                            "GCBM fidelity"}  # fmt: skip


def test_bad_scale():
    with pytest.raises(ValueError, match="scale"):
        reproduce("medium")
