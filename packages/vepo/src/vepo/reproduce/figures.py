"""The report's figures: training curves (reward and entropies per RL step, seed means) and
pass@k with distinct valid solutions per method."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from paper_common import new_figure
from vepo.rl import METHODS

__all__ = ["curves", "pass_at_k"]


def curves(runs: list[dict[str, Any]]) -> Any:
    keys = [("reward", "training reward"), ("entropy/effective_entropy", "effective entropy (nats)"),
            ("entropy/sequence_entropy", "sequence entropy (nats)"),
            ("entropy/invalid_entropy_share", "invalid share of entropy")]  # fmt: skip
    fig, axes = new_figure(1, 4, size=(16, 3.6))
    for ax, (key, label) in zip(axes, keys, strict=True):
        for m in METHODS:
            hs = [r["history"] for r in runs if r["method"] == m]
            n = min(len(h) for h in hs)
            if n == 0:
                continue
            y = np.nanmean([[float(h[i].get(key, math.nan)) for i in range(n)] for h in hs], 0)
            w = max(1, n // 10)
            smooth = np.convolve(y, np.ones(w) / w, mode="valid")
            ax.plot(np.arange(len(smooth)) + w, smooth, label=m)
        ax.set(xlabel="RL step", title=label)
    axes[0].legend(fontsize=7)
    return fig


def pass_at_k(summary: list[dict[str, Any]], ks: tuple[int, ...]) -> Any:
    fig, (ax1, ax2) = new_figure(1, 2, size=(11, 3.8))
    for row in summary:
        ax1.plot(ks, [row[f"pass@{k}"] for k in ks], marker="o", label=row["method"])
    ax1.set(xscale="log", xlabel="k", ylabel="pass@k", title="pass@k on the RL problems")
    ax1.legend(fontsize=7)
    names = [r["method"] for r in summary]
    ax2.barh(names, [r["distinct_valid"] for r in summary])
    ax2.set(xlabel="distinct valid solutions per problem (16 samples)")
    return fig
