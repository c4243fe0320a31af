import json
import math

import numpy as np
import pytest

from paper_common import Claim, Report, main, markdown_table, write_report
from paper_common.plotting import new_figure
from paper_common.reproduce import check_scale, format_value


def make_report(scale: str = "smoke", with_figure: bool = True) -> Report:
    report = Report(package="demo", title="A demo experiment", scale=scale, seed=3)
    report.add_claim(Claim.threshold("Ours beats the baseline.", "error ratio", 0.8, "<", 1.0))
    report.add_claim(Claim.threshold("Gap is large.", "gap (points)", 1.5, ">=", 2.0, note="n=3"))
    report.add_table(
        "errors", [{"method": "ours", "err": np.float64(0.25)}, {"method": "base", "err": 0.5}]
    )
    if with_figure:
        fig, ax = new_figure()
        ax.plot([0, 1], [1, 0])
        report.add_figure("curve", fig)
    report.runtime_s = 1.25
    return report


def test_threshold_claims_compare_value_with_target():
    assert Claim.threshold("s", "m", 0.8, "<", 1.0).point_check
    assert not Claim.threshold("s", "m", 1.0, "<", 1.0).point_check
    assert Claim.threshold("s", "m", 1.0, "<=", 1.0).point_check
    assert Claim.threshold("s", "m", 3, ">", 2).target == "> 2"
    assert not Claim.threshold("s", "m", None, ">", 0).point_check
    assert not Claim.threshold("s", "m", float("nan"), "<", 1).point_check
    # a point without an interval or controls decides nothing
    two_valued = Claim.threshold("s", "m", 0.8, "<", 1.0)
    assert (two_valued.verdict, two_valued.supported) == ("inconclusive", False)
    assert "no interval or controls" in two_valued.reason


def test_claim_rejects_bad_fields():
    with pytest.raises(ValueError, match="statement"):
        Claim("", "m", 1.0, "> 0", True)
    with pytest.raises(ValueError, match="no value"):
        Claim("s", "m", None, "> 0", True)
    with pytest.raises(ValueError, match=r"Claim\.decide"):  # supported needs interval and controls
        Claim("s", "m", 1.0, "> 0", True, verdict="supported")
    with pytest.raises(ValueError, match="verdict"):
        Claim("s", "m", 1.0, "> 0", True, verdict="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="value"):
        Claim("s", "m", "0.5", "> 0", False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="op"):
        Claim.threshold("s", "m", 1.0, "=>", 0.0)  # type: ignore[arg-type]


def test_report_validates_package_scale_and_figure_names():
    with pytest.raises(ValueError, match="scale"):
        Report(package="demo", title="t", scale="huge", seed=0)
    with pytest.raises(ValueError, match="import name"):
        Report(package="not a name", title="t", scale="smoke", seed=0)
    report = Report(package="demo", title="t", scale="smoke", seed=0)
    fig, _ = new_figure()
    with pytest.raises(ValueError, match="figure name"):
        report.add_figure("../escape", fig)
    with pytest.raises(ValueError, match="scale must be one of smoke, quick, full"):
        check_scale("medium")


def test_supported_needs_every_claim():
    report = make_report(with_figure=False)
    assert not report.supported  # two-valued claims are never supported
    assert report.verdicts() == {
        "supported": 0, "refuted": 0, "inconclusive": 2, "paper": 2, "check": 0,
        "check_supported": 0, "defect": 0,
    }  # fmt: skip
    assert not Report(package="demo", title="t", scale="smoke", seed=0).supported  # no claims


def test_write_report_round_trips(tmp_path):
    report = make_report()
    out = write_report(report, tmp_path / "rep")
    assert sorted(p.name for p in out.iterdir()) == ["curve.png", "report.json", "report.md"]
    assert (out / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    loaded = Report.from_json(out)
    assert loaded == report
    assert loaded.tables["errors"][0]["err"] == 0.25
    assert json.loads((out / "report.json").read_text())["supported"] is False
    md = (out / "report.md").read_text()
    assert "| Ours beats the baseline. | error ratio | 0.8 | - | < 1 | inconclusive | yes |" in md
    assert "0 supported, 0 refuted, 2 inconclusive of 2 paper claims" in md
    assert "![curve](curve.png)" in md
    # a report loaded from JSON can be written again elsewhere; the figure it names is carried over
    again = write_report(loaded, out)
    assert (again / "curve.png").exists()


def test_write_report_replaces_an_earlier_report_but_not_other_files(tmp_path):
    out = tmp_path / "rep"
    write_report(make_report(with_figure=False), out)
    second = make_report(with_figure=False)
    second.seed = 9
    write_report(second, out)
    assert Report.from_json(out / "report.json").seed == 9
    assert [p.name for p in tmp_path.iterdir()] == ["rep"]  # no staging directories left behind

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("precious")
    with pytest.raises(ValueError, match="not empty"):
        write_report(make_report(with_figure=False), foreign)
    assert [p.name for p in foreign.iterdir()] == ["thesis.tex"]


def test_failed_write_leaves_nothing_behind(tmp_path):
    report = make_report(with_figure=False)
    report._pending["broken.png"] = "not a figure"  # type: ignore[assignment]
    report.figures.append("broken.png")
    with pytest.raises(TypeError, match="Figure"):
        write_report(report, tmp_path / "rep")
    assert list(tmp_path.iterdir()) == []


def test_markdown_table_and_number_format():
    table = markdown_table([{"a": 1, "b": 0.123456}, {"a": 2, "c": "x|y"}])
    assert table.splitlines() == [
        "| a | b | c |",
        "|---|---|---|",
        "| 1 | 0.1235 | - |",
        "| 2 | - | x\\|y |",
    ]
    assert format_value(1.23e-5) == "1.230e-05"
    assert format_value(17236.9) == "17237"
    assert format_value(2.5e12) == "2.500e+12"
    assert format_value(math.inf) == "inf"
    assert format_value(True) == "yes"
    assert markdown_table([]) == "_(no rows)_\n"


def demo_reproduce(scale: str = "quick", seed: int = 0, out_dir=None) -> Report:
    report = Report(package="demo", title="demo", scale=scale, seed=seed)
    value = float(np.random.default_rng(seed).normal())
    report.add_claim(Claim.threshold("A draw is finite.", "draw", value, ">", -100.0))
    if out_dir is not None:
        write_report(report, out_dir)
    return report


def test_main_writes_report(tmp_path, capsys):
    rc = main(
        demo_reproduce,
        ["reproduce", "--scale", "smoke", "--seed", "4", "--out", str(tmp_path / "o")],
    )
    assert rc == 0
    loaded = Report.from_json(tmp_path / "o")
    assert (loaded.scale, loaded.seed) == ("smoke", 4)
    assert loaded.claims[0].value == pytest.approx(np.random.default_rng(4).normal())
    assert "0 supported, 0 refuted, 1 inconclusive of 1 paper claims" in capsys.readouterr().out


def test_main_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(demo_reproduce, ["reproduce", "--scale", "huge", "--out", str(tmp_path / "o")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "invalid choice: 'huge'" in err
    assert not (tmp_path / "o").exists()

    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert (
        main(demo_reproduce, ["reproduce", "--scale", "smoke", "--out", str(blocker / "sub")]) == 2
    )
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "cannot write" in err


def test_claim_decided_on_a_range():
    from paper_common.stats import Bounds

    supported = Claim.decided("s", "m", Bounds(4.0, np.inf), ">=", 3)
    assert supported.point_check
    assert (supported.low, supported.high) == (4.0, np.inf)
    assert supported.value == 4.0  # the end nearest to failing
    assert "range" in supported.note
    undecided = Claim.decided("s", "m", Bounds(2.0, np.inf), ">=", 3, "n")
    assert not undecided.point_check
    assert undecided.value == 2.0
    assert undecided.note.startswith("n; ")
    assert "undecided" in undecided.note
    refuted = Claim.decided("s", "m", Bounds(0.5, 2.0), ">=", 3)
    assert not refuted.point_check
    assert refuted.value == 2.0  # its best case still fails
    below = Claim.decided("s", "m", Bounds(0.2, 0.5), "<", 1)
    assert below.point_check
    assert below.value == 0.5
    assert below.target == "< 1"
    undefined = Claim.decided("s", "m", Bounds(np.nan, np.nan), "<", 1)
    assert not undefined.point_check
    assert undefined.value is None
    assert "undefined" in undefined.note
