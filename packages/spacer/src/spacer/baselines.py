"""The methods the paper compares against, behind :class:`spacer.base.FrequencySketch`.

Classical: :class:`CountMin` (optionally conservative update), :class:`CountSketch`,
:class:`MisraGries`, :class:`SpaceSaving`, :class:`~spacer.sketch.SampleAndHold`.
Learning-augmented, fed by a heavy-hitter oracle (:func:`perfect_oracle`, :func:`noisy_oracle`):
:class:`LearnedCountMin` (Hsu et al. 2019), :class:`PredictionCountSketch` (after Aamand et al.
2023), and :class:`PredictedExact`, the trivial mechanism: count the predicted items exactly,
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

    ``conservative=True`` raises only the counters below the new minimum. On a batch the update is
    applied to every distinct item at once from the batch's starting minima (``np.maximum.at``): it
    equals sequential conservative update when no two items of a batch share a counter and never
    underestimates either way.
    """

    name: ClassVar[str] = "Count-Min"
    mergeable: ClassVar[bool] = True

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
    """Misra-Gries with ``k`` counters, in its mergeable form (Agarwal et al. 2012).

    A batch is added to the table; if more than ``k`` ids are then tracked, the ``(k+1)``-th largest
    count is subtracted from all and non-positive ones dropped. Estimates never exceed the truth and
    undercount by at most ``(N - sum of counters) / (k + 1) <= N / (k + 1)``.
    """

    name: ClassVar[str] = "Misra-Gries"
    mergeable: ClassVar[bool] = True

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = _check_positive("k", k)
        self.table = Table()

    @classmethod
    def with_memory(cls, memory_words: int) -> MisraGries:
        return cls(max(1, memory_words // 2))

    def _prune(self) -> None:
        if len(self.table) > self.k:
            kth = np.partition(self.table.counts, -(self.k + 1))[-(self.k + 1)]
            self.table.counts = self.table.counts - kth
            self.table.keep(self.table.counts > 0)

    def _update(self, uniq: np.ndarray, counts: np.ndarray) -> None:
        self.table.add_table(Table(uniq, counts))
        self._prune()

    def estimate(self, items: ArrayLike) -> np.ndarray:
        return self.table.lookup(as_items(items))

    @property
    def error_bound(self) -> float:
        return (self.total - int(self.table.counts.sum())) / (self.k + 1)

    @property
    def memory_words(self) -> int:
        return 2 * self.k

    def merge(self, other: FrequencySketch) -> MisraGries:
        self._check_merge(other)
        assert isinstance(other, MisraGries)
        self.table.add_table(other.table)
        self.total += other.total
        self._prune()
        return self

    def params(self) -> dict[str, Any]:
        return {"k": self.k}

    def _state(self) -> dict[str, np.ndarray]:
        return {"ids": self.table.ids, "counts": self.table.counts}

    def _load_state(self, state: dict[str, np.ndarray]) -> None:
        self.table = Table(state["ids"], state["counts"])


class SpaceSaving(FrequencySketch):
    """SpaceSaving (Metwally, Agrawal & El Abbadi 2005) with ``k`` counters, weighted updates.

    A batch is aggregated first and its distinct items are processed in order of id: a tracked item
    adds its weight; an untracked one replaces the item with the smallest count and starts from that
    count. Never underestimates; overestimates by at most the minimum counter ``<= N / k``. The
    replacement is inherently sequential (a Python loop with a heap over the batch's distinct
    untracked items); ``untracked="min"`` answers the minimum counter for untracked items (the
    algorithm's upper bound), ``"zero"`` answers 0.
    """

    name: ClassVar[str] = "SpaceSaving"

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

    def _pop_min(self) -> tuple[int, int]:
        while True:
            c, i = heapq.heappop(self._heap)
            if self.counts.get(i) == c:
                return c, i

    def _update(self, uniq: np.ndarray, counts: np.ndarray) -> None:
        table = self.counts
        for i, c in zip(uniq.tolist(), counts.tolist(), strict=True):
            if i in table:
                table[i] += c
                heapq.heappush(self._heap, (table[i], i))
            elif len(table) < self.k:
                table[i] = c
                heapq.heappush(self._heap, (c, i))
            else:
                m, j = self._pop_min()
                del table[j]
                table[i] = m + c
                heapq.heappush(self._heap, (m + c, i))
        if len(self._heap) > 4 * self.k + 1024:  # drop stale heap entries
            self._heap = [(c, i) for i, c in table.items()]
            heapq.heapify(self._heap)

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
