"""The methods the paper compares against, behind :class:`spacer.base.FrequencySketch`.

Classical: :class:`CountMin` (optionally conservative update), :class:`CountSketch`,
:class:`MisraGries`, :class:`SpaceSaving`, :class:`~spacer.sketch.SampleAndHold`.
Learning-augmented, fed by a heavy-hitter oracle (:func:`perfect_oracle`, :func:`noisy_oracle`):
:class:`LearnedCountMin` (Hsu et al. 2019), :class:`PredictionCountSketch` (after Aamand et al.
2023), :class:`CountSketchPlusPlus` (Aamand et al. 2023, with or without predictions), and :class:`PredictedExact`, the trivial mechanism: count the predicted items exactly,
answer 0 for the rest. :func:`two_pass` builds a learned method whose predictions come from a first
pass over the stream instead of an oracle. Memory is in words: counters plus stored ids.
"""

from __future__ import annotations

import heapq
import math
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from spacer.base import FrequencySketch, HashFamily, as_items
from spacer.sketch import SampleAndHold
from spacer.table import Table

__all__ = [
    "CountMin",
    "CountSketch",
    "CountSketchPlusPlus",
    "LearnedCountMin",
    "MisraGries",
    "PredictedExact",
    "PredictionCountSketch",
    "SampleAndHold",
    "SpaceSaving",
    "noisy_oracle",
    "perfect_oracle",
    "two_pass",
]


def _check_positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive int; got {value!r}")
    return int(value)


class CountMin(FrequencySketch):
    """Count-Min (Cormode & Muthukrishnan 2005): ``depth x width`` counters, estimate = row minimum.

    ``conservative=True`` raises only the counters below the new minimum, item by item in stream
    order (the update depends on the order, so :meth:`update` runs it sequentially; plain Count-Min
    is a sum and aggregates the batch). :meth:`update_aggregated` applies conservative update to
    every distinct item of a batch at once from the batch's starting minima (``np.maximum.at``):
    never an underestimate, but not the sequential answer, so the batch is charged.
    """

    name: ClassVar[str] = "Count-Min"
    mergeable: ClassVar[bool] = True

    @property
    def order_dependent(self) -> bool:  # type: ignore[override]
        return self.conservative

    def __init__(
        self, width: int, depth: int = 2, conservative: bool = False, seed: int = 0
    ) -> None:
        super().__init__()
        self.width, self.depth = _check_positive("width", width), _check_positive("depth", depth)
        self.conservative, self.seed = bool(conservative), seed
        self.hash = HashFamily(self.depth, self.width, seed)
        self.table = np.zeros((self.depth, self.width), np.int64)

    @classmethod
    def with_memory(cls, memory_words: int, depth: int = 2, **kw: Any) -> CountMin:
        return cls(max(1, memory_words // depth), depth, **kw)

    def _update(self, uniq: np.ndarray, counts: np.ndarray) -> None:
        h = self.hash(uniq)
        rows = np.arange(self.depth)[:, None]
        if not self.conservative:
            for r in range(self.depth):
                np.add.at(self.table[r], h[r], counts)
            return
        target = self.table[rows, h].min(axis=0) + counts
        for r in range(self.depth):
            np.maximum.at(self.table[r], h[r], target)

    def _update_sequential(self, items: np.ndarray, counts: np.ndarray) -> None:
        rows = [r.tolist() for r in self.table]
        cells = [h.tolist() for h in self.hash(items)]
        if self.depth == 2:
            r0, r1 = rows
            for a, b, c in zip(cells[0], cells[1], counts.tolist(), strict=True):
                x, y = r0[a], r1[b]
                t = (x if x < y else y) + c
                if x < t:
                    r0[a] = t
                if y < t:
                    r1[b] = t
        else:
            for j, c in enumerate(counts.tolist()):
                t = min(row[col[j]] for row, col in zip(rows, cells, strict=True)) + c
                for row, col in zip(rows, cells, strict=True):
                    if row[col[j]] < t:
                        row[col[j]] = t
        self.table = np.array(rows, np.int64)

    def estimate(self, items: ArrayLike) -> np.ndarray:
        q = as_items(items)
        h = self.hash(q)
        return self.table[np.arange(self.depth)[:, None], h].min(axis=0).astype(np.float64)

    @property
    def memory_words(self) -> int:
        return self.depth * self.width

    def merge(self, other: FrequencySketch) -> CountMin:
        self._check_merge(other)
        if self.conservative:
            raise ValueError("conservative-update Count-Min is not mergeable exactly")
        assert isinstance(other, CountMin)
        self.table += other.table
        self.total += other.total
        return self

    def params(self) -> dict[str, Any]:
        return {
            "width": self.width,
            "depth": self.depth,
            "conservative": self.conservative,
            "seed": self.seed,
        }

    def _state(self) -> dict[str, np.ndarray]:
        return {"table": self.table}

    def _load_state(self, state: dict[str, np.ndarray]) -> None:
        self.table = state["table"].astype(np.int64)


class CountSketch(FrequencySketch):
    """Count-Sketch (Charikar, Chen & Farach-Colton 2002): signed counters, estimate = row median."""

    name: ClassVar[str] = "Count-Sketch"
    mergeable: ClassVar[bool] = True

    def __init__(self, width: int, depth: int = 3, seed: int = 0) -> None:
        super().__init__()
        self.width, self.depth = _check_positive("width", width), _check_positive("depth", depth)
        self.seed = seed
        self.hash = HashFamily(self.depth, self.width, seed)
        self.table = np.zeros((self.depth, self.width), np.int64)

    @classmethod
    def with_memory(cls, memory_words: int, depth: int = 3, **kw: Any) -> CountSketch:
        return cls(max(1, memory_words // depth), depth, **kw)

    def _update(self, uniq: np.ndarray, counts: np.ndarray) -> None:
        h, s = self.hash(uniq), self.hash.signs(uniq)
        for r in range(self.depth):
            np.add.at(self.table[r], h[r], s[r] * counts)

    def estimate(self, items: ArrayLike) -> np.ndarray:
        q = as_items(items)
        h, s = self.hash(q), self.hash.signs(q)
        vals = self.table[np.arange(self.depth)[:, None], h] * s
        return np.median(vals, axis=0).astype(np.float64)

    @property
    def memory_words(self) -> int:
        return self.depth * self.width

    def merge(self, other: FrequencySketch) -> CountSketch:
        self._check_merge(other)
        assert isinstance(other, CountSketch)
        self.table += other.table
        self.total += other.total
        return self

    def params(self) -> dict[str, Any]:
        return {"width": self.width, "depth": self.depth, "seed": self.seed}

    def _state(self) -> dict[str, np.ndarray]:
        return {"table": self.table}

    def _load_state(self, state: dict[str, np.ndarray]) -> None:
        self.table = state["table"].astype(np.int64)


class MisraGries(FrequencySketch):
    """Misra-Gries with ``k`` counters, item by item (Misra & Gries 1982), mergeable (Agarwal et al. 2012).

    An occurrence of a tracked id adds one; of an untracked id takes a free counter, or, with all
    ``k`` taken, decrements every counter (dropping those at 0) and is itself dropped. A weight
    ``c`` (``c`` consecutive occurrences) decrements by ``min(c, smallest counter)`` and inserts the
    rest. Estimates never exceed the truth and undercount by at most
    ``(N - sum of counters) / (k + 1) <= N / (k + 1)``. :meth:`update_aggregated` (and
    :meth:`merge`) add a batch's exact counts and subtract the ``(k+1)``-th largest: the same
    bound, a different (charged) answer.
    """

    name: ClassVar[str] = "Misra-Gries"
    mergeable: ClassVar[bool] = True
    order_dependent: ClassVar[bool] = True

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = _check_positive("k", k)
        self._counts: dict[int, int] = {}

    @classmethod
    def with_memory(cls, memory_words: int) -> MisraGries:
        return cls(max(1, memory_words // 2))

    @property
    def table(self) -> Table:
        ids = np.fromiter(self._counts.keys(), np.int64, len(self._counts))
        return Table(ids, np.fromiter(self._counts.values(), np.int64, len(self._counts)))

    def _set(self, table: Table) -> None:
        if len(table) > self.k:
            kth = np.partition(table.counts, -(self.k + 1))[-(self.k + 1)]
            table.counts = table.counts - kth
            table.keep(table.counts > 0)
        self._counts = dict(zip(table.ids.tolist(), table.counts.tolist(), strict=True))

    def _update(self, uniq: np.ndarray, counts: np.ndarray) -> None:
        t = self.table
        t.add_table(Table(uniq, counts))
        self._set(t)

    def _update_sequential(self, items: np.ndarray, counts: np.ndarray) -> None:
        table, k = self._counts, self.k
        get = table.get
        for i, c in zip(items.tolist(), counts.tolist(), strict=True):
            cur = get(i)
            if cur is not None:
                table[i] = cur + c
            elif len(table) < k:
                table[i] = c
            else:
                d = min(c, min(table.values()))
                table = {j: v - d for j, v in table.items() if v > d}
                get = table.get
                if c > d:
                    table[i] = c - d
        self._counts = table

    def estimate(self, items: ArrayLike) -> np.ndarray:
        return self.table.lookup(as_items(items))

    @property
    def error_bound(self) -> float:
        return (self.total - sum(self._counts.values())) / (self.k + 1)

    @property
    def memory_words(self) -> int:
        return 2 * self.k

    def merge(self, other: FrequencySketch) -> MisraGries:
        self._check_merge(other)
        assert isinstance(other, MisraGries)
        t = self.table
        t.add_table(other.table)
        self._set(t)
        self.total += other.total
        return self

    def params(self) -> dict[str, Any]:
        return {"k": self.k}

    def _state(self) -> dict[str, np.ndarray]:
        t = self.table
        return {"ids": t.ids, "counts": t.counts}

    def _load_state(self, state: dict[str, np.ndarray]) -> None:
        self._set(Table(state["ids"], state["counts"]))


class SpaceSaving(FrequencySketch):
    """SpaceSaving (Metwally, Agrawal & El Abbadi 2005) with ``k`` counters, weighted updates.

    Item by item in stream order: a tracked item adds its weight; an untracked one takes a free
    counter or replaces the item with the smallest count (ties: the smallest id) and starts from
    that count. Never underestimates; overestimates by at most the minimum counter ``<= N / k``.
    The replacement is inherently sequential (a Python loop with a lazy min-heap: one entry per
    tracked id, its key possibly behind its count and refreshed when popped).
    :meth:`update_aggregated` runs the same loop over the batch's distinct ids in id order with
    their total counts (a different, charged answer). ``untracked="min"`` answers the minimum
    counter for untracked items (the algorithm's upper bound), ``"zero"`` answers 0.
    """

    name: ClassVar[str] = "SpaceSaving"
    order_dependent: ClassVar[bool] = True

    def __init__(self, k: int, untracked: str = "min") -> None:
        super().__init__()
        self.k = _check_positive("k", k)
        if untracked not in ("min", "zero"):
            raise ValueError(f"untracked must be 'min' or 'zero'; got {untracked!r}")
        self.untracked = untracked
        self.counts: dict[int, int] = {}
        self._heap: list[tuple[int, int]] = []  # (count, id), lazily cleaned

    @classmethod
    def with_memory(cls, memory_words: int, **kw: Any) -> SpaceSaving:
        return cls(max(1, memory_words // 2), **kw)

    def _update(self, uniq: np.ndarray, counts: np.ndarray) -> None:
        self._update_sequential(uniq, counts)

    def _update_sequential(self, items: np.ndarray, counts: np.ndarray) -> None:
        table, heap, k = self.counts, self._heap, self.k
        get, pop, push = table.get, heapq.heappop, heapq.heappush
        for i, c in zip(items.tolist(), counts.tolist(), strict=True):
            cur = get(i)
            if cur is not None:
                table[i] = cur + c
            elif len(table) < k:
                table[i] = c
                push(heap, (c, i))
            else:
                while True:  # the smallest (count, id): refresh stale keys until one is current
                    m, j = pop(heap)
                    now = table[j]
                    if now == m:
                        break
                    push(heap, (now, j))
                del table[j]
                table[i] = m + c
                push(heap, (m + c, i))

    def min_count(self) -> int:
        return min(self.counts.values()) if len(self.counts) >= self.k else 0

    def estimate(self, items: ArrayLike) -> np.ndarray:
        q = as_items(items)
        default = float(self.min_count()) if self.untracked == "min" else 0.0
        get = self.counts.get
        return np.fromiter((get(i, default) for i in q.tolist()), np.float64, q.size)

    @property
    def memory_words(self) -> int:
        return 2 * self.k

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "untracked": self.untracked}

    def _state(self) -> dict[str, np.ndarray]:
        ids = np.fromiter(self.counts.keys(), np.int64, len(self.counts))
        return {"ids": ids, "counts": np.fromiter(self.counts.values(), np.int64, len(self.counts))}

    def _load_state(self, state: dict[str, np.ndarray]) -> None:
        self.counts = dict(zip(state["ids"].tolist(), state["counts"].tolist(), strict=True))
        self._heap = [(c, i) for i, c in self.counts.items()]
        heapq.heapify(self._heap)


# ----------------------------------------------------------------------------- oracles
def perfect_oracle(items: ArrayLike, k: int) -> np.ndarray:
    """The true ``k`` most frequent ids of a stream (ties broken by id): a perfect heavy-hitter oracle."""
    uniq, counts = np.unique(as_items(items), return_counts=True)
    order = np.lexsort((uniq, -counts))
    return uniq[order[: max(0, int(k))]]


def noisy_oracle(items: ArrayLike, k: int, noise: float, seed: int = 0) -> np.ndarray:
    """The true top ``k`` with a fraction ``noise`` of them replaced by random non-top ids."""
    if not 0 <= noise <= 1:
        raise ValueError(f"noise must be in [0, 1]; got {noise}")
    arr = as_items(items)
    top = perfect_oracle(arr, k)
    rng = np.random.default_rng(seed)
    n_bad = round(noise * top.size)
    others = np.setdiff1d(np.unique(arr), top)
    n_bad = min(n_bad, others.size)
    if n_bad == 0:
        return top
    keep = rng.choice(top.size, top.size - n_bad, replace=False)
    return np.concatenate([top[np.sort(keep)], rng.choice(others, n_bad, replace=False)])


class _Predicted(FrequencySketch):
    """Exact counters for predicted heavy ids (2 words each) plus ``rest_cls`` (a ``depth``-row
    sketch of the remaining words, or nothing) for everything else."""

    rest_cls: ClassVar[type[CountMin] | type[CountSketch] | None] = None
    default_depth: ClassVar[int] = 1

    def __init__(
        self, memory_words: int, predicted: ArrayLike, depth: int | None = None, seed: int = 0
    ) -> None:
        super().__init__()
        self.memory_budget = _check_positive("memory_words", memory_words)
        self.depth = _check_positive("depth", self.default_depth if depth is None else depth)
        pred = np.unique(as_items(predicted, "predicted"))
        if 2 * pred.size > self.memory_budget:
            raise ValueError(
                f"{pred.size} predicted items need {2 * pred.size} words, over memory_words={memory_words}"
            )
        self.seed = seed
        self.heavy = Table(pred, np.zeros(pred.size, np.int64))
        words = self.memory_budget - 2 * pred.size
        self.rest = (
            self.rest_cls(words // self.depth, self.depth, seed=seed)
            if self.rest_cls is not None and words >= self.depth
            else None
        )

    def _update(self, uniq: np.ndarray, counts: np.ndarray) -> None:
        light = self.heavy.add_tracked(uniq, counts)
        if self.rest is not None and light.any():
            self.rest.total += int(counts[light].sum())
            self.rest._update(uniq[light], counts[light])

    def _rest_estimate(self, items: np.ndarray) -> np.ndarray:
        return np.zeros(items.size) if self.rest is None else self.rest.estimate(items)

    def estimate(self, items: ArrayLike) -> np.ndarray:
        q = as_items(items)
        pos, hit = self.heavy.find(q)
        out = self._rest_estimate(q)
        out[hit] = self.heavy.counts[pos[hit]]
        return out

    @property
    def memory_words(self) -> int:
        return 2 * len(self.heavy) + (self.rest.memory_words if self.rest is not None else 0)

    def params(self) -> dict[str, Any]:
        return {
            "memory_words": self.memory_budget,
            "predicted": self.heavy.ids.tolist(),
            "depth": self.depth,
            "seed": self.seed,
        }

    def _state(self) -> dict[str, np.ndarray]:
        state = {"heavy_counts": self.heavy.counts}
        if self.rest is not None:
            state.update({f"rest_{k}": v for k, v in self.rest._state().items()})
            state["rest_total"] = np.array([self.rest.total])
        return state

    def _load_state(self, state: dict[str, np.ndarray]) -> None:
        self.heavy.counts = state["heavy_counts"].astype(np.int64)
        if self.rest is not None:
            self.rest._load_state({k[5:]: v for k, v in state.items() if k.startswith("rest_")})
            self.rest.total = int(state["rest_total"][0])


class PredictedExact(_Predicted):
    """The trivial mechanism: exact counts for the predicted ids, 0 for every other id."""

    name: ClassVar[str] = "Trivial (exact on predictions)"


class LearnedCountMin(_Predicted):
    """Learned Count-Min (Hsu, Indyk, Katabi & Vakilian, ICLR 2019): predicted heavy hitters get
    unique buckets, the rest share a Count-Min (``depth`` rows, default 1) of the remaining words."""

    name: ClassVar[str] = "Learned Count-Min"
    rest_cls = CountMin


class PredictionCountSketch(_Predicted):
    """Prediction-based Count-Sketch (after Aamand, Chen, Nguyen, Silwal & Vakilian, NeurIPS 2023):
    predicted heavy ids counted exactly, the rest in a Count-Sketch (``depth`` rows, default 3) whose
    estimates are clipped to ``[0, inf)``. (Their analysis also truncates small estimates; see
    seeds/spacer.md.)"""

    name: ClassVar[str] = "Prediction Count-Sketch"
    rest_cls = CountSketch
    default_depth = 3

    def _rest_estimate(self, items: np.ndarray) -> np.ndarray:
        return np.maximum(super()._rest_estimate(items), 0.0)


class CountSketchPlusPlus(FrequencySketch):
    """CountSketch++ (Aamand, Chen, Nguyen, Silwal & Vakilian, NeurIPS 2023), optionally learned.

    The memory left after the predictions, ``S``, is split in half: a large Count-Sketch of
    ``depth`` (3) rows of width ``S / (2 depth)``, and ``floor(log2 S)`` small Count-Sketches of
    ``depth`` rows of width ``floor(S / (2 depth log2 S))`` (at least 1; a floor of 3 columns
    would overrun the budget at the literature's smallest S) with independent hashes. An id's
    estimate is 0 when the median of the small tables' estimates is below
    ``tau = C (log2 M / M) N`` (``M`` the whole budget ``memory_words``, ``N`` the stream length),
    else the large table's estimate. With ``predicted`` ids (the
    learning-augmented version) those are counted exactly and kept out of the tables; each costs
    ``prediction_words`` words: 2 (id and counter, this package's accounting) or 1 (the
    literature's: a counter, the id free).
    """

    name: ClassVar[str] = "CountSketch++"

    def __init__(
        self,
        memory_words: int,
        predicted: ArrayLike = (),
        C: float = 8.0,
        depth: int = 3,
        prediction_words: int = 2,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.memory_budget = _check_positive("memory_words", memory_words)
        self.depth = _check_positive("depth", depth)
        if prediction_words not in (1, 2):
            raise ValueError(f"prediction_words must be 1 or 2; got {prediction_words!r}")
        if not C > 0:
            raise ValueError(f"C must be > 0; got {C!r}")
        self.C, self.prediction_words, self.seed = float(C), int(prediction_words), seed
        pred = np.unique(as_items(np.asarray(predicted, np.int64), "predicted"))
        self.heavy = Table(pred, np.zeros(pred.size, np.int64))
        S = self.memory_budget - self.prediction_words * pred.size
        if S < 4:
            raise ValueError(
                f"{pred.size} predictions at {prediction_words} words leave {S} of "
                f"memory_words={memory_words}: need >= 4 for the tables"
            )
        self.sketch_words = S
        n_small = max(1, math.floor(math.log2(S)))
        small_w = max(1, math.floor(S / (2 * depth * math.log2(S))))
        big_w = max(1, math.floor(S / (2 * depth)))
        self.large = CountSketch(big_w, depth, seed=seed)
        self.small = [CountSketch(small_w, depth, seed=seed + 1 + j) for j in range(n_small)]
        used = self.large.memory_words + sum(t.memory_words for t in self.small)
        if used > S:
            raise ValueError(
                f"memory_words={memory_words} too small for CountSketch++: its tables need {used} "
                f"words of the {S} left"
            )

    @property
    def tau(self) -> float:
        """The threshold ``C (log2 S / S) N`` on the small tables' median: ``S`` the whole budget
        (predictions included) and ``N`` the whole stream (predicted items included), as in the
        SpaceR authors' experiment code; the tables are sized from what the predictions leave."""
        S = self.memory_budget
        return self.C * math.log2(S) / S * self.total

    def _update(self, uniq: np.ndarray, counts: np.ndarray) -> None:
        light = self.heavy.add_tracked(uniq, counts)
        if light.any():
            u, c = uniq[light], counts[light]
            for t in (self.large, *self.small):
                t.total += int(c.sum())
                t._update(u, c)

    def estimate(self, items: ArrayLike) -> np.ndarray:
        q = as_items(items)
        small = np.median(np.stack([t.estimate(q) for t in self.small]), axis=0)
        out = np.where(small < self.tau, 0.0, self.large.estimate(q))
        pos, hit = self.heavy.find(q)
        out[hit] = self.heavy.counts[pos[hit]]
        return out

    @property
    def memory_words(self) -> int:
        tables = self.large.memory_words + sum(t.memory_words for t in self.small)
        return self.prediction_words * len(self.heavy) + tables

    def params(self) -> dict[str, Any]:
        return {
            "memory_words": self.memory_budget,
            "predicted": self.heavy.ids.tolist(),
            "C": self.C,
            "depth": self.depth,
            "prediction_words": self.prediction_words,
            "seed": self.seed,
        }

    def _state(self) -> dict[str, np.ndarray]:
        return {
            "heavy_counts": self.heavy.counts,
            "tables": np.concatenate([t.table.ravel() for t in (self.large, *self.small)]),
        }

    def _load_state(self, state: dict[str, np.ndarray]) -> None:
        self.heavy.counts = state["heavy_counts"].astype(np.int64)
        flat = state["tables"].astype(np.int64).ravel()
        pos = 0
        for t in (self.large, *self.small):
            size = t.table.size
            t.table = flat[pos : pos + size].reshape(t.table.shape)
            t.total = self.total
            pos += size


def two_pass(
    stream: ArrayLike,
    cls: type[_Predicted],
    memory_words: int,
    heavy_fraction: float = 0.5,
    batch: int = 1 << 16,
    **kw: Any,
) -> _Predicted:
    """A learned method without an oracle: pass 1 finds candidates with a Misra-Gries of the same
    memory, pass 2 runs ``cls`` with the top ``heavy_fraction * memory_words / 2`` of them."""
    arr = as_items(stream, "stream")
    n_heavy = int(heavy_fraction * memory_words) // 2
    mg = MisraGries.with_memory(memory_words)
    for i in range(0, arr.size, batch):
        mg.update(arr[i : i + batch])
    ids, counts = mg.table.ids, mg.table.counts
    predicted = ids[np.lexsort((ids, -counts))][:n_heavy]
    sketch = cls(memory_words, predicted, **kw)
    for i in range(0, arr.size, batch):
        sketch.update(arr[i : i + batch])
    return sketch


def classical_blogb_words(memory_words: int) -> int:
    """``B log2 B``: the memory of the classical algorithm in claim (1) of the paper."""
    return int(memory_words * max(1.0, math.log2(memory_words)))
