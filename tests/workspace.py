"""Shared facts about the workspace for the cross-package checks."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ROOT / "packages"


@dataclass(frozen=True)
class Member:
    folder: str  # packages/<folder>
    import_name: str
    dist_name: str
    pyproject: dict

    @property
    def path(self) -> Path:
        return PACKAGES / self.folder

    @property
    def is_common(self) -> bool:
        return self.folder == "common"


def workspace_members() -> list[Member]:
    members = []
    for d in sorted(p for p in PACKAGES.iterdir() if p.is_dir() and not p.name.startswith(".")):
        pyproject_path = d / "pyproject.toml"
        data = tomllib.loads(pyproject_path.read_text()) if pyproject_path.exists() else {}
        import_name = "paper_common" if d.name == "common" else d.name
        dist = data.get("project", {}).get("name", "")
        members.append(Member(d.name, import_name, dist, data))
    return members


MEMBERS = workspace_members()
PAPER_MEMBERS = [m for m in MEMBERS if not m.is_common]


def member_params(members: list[Member]) -> list:
    return [pytest.param(m, id=m.folder) for m in members]


def uv_command() -> list[str]:
    """uv as the Makefile found it (exported as $UV), else on PATH, else pip's copy run as a module."""
    if os.environ.get("UV"):
        return shlex.split(os.environ["UV"])
    if shutil.which("uv"):
        return [shutil.which("uv")]
    return [sys.executable, "-m", "uv"]
