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
    rng = np.random.default_rng(int(gap * 10))
    rng.random(6000)
    direction = rng.normal(size=8)
    # the sample AUROC of the true direction sits within ~3 standard errors (about 0.006 here) of
    # the Bayes value, and the probe within 0.01 of it on the same sample (the probe is judged
    # against the sample's best score, not against the sample's own draw from the Bayes value)
    assert auroc(y, x @ direction) == pytest.approx(bayes, abs=0.02)
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
    hidden, y, groups = _rare_positives([3, 17])
    res = fit_layer_probe(hidden, y, groups, seed=0)
    # the two outer folds that test a positive subject leave one in training: no inner split has
    # both classes on both sides. Their all-zero curve used to pick layer 0; they now take the
    # others' mean curve (with three positive subjects stratified folds leave no fold blind)
    assert res.blind_folds == 2
    assert res.fold_layers == [1, 1, 1, 1, 1]
    assert int(np.argmax(res.layer_auroc)) == 1
    assert np.all(np.isfinite(res.layer_auroc))


@pytest.mark.filterwarnings("ignore")
def test_stratified_folds_leave_no_fold_blind_with_three_positive_subjects():
    res = fit_layer_probe(*_rare_positives([3, 17, 25]), seed=0)
    assert res.blind_folds == 0  # GroupKFold left two of five folds blind here
    assert res.fold_layers == [1, 1, 1, 1, 1]


def test_a_layer_that_no_fold_can_choose_raises():
    hidden, y, groups = _rare_positives([3])  # one positive subject: every inner split is blind
    with pytest.raises(ValueError, match="layer cannot be chosen"):
        fit_layer_probe(hidden, y, groups, seed=0)


# ----------------------------------------------------------------------------- issue 46
def test_splits_stratify_by_label_and_never_share_a_subject():
    """Issue 46: ``GroupKFold`` ignored the labels, so with rare positives a test fold could hold
    none (or most) of them; ``StratifiedGroupKFold`` deals the positive subjects out evenly."""
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(100), 3)
    y = np.isin(groups, rng.choice(100, 20, replace=False)).astype(int)  # 20 positive subjects
    for seed in range(4):
        splits = grouped_splits(groups, 5, seed=seed, y=y)
        covered = np.sort(np.concatenate([test for _, test in splits]))
        np.testing.assert_array_equal(covered, np.arange(len(y)))
        for train, test in splits:
            assert not set(groups[train]) & set(groups[test])
            assert y[test].sum() == 12  # 4 of the 20 positive subjects (3 items each) per fold


def test_permutation_band_of_a_fixed_score_sits_on_chance():
    from drift_probe.probe import permutation_band

    rng = np.random.default_rng(1)
    y = (rng.random(300) < 0.3).astype(int)
    s = rng.normal(size=300)
    band = permutation_band(lambda labels: auroc(labels, s), y, n_perm=200, seed=0)
    assert band.low < 0.5 < band.high
    assert band.centre == pytest.approx(0.5, abs=0.02)
    assert band.null.shape == (200,)
    assert band.distance(0.5) == pytest.approx(abs(0.5 - band.centre))
    # the band is the null's own spread: a value inside it is no departure from chance
    assert band.excess(band.centre) == 0.0
    assert band.excess(band.high + 0.05) == pytest.approx(0.05)


def test_pooled_out_of_fold_auroc_on_null_data_sits_below_half_and_the_band_says_so():
    """Issue 46: pooled out-of-fold AUROC is biased low on null data (0.469 mean over 12 null
    sets), so "near chance" is decided against the pipeline's own permutation band, not 0.5. With
    strong shrinkage and unstratified grouped folds the bias is large (null mean ~0.37 here)."""
    from drift_probe.probe import LinearProbe, permutation_band

    rng = np.random.default_rng(2)
    x = rng.normal(size=(60, 5))
    groups = np.arange(60) // 2
    y = (rng.random(60) < 0.5).astype(int)

    def pipeline(labels, stratify=False):
        scores = np.empty(len(labels))
        for train, test in grouped_splits(groups, 5, 0, labels if stratify else None):
            probe = LinearProbe((0.01,)).fit(x[train], labels[train])
            scores[test] = probe.predict_proba(x[test])
        return auroc(labels, scores)

    band = permutation_band(pipeline, y, n_perm=40, seed=0)
    assert band.centre < 0.45  # about 6 standard errors of the null median below 0.5
    assert band.high < 0.5 + 0.1
    assert band.low < pipeline(y) < band.high  # the real (null) labels sit inside the band
    # stratified folds remove most of the bias (the fold mix no longer mirrors the training mix)
    strat = permutation_band(lambda lab: pipeline(lab, True), y, n_perm=40, seed=0)
    assert strat.centre > band.centre


def test_permutation_band_bad_input():
    from drift_probe.probe import permutation_band

    with pytest.raises(ValueError, match="n_perm"):
        permutation_band(lambda labels: 0.5, np.array([0, 1, 0, 1]), n_perm=1)
    with pytest.raises(ValueError, match="confidence"):
        permutation_band(lambda labels: 0.5, np.array([0, 1, 0, 1]), confidence=1.5)


def test_grouped_bootstrap_of_an_auroc_difference_resamples_whole_subjects():
    """The headline's interval resamples subjects (an item's neighbours share its subject): on
    groups of 10 copies of one item the grouped interval is about sqrt(10) times the item one."""
    from drift_probe.probe import auroc_difference_bootstrap

    rng = np.random.default_rng(3)
    n = 60
    y0 = (rng.random(n) < 0.5).astype(int)
    a0, b0 = rng.normal(size=n) + y0, rng.normal(size=n)
    y, a, b = np.repeat(y0, 10), np.repeat(a0, 10), np.repeat(b0, 10)
    groups = np.repeat(np.arange(n), 10)
    item = auroc_difference_bootstrap(y, a, b, seed=0)
    grouped = auroc_difference_bootstrap(y, a, b, seed=0, groups=groups)
    width = np.diff(np.quantile(item, [0.025, 0.975]))[0]
    g_width = np.diff(np.quantile(grouped, [0.025, 0.975]))[0]
    assert g_width > 2 * width
    assert np.mean(grouped) == pytest.approx(auroc(y, a) - auroc(y, b), abs=0.03)
    with pytest.raises(ValueError, match="groups"):
        auroc_difference_bootstrap(y, a, b, groups=groups[:5])
    # the probe's own interval too (it was an item bootstrap): same sqrt(10) widening
    _, lo, hi = auroc_ci(y, a, seed=0)
    _, g_lo, g_hi = auroc_ci(y, a, seed=0, groups=groups)
    assert g_hi - g_lo > 2 * (hi - lo)
    assert g_lo < auroc(y, a) < g_hi


def test_weighted_auroc_matches_the_auroc_of_the_repeated_items():
    """Review: the cluster-bootstrap AUROC under integer weights equals the AUROC of the items
    repeated that often (ties included), without an (n, n) indicator matrix."""
    from drift_probe.probe import _weighted_aurocs

    rng = np.random.default_rng(7)
    n = 60
    y = rng.integers(0, 2, n)
    s = np.round(rng.normal(size=n), 1)  # ties
    w = rng.integers(0, 3, size=(25, n)).astype(float)
    got = _weighted_aurocs(y, s, w)
    for row, g in zip(w, got, strict=True):
        rep = np.repeat(np.arange(n), row.astype(int))
        if len(np.unique(y[rep])) < 2:
            assert np.isnan(g)
        else:
            assert g == pytest.approx(auroc(y[rep], s[rep]), abs=1e-12)
    # 20000 items: memory stays O(R n)
    big = rng.integers(0, 2, 20000)
    vals = _weighted_aurocs(big, rng.normal(size=20000), np.ones((3, 20000)))
    assert np.all(np.abs(vals - 0.5) < 0.03)
