"""The README's package table tells the truth about the workspace, and its commands exist."""

import re

from workspace import PACKAGES, PAPER_MEMBERS, ROOT

STATUSES = {"planned", "implemented", "reproduced"}


def table_rows() -> dict[str, str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- packages:start -->", 1)[1].split("<!-- packages:end -->", 1)[0]
    rows = {}
    for line in block.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[-1]
    return rows


def test_table_lists_all_nineteen_papers_with_a_known_status():
    rows = table_rows()
    assert len(rows) == 19
    assert set(rows.values()) <= STATUSES, rows


def test_status_matches_the_workspace():
    rows = table_rows()
    present = {m.import_name for m in PAPER_MEMBERS}
    assert present <= set(rows), f"packages missing from the README table: {present - set(rows)}"
    for name, status in rows.items():
        exists = (PACKAGES / name).is_dir()
        assert (status == "planned") == (not exists), (
            f"{name}: status {status!r} but exists={exists}"
        )
        if status == "reproduced":
            page = (ROOT / "docs" / "packages" / f"{name}.md").read_text()
            assert "quick" in page, f"{name}: docs page does not show the quick-scale results"
            assert "| claim" in page, f"{name}: docs page lacks the results table"


def test_readme_names_the_two_commands_and_make_has_them():
    readme = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    for target in ("test-all", "reproduce", "test", "bench", "lint", "docs", "setup"):
        assert re.search(rf"^{target}:", makefile, re.M), f"Makefile lacks target {target}"
    assert "make test-all" in readme
    assert "make reproduce" in readme
    assert "test-all" in (ROOT / ".ci" / "run").read_text()
