"""The first ```python block under each member README's '## Quickstart' runs as written."""

import re
import subprocess
import sys

import pytest
from workspace import MEMBERS, Member, member_params


def quickstart(readme: str) -> str | None:
    section = re.search(r"^## Quickstart\s*$(.*?)(?=^## |\Z)", readme, re.M | re.S)
    if section is None:
        return None
    block = re.search(r"```python\n(.*?)```", section.group(1), re.S)
    return block.group(1) if block else None


@pytest.mark.parametrize("member", member_params(MEMBERS))
def test_readme_quickstart_runs(member: Member, tmp_path):
    code = quickstart((member.path / "README.md").read_text())
    assert code, f"{member.folder}/README.md needs a '## Quickstart' section with a python block"
    assert len(code.strip().splitlines()) <= 15, "keep the quickstart about 10 lines"
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip(), "the quickstart should print what it computed"
