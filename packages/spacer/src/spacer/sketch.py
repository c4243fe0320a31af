"""SpaceR: one pass, no predictions: admit items by random sampling, then count them exactly.

The rule we implement (the paper's abstract leaves the details open; ``seeds/spacer.md`` has the
reasoning):

* a table of at most ``k = memory_words // 2`` tracked items (one word for the id, one for the count);
* **sampled admission**: an occurrence of an untracked item is sampled with probability
  ``p_t = min(1, alpha * k / N_t)``, where ``N_t`` is the stream length before this item (so the
  first ``alpha k`` items are admitted for sure and later light items rarely). Once sampled, an
  item is tracked and every later occurrence is counted exactly;
* **bias correction at admission**: an item admitted after ``X`` unsampled occurrences starts at
  its counted occurrences plus ``(1 - p) / p``, the expected number of misses, which makes the
  count an unbiased estimate under sample-and-hold at a fixed rate (``E[f_hat] = f``) and needs no
  extra word;
* **eviction**: when more than ``k`` items are tracked, the one with the smallest count is dropped
  (ties: the largest id), answering 0 from then on: heavy items, admitted early and counted
  exactly, are safe.

``update`` runs this rule item by item in stream order, whatever the batch size (a batch is only
a way to hand items over; two uniforms per item are drawn up front, so the coins do not depend on
the split either). A weighted entry ``(id, c)`` is ``c`` consecutive occurrences: admitted with
probability ``1 - (1-p)^c`` at the entry's ``p``, missing a truncated-geometric ``X < c`` of them.
``update_aggregated`` admits a whole batch at the rate of its start (faster, a different answer,
and the batch summary is charged to ``peak_memory_words``).

Counts are exact for every item whose first occurrence is among the first ``alpha * k`` items of
the stream, as long as nothing has been evicted. Free slots alone do not make a count exact: an
item first seen later is sampled at ``p_t < 1`` like any other.
"""

from __future__ import annotations

import ast
import heapq
import math
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
    """Sampled admission into exact counters (shared by SpaceR and sample-and-hold), item by item.

    State: a dict id -> count and a min-heap with exactly one entry ``(count, -id)`` per tracked id
    whose key may lag behind the count (counts only grow while tracked). A popped entry whose key
    is stale is pushed back with its count, so the first valid pop is the true minimum of
    ``(count, -id)``: the smallest count, ties broken by evicting the largest id. The eviction is a
    function of the counts alone, not of the heap's layout.
    """

    order_dependent: ClassVar[bool] = True

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._counts: dict[int, int] = {}
        self._heap: list[tuple[int, int]] = []
        self._cache: Table | None = None

    capacity: int | float = float("inf")

    def _p(self, n_t: int) -> float:
        """The admission probability of an occurrence arriving after ``n_t`` items."""
        raise NotImplementedError

    @property
    def table(self) -> Table:
        """The tracked ids (sorted) and their counts."""
        if self._cache is None:
            ids = np.fromiter(self._counts.keys(), np.int64, len(self._counts))
            cnt = np.fromiter(self._counts.values(), np.int64, len(self._counts))
            self._cache = Table(ids, cnt)
        return self._cache

    @table.setter
    def table(self, table: Table) -> None:
        self._counts = dict(zip(table.ids.tolist(), table.counts.tolist(), strict=True))
        self._heap = [(c, -i) for i, c in self._counts.items()]
        heapq.heapify(self._heap)
        self._cache = None

    def _evict(self) -> None:
        counts, heap = self._counts, self._heap
        while len(counts) > self.capacity:
            key, neg = heapq.heappop(heap)
            cur = counts[-neg]
            if cur != key:
                heapq.heappush(heap, (cur, neg))
            else:
                del counts[-neg]
        self._cache = None

    def _update_sequential(self, items: np.ndarray, counts: np.ndarray) -> None:
        # two uniforms per entry, drawn up front: the coins do not depend on how batches split
        u = self._rng.random((items.size, 2))
        table, heap, cap = self._counts, self._heap, self.capacity
        get, p_of, n_t = table.get, self._p, self.total
        for i, c, u1, u2 in zip(
            items.tolist(), counts.tolist(), u[:, 0].tolist(), u[:, 1].tolist(), strict=True
        ):
            cur = get(i)
            if cur is not None:
                table[i] = cur + c
                n_t += c
                continue
            p = p_of(n_t)
            n_t += c
            if p >= 1.0:
                start = c
            else:
                log_q = math.log1p(-p)
                if u1 >= -math.expm1(c * log_q):  # none of the c occurrences sampled
                    continue
                # misses before the first sampled one: truncated geometric (inverse CDF)
                x = 0
                if c > 1:
                    x = math.floor(math.log1p(u2 * math.expm1(c * log_q)) / log_q)
                    x = min(max(x, 0), c - 1)
                start = c - x + round((1 - p) / p)
            table[i] = start
            heapq.heappush(heap, (start, -i))
            if len(table) > cap:
                self._evict()
        self._cache = None

    def _update(self, uniq: np.ndarray, counts: np.ndarray) -> None:
        """The aggregated (charged) path: a batch admitted at the rate of its start, as one entry
        per distinct id; see :meth:`FrequencySketch.update_aggregated`."""
        n_t = self.total - int(counts.sum())
        p = self._p(n_t)
        tracked = np.array([i in self._counts for i in uniq.tolist()], bool)
        for i, c in zip(uniq[tracked].tolist(), counts[tracked].tolist(), strict=True):
            self._counts[i] += c
        new, c = uniq[~tracked], counts[~tracked]
        if p < 1 and new.size:
            admitted = self._rng.random(new.size) < -np.expm1(c * np.log1p(-p))
            new, c = new[admitted], c[admitted]
            c = c - truncated_geometric(self._rng, p, c) + round((1 - p) / p)
        for i, v in zip(new.tolist(), c.tolist(), strict=True):
            self._counts[i] = v
            heapq.heappush(self._heap, (v, -i))
        self._evict()

    def estimate(self, items: ArrayLike) -> np.ndarray:
        return self.table.lookup(as_items(items))

    def tracked(self) -> tuple[np.ndarray, np.ndarray]:
        """The tracked ids and their estimates, heaviest first."""
        t = self.table
        order = np.argsort(-t.counts, kind="stable")
        return t.ids[order], t.counts[order].astype(np.float64)

    @property
    def memory_words(self) -> int:
        return 2 * len(self._counts)

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

    def _p(self, n_t: int) -> float:
        return self.rate

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
        self._alpha_k = self.config.alpha * self.capacity

    def _p(self, n_t: int) -> float:
        return 1.0 if n_t <= self._alpha_k else self._alpha_k / n_t

    @property
    def rate(self) -> float:
        """The admission probability of the next item: ``min(1, alpha k / N)``."""
        return self._p(self.total)

    def merge(self, other: FrequencySketch) -> SpaceR:
        """Merge a SpaceR built on another part of the stream (same parameters), in place: counts of
        items tracked in both add up, then the ``k`` largest are kept (as Misra-Gries merges)."""
        self._check_merge(other)
        assert isinstance(other, SpaceR)
        t = self.table.copy()
        t.add_table(other.table)
        t.keep(top_k_mask(t.ids, t.counts, self.capacity))
        self.table = t
        self.total += other.total
        return self

    def params(self) -> dict[str, Any]:
        return asdict(self.config)
