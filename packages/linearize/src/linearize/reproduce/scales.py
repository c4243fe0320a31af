"""The experiment's size at each scale: the recall teacher, seeds, transfer budget, exact-KV budget
and the fact model."""

from __future__ import annotations

from dataclasses import dataclass

from linearize.teachers import TeacherSpec

__all__ = ["SCALES", "FactScale", "Scale"]


@dataclass(frozen=True)
class FactScale:
    """The knowledge-retention check: ``world`` (keyword arguments of ``paper_common.facts.World``),
    the fact model's training ``steps`` and the ``n_items`` multiple-choice questions."""

    world: tuple[tuple[str, int], ...]
    steps: int
    n_items: int


@dataclass(frozen=True)
class Scale:
    """One scale of the reproduction.

    Attributes:
        teacher: the recall teacher (architecture, size, base task length, training budget).
        seeds: linearization seeds (offsets added to ``reproduce``'s seed); claims' intervals are
            over them.
        n_distill: texts captured for attention transfer (a third per task).
        n_eval: items per evaluation set.
        transfer_steps, transfer_lr: the attention-transfer budget, the same for every arm.
        budget, sinks, window: the exact-KV budget every hybrid gets (routed slots: the rest).
        grid: ``all`` (every arm) or ``smoke`` (a subset).
        fact: the knowledge-retention check.
        workers: parallel jobs.
        archs: teacher architectures; real_models: checkpoints of the full scale.
    """

    teacher: TeacherSpec
    seeds: tuple[int, ...]
    n_distill: int
    n_eval: int
    transfer_steps: int
    transfer_lr: float
    budget: int
    sinks: int
    window: int
    grid: str
    fact: FactScale
    workers: int
    archs: tuple[str, ...] = ("llama",)
    real_models: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.grid not in ("smoke", "all"):
            raise ValueError(f"grid must be 'smoke' or 'all'; got {self.grid!r}")
        if not self.seeds:
            raise ValueError("seeds must not be empty")
        if self.sinks + self.window > self.budget:
            raise ValueError(
                f"sinks + window ({self.sinks} + {self.window}) exceed the budget ({self.budget})"
            )


SCALES: dict[str, Scale] = {
    "smoke": Scale(
        teacher=TeacherSpec(d_model=32, length=8, n_train=300, steps=40, batch_size=16),
        seeds=(0,),
        n_distill=32,
        n_eval=16,
        transfer_steps=6,
        transfer_lr=1e-2,
        budget=6,
        sinks=2,
        window=2,
        grid="smoke",
        fact=FactScale(
            world=(("n_people", 12), ("n_cities", 8), ("n_companies", 5), ("n_countries", 4)),
            steps=60,
            n_items=12,
        ),
        workers=1,
    ),
    "quick": Scale(
        teacher=TeacherSpec(),
        seeds=(0, 1, 2),
        n_distill=256,
        n_eval=96,
        transfer_steps=150,
        transfer_lr=1e-2,
        budget=8,
        sinks=2,
        window=2,
        grid="all",
        fact=FactScale(
            world=(("n_people", 30), ("n_cities", 12), ("n_companies", 10)), steps=800, n_items=90
        ),
        workers=2,
    ),
    # the paper's setting: real models from local paths, MMLU through lm-eval (the `eval` extra),
    # needle retrieval from local data; the recall teachers at length 256 (4x = 1024), both archs
    "full": Scale(
        teacher=TeacherSpec(n_layers=4, d_model=128, length=256, n_train=30000, steps=20000),
        archs=("llama", "qwen2"),
        seeds=(0, 1, 2, 3, 4),
        n_distill=4096,
        n_eval=512,
        transfer_steps=2000,
        transfer_lr=1e-3,
        budget=128,
        sinks=4,
        window=60,
        grid="all",
        fact=FactScale(world=(), steps=3000, n_items=400),
        real_models=(
            "meta-llama/Llama-3.2-1B",
            "meta-llama/Llama-3.1-8B",
            "Qwen/Qwen2.5-7B",
            "Qwen/Qwen2.5-32B",
        ),
        workers=1,
    ),
}
