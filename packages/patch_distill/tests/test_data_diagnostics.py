import numpy as np
import pytest
import torch

from patch_distill import (
    SyntheticShapes,
    build_vit,
    correspondence_accuracy,
    correspondence_scores,
    dense_probe,
    digits,
    encode_tokens,
    image_folder,
    knn_accuracy,
    linear_probe_accuracy,
    local_evidence_r2,
    patchify,
    sample_photo_crops,
    view_pair,
)
from patch_distill.data import chance_within, texture_patterns
from patch_distill.models import ViTConfig

TINY = ViTConfig(embed_dim=32, depth=1, num_heads=2)


def test_synthetic_ground_truth_is_consistent():
    gen = SyntheticShapes(n_classes=4)
    s = gen.sample(64, seed=0)
    assert s.images.shape == (64, 3, 32, 32)
    assert s.codes.shape == (64, 64, 4)
    assert set(s.labels.tolist()) <= {0, 1, 2, 3}
    obj = s.seg > 0
    assert ((s.seg[obj] - 1) == s.labels[:, None, None].expand_as(s.seg)[obj]).all()
    assert (s.patch_seg.max(1).values == s.labels + 1).all()  # every object covers a patch
    assert torch.equal(gen.sample(64, seed=0).images, s.images)  # deterministic
    # on a one-colour patch the texture code is exactly the projection of its pixels on the patterns
    pats = texture_patterns(4, 4).permute(0, 2, 3, 1).reshape(4, -1)  # patchify order (y, x, c)
    assert torch.allclose(pats @ pats.T, torch.eye(4), atol=1e-5)
    flat = patchify(s.images, 4)
    uniform = ~(
        s.seg.reshape(64, 8, 4, 8, 4).permute(0, 1, 3, 2, 4).reshape(64, 64, 16).float().std(-1) > 0
    )
    rec = flat @ pats.T / gen.texture_amp
    assert torch.allclose(rec[uniform], s.codes[uniform], atol=1e-4)


def test_bad_data_arguments():
    with pytest.raises(ValueError, match="divide"):
        SyntheticShapes(img_size=32, patch_size=6)
    with pytest.raises(ValueError, match="n_classes"):
        SyntheticShapes(n_classes=9)
    with pytest.raises(ValueError, match="divide"):
        patchify(torch.rand(1, 3, 30, 30), 4)
    with pytest.raises(ValueError, match="transform"):
        view_pair(torch.rand(1, 3, 32, 32), "rotate")  # type: ignore[arg-type]


def test_view_pair_geometry():
    x = torch.rand(2, 3, 32, 32)
    p = view_pair(x, "shift", 8, 4)
    assert torch.allclose(p.b[:, :, 8:, 8:], x[:, :, :-8, :-8], atol=1e-5)
    assert torch.allclose(p.target[0], torch.tensor([2.0, 2.0]))  # patch (0,0) lands 2 patches on
    assert int(p.valid.sum()) == 36
    f = view_pair(x, "flip", 0, 4)
    assert torch.allclose(f.b, x.flip(-1), atol=1e-5)
    assert torch.allclose(f.target[0], torch.tensor([0.0, 7.0]))
    z = view_pair(x, "zoom", 2, 4)
    assert int(z.valid.sum()) == 16  # the central 4x4 patches fill B


def test_correspondence_is_one_for_identical_and_chance_for_shuffled():
    torch.manual_seed(0)
    feats = torch.randn(200, 64, 16)
    pair = view_pair(torch.zeros(1, 3, 32, 32), "shift", 8, 4)
    # identical content moved by the transform: B's cell target[p] holds A's patch p
    fb = torch.zeros_like(feats)
    idx = pair.target[pair.valid].round().long()
    fb[:, idx[:, 0] * 8 + idx[:, 1]] = feats[:, pair.valid]
    assert correspondence_scores(feats, fb, pair.target, pair.valid, (8, 8)).float().mean() == 1.0
    shuffled = correspondence_scores(
        feats, torch.randn(200, 64, 16), pair.target, pair.valid, (8, 8)
    )
    chance = chance_within(pair.target, pair.valid, (8, 8))
    assert shuffled.float().mean().item() == pytest.approx(chance, abs=0.02)
    assert 0.05 < chance < 0.2


def test_correspondence_ties_count_as_a_random_tie_break():
    """Planted: view B collapsed (every token the same), so every patch of B is a nearest
    neighbour. The hit is the share of them within tol: exactly chance, not whatever argmax's
    first index (cell (0, 0), two patches from every target of this shift) happens to give."""
    torch.manual_seed(0)
    feats = torch.randn(3, 64, 16)
    pair = view_pair(torch.zeros(1, 3, 32, 32), "shift", 8, 4)
    collapsed = torch.randn(16).expand(3, 64, 16)
    hits = correspondence_scores(feats, collapsed, pair.target, pair.valid, (8, 8))
    chance = chance_within(pair.target, pair.valid, (8, 8))
    assert hits.mean().item() == pytest.approx(chance)
    assert hits.mean().item() > 0  # argmax's first index scored 0 here
    # two cells equal up to float32 rounding are both nearest: half a hit when one is in reach
    fb = torch.randn(1, 64, 16)
    t = pair.target[pair.valid][0].round().long()  # patch 0 of A lands on cell t of B
    fb[0, int(t[0]) * 8 + int(t[1])] = feats[0, pair.valid][0]
    fb[0, 63] = feats[0, pair.valid][0] * (1 + 1e-7)  # a far cell with the same token
    one = correspondence_scores(feats[:1], fb, pair.target, pair.valid, (8, 8))
    assert one[0, 0].item() == pytest.approx(0.5)
    nan = correspondence_scores(feats[:1] * torch.nan, fb, pair.target, pair.valid, (8, 8))
    assert torch.isnan(nan).all()  # no neighbour is defined


def test_correspondence_on_a_model_and_bad_input():
    vit = build_vit(TINY)
    c = correspondence_accuracy(vit, torch.rand(4, 3, 32, 32), "shift", 8)
    assert 0 <= c.accuracy <= 1
    assert c.n_patches == 36
    with pytest.raises(ValueError, match="both be"):
        correspondence_scores(
            torch.randn(2, 4, 3),
            torch.randn(2, 5, 3),
            torch.zeros(4, 2),
            torch.ones(4, dtype=torch.bool),
            (2, 2),
        )


def test_r2_recovers_a_planted_linear_code_and_not_noise():
    rng = np.random.default_rng(0)
    code = rng.normal(size=(60, 16, 3))
    w = rng.normal(size=(3, 24))
    patches = code @ w + 0.05 * rng.normal(size=(60, 16, 24))
    assert local_evidence_r2(patches, code) > 0.98
    assert local_evidence_r2(patches, rng.normal(size=(60, 16, 3))) < 0.02
    with pytest.raises(ValueError, match="same n, P"):
        local_evidence_r2(patches, code[:, :8])


def test_probes_on_separable_and_random_labels():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 300)
    x = np.eye(3)[y] * 3 + rng.normal(size=(300, 3)) * 0.3
    assert knn_accuracy(x[:200], y[:200], x[200:], y[200:]) > 0.95
    assert linear_probe_accuracy(x[:200], y[:200], x[200:], y[200:]) > 0.95
    yr = rng.integers(0, 3, 300)
    assert linear_probe_accuracy(x[:200], yr[:200], x[200:], yr[200:]) < 0.5
    seg = rng.integers(0, 2, (40, 9))
    feats = np.eye(2)[seg] + 0.1 * rng.normal(size=(40, 9, 2))
    d = dense_probe(
        torch.tensor(feats[:30]),
        torch.tensor(seg[:30]),
        torch.tensor(feats[30:]),
        torch.tensor(seg[30:]),
    )
    assert d["accuracy"] > 0.95
    assert d["iou"] > 0.9
    with pytest.raises(ValueError, match="labels"):
        knn_accuracy(x, y[:10], x, y)


def test_encode_tokens_for_lightly_timm_and_callables():
    wrapped = build_vit(TINY)
    x = torch.rand(3, 3, 32, 32)
    cls, patches = encode_tokens(wrapped, x)
    assert cls.shape == (3, 32)
    assert patches.shape == (3, 64, 32)
    cls2, patches2 = encode_tokens(wrapped.vit, x)  # the bare timm model, same weights
    assert torch.allclose(patches, patches2, atol=1e-5)
    assert torch.allclose(cls, cls2, atol=1e-5)
    c3, p3 = encode_tokens(lambda im: patchify(im, 4), x)
    assert p3.shape == (3, 64, 48)
    assert torch.allclose(c3, p3.mean(1))
    with pytest.raises(TypeError, match="patch tokens"):
        encode_tokens(lambda im: im.mean((2, 3)), x)


def test_real_loaders(tmp_path):
    from PIL import Image

    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        for i in range(2):
            Image.fromarray(np.full((40, 40, 3), 60 * i, dtype=np.uint8)).save(
                tmp_path / cls / f"{i}.png"
            )
    s = image_folder(tmp_path)
    assert s.images.shape == (4, 3, 32, 32)
    assert s.labels.tolist() == [0, 0, 1, 1]
    with pytest.raises(FileNotFoundError):
        image_folder(tmp_path / "missing")
    d = digits()
    assert d.images.shape[1:] == (3, 32, 32)
    assert len(set(d.labels.tolist())) == 10
    p = sample_photo_crops(5)
    assert p.images.shape == (5, 3, 32, 32)
    assert p.labels is None
