"""The report's figures (matplotlib, through ``paper_common.new_figure``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from lora_alpha.reproduce.run import BASE_LR
from lora_alpha.sweep import PowerLawFit, SweepResult
from paper_common import new_figure


def law(res: SweepResult, best: dict[int, float], fit: PowerLawFit) -> Any:
    fig, (ax1, ax2) = new_figure(1, 2, size=(10, 4))
    means = res.mean("loss")
    for r in sorted(best):
        alphas = sorted(a for rr, a, _ in means if rr == r)
        ax1.plot(alphas, [means[(r, a, BASE_LR)] for a in alphas], marker="o", label=f"r={r}")
        if math.isfinite(best[r]):  # NaN: every alpha diverged at this rank
            ax1.axvline(best[r], color=ax1.lines[-1].get_color(), ls=":", lw=1)
    ax1.set(xscale="log", yscale="log", xlabel="alpha (scale alpha/r)", ylabel="test MSE",
            title=f"regression, lr {BASE_LR:g}")  # fmt: skip
    ax1.legend(fontsize=8)
    ranks = np.array(sorted(best), dtype=float)
    ax2.plot(ranks, [best[int(r)] for r in ranks], "o", label="best alpha")
    grid = np.geomspace(ranks[0], ranks[-1], 50)
    ax2.plot(grid, fit.predict(grid), label=f"fit {fit.coefficient:.0f} r^{fit.exponent:.2f}")
    ax2.plot(grid, 2 * grid, "--", label="alpha = 2r")
    ax2.plot(grid, 16 + 0 * grid, ":", label="alpha = 16")
    ax2.set(xscale="log", yscale="log", xlabel="rank r", ylabel="alpha*", title="optimal alpha")
    ax2.legend(fontsize=8)
    return fig


def surface(surface: SweepResult, r: int) -> Any:
    alphas, lrs, table = surface.surface(r, "loss")
    fig, ax = new_figure(1, 1, size=(5.5, 4))
    im = ax.imshow(np.log10(table), aspect="auto", origin="lower", cmap="viridis_r")
    ax.set_xticks(range(len(lrs)), [f"{x:g}" for x in lrs])
    ax.set_yticks(range(len(alphas)), [f"{a:g}" for a in alphas])
    ax.set(xlabel="learning rate", ylabel="alpha", title=f"log10 test MSE, r={r}")
    fig.colorbar(im, ax=ax)
    return fig


def interaction(interaction: dict[str, list[dict[str, Any]]]) -> Any:
    fig, axes = new_figure(2, len(interaction), size=(4 * len(interaction), 6.5))
    axes = np.asarray(axes).reshape(2, -1)
    for j, (task, rows) in enumerate(interaction.items()):
        for kind, style in (("alpha", "o-"), ("lr", "s--")):
            ks = sorted({r["factor"] for r in rows if r["kind"] == kind})
            at = [[r for r in rows if r["kind"] == kind and r["factor"] == k] for k in ks]
            axes[0, j].plot(ks, [np.mean([r["score"] for r in g]) for g in at], style,
                            label=f"{kind} x k (mean over seeds)")  # fmt: skip
            drift = [np.exp(np.mean(np.log([r["drift_ratio_full_ft"] for r in g]))) for g in at]
            axes[1, j].plot(ks, drift, style, label=f"{kind} x k (geometric mean)")
        axes[0, j].set(xscale="log", title=task, ylabel="score")
        axes[1, j].set(xscale="log", xlabel="factor k", ylabel="drift ratio (full-FT ref.)")
        axes[0, j].legend(fontsize=8)
    return fig


def compare(rows_all: list[dict[str, Any]]) -> Any:
    compare = rows_all
    tasks = sorted({c["task"] for c in compare})
    fig, axes = new_figure(1, len(tasks), size=(4.5 * len(tasks), 3.8))
    axes = np.atleast_1d(axes)
    for ax, task in zip(axes, tasks, strict=True):
        rows = [c for c in compare if c["task"] == task]
        methods = list(dict.fromkeys(c["method"] for c in rows))
        ranks = sorted({c["r"] for c in rows})
        width = 0.8 / len(methods)
        for i, m in enumerate(methods):
            vals = [
                next(c["score"] for c in rows if c["method"] == m and c["r"] == r) for r in ranks
            ]
            ax.bar(np.arange(len(ranks)) + i * width, vals, width, label=m)
        ax.set_xticks(np.arange(len(ranks)) + 0.4 - width / 2, [f"r={r}" for r in ranks])
        ax.set(title=task, ylabel="score")
    axes[0].legend(fontsize=7)
    return fig


def diagnostics(curves: dict[str, list[dict[str, float]]]) -> Any:
    keys = [("update_norm", "||dW||_F"), ("drift_ratio", "drift ratio (full-FT ref.)"),
            ("stable_rank", "stable rank of dW"), ("sharpness", "top Hessian eigenvalue")]  # fmt: skip
    fig, axes = new_figure(1, 4, size=(15, 3.5))
    for ax, (key, label) in zip(axes, keys, strict=True):
        for name, hist in curves.items():
            pts = [(h["step"], h[key]) for h in hist if key in h and math.isfinite(h[key])]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker=".", label=name)
        ax.set(xlabel="step", title=label)
        if key in ("sharpness", "update_norm"):
            ax.set_yscale("log")
    axes[0].legend(fontsize=7)
    return fig
