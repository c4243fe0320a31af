"""Every workspace member follows the house layout (../shared/CONVENTIONS.md)."""

import re
import sys
from importlib import metadata

import pytest

from paper_common.suite import ENTRY_POINT_GROUP, discover
from workspace import MEMBERS, PAPER_MEMBERS, ROOT, Member, member_params


def test_common_is_a_member():
    assert "common" in [m.folder for m in MEMBERS]


@pytest.mark.parametrize("member", member_params(MEMBERS))
def test_member_layout(member: Member):
    p = member.path
    assert (p / "pyproject.toml").is_file()
    assert (p / "README.md").is_file()
    assert list((p / "tests").glob("test_*.py")), "needs tests/test_*.py"
    assert (p / "src" / member.import_name / "__init__.py").is_file()
    assert (p / "src" / member.import_name / "py.typed").is_file()
    assert (p / "src" / member.import_name / "__main__.py").is_file()
    project = member.pyproject["project"]
    assert member.dist_name == member.import_name.replace("_", "-")
    assert project["requires-python"] == ">=3.11"
    assert member.pyproject["build-system"]["build-backend"] == "hatchling.build"


@pytest.mark.parametrize("member", member_params(PAPER_MEMBERS))
def test_paper_member_registers_reproduce(member: Member):
    project = member.pyproject["project"]
    eps = project.get("entry-points", {}).get(ENTRY_POINT_GROUP, {})
    assert eps == {member.import_name: f"{member.import_name}.reproduce:reproduce"}
    src = member.path / "src" / member.import_name
    # the experiment: one module, or the reproduce/ subpackage every package moves to
    if (src / "reproduce").is_dir():
        for part in ("__init__.py", "scales.py", "run.py", "claims.py", "figures.py"):
            assert (src / "reproduce" / part).is_file(), f"{member.folder}: reproduce/{part}"
        assert not (src / "reproduce.py").exists()
    else:
        assert (src / "reproduce.py").is_file()
    deps = [re.split(r"[\s\[<>=!~;]", d, maxsplit=1)[0] for d in project.get("dependencies", [])]
    assert "paper-common" in deps
    assert member.pyproject["tool"]["uv"]["sources"]["paper-common"] == {"workspace": True}
    # installed into the workspace venv, so the suite finds it
    assert member.import_name in discover()
    # a docs page per package
    assert (ROOT / "docs" / "packages" / f"{member.import_name}.md").is_file()


@pytest.mark.parametrize("member", member_params(PAPER_MEMBERS))
def test_paper_member_imports_no_other_paper_package(member: Member):
    others = {m.import_name for m in PAPER_MEMBERS} - {member.import_name}
    src = member.path / "src" / member.import_name
    for f in src.rglob("*.py"):
        for other in others:
            assert not re.search(rf"^\s*(from|import)\s+{other}\b", f.read_text(), re.M), (
                f"{f} imports {other}: packages may import only paper_common"
            )


def test_every_installed_workspace_dist_is_a_member():
    names = {m.dist_name for m in MEMBERS}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.dist is not None and ep.dist.name.replace("_", "-") in names:
            continue
        pytest.fail(f"entry point {ep.name} comes from {ep.dist}, not a workspace member")
    assert sys.version_info >= (3, 11)
