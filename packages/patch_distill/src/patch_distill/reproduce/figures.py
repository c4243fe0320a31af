"""The report's figures: the trade-off panels, patch-similarity maps and correspondence matches."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from paper_common import new_figure
from patch_distill.data import view_pair
from patch_distill.reproduce.run import label
from patch_distill.reproduce.scales import MASKED, SYNTHETIC, Scale


def tradeoff(summary: list[dict[str, Any]], cfg: Scale):  # type: ignore[no-untyped-def]
    panels = (("linear", "linear probe accuracy (CLS)"), ("r2_code", "texture-code R² (own patch)"),
              ("corr_mean", "correspondence accuracy"))  # fmt: skip
    fig, axes = new_figure(1, len(panels))
    for ax, (metric, title) in zip(axes, panels, strict=True):
        for d, v, o in sorted(
            {
                (r["dataset"], r["vit"], r["method"])
                for r in summary
                if r["method"] in cfg.objectives
            }
        ):
            rs = sorted(
                (r for r in summary if (r["dataset"], r["vit"], r["method"]) == (d, v, o)),
                key=lambda r: r["lambda"],
            )
            line = ax.errorbar([r["lambda"] for r in rs], [r[metric] for r in rs], yerr=[r[f"{metric}_sd"] for r in rs],
                               marker="o", capsize=3, label=f"{o} ({v})")  # fmt: skip
            # the masked lambda = 0 control of the same objective: hollow square, offset a little
            for r in (
                r for r in summary if (r["dataset"], r["vit"], r["method"]) == (d, v, o + MASKED)
            ):
                ax.errorbar([0.06], [r[metric]], yerr=[r[f"{metric}_sd"]], marker="s", mfc="none",
                            capsize=3, ls="none", color=line.lines[0].get_color(),
                            label=f"{o} ({v}) λ=0 masked")  # fmt: skip
        for b, style in (("mae", "--"), ("latent", "-."), ("random", ":")):
            for r in (r for r in summary if r["method"] == b and r["dataset"] == SYNTHETIC):
                ax.axhline(r[metric], ls=style, color="grey", lw=1)
                ax.annotate(
                    b,
                    (max(cfg.lambdas), r[metric]),
                    fontsize=7,
                    color="grey",
                    ha="right",
                    va="bottom",
                )
        ax.set_xlabel("patch-loss weight λ")
        ax.set_title(title, fontsize=9)
    axes[0].legend(fontsize=7)
    return fig


def similarity(tokens: dict[Any, Any], cfg: Scale):  # type: ignore[no-untyped-def]
    keys = sorted(tokens, key=lambda k: (k[2] == "random", k[2] == "mae", k[2], k[3]))
    fig, axes = new_figure(1, len(keys), size=(1.9 * len(keys), 2.2))
    axes = np.atleast_1d(axes)
    for ax, key in zip(axes, keys, strict=True):
        pa = tokens[key][0][0]  # first image, view A, (P, D)
        g = round(math.sqrt(pa.shape[0]))
        x = pa / (np.linalg.norm(pa, axis=1, keepdims=True) + 1e-8)
        q = (g // 2) * g + g // 2
        ax.imshow((x @ x[q]).reshape(g, g), cmap="viridis")  # own colour range: contrast, not level
        ax.plot(q % g, q // g, "r+", ms=8)
        ax.set_title(label(key[2], key[3]), fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle("cosine similarity to the query patch (+), one test image", fontsize=9)
    return fig


def correspondence(tokens: dict[Any, Any], runs: list[dict[str, Any]], cfg: Scale):  # type: ignore[no-untyped-def]
    """Matches of every patch of view A in the 8-pixel-shifted view B: green = within one patch."""
    import torch

    from patch_distill.data import chebyshev_hits

    top = max(cfg.lambdas)
    keys = sorted((k for k in tokens if k[2] in ("mae", "latent") or (k[2] in cfg.objectives and k[3] in (0.0, top))),
                  key=lambda k: (k[2] in ("mae", "latent"), k[2], k[3]))  # fmt: skip
    fig, axes = new_figure(1, len(keys), size=(2.4 * len(keys), 2.6))
    axes = np.atleast_1d(axes)
    for ax, key in zip(axes, keys, strict=True):
        pa, pb = (torch.tensor(t[:1]) for t in tokens[key])
        g = round(math.sqrt(pa.shape[1]))
        ps = cfg.vits[key[1]].patch_size
        pair = view_pair(torch.zeros(1, 3, g * ps, g * ps), "shift", 8, ps)
        a = torch.nn.functional.normalize(pa[0][pair.valid], dim=-1)
        b = torch.nn.functional.normalize(pb[0], dim=-1)
        nn_idx = (a @ b.T).argmax(-1)
        pred = torch.stack([nn_idx // g, nn_idx % g], -1)
        hit = chebyshev_hits(pred, pair.target[pair.valid])
        src = pair.target[pair.valid]
        for (r0, c0), (r1, c1), h in zip(src.tolist(), pred.tolist(), hit.tolist(), strict=True):
            ax.plot([c0, c1], [r0, r1], color="tab:green" if h else "tab:red", lw=0.6, alpha=0.7)
        ax.set_xlim(-0.5, g - 0.5)
        ax.set_ylim(g - 0.5, -0.5)
        ax.set_title(f"{label(key[2], key[3])}: {float(hit.float().mean()):.2f}", fontsize=8)
        ax.set_aspect("equal")
    fig.suptitle("shift-by-2-patches matches (true cell -> matched cell), one image", fontsize=9)
    return fig
