"""A sorted table of tracked ids with exact counters: the shared core of the counter-based sketches."""

from __future__ import annotations

import numpy as np

__all__ = ["Table"]


class Table:
    """Tracked ids (sorted int64) and their counts; vectorised lookup, add and insert."""

    def __init__(self, ids: np.ndarray | None = None, counts: np.ndarray | None = None) -> None:
        self.ids = np.zeros(0, np.int64) if ids is None else np.asarray(ids, np.int64)
        self.counts = np.zeros(0, np.int64) if counts is None else np.asarray(counts, np.int64)
        order = np.argsort(self.ids, kind="stable")
        self.ids, self.counts = self.ids[order], self.counts[order]

    def __len__(self) -> int:
        return int(self.ids.size)

    def find(self, items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions of ``items`` in the table and a mask of which are tracked."""
        if self.ids.size == 0:
            return np.zeros(items.size, np.int64), np.zeros(items.size, bool)
        pos = np.searchsorted(self.ids, items)
        pos_c = np.minimum(pos, self.ids.size - 1)
        return pos_c, self.ids[pos_c] == items

    def lookup(self, items: np.ndarray, default: float = 0.0) -> np.ndarray:
        pos, hit = self.find(items)
        out = np.full(items.size, default, dtype=np.float64)
        out[hit] = self.counts[pos[hit]]
        return out

    def add_tracked(self, uniq: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Add ``counts`` to the tracked ones among distinct ``uniq``; return the mask of untracked."""
        pos, hit = self.find(uniq)
        self.counts[pos[hit]] += counts[hit]
        return ~hit

    def insert(self, ids: np.ndarray, counts: np.ndarray) -> None:
        """Insert new (untracked, distinct) ids."""
        if ids.size == 0:
            return
        self.ids = np.concatenate([self.ids, ids])
        self.counts = np.concatenate([self.counts, counts.astype(np.int64)])
        order = np.argsort(self.ids, kind="stable")
        self.ids, self.counts = self.ids[order], self.counts[order]

    def keep(self, mask: np.ndarray) -> None:
        self.ids, self.counts = self.ids[mask], self.counts[mask]

    def add_table(self, other: Table) -> None:
        """Counts of ``other`` added in (union of ids)."""
        untracked = self.add_tracked(other.ids, other.counts)
        self.insert(other.ids[untracked], other.counts[untracked])

    def copy(self) -> Table:
        return Table(self.ids.copy(), self.counts.copy())
