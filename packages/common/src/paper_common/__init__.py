"""Shared machinery of the NeurIPS 2026 paper suite.

``Claim``/``Report``/``write_report`` and the ``reproduce`` command line (:mod:`paper_common.reproduce`),
the suite runner (:mod:`paper_common.suite`), device/seed/memory/timing helpers
(:mod:`paper_common.device`), statistics (:mod:`paper_common.stats`) and plotting
(:mod:`paper_common.plotting`). Names are loaded on first use, so ``import paper_common`` stays cheap
(no scipy, matplotlib or torch).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Claim": "reproduce",
    "Control": "reproduce",
    "Report": "reproduce",
    "SCALES": "reproduce",
    "check_scale": "reproduce",
    "markdown_table": "reproduce",
    "pin_threads": "reproduce",
    "write_report": "reproduce",
    "main": "reproduce",
    "discover": "suite",
    "run_suite": "suite",
    "pick_device": "device",
    "seed_everything": "device",
    "peak_memory": "device",
    "Timer": "device",
    "Stopwatch": "device",
    "map_jobs": "device",
    "bootstrap_ci": "stats",
    "cohens_d": "stats",
    "paired_comparison": "stats",
    "new_figure": "plotting",
    "save_figure": "plotting",
}

__all__ = [
    "SCALES",
    "Claim",
    "Control",
    "Report",
    "Stopwatch",
    "Timer",
    "bootstrap_ci",
    "check_scale",
    "cohens_d",
    "discover",
    "main",
    "map_jobs",
    "markdown_table",
    "new_figure",
    "paired_comparison",
    "peak_memory",
    "pick_device",
    "pin_threads",
    "run_suite",
    "save_figure",
    "seed_everything",
    "write_report",
]
assert sorted(__all__) == sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'paper_common' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"paper_common.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


if TYPE_CHECKING:
    from paper_common.device import (
        Stopwatch,
        Timer,
        map_jobs,
        peak_memory,
        pick_device,
        seed_everything,
    )
    from paper_common.plotting import new_figure, save_figure
    from paper_common.reproduce import (
        SCALES,
        Claim,
        Control,
        Report,
        check_scale,
        main,
        markdown_table,
        pin_threads,
        write_report,
    )
    from paper_common.stats import bootstrap_ci, cohens_d, paired_comparison
    from paper_common.suite import discover, run_suite
