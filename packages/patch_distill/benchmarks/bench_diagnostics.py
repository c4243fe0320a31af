"""What one pretraining step and each diagnostic cost on the quick-scale ViT (1 CPU thread).

Prints seconds per training step for every objective (with and without the patch term) and seconds
per diagnostic on 200 test images, so a researcher can size a sweep before running it.

    uv run python packages/patch_distill/benchmarks/bench_diagnostics.py
"""

from __future__ import annotations

import time

import torch

from paper_common import markdown_table
from patch_distill import (
    PretrainConfig,
    SyntheticShapes,
    ViTConfig,
    correspondence_accuracy,
    dense_probe,
    encode_tokens,
    knn_accuracy,
    linear_probe_accuracy,
    local_evidence_r2,
    pretrain,
)

VIT = ViTConfig(embed_dim=48, depth=3, num_heads=2)


def _timed(fn) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    torch.set_num_threads(1)
    gen = SyntheticShapes()
    pre, tr, te = gen.sample(512, 0), gen.sample(300, 1), gen.sample(200, 2)
    rows = []
    configs = [PretrainConfig(objective=o, patch_weight=w, vit=VIT, steps=12, batch_size=32)
               for o in ("dino", "contrastive", "vicreg", "barlow") for w in (0.0, 1.0)]  # fmt: skip
    configs += [
        PretrainConfig.baseline(b, vit=VIT, steps=12, batch_size=32) for b in ("mae", "latent")
    ]
    model = None
    for cfg in configs:
        pretrain(cfg.with_(steps=2), pre, device="cpu")  # warm-up
        res = None

        def run(cfg: PretrainConfig = cfg) -> None:
            nonlocal res
            res = pretrain(cfg, pre, device="cpu")

        rows.append({"what": f"train step: {cfg.label}", "seconds": _timed(run) / cfg.steps})
        model = res.backbone  # type: ignore[union-attr]
    ctr, ptr = encode_tokens(model, tr.images)
    cte, pte = encode_tokens(model, te.images)
    rows.append(
        {
            "what": "encode 500 images",
            "seconds": _timed(lambda: encode_tokens(model, torch.cat([tr.images, te.images]))),
        }
    )
    rows.append(
        {
            "what": "k-NN probe",
            "seconds": _timed(lambda: knn_accuracy(ctr, tr.labels, cte, te.labels)),
        }
    )
    rows.append(
        {
            "what": "linear probe",
            "seconds": _timed(lambda: linear_probe_accuracy(ctr, tr.labels, cte, te.labels)),
        }
    )
    rows.append(
        {
            "what": "texture-code R^2 (5-fold ridge)",
            "seconds": _timed(lambda: local_evidence_r2(pte, te.codes)),
        }
    )
    rows.append(
        {
            "what": "dense probe",
            "seconds": _timed(lambda: dense_probe(ptr, tr.patch_seg, pte, te.patch_seg)),
        }
    )
    rows.append(
        {
            "what": "correspondence (shift)",
            "seconds": _timed(lambda: correspondence_accuracy(model, te.images, "shift", 8)),
        }
    )
    print(markdown_table(rows))


if __name__ == "__main__":
    main()
