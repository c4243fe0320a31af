"""The report's figures: weighted error against memory per exponent, and against prediction noise
(means over replicate seeds, the spread as a band)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from paper_common import new_figure
from spacer.reproduce.scales import Scale

FLOOR = 1e-2  # exact answers (error 0) drawn at this height on log axes
SHOWN = (
    "SpaceR",
    "Count-Min (CU)",
    "Misra-Gries",
    "Learned Count-Min",
    "Prediction Count-Sketch",
    "Learned CountSketch++ C=5",
    "Trivial (exact on predictions)",
    "two-pass Prediction Count-Sketch",
    "SpaceSaving at B log B",
)
# The suite's cycle has 8 colours (Okabe-Ito); the figures draw up to 9+ curves per panel, so
# curves past the eighth would reuse the first colours (SpaceR's). Colours here, in order of
# appearance: Okabe-Ito, then Tol's dark wine, grey and indigo.
PALETTE = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#E69F00",
    "#56B4E9",
    "#F0E442",
    "#000000",
    "#882255",
    "#999999",
    "#332288",
)


def _colour(i: int) -> str:
    if i >= len(PALETTE):
        raise ValueError(f"{i + 1} curves in one panel; the palette has {len(PALETTE)} colours")
    return PALETTE[i]


def _spread(rows: list[dict], key: str, x: str) -> dict[str, tuple[list, np.ndarray, np.ndarray]]:
    """Per method: x values, the mean and the (min, max) over replicates of ``key``."""
    acc: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        acc[r["method"]][r[x]].append(max(r[key], FLOOR))
    out = {}
    for m, by_x in acc.items():
        xs = sorted(by_x)
        v = [np.asarray(by_x[k]) for k in xs]
        out[m] = (xs, np.array([a.mean() for a in v]), np.array([[a.min(), a.max()] for a in v]))
    return out


def error_vs_memory(rows: list[dict], cfg: Scale) -> Figure:
    fig, axes = new_figure(1, len(cfg.exponents), sharey=False)
    axes = np.atleast_1d(axes)
    for ax, a in zip(axes, cfg.exponents, strict=True):
        spread = _spread([r for r in rows if r["exponent"] == a], "weighted_error", "budget")
        for i, m in enumerate(SHOWN):
            xs, mean, band = spread[m]
            lw = 2.5 if m == "SpaceR" else 1.2
            ax.plot(xs, mean, marker="o", label=m, lw=lw, color=_colour(i))
            ax.fill_between(xs, band[:, 0], band[:, 1], color=_colour(i), alpha=0.15)
        ax.set(xscale="log", yscale="log", title=f"Zipf {a}", xlabel="memory B (words)")
        ax.set_xticks(cfg.budgets, labels=[str(b) for b in cfg.budgets])
        ax.xaxis.set_minor_formatter(NullFormatter())
    axes[0].set_ylabel(f"weighted error (mean over seeds; 0 drawn at {FLOOR})")
    axes[0].legend(fontsize=7)
    return fig


def error_vs_noise(noise_rows: list[dict], a0: float, budget: int) -> Figure:
    fig, ax = new_figure()
    for i, (m, (xs, mean, band)) in enumerate(
        _spread(noise_rows, "weighted_error", "noise").items()
    ):
        lw = 2.5 if m == "SpaceR" else 1.2
        ax.plot(xs, mean, marker="o", label=m, lw=lw, color=_colour(i))
        ax.fill_between(xs, band[:, 0], band[:, 1], color=_colour(i), alpha=0.15)
    ax.set(
        xlabel="fraction of wrong predictions",
        ylabel="weighted error (mean over seeds)",
        yscale="log",
        title=f"Zipf {a0}, B={budget}",
    )
    ax.legend(fontsize=7)
    return fig
