"""The report's figure: screening gain against margin uncertainty, and planners across PMT noise."""

from __future__ import annotations

from matplotlib.figure import Figure

from paper_common import new_figure


def gain_vs_uncertainty(rows: list[dict], coverage: int, m: int) -> Figure:
    """Left: every population of every seed, gain over no screening against margin p(1-p).
    Right: the first seed's PMT populations, each planner's expected coverage against sigma."""
    fig, axes = new_figure(1, 2)
    for pop, marker in (("PMT", "o"), ("Beta", "s")):
        sub = [r for r in rows if r["population"] == pop]
        axes[0].scatter(
            [r["margin p(1-p)"] for r in sub],
            [r["gain vs no screening"] for r in sub],
            marker=marker,
            label=pop,
            alpha=0.7,
        )
    first = [r for r in rows if r["population"] == "PMT" and r["replicate"] == 0]
    for name in ("optimal", "screen top", "screen most uncertain", "no screening"):
        axes[1].plot([r["level"] for r in first], [r[name] for r in first], marker=".", label=name)
    axes[0].set(
        xlabel="margin uncertainty: mean p(1-p) near the cut-off",
        ylabel="screening gain (units covered)",
        title=f"K={coverage}, m={m}, all seeds",
    )
    axes[0].legend()
    axes[1].set(
        xscale="log",
        xlabel="PMT consumption noise sigma (aleatoric)",
        ylabel="expected vulnerable covered",
        title="planners on PMT populations (first seed)",
    )
    axes[1].legend(fontsize=7)
    return fig
