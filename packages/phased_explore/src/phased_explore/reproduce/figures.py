"""The report's figures: the frontier, the certificate against agents, visitation heat maps."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from paper_common import new_figure
from phased_explore.algorithms import LayerwiseExplorer, UniformExplorer
from phased_explore.mdp import noisy_lock
from phased_explore.protocol import run
from phased_explore.reproduce.scales import Scale


def frontier(rows: list[dict], cfg: Scale) -> Figure:
    """N_min per number of phases: the simulated range (grid resolution), the closed form, A^m."""
    fig, ax = new_figure(1, 1, size=(6, 3.8))
    rho = np.array([r["rho"] for r in rows], float)
    lo = np.array([r["N_min_low"] for r in rows], float)
    hi = np.array([r["N_min_high"] for r in rows], float)
    shown = np.where(np.isfinite(hi), hi, lo)
    ax.plot(rho, shown, "o-", label=f"simulated (success >= {cfg.success}), first N reaching it")
    ax.vlines(rho, lo, shown, color="C0", alpha=0.5, label="grid resolution")
    cens = ~np.isfinite(hi)
    if cens.any():
        ax.plot(rho[cens], lo[cens], "^", color="C0", label="censored: N_min above the grid")
    ax.plot(rho, [r["N_min_closed_form"] for r in rows], "s--", label="closed form")
    ax.plot(rho, [r["A^m"] for r in rows], ":", color="grey", label="A^{H/rho}")
    ax.set(xscale="log", yscale="log", xlabel="phases rho", ylabel="agents needed",
           title=f"deterministic lock, H = {cfg.lock_H}, A = 2")  # fmt: skip
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def accuracy_vs_agents(E: np.ndarray, eq: list[dict], cfg: Scale) -> Figure:
    fig, axes = new_figure(1, 2, size=(13, 5))
    N = np.asarray(cfg.ns, float)
    mean = E.mean(axis=0)
    axes[0].errorbar(N, mean, yerr=E.std(axis=0), marker="o", label="layerwise, rho = H")
    axes[0].plot(N, mean[0] * np.sqrt(N[0] / N), ":", color="grey", label="N^-1/2")
    axes[0].set(xscale="log", yscale="log", xlabel="agents per phase N", ylabel="E_model",
                title=f"noisy lock H = {cfg.noisy_H}, A = {cfg.noisy_A}")  # fmt: skip
    axes[0].legend()
    names = list(dict.fromkeys(r["algorithm"] for r in eq))
    means = [np.mean([r["E_model"] for r in eq if r["algorithm"] == a]) for a in names]
    axes[1].barh(names, means)
    axes[1].tick_params(axis="y", labelsize=7)
    axes[1].set(xscale="log", xlabel="E_model at equal trajectories (mean over seeds)",
                title=f"T = {eq[0]['trajectories']}")  # fmt: skip
    axes[1].xaxis.set_minor_formatter(NullFormatter())  # after the log scale, which resets it
    fig.tight_layout()
    return fig


def visitation(cfg: Scale, seed: int) -> Figure:
    H, A = cfg.noisy_H, cfg.noisy_A
    mdp = noisy_lock(H, A, seed=seed)
    T = H * cfg.agents_per_layer
    fig, axes = new_figure(1, 2, size=(10, 3.2))
    runs = (
        ("layerwise, rho = H", run(LayerwiseExplorer(), mdp, T // H, H, seed=seed)),
        ("uniform, rho = 1", run(UniformExplorer(), mdp, T, 1, seed=seed)),
    )
    for ax, (name, r) in zip(axes, runs, strict=True):
        visits = r.history.counts().sum((2, 3))  # (H, S)
        im = ax.imshow(np.log10(1 + visits.T), aspect="auto", cmap="viridis")
        ax.set(xlabel="layer h", ylabel="state (0, 1 live; 2 dead; 3 prize)", title=name,
               yticks=range(mdp.S), xticks=range(H))  # fmt: skip
        fig.colorbar(im, ax=ax, label="log10(1 + visits)")
    fig.tight_layout()
    return fig
