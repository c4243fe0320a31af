"""The experiment's size at each scale: stream length, universe, Zipf exponents, memories, seeds."""

from __future__ import annotations

from dataclasses import dataclass

from paper_common.experiment import MIN_SEEDS


@dataclass(frozen=True)
class Scale:
    """One scale of the reproduction.

    Attributes:
        n: stream length (items).
        universe: number of distinct ids the Zipf law draws from.
        exponents: Zipf exponents of the synthetic streams.
        budgets: memories (words) of the error-vs-memory grid.
        budget: the memory B (words) at which the claims are checked.
        noises: fractions of wrong predictions of the noisy-oracle sweep.
        seeds: independent replicates (stream and sketch randomness) each claim's interval is over.
        stdlib_files: Python standard-library files read for the real word stream (None: all).
        batch: items per ``update`` call (speed only: the answers do not depend on it).
        literature_multipliers: S = 7 ceil(log2 n) x these for the literature's budget; must
            contain the claim's multiplier (10).
        binary_items: items of the numpy-binaries stream (None: all, about 3.9 M).
    """

    n: int
    universe: int
    exponents: tuple[float, ...]
    budgets: tuple[int, ...]
    budget: int
    noises: tuple[float, ...]
    seeds: int
    stdlib_files: int | None
    batch: int = 1 << 14
    literature_multipliers: tuple[int, ...] = (1, 2, 5, 10, 20)
    binary_items: int | None = None

    def __post_init__(self) -> None:
        if 10 not in self.literature_multipliers:
            raise ValueError(
                f"literature_multipliers must include 10 (claim 5); got {self.literature_multipliers}"
            )
        if self.budget not in self.budgets:
            raise ValueError(f"budget {self.budget} must be one of budgets {self.budgets}")
        if 0.5 not in self.noises or 0.0 not in self.noises:
            raise ValueError(f"noises must include 0.0 and 0.5 (claim 4); got {self.noises}")
        if self.seeds < MIN_SEEDS:
            raise ValueError(
                f"seeds must be >= {MIN_SEEDS} (an interval over seeds); got {self.seeds}"
            )


SCALES = {
    "smoke": Scale(
        20_000, 2_000, (1.0,), (100, 200), 200, (0.0, 0.5), 3, 30, 1 << 14, (1, 10), 20_000
    ),
    "quick": Scale(
        1_000_000,
        100_000,
        (0.5, 1.0, 1.5, 2.0),
        (250, 1000, 4000),
        1000,
        (0.0, 0.1, 0.25, 0.5, 0.75),
        3,
        None,
    ),
    # the paper's real streams (CAIDA IP traces, AOL queries) are not redistributable: pass your own
    # file through spacer.streams.read_items; full scale runs the synthetic grid at 10x the length
    "full": Scale(
        10_000_000,
        1_000_000,
        (0.5, 0.75, 1.0, 1.25, 1.5, 2.0),
        (250, 500, 1000, 2000, 4000, 8000, 16000),
        4000,
        (0.0, 0.1, 0.25, 0.5, 0.75, 1.0),
        5,
        None,
    ),
}
