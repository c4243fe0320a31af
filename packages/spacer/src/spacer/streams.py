"""Streams: Zipfian (generated in code), a real word stream shipped with Python, adversarial order,
and a reader for a user's own file."""

from __future__ import annotations

import os
import re
import sysconfig
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from spacer.base import as_items

__all__ = [
    "adversarial_order",
    "binary_words",
    "encode",
    "read_items",
    "stdlib_words",
    "zipf_stream",
]


def zipf_stream(n: int, universe: int, exponent: float, seed: int = 0) -> np.ndarray:
    """``n`` ids from a Zipf law over ``universe`` ids (``P(rank r) ~ r^-exponent``), ids shuffled so
    that frequency does not follow the id."""
    if n < 1 or universe < 1:
        raise ValueError(f"n and universe must be >= 1; got {n}, {universe}")
    if not 0 <= exponent <= 5:
        raise ValueError(f"exponent must be in [0, 5]; got {exponent}")
    rng = np.random.default_rng(seed)
    weights = np.arange(1, universe + 1, dtype=float) ** -exponent
    ranks = rng.choice(universe, size=n, p=weights / weights.sum())
    return rng.permutation(universe)[ranks].astype(np.int64)


def adversarial_order(stream: ArrayLike) -> np.ndarray:
    """The same multiset with the heaviest items last (ascending frequency, grouped)."""
    arr = as_items(stream, "stream")
    _uniq, inv, counts = np.unique(arr, return_inverse=True, return_counts=True)
    return arr[np.lexsort((arr, counts[inv]))]


def encode(values: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Map arbitrary values (strings, floats) to dense integer ids; returns ``(ids, vocabulary)``."""
    vocab, ids = np.unique(np.asarray(values), return_inverse=True)
    return ids.astype(np.int64), vocab


def stdlib_words(max_files: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A real stream that ships offline: every identifier-like word of the Python standard
    library's ``.py`` sources and docstrings, in file order. Returns ``(ids, vocabulary)``."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts)
    if max_files is not None:
        files = files[:max_files]
    if not files:
        raise FileNotFoundError(f"no .py files under {root}")
    word = re.compile(r"[A-Za-z_][A-Za-z0-9_]+")
    words: list[str] = []
    for f in files:
        words += word.findall(f.read_text(errors="ignore"))
    return encode(np.array(words))


def binary_words(max_items: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A second real stream that ships offline, machine-generated rather than text: every aligned
    4-byte little-endian word of numpy's compiled extension modules (``numpy/**/*.so`` or
    ``*.pyd``, in path order), like the 32-bit addresses of a packet trace. Heavily skewed (zero
    words, opcodes and pointers repeat). Deterministic for a given numpy build (``uv.lock`` pins
    it); nothing is downloaded. Returns ``(ids, vocabulary)`` with the words as the vocabulary.
    """
    root = Path(np.__file__).parent
    files = sorted(p for p in root.rglob("*") if p.suffix in (".so", ".pyd") and p.is_file())
    if not files:
        raise FileNotFoundError(
            f"no compiled extension modules (*.so, *.pyd) under {root}: binary_words needs a "
            "binary numpy install (a wheel, as `make setup` gives)"
        )
    parts = []
    for f in files:
        data = f.read_bytes()
        parts.append(np.frombuffer(data[: len(data) // 4 * 4], dtype="<u4"))
    words = np.concatenate(parts)
    if max_items is not None:
        if max_items < 1:
            raise ValueError(f"max_items must be >= 1 or None; got {max_items}")
        words = words[:max_items]
    return encode(words)


def read_items(
    path: str | os.PathLike[str], column: int | str = 0
) -> tuple[np.ndarray, np.ndarray]:
    """A user's stream: ``.npy`` (integer ids), ``.csv`` (one column, by index or header name), or
    text with one item per line. Returns ``(ids, vocabulary)``; ids are dense."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(p)
    if p.suffix == ".npy":
        return encode(np.load(p, allow_pickle=False))
    if p.suffix == ".csv":
        import csv

        with p.open(newline="") as f:
            rows = list(csv.reader(f))
        if not rows:
            raise ValueError(f"{p} is empty")
        idx = column
        if isinstance(column, str):
            if column not in rows[0]:
                raise ValueError(f"column {column!r} not in header {rows[0]}")
            idx, rows = rows[0].index(column), rows[1:]
        return encode(np.array([r[int(idx)] for r in rows if r]))
    lines = [line.rstrip("\n") for line in p.open()]
    return encode(np.array([line for line in lines if line]))
