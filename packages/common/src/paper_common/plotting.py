"""One plotting style for every report: Agg backend (no screen needed), readable defaults, PNG output."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # (after use("Agg"): the backend must be chosen first)
from matplotlib.figure import Figure

__all__ = ["STYLE", "new_figure", "save_figure"]

STYLE: dict[str, Any] = {
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "lines.linewidth": 1.8,
    "axes.prop_cycle": matplotlib.cycler(
        color=[
            "#0072B2",
            "#D55E00",
            "#009E73",
            "#CC79A7",
            "#E69F00",
            "#56B4E9",
            "#F0E442",
            "#000000",
        ]
    ),  # Okabe-Ito: distinguishable with colour-blindness
}


def new_figure(
    nrows: int = 1, ncols: int = 1, size: tuple[float, float] | None = None, **kwargs: Any
) -> tuple[Figure, Any]:
    """``plt.subplots`` in the suite's style; ``size`` defaults to 4.5 x 3.2 inches per panel."""
    if size is None:
        size = (4.5 * ncols, 3.2 * nrows)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(nrows, ncols, figsize=size, **kwargs)
    return fig, axes


def save_figure(fig: Figure, path: str | os.PathLike[str]) -> Path:
    """Save ``fig`` as PNG at ``path`` (parent directories created) in the suite's style, then close it."""
    if not isinstance(fig, Figure):
        raise TypeError(f"save_figure expects a matplotlib Figure; got {type(fig).__name__}")
    out = Path(path)
    if out.suffix.lower() != ".png":
        raise ValueError(f"figures are saved as PNG; got {out.name!r}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with plt.rc_context(STYLE):
        fig.savefig(out, format="png")
    plt.close(fig)
    return out
