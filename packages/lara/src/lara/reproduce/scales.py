"""The experiment's size at each scale: efficiency sweeps, the teacher and its world, the
distillation budget, the estimator check."""

from __future__ import annotations

from dataclasses import dataclass

from lara.distill import DistillConfig
from lara.efficiency import CHUNK_SIZES


@dataclass(frozen=True)
class Scale:
    """One scale of the reproduction.

    Attributes:
        seq_lens: lengths of the causal forward sweep.
        backward_lens: lengths of the forward + backward sweep.
        decode_lens: tokens at which the decoding state and time per token are read.
        heads, head_dim: attention shape of the sweeps (batch 1).
        repeat: timed runs per (method, length); the median with the runs' range.
        chunk_sizes: chunk sizes each chunked kernelized method is tuned over, per length.
        world: sizes of the fact world the teacher learns (``paper_common.facts.World``).
        teacher_size, teacher_steps: the fact LM (``paper_common.lm.fact_lm``).
        distill: the protocol's shared budget.
        samples: LARA++ samples per proposal in the estimator check.
        proposals: LARA proposals / Performer features in the estimator check.
        estimator_seeds: seeds of the random features in the estimator check.
    """

    seq_lens: tuple[int, ...]
    backward_lens: tuple[int, ...]
    decode_lens: tuple[int, ...]
    heads: int
    head_dim: int
    repeat: int
    chunk_sizes: tuple[int, ...]
    world: tuple[tuple[str, int], ...]
    teacher_size: str
    teacher_steps: int | None
    distill: DistillConfig
    samples: tuple[int, ...]
    proposals: tuple[int, ...]
    estimator_seeds: int


_WORLD_QUICK = (("n_people", 40), ("n_cities", 12), ("n_companies", 10), ("n_countries", 4))
SCALES = {
    "smoke": Scale(
        (64, 128), (64,), (8, 32), 2, 16, 2, (16, 64),
        (("n_people", 8), ("n_cities", 6), ("n_companies", 4), ("n_countries", 3)), "tiny", 40,
        DistillConfig(transfer_steps=2, finetune_steps=3, batch_size=8), (1, 4), (4, 8), 2,
    ),
    "quick": Scale(
        (256, 512, 1024, 2048, 4096, 8192), (256, 1024, 4096), (64, 256, 1024, 4096), 4, 64, 5,
        CHUNK_SIZES, _WORLD_QUICK, "tiny", 1000,
        DistillConfig(transfer_steps=60, finetune_steps=200, batch_size=32), (1, 4, 16, 64),
        (4, 16, 64), 5,
    ),
    "full": Scale(
        (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072), (1024, 4096, 16384, 32768),
        (256, 1024, 4096, 16384, 65536), 16, 128, 7, (*CHUNK_SIZES, 512),
        (("n_people", 200), ("n_cities", 40), ("n_companies", 30), ("n_countries", 10)),
        "small", None,
        DistillConfig(transfer_steps=1000, finetune_steps=3000, batch_size=64, lr=3e-4),
        (1, 2, 4, 8, 16, 32, 64, 128, 256), (4, 8, 16, 32, 64, 128, 256), 10,
    ),
}  # fmt: skip
