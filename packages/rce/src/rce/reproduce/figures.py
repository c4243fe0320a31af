"""The report's figures."""

from __future__ import annotations

from typing import Any

import numpy as np

from paper_common import (
    Report,
    new_figure,
)
from rce.attacks import BUDGETS

# every defence the runner knows, by the name the report uses
from rce.reproduce.scales import ATTACK_LABELS


def _figures(
    report: Report,
    cfg: dict[str, Any],
    pooled: dict[str, dict[str, np.ndarray]],
    cells: list[str],
    n_values: int,
) -> None:
    editors = cfg["editors"]
    # rank histograms, before and after, per defence
    fig, axes = new_figure(1, len(editors), size=(5.0 * len(editors), 3.4), squeeze=False)
    bins = np.logspace(
        0,
        np.log10(
            max(
                int(pooled["before"]["true_rank"].max()),
                *(int(pooled[c]["true_rank"].max()) for c in cells),
            )
            + 1
        ),
        25,
    )
    for ax, e in zip(axes[0], editors, strict=True):
        ax.hist(
            pooled["before"]["true_rank"],
            bins=bins,
            histtype="step",
            label="before editing",
            color="black",
        )
        for c in cells:
            if c.startswith(e + "/"):
                ax.hist(pooled[c]["true_rank"], bins=bins, histtype="step", label=c.split("/")[1])
        ax.axvline(10.5, ls=":", color="grey")
        ax.set(
            xscale="log",
            xlabel="rank of the true token (final layer)",
            ylabel="facts",
            title=e.upper(),
        )
        ax.legend(fontsize=7)
    report.add_figure("rank_histograms", fig)
    # ASR@B per attack x defence, chance line
    defs = [c.split("/")[1] for c in cells if c.startswith(editors[0] + "/")]
    fig, axes = new_figure(
        len(editors),
        len(defs),
        size=(3.2 * len(defs), 2.8 * len(editors)),
        squeeze=False,
        sharey=True,
    )
    for i, e in enumerate(editors):
        for j, d in enumerate(defs):
            ax = axes[i][j]
            cell = f"{e}/{d}"
            if cell not in pooled:
                ax.set_visible(False)
                continue
            for attack, label in ATTACK_LABELS.items():
                ys = [
                    np.mean(pooled[cell][f"success/{attack}/{b}"])
                    for b in BUDGETS
                    if f"success/{attack}/{b}" in pooled[cell]
                ]
                if ys:
                    ax.plot(BUDGETS[: len(ys)], ys, marker="o", ms=3, label=label)
            ax.plot(
                BUDGETS,
                [np.mean(pooled[cell][f"chance/{b}"]) for b in BUDGETS],
                color="black",
                ls=":",
                label="chance (decoy)",
            )
            ax.set(xscale="log", title=f"{e.upper()} / {d}", ylim=(0, 1.02))
            if i == len(editors) - 1:
                ax.set_xlabel("budget B")
            if j == 0:
                ax.set_ylabel("attack success rate")
    axes[0][0].legend(fontsize=6)
    report.add_figure("asr_by_budget", fig)
    # concealment vs fidelity
    fig, ax = new_figure(size=(5.0, 3.6))
    for c in cells:
        ax.scatter(np.mean(pooled[c]["success/output/10"]), np.mean(pooled[c]["target_top1"]), s=25)
        ax.annotate(
            c,
            (np.mean(pooled[c]["success/output/10"]), np.mean(pooled[c]["target_top1"])),
            fontsize=6,
        )
    ax.axvline(
        np.mean(pooled[cells[0]]["chance/10"]), ls=":", color="grey", label="chance@10 (decoy)"
    )
    ax.set(
        xlabel="Output Attack ASR@10 (lower conceals)", ylabel="sanitized target top-1 (fidelity)"
    )
    ax.legend(fontsize=7)
    report.add_figure("concealment_vs_fidelity", fig)
    # per-layer logit-lens rank of the true token
    fig, axes = new_figure(1, len(editors), size=(5.0 * len(editors), 3.4), squeeze=False)
    for ax, e in zip(axes[0], editors, strict=True):
        layers = np.arange(pooled["before"]["lens_rank"].shape[1])
        ax.plot(
            layers,
            np.median(pooled["before"]["lens_rank"], 0),
            color="black",
            marker="o",
            label="before editing",
        )
        for c in cells:
            if c.startswith(e + "/"):
                ax.plot(
                    layers,
                    np.median(pooled[c]["lens_rank"], 0),
                    marker="o",
                    ms=3,
                    label=c.split("/")[1],
                )
        ax.axhline(4, ls=":", color="grey")
        ax.set(
            yscale="log",
            xlabel="residual layer (logit lens)",
            ylabel="median rank of the true token",
            title=e.upper(),
        )
        ax.legend(fontsize=7)
    report.add_figure("lens_rank_by_layer", fig)


def _frontier_figure(report: Report, rows: list[dict[str, Any]], main: float | None) -> None:
    fig, ax = new_figure(size=(5.0, 3.6))
    x = [r["efficacy"] for r in rows]
    y = [r["output_asr@10_successful"] for r in rows]
    ax.plot(x, y, marker="o", color="tab:blue")
    for r in rows:
        ax.errorbar(r["efficacy"], r["output_asr@10_successful"],
                    yerr=[[r["output_asr@10_successful"] - r["asr_ci_low"]],
                          [r["asr_ci_high"] - r["output_asr@10_successful"]]],
                    color="tab:blue", capsize=2)  # fmt: skip
        label = f"clamp {r['clamp_norm_factor']:g}" + (
            " (ROME's)" if main is not None and r["clamp_norm_factor"] == main else ""
        )
        ax.annotate(label, (r["efficacy"], r["output_asr@10_successful"]), fontsize=7)
    ax.axhline(rows[0]["chance@10"], ls=":", color="grey", label="chance@10")
    ax.set(xlabel="edit efficacy (new target top-1)",
           ylabel="Output ASR@10 among successful edits", ylim=(0, 1.02))  # fmt: skip
    ax.legend(fontsize=7)
    report.add_figure("clamp_frontier", fig)
