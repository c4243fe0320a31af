"""What every package's ``reproduce`` shares, so a package writes only its measurements and claims.

A package's ``reproduce/`` subpackage holds ``scales.py`` (one frozen dataclass per scale),
``run.py`` (the measurements), ``claims.py`` (verdicts and their controls) and ``figures.py``; its
``__init__.py`` builds the entry point with :func:`experiment`::

    @experiment("spacer", "Frequency estimation without predictions", SCALES)
    def reproduce(cfg: Scale, report: Report, seed: int) -> None:
        results = run.measure(cfg, seed)
        for claim in claims.decide(results, cfg):
            report.add_claim(claim)

:func:`experiment` turns that into ``reproduce(scale="quick", seed=0, out_dir=None) -> Report``:
it checks the scale, pins the thread count (:data:`~paper_common.reproduce.THREADS`), makes the
report, times the run, records the scale's configuration, and writes the report when asked.
:func:`replicate_seeds` gives the independent seeds a claim's interval is computed over.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np

from paper_common.reproduce import (
    SCALES,
    Report,
    ReproduceFn,
    check_scale,
    pin_threads,
    write_report,
)

__all__ = ["MIN_SEEDS", "check_scales", "experiment", "replicate_seeds"]

MIN_SEEDS = 3
"""The fewest independent seeds a stochastic claim's interval is computed over."""

S = TypeVar("S")


def replicate_seeds(seed: int, n: int) -> list[int]:
    """``n`` independent 32-bit seeds derived from ``seed`` (``numpy.random.SeedSequence``), so the
    replicates of run ``seed`` never overlap those of run ``seed + 1``.

    >>> replicate_seeds(0, 3) == replicate_seeds(0, 3), len(set(replicate_seeds(0, 5)))
    (True, 5)
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative int; got {seed!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int; got {n!r}")
    return [int(s) for s in np.random.SeedSequence(int(seed)).generate_state(n)]


def check_scales(scales: Mapping[str, Any]) -> None:
    """A package's scales: one frozen dataclass instance for each of smoke, quick and full."""
    missing = [s for s in SCALES if s not in scales]
    if missing or set(scales) - set(SCALES):
        raise ValueError(f"scales must be exactly {', '.join(SCALES)}; got {', '.join(scales)}")
    for name, cfg in scales.items():
        if not dataclasses.is_dataclass(cfg) or isinstance(cfg, type):
            raise TypeError(
                f"scale {name!r} must be a dataclass instance; got {type(cfg).__name__}"
            )
        if not cfg.__dataclass_params__.frozen:  # type: ignore[attr-defined]
            raise TypeError(f"scale {name!r}: {type(cfg).__name__} must be a frozen dataclass")


def _config_cell(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return ", ".join(str(_config_cell(v)) for v in value)
    return value if isinstance(value, int | float | str | bool) or value is None else str(value)


def experiment(
    package: str,
    title: str,
    scales: Mapping[str, S],
    *,
    torch: bool = False,
    notes: str = "",
) -> Callable[[Callable[[S, Report, int], None]], ReproduceFn]:
    """Make a package's ``reproduce(scale, seed, out_dir)`` from ``body(cfg, report, seed)``.

    ``body`` fills ``report`` (claims, tables, figures, notes) for the scale's configuration
    ``cfg = scales[scale]``. Around it: the scale is checked, threads are pinned
    (``torch=True`` for packages computing with torch), the run is timed, the configuration becomes
    the report's ``configuration`` table, ``notes`` (if given) start the report's notes, and the
    report is written to ``out_dir`` when one is given.
    """
    check_scales(scales)

    def decorate(body: Callable[[S, Report, int], None]) -> ReproduceFn:
        def reproduce(
            scale: str = "quick", seed: int = 0, out_dir: str | os.PathLike[str] | None = None
        ) -> Report:
            """Run the experiment at ``scale`` and return (and, with ``out_dir``, write) the report."""
            check_scale(scale)
            if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
                raise ValueError(f"seed must be a non-negative int; got {seed!r}")
            cfg = scales[scale]
            start = time.perf_counter()
            report = Report(package=package, title=title, scale=scale, seed=seed, notes=notes)
            body(cfg, report, seed)
            report.add_table(
                "configuration",
                [
                    {"field": f.name, "value": _config_cell(getattr(cfg, f.name))}
                    for f in dataclasses.fields(cfg)  # type: ignore[arg-type]
                ],
            )
            report.runtime_s = time.perf_counter() - start
            if out_dir is not None:
                write_report(report, out_dir)
            return report

        reproduce.__module__ = body.__module__
        reproduce.__doc__ = body.__doc__ or reproduce.__doc__
        entry = pin_threads(torch=torch)(reproduce)
        entry.package = package  # type: ignore[attr-defined]  # main() names the command after it
        return entry

    return decorate
