"""Snapshots by continued training: shared tokenizer, caching, later snapshots learn the new values."""

import numpy as np
import pytest
import torch

from drift_probe.data import drift_items
from drift_probe.features import cells, extract_features
from drift_probe.models import SnapshotConfig, snapshots

CFG = SnapshotConfig(
    arch="llama", n_layers=2, d_model=32, steps=60, continue_steps=20, batch_size=16
)


def test_snapshots_cache_and_continue(world, unseen, tmp_path, monkeypatch):
    monkeypatch.setenv("PAPER_CACHE_DIR", str(tmp_path))
    first = snapshots(world, [2021, 2023], CFG, unseen, progress=False)
    (m1, t1), (m2, t2) = first
    assert t1.get_vocab() == t2.get_vocab()
    w1 = dict(m1.named_parameters())["model.embed_tokens.weight"]
    w2 = dict(m2.named_parameters())["model.embed_tokens.weight"]
    assert not torch.equal(w1, w2)  # the second snapshot kept training
    again = snapshots(world, [2021, 2023], CFG, unseen, progress=False)  # from the cache
    for (a, _), (b, _) in zip(first, again, strict=True):
        for (na, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
            assert torch.equal(pa, pb), na
    assert len(list((tmp_path / "drift_probe").iterdir())) >= 2


def test_bad_snapshot_arguments(world):
    with pytest.raises(ValueError, match="strictly increasing"):
        snapshots(world, [2023, 2021], CFG)
    with pytest.raises(ValueError, match="arch"):
        SnapshotConfig(arch="bert")
    with pytest.raises(ValueError, match="positive int"):
        SnapshotConfig(steps=0)


def test_features_and_cells(world, unseen, random_lm, tok):
    items = drift_items(world, 2021, unseen=unseen)[:40]
    f = extract_features(random_lm, tok, items)
    assert f.hidden.shape[:2] == (40, 4)  # embeddings + 3 blocks
    assert np.all(f.entropy >= 0)
    c = cells(items, f)
    shown = np.array([i.shown for i in items])
    assert np.all(c[~shown] == "confabulation")
    assert set(c) <= {
        "stable-correct",
        "drifted-stale",
        "drifted-current",
        "confabulation",
        "other",
    }
    with pytest.raises(ValueError, match="must not be empty"):
        extract_features(random_lm, tok, [])
