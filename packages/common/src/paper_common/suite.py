"""Find every installed paper package and run their ``reproduce`` functions as one suite.

A package registers itself in its ``pyproject.toml``::

    [project.entry-points."paper_common.reproduce"]
    spacer = "spacer.reproduce:reproduce"

:func:`run_suite` runs the chosen packages one after another, each report in ``<out>/<name>/``; a
package that raises is recorded with its traceback and the others still run. ``SUMMARY.md`` and
``summary.json`` list every claim with its measured value, target and verdict.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

from tqdm.auto import tqdm

from paper_common.claims import interval_text
from paper_common.reproduce import (
    Report,
    check_scale,
    count_verdicts,
    format_value,
    markdown_table,
    verdict_line,
    write_report,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "PackageResult",
    "Summary",
    "discover",
    "run_suite",
    "write_summary",
]

ENTRY_POINT_GROUP = "paper_common.reproduce"
log = logging.getLogger(__name__)


def discover() -> dict[str, metadata.EntryPoint]:
    """Registered ``reproduce`` entry points of the installed packages, by name, sorted."""
    eps = metadata.entry_points(group=ENTRY_POINT_GROUP)
    return {ep.name: ep for ep in sorted(eps, key=lambda e: e.name)}


@dataclass
class PackageResult:
    """What running one package's ``reproduce`` gave: its report, or the error that stopped it."""

    name: str
    ok: bool
    runtime_s: float
    report_dir: str | None = None
    claims: list[dict] = field(default_factory=list)
    error: str | None = None


@dataclass
class Summary:
    scale: str
    seed: int
    results: list[PackageResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def verdicts(self) -> dict[str, int]:
        """Verdict counts over every package's claims (:func:`~paper_common.reproduce.count_verdicts`)."""
        return count_verdicts([c for r in self.results for c in r.claims])

    def to_markdown(self) -> str:
        lines = ["# Reproduction summary", "", f"Scale `{self.scale}`, seed {self.seed}.", ""]
        if not self.results:
            lines += [
                "No paper packages are installed: nothing registered the "
                f"`{ENTRY_POINT_GROUP}` entry point, so there was nothing to run.",
                "",
            ]
            return "\n".join(lines)
        rows = []
        for r in self.results:
            if not r.ok:
                rows.append(
                    {"package": r.name, "claim": "(failed, see below)", "runtime_s": r.runtime_s}
                )
            for c in r.claims:
                low, high = c.get("low"), c.get("high")
                rows.append(
                    {
                        "package": r.name,
                        "claim": c["statement"],
                        "measured": c["value"],
                        "interval": interval_text(low, high),
                        "target": c["target"],
                        "verdict": ("DEFECT " if c.get("defect") else "") + c["verdict"],
                        "runtime_s": r.runtime_s,
                    }
                )
        cols = ["package", "claim", "measured", "interval", "target", "verdict", "runtime_s"]
        lines.append(markdown_table(rows, cols))
        n_fail = sum(not r.ok for r in self.results)
        lines += [
            f"{len(self.results)} packages, {n_fail} failed; {verdict_line(self.verdicts())}.",
            "",
        ]
        for r in self.results:
            if r.error:
                lines += [f"## {r.name} failed", "", "```", r.error.rstrip(), "```", ""]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "scale": self.scale,
            "seed": self.seed,
            "results": [asdict(r) for r in self.results],
        }


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_summary(summary: Summary, out_dir: str | os.PathLike[str]) -> Path:
    """Write ``SUMMARY.md`` and ``summary.json`` into ``out_dir``; returns the Markdown path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _write_atomic(out / "summary.json", json.dumps(summary.to_dict(), indent=2))
    _write_atomic(out / "SUMMARY.md", summary.to_markdown())
    return out / "SUMMARY.md"


def run_suite(
    names: Sequence[str] | None = None,
    scale: str = "quick",
    seed: int = 0,
    out_dir: str | os.PathLike[str] = "results",
    progress: bool | None = None,
) -> Summary:
    """Run ``reproduce`` of each named package (all registered ones when ``names`` is None/empty).

    Unknown names raise ``ValueError`` before anything runs. Each report goes to ``out_dir/<name>``.
    """
    check_scale(scale)
    registered = discover()
    chosen = list(dict.fromkeys(names)) if names else list(registered)
    unknown = [n for n in chosen if n not in registered]
    if unknown:
        known = ", ".join(registered) or "none are installed"
        raise ValueError(f"unknown package(s) {', '.join(unknown)}; registered: {known}")
    out = Path(out_dir)
    summary = Summary(scale=scale, seed=seed)
    show = sys.stderr.isatty() if progress is None else progress
    for name in tqdm(chosen, desc="reproduce", unit="pkg", disable=not show):
        start = time.perf_counter()
        try:
            from paper_common.device import seed_everything

            seed_everything(seed)
            fn = registered[name].load()
            report = fn(scale=scale, seed=seed, out_dir=None)
            if not isinstance(report, Report):
                raise TypeError(
                    f"{name}'s reproduce returned {type(report).__name__}, not a Report"
                )
            runtime = time.perf_counter() - start
            if not report.runtime_s:
                report.runtime_s = runtime
            write_report(report, out / name)
            result = PackageResult(
                name=name,
                ok=True,
                runtime_s=runtime,
                report_dir=str(out / name),
                claims=[c.to_dict() for c in report.claims],
            )
            log.info("%s: %d claims in %s s", name, len(report.claims), format_value(runtime))
        except Exception:
            result = PackageResult(
                name=name,
                ok=False,
                runtime_s=time.perf_counter() - start,
                error=traceback.format_exc(),
            )
            log.error("%s failed:\n%s", name, result.error)
        summary.results.append(result)
    write_summary(summary, out)
    return summary
