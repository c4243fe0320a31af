"""`import <package>` works in a fresh interpreter and pulls in torch only where the package needs it."""

import json
import re
import subprocess
import sys
from importlib import metadata

import pytest

from workspace import MEMBERS, Member, member_params

TORCH_STACK = {"torch", "transformers", "torch-geometric", "torch_geometric", "peft", "accelerate"}


def _name(req: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", req, maxsplit=1)[0].lower().replace("_", "-")


def needs_torch(dist: str, seen: set[str] | None = None) -> bool:
    """True if ``dist``'s installed metadata (non-extra requirements, recursively) reaches torch."""
    seen = set() if seen is None else seen
    if dist in seen:
        return False
    seen.add(dist)
    try:
        reqs = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        return False
    for req in reqs:
        if "extra ==" in req.split(";", 1)[-1] and ";" in req:
            continue  # optional extra of this dist
        name = _name(req)
        extras = re.search(r"\[([^\]]+)\]", req.split(";", 1)[0])
        if name in TORCH_STACK:
            return True
        if extras and name == "paper-common" and "lm" in extras.group(1):
            return True
        if needs_torch(name, seen):
            return True
    return False


@pytest.mark.parametrize("member", member_params(MEMBERS))
def test_fresh_import_is_light(member: Member):
    code = (
        f"import sys, json, {member.import_name} as m; "
        "print(json.dumps({'torch': 'torch' in sys.modules, 'all': sorted(getattr(m, '__all__', []))}))"
    )
    # what is measured is which modules the import loads; the timeout only stops a hang, and is far
    # above the ~15 s a torch-stack import takes on a loaded 2-core machine
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout.strip().splitlines()[-1])
    assert info["all"], f"{member.import_name} should declare its public API in __all__"
    if not needs_torch(member.dist_name):
        assert not info["torch"], f"{member.import_name} imports torch but does not depend on it"


def test_needs_torch_reads_requirements():
    assert not needs_torch("paper-common")
    assert not needs_torch("no-such-distribution")
