"""Data with known geometry: synthetic "layers" (a sparse part plus an embedded manifold) and the
reference manifolds the estimators are checked on; a cyclic-text corpus for tiny language models.

A synthetic layer is ``x = sparse + s * M(phi) + noise`` in ``R^D``:

* ``sparse``: ``n_atoms`` random unit directions, ``n_active`` of them per point with Exp(1) sizes
  (the part a sparse linear dictionary represents exactly);
* ``M``: a ``d``-torus (``phi`` uniform on ``[0, 2 pi)^d``) or a ``d``-sphere (``phi`` uniform on
  ``S^d``) embedded by random Fourier features up to harmonic ``K``: for each level ``h <= K``,
  ``n_features`` features ``cos(h <w, phi> + b) / h`` (integer frequency vectors with sup-norm ``h``
  on the torus, random unit vectors ``w`` times ``h`` on the sphere), mixed into ``R^D`` by a random
  Gaussian matrix; higher ``K`` bends the manifold more while keeping its dimension;
* ``s`` makes the manifold's variance ``manifold_share`` of the total; the whole layer is then
  rescaled to unit mean squared norm and ``noise`` is the per-coordinate standard deviation added.

The embedding (frequencies, phases, mixing, atoms) is fixed by ``embed_seed``; the points by ``seed``,
so seeds resample the same layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

__all__ = [
    "SyntheticLayer",
    "cyclic_corpus",
    "flat_torus",
    "round_sphere",
    "synthetic_layer",
]

Family = Literal["torus", "sphere"]


@dataclass(frozen=True)
class SyntheticLayer:
    """A synthetic layer's recipe (see the module docstring); ``name`` is a readable id."""

    family: Family = "torus"
    d: int = 2
    harmonics: int = 1
    ambient: int = 64
    n_atoms: int = 256
    n_active: int = 4
    n_features: int = 8
    manifold_share: float = 0.5
    noise: float = 0.01
    embed_seed: int = 0

    def __post_init__(self) -> None:
        if self.family not in ("torus", "sphere"):
            raise ValueError(f"family must be 'torus' or 'sphere'; got {self.family!r}")
        for name in ("d", "harmonics", "ambient", "n_atoms", "n_active", "n_features"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"SyntheticLayer.{name} must be a positive int; got {value!r}")
        if self.n_active > self.n_atoms:
            raise ValueError(f"n_active ({self.n_active}) must be <= n_atoms ({self.n_atoms})")
        if self.d >= self.ambient:
            raise ValueError(f"d ({self.d}) must be below the ambient dimension ({self.ambient})")
        if not 0 <= self.manifold_share <= 1:
            raise ValueError(f"manifold_share must be in [0, 1]; got {self.manifold_share}")
        if self.noise < 0:
            raise ValueError(f"noise must be >= 0; got {self.noise}")

    @property
    def name(self) -> str:
        return f"{self.family}-d{self.d}-K{self.harmonics}"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _frequencies(rng: np.random.Generator, d: int, h: int, n: int) -> np.ndarray:
    """``n`` integer vectors in ``{-h..h}^d`` with sup-norm exactly ``h``."""
    m = rng.integers(-h, h + 1, size=(n, d))
    col = rng.integers(0, d, size=n)
    m[np.arange(n), col] = h * rng.choice([-1, 1], size=n)
    return m


def _manifold(layer: SyntheticLayer, n: int, rng: np.random.Generator) -> np.ndarray:
    """Manifold points ``(n, ambient)`` before scaling: features of random base points, mixed."""
    emb = np.random.default_rng([layer.embed_seed, 1])
    feats = []
    if layer.family == "torus":
        phi = rng.uniform(0, 2 * np.pi, size=(n, layer.d))
    else:
        phi = rng.standard_normal((n, layer.d + 1))
        phi /= np.linalg.norm(phi, axis=1, keepdims=True)
    for h in range(1, layer.harmonics + 1):
        if layer.family == "torus":
            w = _frequencies(emb, layer.d, h, layer.n_features).T.astype(float)
        else:
            w = emb.standard_normal((layer.d + 1, layer.n_features))
            w *= h / np.linalg.norm(w, axis=0, keepdims=True)
        b = emb.uniform(0, 2 * np.pi, size=layer.n_features)
        feats.append(np.cos(phi @ w + b) / h)
    f = np.concatenate(feats, axis=1)
    mix = emb.standard_normal((f.shape[1], layer.ambient)) / np.sqrt(layer.ambient)
    return f @ mix


def synthetic_layer(layer: SyntheticLayer, n: int, seed: int = 0) -> np.ndarray:
    """``n`` points ``(n, ambient)`` of ``layer`` (float32, unit mean squared norm plus noise)."""
    if not isinstance(n, int) or n < 2:
        raise ValueError(f"n must be an int >= 2; got {n!r}")
    rng = np.random.default_rng([layer.embed_seed, seed, 2])
    emb = np.random.default_rng([layer.embed_seed, 0])
    atoms = emb.standard_normal((layer.n_atoms, layer.ambient))
    atoms /= np.linalg.norm(atoms, axis=1, keepdims=True)
    active = np.argsort(rng.random((n, layer.n_atoms)), axis=1)[:, : layer.n_active]
    sizes = rng.exponential(1.0, size=(n, layer.n_active))
    sparse = np.einsum("na,nad->nd", sizes, atoms[active])
    man = _manifold(layer, n, rng)
    man -= man.mean(0)
    var_sparse = np.mean(np.sum((sparse - sparse.mean(0)) ** 2, axis=1))
    var_man = np.mean(np.sum(man**2, axis=1))
    share = layer.manifold_share
    x = man if share >= 1 else sparse + man * np.sqrt(share / (1 - share) * var_sparse / var_man)
    x = x / np.sqrt(np.mean(np.sum(x * x, axis=1)))
    x = x + layer.noise * rng.standard_normal(x.shape)
    return x.astype(np.float32)


def _rotation(rng: np.random.Generator, ambient: int, k: int) -> np.ndarray:
    return np.linalg.qr(rng.standard_normal((ambient, ambient)))[0][:, :k]


def round_sphere(
    n: int, d: int, radius: float = 1.0, ambient: int = 64, noise: float = 0.0, seed: int = 0
) -> np.ndarray:
    """``n`` uniform points on a radius-``radius`` ``d``-sphere, randomly rotated into ``R^ambient``
    (curvature ``1/radius`` in every direction)."""
    if d + 1 > ambient:
        raise ValueError(f"a {d}-sphere needs ambient >= {d + 1}; got {ambient}")
    rng = np.random.default_rng(seed)
    y = rng.standard_normal((n, d + 1))
    y *= radius / np.linalg.norm(y, axis=1, keepdims=True)
    return y @ _rotation(rng, ambient, d + 1).T + noise * rng.standard_normal((n, ambient))


def flat_torus(
    n: int, d: int, radius: float = 1.0, ambient: int = 64, noise: float = 0.0, seed: int = 0
) -> np.ndarray:
    """``n`` uniform points on the product of ``d`` circles of radius ``radius`` (a flat torus in
    ``R^2d``), rotated into ``R^ambient``: every principal curvature is ``1/radius``."""
    if 2 * d > ambient:
        raise ValueError(f"a flat {d}-torus needs ambient >= {2 * d}; got {ambient}")
    rng = np.random.default_rng(seed)
    phi = rng.uniform(0, 2 * np.pi, size=(n, d))
    y = radius * np.concatenate([np.cos(phi), np.sin(phi)], axis=1)
    return y @ _rotation(rng, ambient, 2 * d).T + noise * rng.standard_normal((n, ambient))


WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
NUMBER_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve",
)  # fmt: skip


def cyclic_corpus(
    n_texts: int, seed: int = 0, facts: Sequence[str] = (), moduli: Sequence[int] = (5, 7, 12)
) -> list[str]:
    """Texts with cyclic structure for a tiny LM: counting mod ``p`` in number words, weekdays and
    months continuing from a random start (with offsets "two days after monday is wednesday"),
    mixed with ``facts`` (sparse, non-cyclic statements, e.g. ``World.statements``)."""
    if n_texts < 1:
        raise ValueError(f"n_texts must be >= 1; got {n_texts}")
    if any(p < 2 or p > len(NUMBER_WORDS) for p in moduli):
        raise ValueError(f"moduli must be in [2, {len(NUMBER_WORDS)}]; got {list(moduli)}")
    rng = np.random.default_rng(seed)
    cycles = [("count mod " + NUMBER_WORDS[p], NUMBER_WORDS[:p]) for p in moduli]
    cycles += [("days", WEEKDAYS), ("months", MONTHS)]
    facts = list(facts)
    texts = []
    for _ in range(n_texts):
        kind = rng.random()
        if facts and kind < 0.25:
            texts.append(facts[rng.integers(len(facts))])
            continue
        head, cycle = cycles[rng.integers(len(cycles))]
        start = int(rng.integers(len(cycle)))
        if kind < 0.45:
            step = int(rng.integers(1, 4))
            end = cycle[(start + step) % len(cycle)]
            texts.append(f"{NUMBER_WORDS[step]} after {cycle[start]} is {end} .")
            continue
        length = int(rng.integers(4, 12))
        words = [cycle[(start + i) % len(cycle)] for i in range(length)]
        texts.append(f"{head} : " + " ".join(words))
    return texts
