"""Every ```python block under each member README's '## Quickstart' runs as written."""

import os
import re
import subprocess
import sys

import pytest

from workspace import MEMBERS, Member, member_params


def quickstart_blocks(readme: str) -> list[str]:
    section = re.search(r"^## Quickstart\s*$(.*?)(?=^## |\Z)", readme, re.M | re.S)
    if section is None:
        return []
    return re.findall(r"```python\n(.*?)```", section.group(1), re.S)


@pytest.mark.parametrize("member", member_params(MEMBERS))
def test_readme_quickstart_runs(member: Member, tmp_path):
    blocks = quickstart_blocks((member.path / "README.md").read_text())
    assert blocks, f"{member.folder}/README.md needs a '## Quickstart' section with a python block"
    env = {**os.environ, "PAPER_CACHE_DIR": str(tmp_path / "cache")}  # train, do not reuse a cache
    for code in blocks:
        lines = [line for line in code.splitlines() if line.strip()]
        assert len(lines) <= 16, "keep each quickstart block about 10 lines of code"
        res = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip(), "the quickstart should print what it computed"
