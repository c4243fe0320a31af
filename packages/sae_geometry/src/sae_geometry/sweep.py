"""A width x sparsity x seed grid of TopK SAEs over many layers, trained as stacked batches.

Members that share a width and an input dimension train together in one :class:`TopKSAE` stack
(one batched matrix product per step for all of them); every member has its own layer data, ``k``
and initialisation. Each layer's rows are split into training rows and held-out rows on which FVU
and L0 are measured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import product
from typing import Any

import numpy as np
import torch

from sae_geometry.geometry import unit_mean_square
from sae_geometry.sae import SAETrainConfig, TopKSAE, geometric_median, train_sae

__all__ = ["sweep", "sweep_grid"]


def _per_seed(name: str, value: Any, n_seeds: int) -> list[np.ndarray]:
    arrays = [value] if isinstance(value, np.ndarray | torch.Tensor) else list(value)
    if len(arrays) not in (1, n_seeds):
        raise ValueError(
            f"layer {name!r}: give one array or one per seed ({n_seeds}); got {len(arrays)}"
        )
    out = []
    for a in arrays:
        a = np.asarray(a.detach().cpu() if isinstance(a, torch.Tensor) else a, dtype=np.float32)
        if a.ndim != 2:
            raise ValueError(f"layer {name!r}: activations must be (n, d); got shape {a.shape}")
        if not np.isfinite(a).all():
            raise ValueError(f"layer {name!r}: activations have non-finite values")
        out.append(a)
    return out * n_seeds if len(out) == 1 else out


def sweep(
    layers: Mapping[str, Any],
    widths: Sequence[int],
    ks: Sequence[int],
    seeds: Sequence[int] = (0,),
    config: SAETrainConfig | None = None,
    eval_fraction: float = 0.2,
    progress: bool = False,
) -> list[dict[str, Any]]:
    """Train one TopK SAE per (layer, width, k, seed) and measure held-out FVU and L0.

    Args:
        layers: name -> activations ``(n, d)`` (one array, used by every seed) or a list with one
            array per seed (resampled data). Rows are rescaled to unit mean squared norm.
        widths, ks: the grid; every ``k`` must be <= every width.
        seeds: SAE initialisation (and batch order) seeds.
        config: training settings shared by all members (default ``SAETrainConfig()``).
        eval_fraction: the last fraction of each array's rows is held out.

    Returns rows ``{layer, n, k, seed, fvu, l0}`` in (layer, width, k, seed) order.
    """
    config = config or SAETrainConfig()
    widths, ks, seeds = [int(w) for w in widths], [int(k) for k in ks], [int(s) for s in seeds]
    if not layers:
        raise ValueError("layers must not be empty")
    if not widths or not ks or not seeds:
        raise ValueError("widths, ks and seeds must not be empty")
    if max(ks) > min(widths):
        raise ValueError(
            f"k={max(ks)} exceeds width n={min(widths)}: every k must be <= every width"
        )
    if not 0 < eval_fraction < 1:
        raise ValueError(f"eval_fraction must be in (0, 1); got {eval_fraction}")
    data = {name: _per_seed(name, value, len(seeds)) for name, value in layers.items()}
    train, held = {}, {}
    for name, arrays in data.items():
        for s, a in zip(seeds, arrays, strict=True):
            a = unit_mean_square(a)
            cut = round(len(a) * (1 - eval_fraction))
            if cut < 2 or len(a) - cut < 2:
                raise ValueError(f"layer {name!r} has too few rows ({len(a)}) to split")
            train[name, s], held[name, s] = a[:cut], a[cut:]
    members = list(product(layers, ks, seeds))
    by_dim: dict[int, list[tuple[str, int, int]]] = {}
    for m in members:
        by_dim.setdefault(train[m[0], m[2]].shape[1], []).append(m)
    results: dict[tuple[str, int, int, int], tuple[float, float]] = {}
    from tqdm.auto import tqdm

    stacks = {}
    for d, group in by_dim.items():  # one copy of each (layer, seed)'s data, shared by all widths
        keys = list(dict.fromkeys((g[0], g[2]) for g in group))
        index = torch.tensor([keys.index((g[0], g[2])) for g in group])
        n_tr = min(len(train[key]) for key in keys)
        n_ev = min(len(held[key]) for key in keys)
        xs = torch.from_numpy(np.stack([train[key][:n_tr] for key in keys]))
        xe = torch.from_numpy(np.stack([held[key][:n_ev] for key in keys]))
        rng = torch.Generator().manual_seed(d)
        sample = xs[:, torch.randperm(n_tr, generator=rng)[: config.median_sample]]
        median = geometric_median(sample.double()).float()[index]
        stacks[d] = (group, index, xs, xe, median)
    jobs = [(w, d) for w in widths for d in stacks]
    for w, d in tqdm(jobs, desc="sae grid", disable=not progress, leave=False):
        group, index, xs, xe, median = stacks[d]
        init_seed = int(np.random.default_rng([w, d, *seeds]).integers(2**31))
        sae = TopKSAE(d, w, [g[1] for g in group], seed=init_seed)
        train_sae(sae, xs, config, seed=init_seed + 1, b_dec=median, data_index=index)
        fvu, l0 = sae.evaluate(xe, data_index=index)
        for g, f, a in zip(group, fvu, l0, strict=True):
            results[g[0], w, g[1], g[2]] = (float(f), float(a))
    return [
        {"layer": name, "n": w, "k": k, "seed": s, "fvu": results[name, w, k, s][0],
         "l0": results[name, w, k, s][1]}
        for name in layers for w in widths for k in ks for s in seeds
    ]  # fmt: skip


def sweep_grid(rows: Sequence[Mapping[str, Any]], layer: str) -> tuple[np.ndarray, ...]:
    """``(n, k, fvu)`` arrays of one layer's rows, ready for :func:`~sae_geometry.scaling.fit_layer`."""
    sel = [r for r in rows if r["layer"] == layer]
    if not sel:
        raise ValueError(f"no rows for layer {layer!r}")
    return tuple(np.array([r[key] for r in sel], dtype=float) for key in ("n", "k", "fvu"))
