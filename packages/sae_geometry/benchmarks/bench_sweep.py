"""Stacked SAE training (one `TopKSAE` holding G members) against a loop of G single SAEs.

The Stage-1 grid is hundreds of small SAEs; `sweep` trains every member of one width and input
size as one batched matrix product per step. Same data, k, initialisation and batches (the stacked
members equal the looped ones to float rounding, checked), printed as seconds, the ratio and peak
memory. Run: `make bench PKG=sae_geometry`.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from paper_common.device import peak_memory
from sae_geometry import SAETrainConfig, SyntheticLayer, TopKSAE, synthetic_layer, train_sae


def main() -> None:
    cfg = SAETrainConfig(steps=150, batch_size=256, lr=6e-3)
    layers = [SyntheticLayer("torus", d, k, embed_seed=i) for i, (d, k) in enumerate(
        [(d, k) for d in (1, 2, 3, 4) for k in (1, 4)])]  # fmt: skip
    x = torch.from_numpy(np.stack([synthetic_layer(s, 6000) for s in layers]))
    ks = [4, 8] * (len(layers) // 2)
    median = x.mean(1)
    # the first optimiser step imports torch's compiler stack (seconds): pay it before timing
    train_sae(TopKSAE(64, 8, 2), x[0], SAETrainConfig(steps=2, batch_size=8))
    print("| method | members | width | seconds | ratio | peak MiB |")
    print("|---|---|---|---|---|---|")
    for width in (32, 128):
        stacked = TopKSAE(64, width, ks, seed=0)
        singles = [stacked.member(i) for i in range(len(layers))]
        init = stacked.W_dec.detach().clone()
        start = time.perf_counter()
        with peak_memory() as mem_stacked:
            train_sae(stacked, x, cfg, seed=1, b_dec=median)
        t_stacked = time.perf_counter() - start
        start = time.perf_counter()
        with peak_memory() as mem_loop:
            for i, sae in enumerate(singles):
                train_sae(sae, x[i], cfg, seed=1, b_dec=median[i : i + 1])
        t_loop = time.perf_counter() - start
        with torch.no_grad():
            diff = max(
                float((stacked.W_dec[i] - s.W_dec[0]).abs().max()) for i, s in enumerate(singles)
            )
            moved = float((stacked.W_dec - init).abs().max())
        for name, t, mem in (("stacked", t_stacked, mem_stacked), ("loop", t_loop, mem_loop)):
            print(
                f"| {name} | {len(layers)} | {width} | {t:.1f} | {t / t_stacked:.2f} | "
                f"{mem.peak_mib:.0f} |"
            )
        print(
            f"width {width}: max |W_dec stacked - loop| {diff:.1e} "
            f"(training moved W_dec by up to {moved:.2f})"
        )


if __name__ == "__main__":
    main()
