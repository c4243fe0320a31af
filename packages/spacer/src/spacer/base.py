"""The interface every frequency sketch shares, vectorised hashing, and input checks.

Items are non-negative integer ids in a numpy array (map strings to ids with ``np.unique(...,
return_inverse=True)`` or :func:`spacer.streams.encode`). ``update`` takes a whole batch and
aggregates it with ``np.unique`` before touching the sketch, so no hot path loops over items in
Python. Memory is counted in *words*, the unit of this literature: one word per counter and one per
stored item id.
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
    merge_ignores: ClassVar[
        tuple[str, ...]
    ] = ()  # parameters that may differ between merged sketches

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _REGISTRY[cls.__name__] = cls

    def __init__(self) -> None:
        self.total = 0  # stream length N seen so far (sum of counts)

    def update(self, items: ArrayLike, counts: ArrayLike | None = None) -> FrequencySketch:
        """Add a batch of items (each once, or ``counts[i]`` times); returns ``self``."""
        arr = as_items(items)
        c = as_counts(counts, arr.size)
        if arr.size == 0:
            return self
        uniq, tot = aggregate(arr, c)
        if uniq.size:
            self.total += int(tot.sum())
            self._update(uniq, tot)
        return self

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
            {"class": type(self).__name__, "params": self.params(), "total": self.total}
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
        sketch._load_state(state)
        return sketch

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args}; N={self.total}, words={self.memory_words})"
