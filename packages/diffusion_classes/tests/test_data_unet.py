import gzip
import struct

import numpy as np
import pytest
import torch

from diffusion_classes.data import (
    ImageSet,
    geometric_counts,
    imbalanced_split,
    load_digits_images,
    load_fashion_mnist,
)


def _write_idx(path, arr):
    header = struct.pack(">HBB", 0, 0x08, arr.ndim) + struct.pack(">" + "I" * arr.ndim, *arr.shape)
    data = header + arr.astype(np.uint8).tobytes()
    if path.suffix == ".gz":
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)


def test_fashion_mnist_idx_loader_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, size=(5, 28, 28))
    labels = np.array([3, 1, 4, 1, 5])
    _write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", imgs)
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte", labels)
    ds = load_fashion_mnist(tmp_path, "test")
    assert ds.images.shape == (5, 1, 28, 28)
    assert ds.labels.tolist() == labels.tolist()
    assert torch.allclose(ds.images[2, 0], torch.as_tensor(imgs[2] / 127.5 - 1.0))
    with pytest.raises(FileNotFoundError, match="train-images"):
        load_fashion_mnist(tmp_path, "train")
    with pytest.raises(ValueError, match="split"):
        load_fashion_mnist(tmp_path, "val")


def test_digits_imbalance_sampler():
    d = load_digits_images()
    assert d.images.shape == (1797, 1, 8, 8)
    assert d.images.min() == -1
    assert d.images.max() == 1
    counts = geometric_counts([3, 7, 9], n_max=80, ratio=8.0)
    assert counts == {3: 80, 7: 28, 9: 10}
    tr, te = imbalanced_split(d, counts, n_test=25, seed=1)
    assert {c: int((tr.labels == c).sum()) for c in counts} == counts
    assert all(int((te.labels == c).sum()) == 25 for c in counts)
    # disjoint: no training image appears among the held-out ones
    dist = torch.cdist(tr.flat, te.flat)
    assert float(dist.min()) > 0 or len(torch.unique(d.flat, dim=0)) < len(d)
    with pytest.raises(ValueError, match="available"):
        imbalanced_split(d, {0: 5000})
    var = tr.class_variance()
    assert set(var) == set(counts)
    assert all(v > 0 for v in var.values())


def test_imageset_checks_shapes():
    with pytest.raises(ValueError, match="images must be"):
        ImageSet(torch.zeros(3, 8, 8), torch.zeros(3, dtype=torch.long))


def test_unet_learns_and_memorises_a_tiny_set(one_thread):
    pytest.importorskip("diffusers")
    from diffusion_classes.unet import class_losses, make_unet, train_unet, unet_score

    d = load_digits_images()
    tr, te = imbalanced_split(d, {0: 6, 1: 6}, n_test=20, seed=0)
    model = make_unet(8, (8, 16), seed=0)
    before = class_losses(model, tr, (0.1,), 2)
    run = train_unet(model, tr, te, steps=150, batch=12, lr=3e-3, n_evals=4, seed=0)
    after = class_losses(model, tr, (0.1,), 2)
    # measured on 1 thread: after / before = 0.18 and 0.15, gap growth +0.12 and +0.20 (classes 0, 1)
    assert all(after[c] < 0.5 * before[c] for c in before)  # it learns to denoise
    assert all(run.gap(c)[-1] > run.gap(c)[0] for c in (0, 1))  # and starts to memorise 6 images
    # an onset (steps 13 and 22 here) lies within the evaluations, never NaN; censored: the last
    for c in (0, 1):
        cr = run.tau_mem[c]
        assert run.steps[0] <= cr.time <= run.steps[-1]
        assert not cr.censored or cr.time == run.steps[-1]
    s = unet_score(model)(torch.zeros(3, 1, 8, 8, dtype=torch.float64), 0.5)
    assert s.shape == (3, 1, 8, 8)
    assert s.dtype == torch.float64
    with pytest.raises(ValueError, match="divisible"):
        make_unet(6, (8, 16, 32))
