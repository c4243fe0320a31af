"""Real data for the class-dependent experiments: scikit-learn's bundled digits with an imbalance
sampler, and Fashion-MNIST from its IDX files (for the ``full`` scale; nothing is downloaded).

Images are returned as float64 ``(n, 1, H, W)`` scaled to ``[-1, 1]``, with integer labels.
"""

from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch


@dataclass(frozen=True)
class ImageSet:
    """Images ``(n, 1, H, W)`` in ``[-1, 1]`` and labels ``(n,)``."""

    images: torch.Tensor
    labels: torch.Tensor

    def __post_init__(self) -> None:
        if self.images.dim() != 4 or self.labels.shape != (self.images.shape[0],):
            raise ValueError("images must be (n, 1, H, W) and labels (n,)")

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def flat(self) -> torch.Tensor:
        return self.images.flatten(1)

    def class_variance(self) -> dict[int, float]:
        """Per-class mean pixel variance ``tr(Cov_c) / D`` (the ``sigma_c^2`` of the theory)."""
        x = self.flat
        return {int(c): float(x[self.labels == c].var(0).mean()) for c in torch.unique(self.labels)}

    def subset(self, idx: torch.Tensor | np.ndarray) -> ImageSet:
        idx = torch.as_tensor(idx, dtype=torch.long)
        return ImageSet(self.images[idx], self.labels[idx])


def load_digits_images() -> ImageSet:
    """The 1,797 8x8 digits bundled with scikit-learn (pixel values 0-16), scaled to ``[-1, 1]``."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.as_tensor(d.images, dtype=torch.float64)[:, None] / 8.0 - 1.0
    return ImageSet(x, torch.as_tensor(d.target, dtype=torch.long))


def imbalanced_split(
    data: ImageSet, counts: dict[int, int], n_test: int = 40, seed: int = 0
) -> tuple[ImageSet, ImageSet]:
    """Disjoint ``(train, test)``: ``counts[c]`` training images of each listed class and up to
    ``n_test`` held-out images of each; classes not in ``counts`` are dropped."""
    rng = np.random.default_rng(seed)
    labels = data.labels.numpy()
    tr, te = [], []
    for c, k in counts.items():
        pool = np.flatnonzero(labels == c)
        if k < 1 or k + 1 > len(pool):
            raise ValueError(f"class {c}: asked for {k} training images, {len(pool)} available")
        perm = rng.permutation(pool)
        tr.append(perm[:k])
        te.append(perm[k : k + n_test])
    return data.subset(np.concatenate(tr)), data.subset(np.concatenate(te))


def geometric_counts(classes: list[int], n_max: int, ratio: float) -> dict[int, int]:
    """Per-class counts falling geometrically from ``n_max`` (first class) to ``n_max / ratio``."""
    if ratio < 1 or n_max < 1 or not classes:
        raise ValueError("need ratio >= 1, n_max >= 1 and at least one class")
    k = len(classes)
    pw = np.linspace(0, 1, k) if k > 1 else np.zeros(1)
    return {c: max(1, round(n_max * ratio ** (-q))) for c, q in zip(classes, pw, strict=True)}


def _read_idx(path: Path) -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        raw = f.read()
    zero, dtype_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype_code != 0x08:
        raise ValueError(f"{path} is not an unsigned-byte IDX file")
    shape = struct.unpack(">" + "I" * ndim, raw[4 : 4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def load_fashion_mnist(root: str | Path, split: str = "train") -> ImageSet:
    """Fashion-MNIST from the four IDX files (optionally ``.gz``) in ``root``; no download."""
    prefix = {"train": "train", "test": "t10k"}.get(split)
    if prefix is None:
        raise ValueError("split must be 'train' or 'test'")
    root = Path(root)

    def find(stem: str) -> Path:
        for name in (stem, stem + ".gz"):
            if (root / name).exists():
                return root / name
        raise FileNotFoundError(
            f"{stem}[.gz] not found in {root}; put the Fashion-MNIST IDX files there"
        )

    images = _read_idx(find(f"{prefix}-images-idx3-ubyte"))
    labels = _read_idx(find(f"{prefix}-labels-idx1-ubyte"))
    x = torch.as_tensor(images.astype(np.float64) / 127.5 - 1.0)[:, None]
    return ImageSet(x, torch.as_tensor(labels.astype(np.int64)))
