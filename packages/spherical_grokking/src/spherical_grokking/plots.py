"""The report's figures: accuracy curves per arm and task, grokking times with CIs, norms, spectra.

Each function takes the plain rows and histories that ``reproduce`` collects (lists of dicts), so
they also work on a report loaded back from JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from paper_common import bootstrap_ci, new_figure
from paper_common.stats import median_bounds

from .metrics import delay_bounds

__all__ = ["plot_curves", "plot_norms", "plot_spectra", "plot_times"]

Run = Mapping[str, Any]  # {"row": {...}, "history": {...}, ...}
TRAIN, TEST = "#0072B2", "#D55E00"
ARM_COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"]


def _grid(runs: Sequence[Run]) -> tuple[list[str], list[str]]:
    tasks = list(dict.fromkeys(r["row"]["task"] for r in runs))
    arms = list(dict.fromkeys(r["row"]["arm"] for r in runs))
    return tasks, arms


def plot_curves(runs: Sequence[Run], title: str = "") -> Figure:
    """Train (dashed) and test (solid) accuracy against step, one panel per task x arm, every seed.

    Panels of one task share their step axis, so the arms' delays compare at a glance.
    """
    tasks, arms = _grid(runs)
    fig, axes = new_figure(
        len(tasks), len(arms), size=(3.2 * len(arms), 2.5 * len(tasks)), squeeze=False
    )
    for i, task in enumerate(tasks):
        last = max(r["history"]["step"][-1] for r in runs if r["row"]["task"] == task)
        for j, arm in enumerate(arms):
            ax = axes[i][j]
            mine = [r for r in runs if r["row"]["task"] == task and r["row"]["arm"] == arm]
            if not mine:
                ax.set_visible(False)
                continue
            for r in mine:
                h = r["history"]
                ax.plot(h["step"], h["train_acc"], ls="--", color=TRAIN, alpha=0.7, lw=1.2)
                ax.plot(h["step"], h["test_acc"], color=TEST, alpha=0.8, lw=1.4)
            ax.set_title(f"{task}: {arm}", fontsize=9)
            ax.set_xlim(0, last)
            ax.set_ylim(-0.02, 1.02)
            ax.set_xlabel("step", fontsize=8)
            ax.set_ylabel("accuracy", fontsize=8)
    handles = [Line2D([], [], ls="--", color=TRAIN), Line2D([], [], color=TEST)]
    fig.legend(handles, ["train", "test"], loc="upper right", ncols=2)
    fig.suptitle(title or "accuracy per seed")
    fig.tight_layout()
    return fig


def plot_times(
    rows: Sequence[Mapping[str, Any]], keys: Sequence[str] = ("t_test95", "delay")
) -> Figure:
    """Per task, each arm's seeds and their median.

    Seeds: dots; censored (a lower bound): open triangles at the bound; a delay that is unknown
    (training never reached 0.99) is counted under the axis. Median: a square with the percentile
    bootstrap 95% CI when no seed is censored or unknown, else an open square at the low end of what
    the censored seeds allow, with an arrow when the median may be higher.
    """
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    fig, axes = new_figure(
        len(keys), len(tasks), size=(4.2 * len(tasks), 3.0 * len(keys)), squeeze=False
    )
    for i, key in enumerate(keys):
        for j, task in enumerate(tasks):
            ax = axes[i][j]
            mine = [r for r in rows if r["task"] == task]
            arms = list(dict.fromkeys(r["arm"] for r in mine))
            unknown = []
            for x, arm in enumerate(arms):
                sel = [r for r in mine if r["arm"] == arm]
                colour = ARM_COLOURS[x % len(ARM_COLOURS)]
                if key == "delay":
                    cols = ("t_train99", "t_train99_censored", "t_test95", "t_test95_censored")
                    lo, hi = delay_bounds(*([r[c] for r in sel] for c in cols))
                else:
                    lo = np.array([float(r[key]) for r in sel])
                    hi = np.where([bool(r[f"{key}_censored"]) for r in sel], np.inf, lo)
                exact, cens, ok = lo == hi, np.isfinite(lo) & ~np.isfinite(hi), np.isfinite(lo)
                jitter = np.linspace(-0.12, 0.12, len(sel)) if len(sel) > 1 else np.zeros(1)
                ax.scatter((x + jitter)[exact], lo[exact], s=14, color="0.4", zorder=3)
                ax.scatter((x + jitter)[cens], lo[cens], s=28, marker="^",
                           facecolors="none", edgecolors="0.3", zorder=3)  # fmt: skip
                if (~ok).any():
                    unknown.append(f"{arm}: {int((~ok).sum())}")
                med = median_bounds(lo, hi)
                if exact.all() and len(sel) >= 2:
                    ci = bootstrap_ci(lo, np.median, method="percentile")
                    ax.errorbar(x, ci.estimate, yerr=[[ci.estimate - ci.low], [ci.high - ci.estimate]],
                                fmt="s", color=colour, capsize=4, ms=6)  # fmt: skip
                elif med.exact:
                    ax.plot(x, med.low, "s", color=colour, ms=6)
                elif np.isfinite(med.low):
                    ax.plot(x, med.low, "s", mfc="none", mec=colour, ms=7)
                    ax.annotate("", (x, med.low), xytext=(0, 14), textcoords="offset points",
                                arrowprops={"arrowstyle": "<-", "color": colour})  # fmt: skip
            if unknown:
                ax.text(0.02, 0.02, "unknown: " + ", ".join(unknown), transform=ax.transAxes,
                        fontsize=7, color="0.3")  # fmt: skip
            ax.set_xticks(range(len(arms)), arms, rotation=30, ha="right", fontsize=8)
            ax.set_title(task, fontsize=10)
            ax.set_ylabel(
                {"t_test95": "steps to test acc >= 0.95", "delay": "t_test95 - t_train99"}.get(
                    key, key
                )
            )
    fig.tight_layout()
    return fig


def plot_norms(runs: Sequence[Run], task: str) -> Figure:
    """Residual-stream norm before the last normalisation, and the largest logit norm, over training."""
    fig, axes = new_figure(1, 2, size=(9.5, 3.4))
    arms = list(dict.fromkeys(r["row"]["arm"] for r in runs if r["row"]["task"] == task))
    for k, arm in enumerate(arms):
        colour = ARM_COLOURS[k % len(ARM_COLOURS)]
        for s, r in enumerate(
            r for r in runs if r["row"]["task"] == task and r["row"]["arm"] == arm
        ):
            h = r["history"]
            label = arm if s == 0 else None
            axes[0].plot(
                h["step"], h["residual_norm"], color=colour, alpha=0.8, lw=1.2, label=label
            )
            axes[1].plot(h["step"], h["logit_norm"], color=colour, alpha=0.8, lw=1.2, label=label)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("mean ||resid before N3||")
    axes[1].set_ylabel("max ||logits||")
    for ax in axes:
        ax.set_xlabel("step")
    axes[0].legend(fontsize=8)
    fig.suptitle(task, fontsize=10)
    fig.tight_layout()
    return fig


def plot_spectra(runs: Sequence[Run]) -> Figure:
    """Share of embedding energy per frequency after training, one panel per Z_p task, one bar set per arm."""
    with_spectrum = [r for r in runs if "spectrum" in r]
    tasks, arms = _grid(with_spectrum)
    fig, axes = new_figure(1, len(tasks), size=(5.0 * len(tasks), 3.2), squeeze=False)
    width = 0.8 / max(len(arms), 1)
    for j, task in enumerate(tasks):
        ax = axes[0][j]
        for k, arm in enumerate(arms):
            first = next(
                (r for r in with_spectrum if r["row"]["task"] == task and r["row"]["arm"] == arm),
                None,
            )
            if first is None:
                continue
            s = np.asarray(first["spectrum"], dtype=float)[1:]
            share = s / s.sum() if s.sum() > 0 else s
            freqs = np.arange(1, len(s) + 1)
            ax.bar(freqs + (k - (len(arms) - 1) / 2) * width, share, width=width,
                   color=ARM_COLOURS[k % len(ARM_COLOURS)], label=f"{arm} (seed {first['row']['seed']})")  # fmt: skip
        ax.set_xlabel("frequency (cyclic coordinate)")
        ax.set_ylabel("share of embedding energy")
        ax.set_title(task, fontsize=10)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
