"""The smoke reproduction writes a complete, honest report."""

import json

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
        assert c.supported is False or (c.value is not None and c.value == c.value)
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
