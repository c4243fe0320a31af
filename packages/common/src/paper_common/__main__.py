"""``python -m paper_common``: list the registered paper packages, or run their reproductions."""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from paper_common.reproduce import SCALES, ArgumentParser, verdict_line
from paper_common.suite import ENTRY_POINT_GROUP, discover, run_suite


def _parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="python -m paper_common",
        description="The NeurIPS 2026 paper suite: run every installed package's reproduction.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("list", help="print the registered paper packages, one per line")
    rp = sub.add_parser(
        "reproduce",
        help="run reproduce for some or all packages and write SUMMARY.md",
        description="Run each chosen package's reproduce; reports go to OUT/<package>/, "
        "the table of every claim to OUT/SUMMARY.md. A failing package is recorded and the rest go on.",
    )
    rp.add_argument("names", nargs="*", metavar="NAME", help="packages to run (see `list`)")
    rp.add_argument("--all", action="store_true", help="run every registered package (the default)")
    rp.add_argument("--scale", choices=SCALES, default="quick", help="default: quick")
    rp.add_argument("--seed", type=int, default=0, help="default: 0")
    rp.add_argument("--out", type=Path, default=Path("results"), help="default: results")
    rp.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    res = sub.add_parser(
        "results",
        help="write docs/results.md and the README's verdict column from committed reports",
        description="Generate the results page (every claim, its verdict, interval and controls) "
        "and the README table's verdict column from REPORTS/<package>/report.json.",
    )
    res.add_argument(
        "--reports", type=Path, default=Path("docs/packages"), help="default: docs/packages"
    )
    res.add_argument(
        "--out", type=Path, default=Path("docs/results.md"), help="default: docs/results.md"
    )
    res.add_argument("--readme", type=Path, default=Path("README.md"), help="default: README.md")
    res.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the page or the README column differ from the reports",
    )
    base = sub.add_parser(
        "base-lm",
        help="pretrain the shared base language model (hours on a CPU; resumable)",
        description="Pretrain the suite's base model (paper_common.lm.base) from scratch, resuming "
        "from its checkpoint if one exists, and save it in fp16 with its acceptance numbers.",
    )
    base.add_argument("--out", type=Path, default=None, help="default: the package's base_lm/")
    base.add_argument(
        "--checkpoint", type=Path, default=None, help="default: base_lm.ckpt in the suite cache"
    )
    base.add_argument("--steps", type=int, default=None, help="override the recipe's steps")
    base.add_argument(
        "--accept-only",
        action="store_true",
        help="only measure the saved model's acceptance numbers",
    )
    return parser


def _base_lm(args: argparse.Namespace) -> int:
    import json

    from paper_common.lm import base

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.accept_only:
        model, tok = base.load_base_lm(args.out)
        numbers = base.acceptance(model, tok)
    else:
        numbers = base.train_base_lm(args.out, args.checkpoint, args.steps)["acceptance"]
    print(json.dumps(numbers, indent=2))
    return 0 if numbers["passes"] else 1


def _results(args: argparse.Namespace) -> int:
    from paper_common.results import load_reports, results_page, update_readme

    try:
        reports = load_reports(args.reports)
        page = results_page(reports, source=args.reports.as_posix())
        readme = update_readme(args.readme.read_text(), reports)
    except (OSError, ValueError) as exc:
        print(f"python -m paper_common results: error: {exc}", file=sys.stderr)
        return 2
    stale = [
        str(path)
        for path, text in ((args.out, page), (args.readme, readme))
        if not path.exists() or path.read_text() != text
    ]
    if args.check:
        if stale:
            print(
                f"out of date with {args.reports}: {', '.join(stale)}; run `python -m paper_common results`",
                file=sys.stderr,
            )
            return 1
        print(f"{args.out} and {args.readme} match {len(reports)} reports")
        return 0
    args.out.write_text(page)
    args.readme.write_text(readme)
    print(f"wrote {args.out} and the verdict column of {args.readme} from {len(reports)} reports")
    return 0


def _writable(out: Path) -> str | None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:
        return f"cannot write to --out {out}: {exc.strerror or exc}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    registered = discover()
    if args.command == "results":
        return _results(args)
    if args.command == "base-lm":
        return _base_lm(args)
    if args.command == "list":
        if not registered:
            print(
                f"no paper packages registered (entry-point group {ENTRY_POINT_GROUP!r})",
                file=sys.stderr,
            )
        for name, ep in registered.items():
            print(f"{name}\t{ep.value}")
        return 0
    if args.all and args.names:
        parser.error("give package names or --all, not both")
    unknown = [n for n in args.names if n not in registered]
    if unknown:
        known = ", ".join(registered) or "none are installed"
        parser.exit(
            2,
            f"{parser.prog}: error: unknown package(s) {', '.join(unknown)}; registered: {known}\n",
        )
    problem = _writable(args.out)
    if problem:
        parser.exit(2, f"{parser.prog}: error: {problem}\n")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    summary = run_suite(
        args.names or None,
        scale=args.scale,
        seed=args.seed,
        out_dir=args.out,
        progress=False if args.no_progress else None,
    )
    failed = [r.name for r in summary.results if not r.ok]
    print(
        f"{len(summary.results)} packages run, {len(failed)} failed"
        + (f" ({', '.join(failed)})" if failed else "")
        + f"; {verdict_line(summary.verdicts())}; summary in {args.out / 'SUMMARY.md'}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
