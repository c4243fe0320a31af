"""The interface every frequency sketch shares, vectorised hashing, and input checks.

Items are non-negative integer ids in a numpy array (map strings to ids with ``np.unique(...,
return_inverse=True)`` or :func:`spacer.streams.encode`). ``update`` takes a whole batch, and the
state after it is what the item-by-item algorithm leaves, whatever the batch size: linear sketches
(Count-Min, Count-Sketch and the predicted-exact parts) aggregate the batch with ``np.unique``
(their state is a sum, so order and grouping do not matter); order-dependent ones (Misra-Gries,
SpaceSaving, conservative update, SpaceR, sample-and-hold) run their item-by-item rule over the
batch in stream order. :meth:`FrequencySketch.update_aggregated` keeps the faster
aggregate-then-summarise path for those, and charges it: the batch's exact counts (one id and one
counter per distinct item) are added to :attr:`~FrequencySketch.peak_memory_words`. Memory is
counted in *words*, the unit of this literature: one word per counter and one per stored item id.
"""

from __future__ import annotations

import io
import json
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["FrequencySketch", "HashFamily", "aggregate", "as_counts", "as_items"]

_REGISTRY: dict[str, type[FrequencySketch]] = {}


def as_items(items: ArrayLike, name: str = "items") -> np.ndarray:
    """Validate a batch of item ids: 1-D, integer dtype, non-negative; returned as int64."""
    arr = np.asarray(items)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of item ids; got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(
            f"{name} must be integer ids; got dtype {arr.dtype} "
            "(map other values to ids with np.unique(values, return_inverse=True))"
        )
    arr = arr.astype(np.int64, copy=False)
    if arr.size and arr.min() < 0:
        raise ValueError(f"{name} must be non-negative ids; got {int(arr.min())}")
    return arr


def as_counts(counts: ArrayLike | None, n: int) -> np.ndarray | None:
    """Validate per-item counts: None (each item once) or ``n`` non-negative integers."""
    if counts is None:
        return None
    c = np.asarray(counts)
    if c.shape != (n,):
        raise ValueError(f"counts must have one entry per item ({n}); got shape {c.shape}")
    if c.size and not np.issubdtype(c.dtype, np.integer):
        raise TypeError(f"counts must be integers; got dtype {c.dtype}")
    c = c.astype(np.int64, copy=False)
    if c.size and c.min() < 0:
        raise ValueError("counts must be non-negative (these sketches do not support deletions)")
    return c


def aggregate(items: np.ndarray, counts: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ids of a batch (sorted) and their total counts."""
    if counts is None:
        return np.unique(items, return_counts=True)
    uniq, inv = np.unique(items, return_inverse=True)
    tot = np.bincount(inv, weights=counts, minlength=uniq.size).astype(np.int64)
    keep = tot > 0
    return uniq[keep], tot[keep]


class HashFamily:
    """``depth`` seeded hash functions to ``[0, width)`` by multiply-shift, vectorised on uint64.

    ``h_j(x) = (((a_j x + b_j) mod 2^64) >> 32) * width >> 32`` with random odd ``a_j``: a
    2-universal family (Dietzfelbinger et al.). ``signs`` gives independent +-1 hashes.
    """

    def __init__(self, depth: int, width: int, seed: int) -> None:
        if not 1 <= width < 2**32:
            raise ValueError(f"width must be in [1, 2**32); got {width}")
        rng = np.random.default_rng(seed)
        self.depth, self.width, self.seed = depth, width, seed
        self.a = rng.integers(1, 2**63, size=(depth, 1), dtype=np.uint64) * np.uint64(
            2
        ) + np.uint64(1)
        self.b = rng.integers(0, 2**63, size=(depth, 1), dtype=np.uint64)
        self.sa = rng.integers(1, 2**63, size=(depth, 1), dtype=np.uint64) * np.uint64(
            2
        ) + np.uint64(1)
        self.sb = rng.integers(0, 2**63, size=(depth, 1), dtype=np.uint64)

    def __call__(self, items: np.ndarray) -> np.ndarray:
        x = items.astype(np.uint64)[None, :]
        with np.errstate(over="ignore"):
            hi = (self.a * x + self.b) >> np.uint64(32)
        return ((hi * np.uint64(self.width)) >> np.uint64(32)).astype(np.int64)

    def signs(self, items: np.ndarray) -> np.ndarray:
        x = items.astype(np.uint64)[None, :]
        with np.errstate(over="ignore"):
            top = (self.sa * x + self.sb) >> np.uint64(63)
        return 1 - 2 * top.astype(np.int64)


class FrequencySketch(ABC):
    """A one-pass frequency estimator over a stream of integer ids.

    Subclasses implement :meth:`_update` (on aggregated distinct ids and counts), :meth:`estimate`,
    :attr:`memory_words`, :meth:`_state` / :meth:`_from_state` for serialisation, and, where the
    algorithm admits it, :meth:`merge`.
    """

    name: ClassVar[str] = "sketch"
    mergeable: ClassVar[bool] = False
    # True where the item-by-item algorithm's state depends on the order of the items: ``update``
    # then runs :meth:`_update_sequential` (exact), ``update_aggregated`` the batch path (charged)
    order_dependent: ClassVar[bool] = False
    merge_ignores: ClassVar[
        tuple[str, ...]
    ] = ()  # parameters that may differ between merged sketches

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _REGISTRY[cls.__name__] = cls

    def __init__(self) -> None:
        self.total = 0  # stream length N seen so far (sum of counts)
        self.batch_words = 0  # the largest batch summary update_aggregated held beside the sketch

    def update(self, items: ArrayLike, counts: ArrayLike | None = None) -> FrequencySketch:
        """Add a batch of items in stream order (each once, or ``counts[i]`` consecutive times);
        returns ``self``. The state afterwards is the item-by-item algorithm's, for any batch size."""
        arr = as_items(items)
        c = as_counts(counts, arr.size)
        if arr.size == 0:
            return self
        if not self.order_dependent:
            return self._update_aggregated(arr, c)
        w = np.ones(arr.size, np.int64) if c is None else c
        keep = w > 0
        arr, w = arr[keep], w[keep]
        if arr.size:
            self._update_sequential(arr, w)
            self.total += int(w.sum())
        return self

    def update_aggregated(
        self, items: ArrayLike, counts: ArrayLike | None = None
    ) -> FrequencySketch:
        """The fast path: count the batch exactly with ``np.unique``, then summarise the counts.

        For an order-dependent sketch the answer can differ from the item-by-item algorithm's (the
        batch's exact counts are memory the sketch did not pay for), so its size, two words per
        distinct item, is charged: :attr:`peak_memory_words` includes the largest such batch. For
        a linear sketch this is :meth:`update` and charges nothing.
        """
        arr = as_items(items)
        c = as_counts(counts, arr.size)
        if arr.size == 0:
            return self
        return self._update_aggregated(arr, c)

    def _update_aggregated(self, arr: np.ndarray, c: np.ndarray | None) -> FrequencySketch:
        uniq, tot = aggregate(arr, c)
        if uniq.size:
            if self.order_dependent:
                self.batch_words = max(self.batch_words, 2 * int(uniq.size))
            self.total += int(tot.sum())
            self._update(uniq, tot)
        return self

    def _update_sequential(self, items: np.ndarray, counts: np.ndarray) -> None:
        """The item-by-item rule over ``items`` in order, ``counts[i]`` consecutive copies each."""
        raise NotImplementedError(f"{type(self).__name__} has no sequential update")

    @property
    def peak_memory_words(self) -> int:
        """:attr:`memory_words` plus the largest batch summary :meth:`update_aggregated` kept."""
        return self.memory_words + self.batch_words

    @abstractmethod
    def _update(self, uniq: np.ndarray, counts: np.ndarray) -> None: ...

    @abstractmethod
    def estimate(self, items: ArrayLike) -> np.ndarray:
        """Estimated frequencies of ``items`` (float64 array of the same length)."""

    @property
    @abstractmethod
    def memory_words(self) -> int:
        """Counters plus stored ids, exactly, at the current state."""

    def merge(self, other: FrequencySketch) -> FrequencySketch:
        raise NotImplementedError(f"{type(self).__name__} does not support merge")

    def _check_merge(self, other: FrequencySketch) -> None:
        if type(other) is not type(self):
            raise TypeError(f"cannot merge {type(other).__name__} into {type(self).__name__}")
        mine = {k: v for k, v in self.params().items() if k not in self.merge_ignores}
        theirs = {k: v for k, v in other.params().items() if k not in self.merge_ignores}
        if mine != theirs:
            raise ValueError(
                f"cannot merge sketches with different parameters: {other.params()} vs {self.params()}"
            )

    @abstractmethod
    def params(self) -> dict[str, Any]:
        """The constructor arguments (JSON-serialisable)."""

    @abstractmethod
    def _state(self) -> dict[str, np.ndarray]: ...

    @abstractmethod
    def _load_state(self, state: dict[str, np.ndarray]) -> None: ...

    def to_bytes(self) -> bytes:
        """Serialise to bytes (an ``.npz`` archive with the parameters as JSON; no pickle)."""
        buf = io.BytesIO()
        meta = json.dumps(
            {
                "class": type(self).__name__,
                "params": self.params(),
                "total": self.total,
                "batch_words": self.batch_words,
            }
        )
        np.savez(buf, __meta__=np.frombuffer(meta.encode(), dtype=np.uint8), **self._state())
        return buf.getvalue()

    @staticmethod
    def from_bytes(data: bytes) -> FrequencySketch:
        """Rebuild any sketch written by :meth:`to_bytes`."""
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            meta = json.loads(z["__meta__"].tobytes().decode())
            state = {k: z[k] for k in z.files if k != "__meta__"}
        cls = _REGISTRY.get(meta["class"])
        if cls is None:
            raise ValueError(f"unknown sketch class {meta['class']!r}")
        sketch = cls(**meta["params"])
        sketch.total = int(meta["total"])
        sketch.batch_words = int(meta.get("batch_words", 0))
        sketch._load_state(state)
        return sketch

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args}; N={self.total}, words={self.memory_words})"
