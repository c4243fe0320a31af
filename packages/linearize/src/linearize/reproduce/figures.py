"""The report's figures: MQAR over length, MSE per layer, the ablation waterfall, key dependence."""

from __future__ import annotations

from typing import Any

import numpy as np

from linearize.reproduce.claims import _delta_gain, _head_errors, _values
from linearize.reproduce.run import OURS
from paper_common import (
    new_figure,
)


def _figures(report, grid, runs, teacher_row) -> None:  # type: ignore[no-untyped-def]
    names = list(grid)
    keys, xs = ("mqar_1x", "mqar_2x", "mqar_4x"), [1, 2, 4]
    styles = {"update": "-", "intervention": "--", "baseline": ":"}
    cmap = _colors(len(names))
    fig, ax = new_figure(size=(8, 4.5))
    for i, name in enumerate(names):
        group = grid[name][0]
        m = [np.mean(_values(runs, name, k)) for k in keys]
        ax.plot(xs, m, styles[group], color=cmap[i], marker="o", ms=3, label=f"{name} ({group})")
    ax.plot(xs, [teacher_row[k] for k in keys], "k-", lw=2.5, marker="s", label="softmax teacher")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, ["1x", "2x", "4x"])
    ax.set_xlabel("sequence length (x training length)")
    ax.set_ylabel("MQAR accuracy")
    ax.legend(fontsize=5.5, ncol=2, loc="upper right")
    report.add_figure("mqar_vs_length", fig)

    fig, ax = new_figure(size=(7, 4))
    for name in [n for n in names if grid[n][0] == "update"]:
        per_layer = _head_errors(runs, name).mean(1)
        ax.plot(range(len(per_layer)), per_layer, marker="o", label=name)
    ax.set_xticks(range(len(per_layer)))
    ax.set_xlabel("layer")
    ax.set_ylabel("relative attention-output MSE")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    report.add_figure("mse_per_layer", fig)

    steps = [
        n
        for n in ("deltanet", "deltanet+sinks", "deltanet+conv", "deltanet+routing", OURS)
        if n in grid
    ]
    vals = [np.mean(_values(runs, n, "mqar_4x")) for n in steps]
    fig, ax = new_figure(size=(7, 4))
    ax.bar(0, vals[0], color="grey")
    for i, v in enumerate(vals[1:], 1):
        ax.bar(i, v - vals[0], bottom=vals[0], color="tab:green" if v >= vals[0] else "tab:red")
    ax.axhline(teacher_row["mqar_4x"], color="k", ls="--", label="softmax")
    ax.set_xticks(range(len(steps)), steps, rotation=20, fontsize=7)
    ax.set_ylabel("MQAR accuracy at 4x")
    ax.legend()
    report.add_figure("ablation_waterfall", fig)

    if "gated_scalar" in grid and "deltanet" in grid:
        kdi = np.asarray(teacher_row["key_dependence"]).ravel()
        adv = _delta_gain(runs)
        fig, ax = new_figure(size=(5, 4))
        ax.scatter(kdi, adv)
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_xlabel("key-dependence index (teacher head)")
        ax.set_ylabel("gated MSE - delta MSE")
        report.add_figure("key_dependence_vs_delta_gain", fig)


def _colors(n: int) -> list[Any]:
    """``n`` distinct colours (tab20)."""
    import matplotlib

    cmap = matplotlib.colormaps["tab20"]
    return [cmap(i % 20) for i in range(n)]
