"""Probes against known answers: the Bayes AUROC of Gaussian classes, grouped splits, bad input."""

import numpy as np
import pytest
from scipy.stats import norm

from drift_probe.crosscutoff import p_a_greater_b
from drift_probe.probe import (
    LinearProbe,
    auroc,
    auroc_ci,
    fit_layer_probe,
    grouped_splits,
    out_of_fold,
)


def gaussian_classes(n, d, gap, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.5
    direction = rng.normal(size=d)
    direction /= np.linalg.norm(direction)
    x = rng.normal(size=(n, d)) + np.outer(y * gap, direction)
    return x, y.astype(int), np.arange(n) // 2


@pytest.mark.parametrize("gap", [0.5, 1.0, 2.0])
def test_probe_reaches_the_bayes_auroc(gap):
    x, y, groups = gaussian_classes(6000, 8, gap, seed=int(gap * 10))
    scores = out_of_fold(x, y, groups, seed=0)
    bayes = norm.cdf(gap / np.sqrt(2))
    # the sample AUROC sits within ~3 standard errors (about 0.006 here) of the Bayes value ...
    assert auroc(y, scores) == pytest.approx(bayes, abs=0.02)
    # ... and within 0.01 of the Bayes-optimal score (the true direction) on the same sample
    rng = np.random.default_rng(int(gap * 10))
    rng.random(6000)
    direction = rng.normal(size=8)
    assert auroc(y, scores) == pytest.approx(auroc(y, x @ direction), abs=0.01)


def test_layer_probe_picks_the_informative_layer():
    x, y, groups = gaussian_classes(1200, 6, 1.5, seed=1)
    rng = np.random.default_rng(2)
    hidden = np.stack([rng.normal(size=x.shape), x, rng.normal(size=x.shape)], axis=1)
    res = fit_layer_probe(hidden, y, groups, seed=0)
    assert res.layer == 1
    assert set(res.fold_layers) == {1}
    assert res.layer_auroc[1] > 0.8 > max(res.layer_auroc[0], res.layer_auroc[2]) + 0.2
    assert res.ci[0] < res.auroc < res.ci[1]
    # held-out items are scored but never trained on
    mask = np.arange(len(y)) % 3 != 0
    held = fit_layer_probe(hidden, y, groups, seed=0, train_mask=mask)
    assert auroc(y[~mask], held.scores[~mask]) > 0.8


def test_grouped_splits_never_share_a_subject():
    groups = np.repeat(np.arange(40), 3)
    for train, test in grouped_splits(groups, 5, seed=3):
        assert not set(groups[train]) & set(groups[test])
    covered = np.concatenate([t for _, t in grouped_splits(groups, 5)])
    assert sorted(covered) == list(range(len(groups)))


def test_bootstrap_interval_covers_and_narrows():
    x, y, _ = gaussian_classes(400, 2, 1.0)
    small = auroc_ci(y, x @ np.ones(2), seed=0)
    x, y, _ = gaussian_classes(4000, 2, 1.0)
    large = auroc_ci(y, x @ np.ones(2), seed=0)
    assert small[1] < small[0] < small[2]
    assert large[2] - large[1] < (small[2] - small[1]) / 2


def test_determinism_by_seed():
    x, y, groups = gaussian_classes(300, 5, 1.0)
    a, b = out_of_fold(x, y, groups, seed=4), out_of_fold(x, y, groups, seed=4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, out_of_fold(x, y, groups, seed=5))


def test_p_a_greater_b_counts_ties_as_half():
    assert p_a_greater_b([1, 1, 0], [0, 1, 1]) == pytest.approx((1 + 0.5 + 0) / 3)
    assert p_a_greater_b([0.2, 0.2], [0.2, 0.2]) == 0.5
    with pytest.raises(ValueError, match="one length"):
        p_a_greater_b([1, 2], [1])


def test_bad_input_raises():
    x, y, groups = gaussian_classes(100, 4, 1.0)
    with pytest.raises(ValueError, match="one class"):
        LinearProbe().fit(x, np.ones(100))
    with pytest.raises(ValueError, match="rows but there are"):
        LinearProbe().fit(x[:50], y)
    probe = LinearProbe().fit(x, y, groups)
    with pytest.raises(ValueError, match="fitted on 4 features"):
        probe.predict_proba(x[:, :3])
    with pytest.raises(ValueError, match="out of range"):
        fit_layer_probe(x[:, None, :], y, groups, layers=[1])
    with pytest.raises(ValueError, match="binary"):
        auroc([0, 1, 2], [0.1, 0.2, 0.3])


def _rare_positives(positive_groups, seed=0):
    """Layer 1 informative, 0 and 2 noise; positives only in a few subjects (4 items each)."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(30), 4)
    y = np.isin(groups, positive_groups).astype(int)
    x = rng.normal(size=(len(y), 4))
    x[:, 0] += 3 * y
    hidden = np.stack([rng.normal(size=x.shape), x, rng.normal(size=x.shape)], axis=1)
    return hidden, y, groups


@pytest.mark.filterwarnings("ignore")  # sklearn warns about single-class CV folds in the C search
def test_a_fold_without_a_two_class_inner_split_does_not_default_to_layer_0():
    hidden, y, groups = _rare_positives([3, 17, 25])
    res = fit_layer_probe(hidden, y, groups, seed=0)
    # two outer folds leave one positive subject in training: no inner split has both classes on
    # both sides. Their all-zero curve used to pick layer 0; they now take the others' mean curve
    assert res.blind_folds == 2
    assert res.fold_layers == [1, 1, 1, 1, 1]
    assert int(np.argmax(res.layer_auroc)) == 1
    assert np.all(np.isfinite(res.layer_auroc))


def test_a_layer_that_no_fold_can_choose_raises():
    hidden, y, groups = _rare_positives([3])  # one positive subject: every inner split is blind
    with pytest.raises(ValueError, match="layer cannot be chosen"):
        fit_layer_probe(hidden, y, groups, seed=0)
