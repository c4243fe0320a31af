"""The figures: eigenvectors of the first grid, learning curves on goal tasks, gaps vs bounds."""

from __future__ import annotations

import numpy as np

from laplacian_keyboard.reproduce.claims import EVAL_EVERY
from laplacian_keyboard.reproduce.scales import THRESHOLD
from paper_common import Report, new_figure


def add_figures(report: Report, m: dict) -> None:
    """Add ``eigenvectors``, ``learning_curves`` and ``bounds`` from :func:`measure_tabular`'s ``m``."""
    eig_pictures, curves, bound_rows = m["eig_pictures"], m["curves"], m["bound_rows"]
    base, (vals, vecs) = eig_pictures
    fig, axes = new_figure(1, 4, size=(13, 3.2))
    for i, ax in enumerate(axes):
        im = ax.imshow(base.to_grid(vecs[:, i]), cmap="RdBu_r")
        ax.set_title(f"eigenvector {i + 2}\nlambda = {vals[i]:.4f}", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        fig.colorbar(im, ax=ax, fraction=0.046)
    report.add_figure("eigenvectors", fig)
    keys = [k for k in curves if k.endswith("/goal")] or list(curves)
    fig, axes = new_figure(1, len(keys), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        for name, runs in curves[key].items():
            arr = np.asarray(runs)
            steps = np.arange(1, arr.shape[1] + 1) * EVAL_EVERY
            m, se = arr.mean(0), arr.std(0) / np.sqrt(len(arr))
            ax.plot(steps, m, label=name)
            ax.fill_between(steps, m - 1.96 * se, m + 1.96 * se, alpha=0.2)
        ax.axhline(THRESHOLD, color="grey", ls=":", lw=1)
        ax.set_title(key)
        ax.set_xlabel("environment steps")
        ax.set_ylabel("return / optimal")
    axes[0][0].legend(fontsize=7)
    report.add_figure("learning_curves", fig)
    fig, ax = new_figure()
    bx = np.array([[r["gap"], r["standard"], r["residual_value"]] for r in bound_rows])
    ax.scatter(bx[:, 1], bx[:, 0], s=12, label="vs 2||e||/(1-gamma)")
    ax.scatter(bx[:, 2], bx[:, 0], s=12, marker="x", label="vs residual-value bound")
    lim = float(bx[:, 1].max()) * 1.05
    ax.plot([0, lim], [0, lim], color="grey", lw=1)
    ax.set_xlabel("bound")
    ax.set_ylabel("measured zero-shot gap at s0")
    ax.legend(fontsize=8)
    report.add_figure("bounds", fig)
