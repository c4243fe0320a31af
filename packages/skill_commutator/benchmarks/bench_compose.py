"""Both orders of every skill pair: batched `compose_pairs` against one `ordered_commutator` per pair.

`compose_pairs` runs each skill's first segment once (it does not depend on the partner) and every
pair's second segment in one stacked batch; the loop recomputes both segments per pair. Same numbers
(checked), printed as seconds and the ratio. Run: `make bench PKG=skill_commutator`.
"""

from __future__ import annotations

import itertools
import time

import torch

from skill_commutator import (
    ActivationRealization,
    TaskConfig,
    agent_task,
    build_task_lm,
    caa_basis,
    compose_pairs,
    deployment_strength,
    ordered_commutator,
)


def main() -> None:
    torch.set_num_threads(1)
    cfg = TaskConfig(n_layers=3, d_model=64, n_heads=4, steps=600)
    model, tok, _ = build_task_lm(cfg, seed=0)
    spec = agent_task(cfg.language(), n_contexts=8, n_contrast=48, seed=0)
    bases = [caa_basis(model, tok, s, 1, 4) for s in spec.skills]
    real = ActivationRealization(model, tok, spec.with_filler(), list(spec.skills), bases, 1)
    h0 = deployment_strength(real)
    h = 0.05 * h0
    pairs = list(itertools.combinations(range(len(spec.skills)), 2))
    start = time.perf_counter()
    res = compose_pairs(real, h, [h], pairs=pairs, steps_at_h0=1)  # one RK4 step at h, once
    batched = time.perf_counter() - start
    start = time.perf_counter()
    loop = [
        ordered_commutator(real.flow(a, 1), real.flow(b, 1), real.zeros(), h, readout=real.readout)
        for a, b in pairs
    ]
    looped = time.perf_counter() - start
    err = max(float((x - y).abs().max()) for x, y in zip(loop, res.c1[h], strict=True))
    print("| method | pairs | contexts | seconds | ratio |")
    print("|---|---|---|---|---|")
    print(f"| compose_pairs (batched) | {len(pairs)} | {real.batch} | {batched:.1f} | 1.00 |")
    print(
        f"| ordered_commutator per pair | {len(pairs)} | {real.batch} | {looped:.1f} | {looped / batched:.2f} |"
    )
    print(f"max |difference| of C1: {err:.1e}")


if __name__ == "__main__":
    main()
