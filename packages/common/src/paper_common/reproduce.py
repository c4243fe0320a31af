"""Claims, reports and the command line every package's ``reproduce`` shares.

A package's ``reproduce(scale, seed, out_dir)`` measures the paper's headline claims at one of three
scales and returns a :class:`Report`. :func:`write_report` turns it into ``report.json`` (machine
readable, round-trips through :meth:`Report.from_json`), ``report.md`` (a table a person reads) and
PNG figures, written into a temporary directory that is renamed into place only once complete, so a
failed run never leaves half a report behind.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from paper_common.claims import OPS, VERDICTS, Claim, Control, Verdict, format_value

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "OPS",
    "SCALES",
    "THREADS",
    "VERDICTS",
    "ArgumentParser",
    "Claim",
    "Control",
    "Report",
    "ReproduceFn",
    "Verdict",
    "check_scale",
    "claims_table",
    "count_verdicts",
    "environment_info",
    "format_value",
    "main",
    "markdown_table",
    "pin_threads",
    "verdict_line",
    "write_report",
]

SCALES: tuple[str, ...] = ("smoke", "quick", "full")
"""``smoke``: seconds, runs in tests; ``quick``: <= ~5 min on 2 CPU cores; ``full``: the paper's setting."""

THREADS: dict[str, int | None] = {"smoke": 1, "quick": 2, "full": None}
"""Threads (torch and BLAS) a ``reproduce`` runs with at each scale, so its numbers do not depend on
the machine's core count or ``OMP_NUM_THREADS``: ``quick`` is the reference 2-core machine of the
README's numbers; ``full`` uses what the environment sets (recorded in the report)."""

REPORT_JSON = "report.json"
REPORT_MD = "report.md"


def check_scale(scale: str) -> str:
    """Return ``scale`` if it is one of :data:`SCALES`, else raise ``ValueError`` naming the choices."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}; got {scale!r}")
    return scale


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """Render ``rows`` (dicts sharing keys) as a GitHub Markdown table; numbers via :func:`format_value`."""
    if not rows:
        return "_(no rows)_\n"
    if columns is None:
        columns = list(dict.fromkeys(k for row in rows for k in row))
    cells = [[format_value(row.get(c)).replace("|", "\\|") for c in columns] for row in rows]
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in cells]
    return "\n".join(lines) + "\n"


@dataclass
class Report:
    """The outcome of one ``reproduce`` run.

    Attributes:
        package: import name of the package (``"spacer"``).
        title: the paper's title or a short description of the experiment.
        scale: one of :data:`SCALES`.
        seed: the seed the run used.
        claims: the claims checked, in the order a reader should see them.
        tables: named tables, each a list of rows (dicts with the same keys).
        figures: file names (PNG, relative to the report directory) of the figures.
        runtime_s: wall-clock seconds of the run.
        environment: library versions and the device, see :func:`environment_info`.
        notes: free text (deviations from the paper, what the scale cannot show).
    """

    package: str
    title: str
    scale: str
    seed: int
    claims: list[Claim] = field(default_factory=list)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    figures: list[str] = field(default_factory=list)
    runtime_s: float = 0.0
    environment: dict[str, Any] = field(default_factory=dict)
    notes: str = ""
    _pending: dict[str, Figure] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.package or not self.package.isidentifier():
            raise ValueError(f"Report.package must be an import name; got {self.package!r}")
        check_scale(self.scale)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TypeError(f"Report.seed must be an int; got {self.seed!r}")
        if not self.environment:
            self.environment = environment_info()

    @property
    def supported(self) -> bool:
        """True when every claim is supported (and there is at least one)."""
        return bool(self.claims) and all(c.supported for c in self.claims)

    def verdicts(self) -> dict[str, int]:
        """Verdict counts: see :func:`count_verdicts`."""
        return count_verdicts(self.claims)

    def verdict_line(self) -> str:
        """``"2 supported, 1 refuted, 5 inconclusive of 8 paper claims"`` (checks and defects
        after it, if any)."""
        return verdict_line(self.verdicts())

    def add_claim(self, claim: Claim) -> Claim:
        self.claims.append(claim)
        return claim

    def add_table(self, name: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """Attach a table; values must be JSON-serialisable scalars (numpy scalars are converted)."""
        if not name:
            raise ValueError("table name must be non-empty")
        self.tables[name] = [{str(k): _plain(v) for k, v in row.items()} for row in rows]

    def add_figure(self, name: str, fig: Figure) -> str:
        """Attach a matplotlib figure, saved as ``<name>.png`` by :func:`write_report`."""
        stem = Path(name).stem
        if not stem or Path(name).name != name or not stem.replace("-", "_").isidentifier():
            raise ValueError(
                f"figure name must be a plain file stem like 'error_vs_memory'; got {name!r}"
            )
        file = f"{stem}.png"
        self._pending[file] = fig
        if file not in self.figures:
            self.figures.append(file)
        return file

    def to_dict(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "title": self.title,
            "scale": self.scale,
            "seed": self.seed,
            "supported": self.supported,
            "verdicts": self.verdicts(),
            "claims": [c.to_dict() for c in self.claims],
            "tables": self.tables,
            "figures": list(self.figures),
            "runtime_s": self.runtime_s,
            "environment": self.environment,
            "notes": self.notes,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False, allow_nan=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Report:
        claims = [Claim.from_dict(c) for c in data.get("claims", [])]
        return cls(
            package=data["package"],
            title=data["title"],
            scale=data["scale"],
            seed=int(data["seed"]),
            claims=claims,
            tables={k: [dict(r) for r in v] for k, v in data.get("tables", {}).items()},
            figures=list(data.get("figures", [])),
            runtime_s=float(data.get("runtime_s", 0.0)),
            environment=dict(data.get("environment", {})) or {"unknown": True},
            notes=data.get("notes", ""),
        )

    @classmethod
    def from_json(cls, text_or_path: str | os.PathLike[str]) -> Report:
        """Load a report from JSON text, a ``report.json`` path or a report directory."""
        if isinstance(text_or_path, os.PathLike) or not str(text_or_path).lstrip().startswith("{"):
            path = Path(text_or_path)
            if path.is_dir():
                path = path / REPORT_JSON
            text = path.read_text()
        else:
            text = str(text_or_path)
        return cls.from_dict(json.loads(text))

    def to_markdown(self) -> str:
        lines = [f"# {self.package}: {self.title}", ""]
        lines += [
            f"Scale `{self.scale}`, seed {self.seed}, {self.runtime_s:.1f} s; {self.verdict_line()}.",
            "",
            "## Claims",
            "",
        ]
        lines.append(claims_table(self.claims) if self.claims else "_(no claims)_\n")
        for name, table in self.tables.items():
            lines += [f"## {name}", "", markdown_table(table)]
        if self.figures:
            lines += ["## Figures", ""]
            lines += [f"![{Path(f).stem}]({f})" for f in self.figures]
            lines.append("")
        if self.notes:
            lines += ["## Notes", "", self.notes.strip(), ""]
        env = ", ".join(f"{k} {v}" for k, v in self.environment.items())
        lines += ["## Environment", "", env, ""]
        return "\n".join(lines)


def count_verdicts(claims: Iterable[Claim | Mapping[str, Any]]) -> dict[str, int]:
    """How many paper claims have each verdict (``supported``, ``refuted``, ``inconclusive``, of
    ``paper``), how many claims are checks of our own code (``check``) and how many of those hold
    (``check_supported``), and how many have a negative control that came out supported
    (``defect``). Takes claims or their ``to_dict()`` rows."""
    rows = [
        (c.verdict, c.kind, c.defect)
        if isinstance(c, Claim)
        else (c["verdict"], c.get("kind", "paper"), bool(c.get("defect")))
        for c in claims
    ]
    paper = [r for r in rows if r[1] == "paper"]
    counts = {v: sum(r[0] == v for r in paper) for v in VERDICTS}
    counts["paper"] = len(paper)
    counts["check"] = len(rows) - len(paper)
    counts["check_supported"] = sum(r[0] == "supported" for r in rows if r[1] == "check")
    counts["defect"] = sum(r[2] for r in rows)
    return counts


def verdict_line(counts: Mapping[str, int]) -> str:
    """One line of :func:`count_verdicts`, as :meth:`Report.verdict_line` writes it."""
    parts = [f"{counts.get(v, 0)} {v}" for v in VERDICTS]
    line = f"{', '.join(parts)} of {counts.get('paper', 0)} paper claims"
    if counts.get("check"):
        line += f"; {counts['check_supported']} of {counts['check']} checks of our own code hold"
    if counts.get("defect"):
        line += f"; {counts['defect']} DEFECT (a negative control came out supported)"
    return line


def claims_table(claims: Sequence[Claim]) -> str:
    """The claims as a Markdown table: verdict, estimate, interval, target, both controls, why."""
    rows = [
        {
            "claim": c.statement + (" (check of our code)" if c.kind == "check" else ""),
            "metric": c.metric,
            "measured": c.value,
            "interval": c.interval_text() + (f" ({c.interval})" if c.interval else ""),
            "target": c.target,
            "verdict": ("**DEFECT** " if c.defect else "") + str(c.verdict),
            "point meets target": c.point_check,
            "positive control": "-" if c.positive is None else c.positive.text(),
            "negative control": "-" if c.negative is None else c.negative.text(),
            "why": c.reason,
            "note": c.note,
        }
        for c in claims
    ]
    return markdown_table(rows)


def _plain(value: Any) -> Any:
    """Convert numpy scalars/arrays to plain Python so tables serialise to JSON."""
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def environment_info() -> dict[str, Any]:
    """Python, platform and library versions, and the torch device if torch is already imported."""
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }
    for dist in ("numpy", "scipy", "torch", "transformers"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            env[dist] = metadata.version(dist)
    from paper_common.device import thread_info

    env.update(thread_info())
    if "torch" in sys.modules:
        from paper_common.device import pick_device

        env["device"] = str(pick_device())
    else:
        env["device"] = "cpu"
    return env


@contextlib.contextmanager
def _staging_dir(out_dir: Path) -> Iterator[Path]:
    """A fresh temporary directory beside ``out_dir``, renamed onto it only if the block succeeds.

    ``out_dir`` may be absent, empty, or hold an earlier report (it is then replaced). A directory
    holding anything else is refused, so a typo never deletes a user's files.
    """
    out_dir = Path(out_dir)
    if out_dir.exists():
        if not out_dir.is_dir():
            raise ValueError(f"--out {out_dir} exists and is not a directory")
        if any(out_dir.iterdir()) and not (out_dir / REPORT_JSON).exists():
            raise ValueError(
                f"--out {out_dir} is not empty and holds no earlier report; choose an empty or new directory"
            )
    parent = out_dir.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=parent))
    except OSError as exc:
        raise OSError(f"cannot write to {parent}: {exc.strerror or exc}") from exc
    try:
        yield tmp
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".old", dir=parent))
            os.replace(out_dir, old / "previous")
            os.replace(tmp, out_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def check_writable(out_dir: str | os.PathLike[str]) -> Path:
    """Fail fast (before a long run) if a report could not be written to ``out_dir``."""
    out = Path(out_dir)
    try:
        with _staging_dir(out) as tmp:
            (tmp / ".probe").write_text("")
            raise _Probe  # discard the staging directory: this was only a probe
    except _Probe:
        pass
    return out


class _Probe(Exception):
    pass


def write_report(report: Report, out_dir: str | os.PathLike[str]) -> Path:
    """Write ``report.json``, ``report.md`` and the figures into ``out_dir`` atomically; return it."""
    if not isinstance(report, Report):
        raise TypeError(f"write_report expects a Report; got {type(report).__name__}")
    out = Path(out_dir)
    missing = [f for f in report.figures if f not in report._pending]
    with _staging_dir(out) as tmp:
        if report._pending:
            from paper_common.plotting import save_figure

            for file, fig in report._pending.items():
                save_figure(fig, tmp / file)
        # figures of a report loaded from JSON: copy them over if they lie beside it
        for file in missing:
            src = out / file
            if src.exists():
                shutil.copy2(src, tmp / file)
        (tmp / REPORT_JSON).write_text(report.to_json())
        (tmp / REPORT_MD).write_text(report.to_markdown())
    return out


def pin_threads(torch: bool = False) -> Callable[[ReproduceFn], ReproduceFn]:
    """Decorate a package's ``reproduce(scale, seed, out_dir)`` to run with :data:`THREADS`
    ``[scale]`` threads (restored after). ``torch=True`` for packages that compute with torch: torch
    is imported first so its thread count is pinned before any model is built.

    >>> @pin_threads()
    ... def reproduce(scale="quick", seed=0, out_dir=None):
    ...     from threadpoolctl import threadpool_info
    ...     return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}
    >>> reproduce("smoke")
    {1}
    """
    import functools
    import inspect

    from paper_common.device import pinned_threads

    def decorate(fn: ReproduceFn) -> ReproduceFn:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Report:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            scale = check_scale(bound.arguments["scale"])
            with pinned_threads(THREADS[scale], torch=torch or None):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


class ReproduceFn(Protocol):
    def __call__(
        self, scale: str = ..., seed: int = ..., out_dir: str | os.PathLike[str] | None = ...
    ) -> Report: ...


class ArgumentParser(argparse.ArgumentParser):
    """argparse with errors as one line on stderr (``prog: error: ...; see --help``) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _seed_arg(value: str) -> int:
    try:
        seed = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--seed must be a non-negative integer; got {value!r}"
        ) from None
    if seed < 0:
        raise argparse.ArgumentTypeError(f"--seed must be a non-negative integer; got {seed}")
    return seed


def _out_dir_arg(value: str) -> Path:
    if not value.strip():
        raise argparse.ArgumentTypeError("--out must be a directory path")
    return Path(value)


def main(
    reproduce_fn: ReproduceFn, argv: Sequence[str] | None = None, prog: str | None = None
) -> int:
    """The ``python -m <package>`` command line: ``reproduce --scale S --seed N --out DIR``.

    Returns the exit status: 0 on success, 2 on bad input (one line on stderr), 1 if the run failed.
    """
    pkg = (
        prog
        or getattr(reproduce_fn, "package", None)
        or getattr(reproduce_fn, "__module__", "package").split(".")[0]
    )
    parser = ArgumentParser(
        prog=f"python -m {pkg}",
        description=f"Run {pkg}'s reproduction of the paper's headline claims and write a report.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    rp = sub.add_parser(
        "reproduce",
        help="check the paper's claims and write report.json, report.md and figures",
        description="Check the paper's claims at a scale and write report.json, report.md and PNG figures.",
    )
    rp.add_argument(
        "--scale",
        choices=SCALES,
        default="quick",
        help="smoke: seconds (tests); quick: <= ~5 min on 2 CPU cores (the README's numbers); "
        "full: the paper's setting, for a GPU or a larger machine (default: quick)",
    )
    rp.add_argument("--seed", type=_seed_arg, default=0, help="random seed, >= 0 (default: 0)")
    rp.add_argument(
        "--out",
        type=_out_dir_arg,
        default=None,
        help="report directory (default: results/<package>); replaced atomically if it holds a report",
    )
    args = parser.parse_args(argv)
    out = args.out if args.out is not None else Path("results") / pkg
    try:
        check_writable(out)
    except (OSError, ValueError) as exc:
        print(f"{parser.prog} reproduce: error: {exc}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    report = reproduce_fn(scale=args.scale, seed=args.seed, out_dir=None)
    if not report.runtime_s:
        report.runtime_s = time.perf_counter() - start
    try:
        write_report(report, out)
    except (OSError, ValueError) as exc:
        print(f"{parser.prog} reproduce: error: {exc}", file=sys.stderr)
        return 2
    print(f"{pkg}: {report.verdict_line()} at scale {args.scale}; report in {out}")
    return 0
