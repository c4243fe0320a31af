"""The suite runner against a real (tiny) distribution with real entry points, built in a tmp dir."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from paper_common import Report
from paper_common.suite import ENTRY_POINT_GROUP, Summary, discover, run_suite

OK_MODULE = """
from paper_common import Claim, Report, write_report

def reproduce(scale="quick", seed=0, out_dir=None):
    report = Report(package="demo_ok", title="demo", scale=scale, seed=seed)
    report.add_claim(Claim.threshold("Seed plus one exceeds the seed.", "seed + 1", seed + 1, ">", seed))
    if out_dir is not None:
        write_report(report, out_dir)
    return report
"""

FAIL_MODULE = """
def reproduce(scale="quick", seed=0, out_dir=None):
    raise RuntimeError("boom: the experiment diverged")
"""


@pytest.fixture
def demo_dist(tmp_path_factory):
    """A directory on sys.path holding two modules and a dist-info that registers both."""
    site = tmp_path_factory.mktemp("site")
    (site / "demo_ok").mkdir()
    (site / "demo_ok" / "__init__.py").write_text(OK_MODULE)
    (site / "demo_fail").mkdir()
    (site / "demo_fail" / "__init__.py").write_text(FAIL_MODULE)
    info = site / "demo_suite-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-suite\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent(f"""
        [{ENTRY_POINT_GROUP}]
        demo_ok = demo_ok:reproduce
        demo_fail = demo_fail:reproduce
        """)
    )
    return site


def run_cli(site, *args, cwd):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "paper_common", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
    )


def test_discover_finds_the_registered_entry_points(demo_dist, monkeypatch):
    monkeypatch.syspath_prepend(str(demo_dist))
    found = discover()
    assert {"demo_ok", "demo_fail"} <= set(found)
    assert found["demo_ok"].value == "demo_ok:reproduce"


def test_run_suite_records_a_failure_and_goes_on(demo_dist, monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(demo_dist))
    out = tmp_path / "results"
    summary = run_suite(
        ["demo_fail", "demo_ok"], scale="smoke", seed=2, out_dir=out, progress=False
    )
    assert [r.name for r in summary.results] == ["demo_fail", "demo_ok"]
    fail, ok = summary.results
    assert not fail.ok
    assert "RuntimeError: boom" in fail.error
    assert ok.ok
    assert ok.claims[0]["value"] == 3.0
    assert not summary.ok
    assert Report.from_json(out / "demo_ok").seed == 2
    assert not (out / "demo_fail").exists()
    md = (out / "SUMMARY.md").read_text()
    assert "| demo_ok | Seed plus one exceeds the seed. | 3 | - | > 2 | inconclusive |" in md
    assert "## demo_fail failed" in md
    assert "boom: the experiment diverged" in md
    data = json.loads((out / "summary.json").read_text())
    assert [r["ok"] for r in data["results"]] == [False, True]


def test_run_suite_rejects_unknown_names_before_running(demo_dist, monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(demo_dist))
    with pytest.raises(ValueError, match="unknown package\\(s\\) nope"):
        run_suite(["demo_ok", "nope"], scale="smoke", out_dir=tmp_path / "r")
    with pytest.raises(ValueError, match="scale"):
        run_suite(["demo_ok"], scale="medium", out_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_empty_summary_says_nothing_was_run(tmp_path):
    md = Summary(scale="quick", seed=0).to_markdown()
    assert "No paper packages are installed" in md


def test_cli_list_and_reproduce(demo_dist, tmp_path):
    listed = run_cli(demo_dist, "list", cwd=tmp_path)
    assert listed.returncode == 0
    assert "demo_ok\tdemo_ok:reproduce" in listed.stdout.splitlines()

    res = run_cli(
        demo_dist, "reproduce", "demo_ok", "--scale", "smoke", "--out", "res", cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    assert (
        "1 packages run, 0 failed; 0 supported, 0 refuted, 1 inconclusive of 1 paper claims"
        in res.stdout
    )
    assert (tmp_path / "res" / "demo_ok" / "report.md").exists()

    res = run_cli(
        demo_dist,
        "reproduce",
        "demo_ok",
        "demo_fail",
        "--scale",
        "smoke",
        "--out",
        "r2",
        cwd=tmp_path,
    )
    assert res.returncode == 1
    assert "1 failed (demo_fail)" in res.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["reproduce", "nope", "--scale", "smoke"], "unknown package(s) nope"),
        (["reproduce", "demo_ok", "--scale", "huge"], "invalid choice: 'huge'"),
        (["reproduce", "demo_ok", "--out", "blocker/sub"], "cannot write to --out"),
        (["reproduce", "demo_ok", "--all"], "not both"),
    ],
)
def test_cli_bad_input_is_one_line_and_writes_nothing(demo_dist, tmp_path, args, message):
    (tmp_path / "blocker").write_text("a file, not a directory")
    res = run_cli(demo_dist, *args, cwd=tmp_path)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert message in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker"]
