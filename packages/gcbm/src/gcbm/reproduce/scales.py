"""The sizes of each scale (``smoke`` for tests, ``quick`` for the docs, ``full`` with real data)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SCALES", "TU_ROOT_ENV", "Scale"]

#: environment variable naming the folder with the TU datasets' raw files (``full`` only)
TU_ROOT_ENV = "GCBM_TU_ROOT"


@dataclass(frozen=True)
class Scale:
    """Graphs per synthetic dataset, seeds, GNN and LM epochs, vocabulary size, and the TU datasets
    read from ``$GCBM_TU_ROOT/<name>/raw`` (never downloaded)."""

    n_graphs: int
    seeds: int
    epochs: int
    lm_epochs: int
    max_concepts: int
    tu_datasets: tuple[str, ...] = ()


SCALES = {
    "smoke": Scale(160, 2, 5, 2, 16),
    "quick": Scale(600, 3, 40, 20, 32),
    "full": Scale(2000, 5, 200, 100, 64, ("DHFR", "MUTAG", "PROTEINS", "NCI1")),
}
