"""Each package installs alone (common + itself, in a fresh venv) and its smoke reproduce runs there."""

import subprocess
import sys

import pytest

from paper_common import Report
from workspace import MEMBERS, PACKAGES, Member, member_params, uv_command


def _run(cmd, **kw):
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)
    assert res.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{res.stdout}\n{res.stderr}"
    return res


@pytest.mark.parametrize("member", member_params(MEMBERS))
def test_installs_alone_and_reproduces(member: Member, tmp_path):
    uv = uv_command()
    venv = tmp_path / "venv"
    _run([*uv, "venv", "--quiet", "--python", sys.executable, str(venv)])
    py = venv / "bin" / "python"
    targets = [str(PACKAGES / "common")]
    if not member.is_common:
        targets.append(str(member.path))
    _run([*uv, "pip", "install", "--quiet", "--python", str(py), *targets])
    out = tmp_path / "out"
    if member.is_common:
        listed = _run([str(py), "-m", "paper_common", "list"], cwd=tmp_path)
        assert listed.stdout == ""  # nothing but paper_common in this venv
        _run(
            [str(py), "-m", "paper_common", "reproduce", "--scale", "smoke", "--out", str(out)],
            cwd=tmp_path,
        )
        assert "No paper packages are installed" in (out / "SUMMARY.md").read_text()
        return
    _run(
        [str(py), "-m", member.import_name, "reproduce", "--scale", "smoke", "--out", str(out)],
        cwd=tmp_path,
    )
    report = Report.from_json(out)
    assert report.package == member.import_name
    assert report.scale == "smoke"
    assert report.claims, "a smoke reproduce still states the claims it checks"
    for fig in report.figures:
        assert (out / fig).is_file()
