"""Images with known semantics and known local detail, view pairs with known geometry, loaders.

:class:`SyntheticShapes` draws 32x32 RGB images whose **class** is a global property (the shape of
one large object) and whose **patches** each carry an independent random texture code: a vector
``z_p ~ N(0, I_k)`` mixed through ``k`` fixed zero-mean texture patterns and added to the patch.
The code is independent of the class, of the object and of every other patch, so it is exactly the
kind of target variation that cannot be predicted from the visible context. All of it is returned
as ground truth (labels, codes, per-pixel and per-patch segmentation, object position).

:func:`view_pair` applies a known affine transform (shift, zoom = crop-and-resize, horizontal
flip) to any batch of images and returns, for every patch of the first view, where its centre
lands in the second view: the ground truth of the correspondence diagnostic.

Real data: scikit-learn's bundled digits (upsampled) and sample photographs (random crops), and
loaders for an ImageFolder directory and CIFAR-10 / STL-10 from a local path (the ``full`` scale).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

SHAPES = ("circle", "square", "triangle", "cross", "ring", "diamond")
TEXTURE_SEED = 1234  # the texture patterns are shared by every split and seed


@dataclass(frozen=True)
class ImageSet:
    """A batch of images with whatever ground truth is known.

    ``images`` is ``(n, 3, H, W)`` float in about [0, 1]. ``labels`` (n,) is the global class or
    ``None``; ``codes`` ``(n, n_patches, k)`` the per-patch texture codes; ``seg`` ``(n, H, W)``
    the per-pixel segmentation (0 = background, 1 + class = object); ``patch_seg`` ``(n,
    n_patches)`` its per-patch majority label.
    """

    images: torch.Tensor
    labels: torch.Tensor | None = None
    codes: torch.Tensor | None = None
    seg: torch.Tensor | None = None
    patch_seg: torch.Tensor | None = None
    patch_size: int = 4
    name: str = "images"

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def grid(self) -> tuple[int, int]:
        """Patch grid ``(rows, cols)``."""
        h, w = self.images.shape[-2:]
        return h // self.patch_size, w // self.patch_size

    def subset(self, idx: slice | torch.Tensor | np.ndarray) -> ImageSet:
        """The same set restricted to ``idx``."""

        def take(x: torch.Tensor | None) -> torch.Tensor | None:
            return None if x is None else x[idx]

        return ImageSet(
            self.images[idx],
            take(self.labels),
            take(self.codes),
            take(self.seg),
            take(self.patch_seg),
            self.patch_size,
            self.name,
        )


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """``(n, C, H, W)`` -> ``(n, n_patches, patch_size**2 * C)`` in row-major patch order."""
    n, c, h, w = images.shape
    if h % patch_size or w % patch_size:
        raise ValueError(f"patch size {patch_size} does not divide the image size {h}x{w}")
    x = images.reshape(n, c, h // patch_size, patch_size, w // patch_size, patch_size)
    return x.permute(0, 2, 4, 3, 5, 1).reshape(n, (h // patch_size) * (w // patch_size), -1)


def texture_patterns(k: int, patch_size: int, seed: int = TEXTURE_SEED) -> torch.Tensor:
    """``k`` fixed ``(3, p, p)`` texture patterns: orthonormal, zero mean in every channel."""
    gen = torch.Generator().manual_seed(seed)
    d = 3 * patch_size * patch_size
    if k > d - 3:
        raise ValueError(f"texture_dim {k} must be at most {d - 3} for patch size {patch_size}")
    raw = torch.randn(3, patch_size * patch_size, k, generator=gen)
    raw = (raw - raw.mean(1, keepdim=True)).reshape(d, k)  # zero mean per channel: no colour shift
    q, _ = torch.linalg.qr(raw)
    return q.T.reshape(k, 3, patch_size, patch_size)


def _shape_masks(kind: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Boolean object masks from per-image shape index and normalised coordinates ``u, v``."""
    r = torch.sqrt(u**2 + v**2)
    a, b = u.abs(), v.abs()
    masks = torch.stack(
        [
            r <= 1.0,  # circle
            torch.maximum(a, b) <= 0.85,  # square
            (v <= 0.8) & (v >= 1.6 * a - 0.9),  # triangle
            (torch.minimum(a, b) <= 0.33) & (torch.maximum(a, b) <= 1.0),  # cross
            (r <= 1.0) & (r >= 0.55),  # ring
            a + b <= 1.05,  # diamond
        ]
    )  # (6, n, H, W)
    return masks[kind, torch.arange(kind.shape[0])]


class SyntheticShapes:
    """Procedural images: one object whose shape is the class, on textured patches.

    Parameters: ``n_classes`` (2..6 shapes), ``img_size`` and ``patch_size`` (must divide it),
    ``texture_dim`` k and ``texture_amp`` (standard deviation of each code coordinate times the
    pattern norm), and the per-image nuisances: object scale, position, colours (jitter).
    ``sample(n, seed)`` returns an :class:`ImageSet` with every piece of ground truth.
    """

    def __init__(
        self,
        n_classes: int = 4,
        img_size: int = 32,
        patch_size: int = 4,
        texture_dim: int = 4,
        texture_amp: float = 0.4,
        scale: tuple[float, float] = (0.45, 0.7),
        colour_jitter: float = 0.25,
    ) -> None:
        if not 2 <= n_classes <= len(SHAPES):
            raise ValueError(f"n_classes must be in [2, {len(SHAPES)}], got {n_classes}")
        if img_size % patch_size:
            raise ValueError(f"patch size {patch_size} does not divide the image size {img_size}")
        if texture_amp < 0 or texture_dim < 1:
            raise ValueError("texture_amp must be >= 0 and texture_dim >= 1")
        self.n_classes = n_classes
        self.img_size = img_size
        self.patch_size = patch_size
        self.texture_dim = texture_dim
        self.texture_amp = texture_amp
        self.scale = scale
        self.colour_jitter = colour_jitter
        self.patterns = texture_patterns(texture_dim, patch_size)

    @property
    def grid(self) -> tuple[int, int]:
        g = self.img_size // self.patch_size
        return g, g

    def sample(self, n: int, seed: int = 0) -> ImageSet:
        """``n`` images with labels, texture codes and segmentation, deterministic in ``seed``."""
        if n < 1:
            raise ValueError("n must be >= 1")
        gen = torch.Generator().manual_seed(seed)
        s, p, k = self.img_size, self.patch_size, self.texture_dim
        g = s // p
        labels = torch.randint(self.n_classes, (n,), generator=gen)
        radius = self.scale[0] + (self.scale[1] - self.scale[0]) * torch.rand(n, generator=gen)
        centre = (torch.rand(n, 2, generator=gen) * 2 - 1) * (0.95 - radius[:, None])
        coords = (torch.arange(s, dtype=torch.float32) + 0.5) / s * 2 - 1
        yy, xx = torch.meshgrid(coords, coords, indexing="ij")
        u = (xx[None] - centre[:, 0, None, None]) / radius[:, None, None]
        v = (yy[None] - centre[:, 1, None, None]) / radius[:, None, None]
        obj = _shape_masks(labels, u, v)  # (n, s, s)
        # colours: background and object differ by at least a fixed contrast
        bg = 0.3 + self.colour_jitter * (torch.rand(n, 3, generator=gen) - 0.5)
        fg = 0.75 + self.colour_jitter * (torch.rand(n, 3, generator=gen) - 0.5)
        images = torch.where(obj[:, None], fg[:, :, None, None], bg[:, :, None, None])
        codes = torch.randn(n, g * g, k, generator=gen)
        tex = torch.einsum("npk,kcij->npcij", codes, self.patterns) * self.texture_amp
        tex = tex.reshape(n, g, g, 3, p, p).permute(0, 3, 1, 4, 2, 5).reshape(n, 3, s, s)
        images = images + tex
        seg = torch.where(obj, labels[:, None, None] + 1, torch.zeros_like(labels)[:, None, None])
        frac = obj.float().reshape(n, g, p, g, p).mean(dim=(2, 4)).reshape(n, g * g)
        patch_seg = torch.where(frac >= 0.5, labels[:, None] + 1, 0)
        return ImageSet(images, labels, codes, seg, patch_seg, p, "synthetic_shapes")


# --------------------------------------------------------------------------------------------
# view pairs with known geometry
# --------------------------------------------------------------------------------------------

TransformKind = Literal["shift", "zoom", "flip"]


@dataclass(frozen=True)
class ViewPair:
    """Two views and, for each patch of view A, where its centre lands in view B.

    ``target`` ``(n_patches, 2)`` holds (row, col) in B's patch-grid units (continuous); ``valid``
    marks the patches whose correspondent lies inside B.
    """

    a: torch.Tensor
    b: torch.Tensor
    target: torch.Tensor
    valid: torch.Tensor
    grid: tuple[int, int]
    kind: str


def view_pair(
    images: torch.Tensor, kind: TransformKind = "shift", amount: float = 4, patch_size: int = 4
) -> ViewPair:
    """View B = a known affine transform of view A (= ``images``).

    ``shift``: translate by ``amount`` pixels right and down (zero padding). ``zoom``: crop the
    central ``1/amount`` of the image and resize it back (crop-and-resize, ``amount`` > 1).
    ``flip``: horizontal mirror (``amount`` ignored).
    """
    n, _, h, w = images.shape
    if h % patch_size or w % patch_size:
        raise ValueError(f"patch size {patch_size} does not divide the image size {h}x{w}")
    gh, gw = h // patch_size, w // patch_size
    # map from B's normalised coords to A's (what grid_sample needs), and A -> B for the labels
    if kind == "shift":
        tx, ty = 2 * amount / w, 2 * amount / h
        theta = torch.tensor([[1.0, 0.0, -tx], [0.0, 1.0, -ty]])
    elif kind == "zoom":
        if amount <= 1:
            raise ValueError("zoom amount must be > 1 (the crop is 1/amount of the image)")
        theta = torch.tensor([[1.0 / amount, 0.0, 0.0], [0.0, 1.0 / amount, 0.0]])
    elif kind == "flip":
        theta = torch.tensor([[-1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    else:
        raise ValueError(f"unknown transform {kind!r}; use 'shift', 'zoom' or 'flip'")
    moved = theta.to(images.device, images.dtype).expand(n, 2, 3)  # the geometry stays on the CPU
    grid = F.affine_grid(moved, list(images.shape), align_corners=False)
    b = F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    # patch centres of A in normalised coordinates -> B: solve B = inverse(theta) applied to A
    rows, cols = torch.meshgrid(torch.arange(gh), torch.arange(gw), indexing="ij")
    xa = ((cols.flatten() + 0.5) * patch_size) / w * 2 - 1
    ya = ((rows.flatten() + 0.5) * patch_size) / h * 2 - 1
    m = theta[:, :2]
    inv = torch.linalg.inv(m)
    pts = torch.stack([xa, ya], 1) - theta[:, 2]
    xb, yb = (pts @ inv.T).unbind(1)
    col_b = (xb + 1) / 2 * w / patch_size - 0.5
    row_b = (yb + 1) / 2 * h / patch_size - 0.5
    target = torch.stack([row_b, col_b], 1)
    valid = (row_b > -0.5) & (row_b < gh - 0.5) & (col_b > -0.5) & (col_b < gw - 0.5)
    return ViewPair(images, b, target, valid, (gh, gw), kind)


# --------------------------------------------------------------------------------------------
# real data
# --------------------------------------------------------------------------------------------


def digits(img_size: int = 32, patch_size: int = 4) -> ImageSet:
    """scikit-learn's bundled 8x8 digits, upsampled to ``img_size`` and replicated to RGB."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32)[:, None] / 16.0
    x = F.interpolate(x, size=(img_size, img_size), mode="bilinear", align_corners=False)
    return ImageSet(
        x.repeat(1, 3, 1, 1), torch.tensor(d.target), patch_size=patch_size, name="digits"
    )


def sample_photo_crops(n: int, img_size: int = 32, patch_size: int = 4, seed: int = 0) -> ImageSet:
    """Random ``img_size`` crops (downscaled 4x) of scikit-learn's two bundled photographs."""
    from sklearn.datasets import load_sample_images

    gen = torch.Generator().manual_seed(seed)
    photos = [
        torch.tensor(im, dtype=torch.float32).permute(2, 0, 1) / 255.0
        for im in load_sample_images().images
    ]
    photos = [F.avg_pool2d(p[None], 4)[0] for p in photos]
    which = torch.randint(len(photos), (n,), generator=gen)
    out = torch.empty(n, 3, img_size, img_size)
    for i, j in enumerate(which.tolist()):
        _, h, w = photos[j].shape
        y = int(torch.randint(h - img_size + 1, (1,), generator=gen))
        x = int(torch.randint(w - img_size + 1, (1,), generator=gen))
        out[i] = photos[j][:, y : y + img_size, x : x + img_size]
    return ImageSet(out, patch_size=patch_size, name="sample_photos")


def image_folder(
    path: str | Path, img_size: int = 32, patch_size: int = 4, limit: int | None = None
) -> ImageSet:
    """An ImageFolder directory (``root/<class>/<image>``), resized to ``img_size``."""
    from torchvision import datasets, transforms

    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a directory of class folders")
    tf = transforms.Compose([transforms.Resize((img_size, img_size)), transforms.ToTensor()])
    return _stack(datasets.ImageFolder(str(root), transform=tf), patch_size, limit, root.name)


def torchvision_dataset(
    name: Literal["cifar10", "stl10"], root: str | Path, split: str = "train", img_size: int = 32,
    patch_size: int = 4, limit: int | None = None,
) -> ImageSet:  # fmt: skip
    """CIFAR-10 or STL-10 already on disk under ``root`` (never downloaded)."""
    from torchvision import datasets, transforms

    tf = transforms.Compose([transforms.Resize((img_size, img_size)), transforms.ToTensor()])
    try:
        if name == "cifar10":
            ds = datasets.CIFAR10(str(root), train=split == "train", transform=tf, download=False)
        elif name == "stl10":
            ds = datasets.STL10(str(root), split=split, transform=tf, download=False)
        else:
            raise ValueError(f"unknown dataset {name!r}; use 'cifar10' or 'stl10'")
    except RuntimeError as err:
        raise FileNotFoundError(
            f"{name} not found under {root}: put the extracted files there"
        ) from err
    return _stack(ds, patch_size, limit, name)


def _stack(ds: object, patch_size: int, limit: int | None, name: str) -> ImageSet:
    n = len(ds) if limit is None else min(limit, len(ds))  # type: ignore[arg-type]
    xs, ys = zip(*(ds[i] for i in range(n)), strict=True)  # type: ignore[index]
    return ImageSet(torch.stack(xs), torch.tensor(ys), patch_size=patch_size, name=name)


def chebyshev_hits(pred: torch.Tensor, target: torch.Tensor, tol: float = 1.0) -> torch.Tensor:
    """Whether predicted (row, col) cells lie within ``tol`` patches of the targets (max-norm)."""
    return (pred.float() - target).abs().amax(-1) <= tol + 1e-6


def chance_within(
    target: torch.Tensor, valid: torch.Tensor, grid: tuple[int, int], tol: float = 1.0
) -> float:
    """Expected within-``tol`` hit rate of a uniformly random match on the ``grid``."""
    gh, gw = grid
    rows, cols = torch.meshgrid(torch.arange(gh), torch.arange(gw), indexing="ij")
    cells = torch.stack([rows.flatten(), cols.flatten()], 1)
    hits = chebyshev_hits(cells[None], target[valid][:, None], tol)  # (n_valid, n_cells)
    return float(hits.float().mean()) if hits.numel() else math.nan
