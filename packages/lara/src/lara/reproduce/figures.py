"""The report's figures: time and memory against length, the decoding state, QA accuracy as a
fraction of softmax, and the estimator's error against samples."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from lara.efficiency import plot_decoding, plot_efficiency
from paper_common import new_figure

__all__ = ["decoding", "efficiency", "estimator", "quality"]

efficiency = plot_efficiency
decoding = plot_decoding


def estimator(rows: list[dict[str, Any]]) -> Figure:
    fig, ax = new_figure(1, 1, size=(5.5, 4))
    labels = {"lara++": "LARA++ (16 proposals, x samples each)", "lara": "LARA (x proposals)",
              "performer": "Performer (x features)"}  # fmt: skip
    for name, label in labels.items():
        pts = [r for r in rows if r["method"] == name]
        ax.plot([p["samples"] for p in pts], [p["rel_error"] for p in pts], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("samples / proposals / features")
    ax.set_ylabel("relative output error (real activations)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    return fig


def quality(rows: list[dict[str, Any]]) -> Figure:
    fig, ax = new_figure(1, 1, size=(6, 3.6))
    names = [r["method"] for r in rows]
    ax.bar(
        names,
        [r["fraction_of_softmax"] for r in rows],
        color=["black"] + ["C0"] * (len(names) - 1),
    )
    ax.axhline(0.95, ls="--", color="C3", lw=1, label="95% of softmax")
    fractions = np.array([r["fraction_of_softmax"] for r in rows], dtype=float)
    low = float(np.nanmin(fractions)) if np.isfinite(fractions).any() else 1.0  # NaN: teacher at 0
    ax.set_ylim(min(0.5, low - 0.05), 1.02)
    ax.set_ylabel("QA accuracy / softmax")
    ax.tick_params(axis="x", rotation=30)
    ax.legend(fontsize=7)
    return fig
