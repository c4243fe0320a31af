"""SpaceR: one pass, no predictions: admit items by random sampling, then count them exactly.

The rule we implement (the paper's abstract leaves the details open; ``seeds/spacer.md`` has the
reasoning):

* a table of at most ``k = memory_words // 2`` tracked items (one word for the id, one for the count);
* **sampled admission**: an occurrence of an untracked item is sampled with probability
  ``p_t = min(1, alpha * k / N_t)``, where ``N_t`` is the stream length before the current batch
  (so early items are admitted for sure and later light items rarely). Once sampled, an item is
  tracked and every later occurrence is counted exactly;
* **bias correction at admission**: an item admitted after ``X`` unsampled occurrences starts at
  its counted occurrences plus ``(1 - p) / p``, the expected number of misses, which makes the
  count an unbiased estimate under sample-and-hold at a fixed rate (``E[f_hat] = f``) and needs no
  extra word;
* **eviction**: when more than ``k`` items are tracked, the ones with the smallest counts are
  dropped (they answer 0 from then on): heavy items, admitted early and counted exactly, are safe.

A batch is processed at once: an untracked item with ``c`` occurrences is admitted with
probability ``1 - (1-p)^c`` and misses a truncated-geometric number ``X < c`` of them (the same
distribution as item-by-item sampling within the batch), then the table keeps its ``k`` largest
counts; ties at the boundary keep the smallest ids (a rule, not the order a partial sort happens to
leave, so the survivors do not depend on the numpy build or the CPU).

Counts are exact for every item whose first occurrence falls in a batch that starts while
``N_t <= alpha * k`` (then ``p_t = 1``), as long as no item has been evicted (at most ``k``
distinct items so far). Free slots alone do not make a count exact: an item first seen later is
sampled at ``p_t < 1`` like any other, so it may start from the bias-corrected estimate.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from spacer.base import FrequencySketch, as_items
from spacer.table import Table

__all__ = ["SampleAndHold", "SpaceR", "SpaceRConfig"]


@dataclass(frozen=True)
class SpaceRConfig:
    """Parameters of :class:`SpaceR`.

    Attributes:
        memory_words: the budget B in words; SpaceR tracks ``B // 2`` items (id + count each).
        seed: seed of the sampling coins.
        alpha: admission rate scale: ``p_t = min(1, alpha * k / N_t)``; larger admits more often
            (more churn among light items, shorter delay before a heavy item is caught).
    """

    memory_words: int
    seed: int = 0
    alpha: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.memory_words, bool) or not isinstance(
            self.memory_words, int | np.integer
        ):
            raise TypeError(f"memory_words must be an int; got {type(self.memory_words).__name__}")
        if self.memory_words < 2:
            raise ValueError(
                f"memory_words must be >= 2 (one id and one counter); got {self.memory_words}"
            )
        if not self.alpha > 0:
            raise ValueError(f"alpha must be > 0; got {self.alpha}")


def truncated_geometric(rng: np.random.Generator, p: float, n: np.ndarray) -> np.ndarray:
    """Failures before the first success in Bernoulli(p) trials, given a success within ``n`` trials."""
    n = np.asarray(n, np.int64)
    if p >= 1:
        return np.zeros(n.shape, np.int64)
    u = rng.random(n.shape)
    log_q = np.log1p(-p)
    # inverse CDF of X | X < n:  P(X <= x | X < n) = (1 - q^(x+1)) / (1 - q^n)
    x = np.floor(np.log1p(u * np.expm1(n * log_q)) / log_q).astype(np.int64)
    return np.clip(x, 0, np.maximum(n - 1, 0))


def top_k_mask(ids: np.ndarray, counts: np.ndarray, k: int) -> np.ndarray:
    """Mask of the ``k`` largest ``counts``, ties at the boundary broken by the smallest id.

    ``ids``: (n,) distinct ids, ``counts``: (n,). A total order on ``(-count, id)``, so the result
    does not depend on the input's order or on how a partial sort breaks ties.
    """
    keep = np.zeros(ids.size, bool)
    keep[np.lexsort((ids, -counts))[: max(0, int(k))]] = True
    return keep


class _Sampled(FrequencySketch):
    """Sampled admission into a :class:`Table` of exact counters (shared by SpaceR and sample-and-hold)."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self.table = Table()

    def _rate(self) -> float:
        raise NotImplementedError

    def _admit(self, uniq: np.ndarray, counts: np.ndarray, p: float) -> None:
        untracked = self.table.add_tracked(uniq, counts)
        new, c = uniq[untracked], counts[untracked]
        if new.size == 0:
            return
        if p >= 1:
            self.table.insert(new, c)
            return
        admitted = self._rng.random(new.size) < -np.expm1(c * np.log1p(-p))
        c = c[admitted]
        counted = c - truncated_geometric(self._rng, p, c)
        self.table.insert(new[admitted], counted + round((1 - p) / p))

    def estimate(self, items: ArrayLike) -> np.ndarray:
        return self.table.lookup(as_items(items))

    def tracked(self) -> tuple[np.ndarray, np.ndarray]:
        """The tracked ids and their estimates, heaviest first."""
        order = np.argsort(-self.table.counts, kind="stable")
        return self.table.ids[order], self.table.counts[order].astype(np.float64)

    @property
    def memory_words(self) -> int:
        return 2 * len(self.table)

    def _state(self) -> dict[str, np.ndarray]:
        rng = repr(self._rng.bit_generator.state).encode()
        return {
            "ids": self.table.ids,
            "counts": self.table.counts,
            "rng": np.frombuffer(rng, np.uint8),
        }

    def _load_state(self, state: dict[str, np.ndarray]) -> None:
        self.table = Table(state["ids"], state["counts"])
        self._rng.bit_generator.state = ast.literal_eval(state["rng"].tobytes().decode())


class SampleAndHold(_Sampled):
    """Sample-and-hold (Estan & Varghese 2002) at a fixed ``rate``, with no memory bound; counts
    start at ``(1 - rate) / rate`` so that estimates are unbiased."""

    name: ClassVar[str] = "Sample-and-hold"

    def __init__(self, rate: float = 0.01, seed: int = 0) -> None:
        if not 0 < rate <= 1:
            raise ValueError(f"rate must be in (0, 1]; got {rate}")
        super().__init__(seed)
        self.rate = float(rate)

    def _update(self, uniq: np.ndarray, counts: np.ndarray) -> None:
        self._admit(uniq, counts, self.rate)

    def params(self) -> dict[str, Any]:
        return {"rate": self.rate, "seed": self.seed}


class SpaceR(_Sampled):
    """SpaceR: sampled admission, exact tracking and smallest-count eviction in ``memory_words // 2`` slots.

    >>> import numpy as np
    >>> s = SpaceR(memory_words=200, seed=0).update(np.array([1, 1, 2, 1, 3]))
    >>> s.estimate([1, 2, 9]).tolist()  # exact: every item arrived while p_t = 1
    [3.0, 1.0, 0.0]
    """

    name: ClassVar[str] = "SpaceR"
    mergeable: ClassVar[bool] = True
    merge_ignores: ClassVar[tuple[str, ...]] = ("seed",)  # shards sample with their own coins

    def __init__(self, memory_words: int, seed: int = 0, alpha: float = 1.0) -> None:
        self.config = SpaceRConfig(memory_words, seed, alpha)
        super().__init__(seed)
        self.capacity = memory_words // 2
        self._seen = 0  # N_t: the stream length before the current batch

    @property
    def rate(self) -> float:
        """The admission probability the next batch will use."""
        return min(1.0, self.config.alpha * self.capacity / max(self._seen, 1))

    def update(self, items: ArrayLike, counts: ArrayLike | None = None) -> SpaceR:
        self._seen = self.total
        super().update(items, counts)
        return self

    def _update(self, uniq: np.ndarray, counts: np.ndarray) -> None:
        self._admit(uniq, counts, self.rate)
        self._evict()

    def _evict(self) -> None:
        if len(self.table) > self.capacity:
            self.table.keep(top_k_mask(self.table.ids, self.table.counts, self.capacity))

    def merge(self, other: FrequencySketch) -> SpaceR:
        """Merge a SpaceR built on another part of the stream (same parameters), in place: counts of
        items tracked in both add up, then the ``k`` largest are kept (as Misra-Gries merges)."""
        self._check_merge(other)
        assert isinstance(other, SpaceR)
        self.table.add_table(other.table)
        self.total += other.total
        self._evict()
        return self

    def params(self) -> dict[str, Any]:
        return asdict(self.config)
