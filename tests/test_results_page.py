"""docs/results.md and the README's verdict column are generated from the committed reports."""

import subprocess
import sys

from paper_common.reproduce import Report
from paper_common.results import load_reports, results_page, update_readme, verdict_cell
from workspace import PAPER_MEMBERS, ROOT


def test_every_package_commits_its_quick_report():
    reports = load_reports(ROOT / "docs" / "packages")
    assert set(reports) == {m.import_name for m in PAPER_MEMBERS}
    for name, report in reports.items():
        assert report.scale == "quick", f"{name}: the committed report ran at {report.scale}"
        assert report.claims, f"{name}: the committed report has no claims"


def test_results_page_and_readme_column_match_the_reports():
    reports = load_reports(ROOT / "docs" / "packages")
    page = (ROOT / "docs" / "results.md").read_text()
    assert page == results_page(reports), "run `python -m paper_common results`"
    readme = (ROOT / "README.md").read_text()
    assert readme == update_readme(readme, reports), "run `python -m paper_common results`"
    for name, report in reports.items():
        assert f"| `{name}` |" in readme
        assert verdict_cell(report) in readme
        for claim in report.claims:
            assert claim.statement.replace("|", "\\|") in page


def test_docs_index_starts_at_the_results_page():
    index = (ROOT / "docs" / "index.md").read_text()
    first_link = index.index("](")
    assert index[first_link:].startswith("](results.md)")


def test_results_command_checks_without_writing(tmp_path):
    reports = tmp_path / "reports"
    (reports / "demo").mkdir(parents=True)
    report = Report(package="demo", title="t", scale="quick", seed=0)
    (reports / "demo" / "report.json").write_text(report.to_json())
    readme = tmp_path / "README.md"
    readme.write_text(
        "x\n<!-- packages:start -->\n| package | verdicts | status |\n|---|---|---|\n"
        "| `demo` | - | reproduced |\n<!-- packages:end -->\n"
    )
    cmd = [sys.executable, "-m", "paper_common", "results", "--reports", str(reports)]
    cmd += ["--out", str(tmp_path / "results.md"), "--readme", str(readme)]
    stale = subprocess.run([*cmd, "--check"], capture_output=True, text=True)
    assert stale.returncode == 1
    assert "out of date" in stale.stderr
    assert not (tmp_path / "results.md").exists()
    assert subprocess.run(cmd, capture_output=True, text=True).returncode == 0
    assert "| `demo` | 0 / 0 / 0 | reproduced |" in readme.read_text()
    assert subprocess.run([*cmd, "--check"], capture_output=True, text=True).returncode == 0
    (reports / "other").mkdir()
    (reports / "other" / "report.json").write_text(report.to_json())  # filed under the wrong name
    bad = subprocess.run(cmd, capture_output=True, text=True)
    assert bad.returncode == 2
    assert "not 'other'" in bad.stderr


def test_every_committed_claim_has_a_rule_an_interval_and_both_controls():
    """Issue 43's bar: each claim of each quick report is three-valued (absent controls are named)."""
    reports = load_reports(ROOT / "docs" / "packages")
    lacking = {
        f"{name}: {claim.statement[:60]}": claim.missing_parts()
        for name, report in reports.items()
        for claim in report.claims
        if claim.missing_parts()
    }
    assert not lacking, lacking
