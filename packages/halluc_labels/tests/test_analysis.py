import numpy as np
import pytest
from scipy.stats import binom

from halluc_labels.analysis import (
    agreement_table,
    bootstrap_kappa_diff,
    detector_auroc,
    flag_rates_by_type,
    kappa,
    kappa_matrix,
    mcnemar_exact,
    prompt_switch,
)


def _table(yy: int, yn: int, ny: int, nn: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.array([True] * (yy + yn) + [False] * (ny + nn))
    b = np.array([True] * yy + [False] * yn + [True] * ny + [False] * nn)
    return a, b


def test_kappa_on_a_hand_table():
    # 20 both yes, 5 only a, 10 only b, 15 both no: p_o = 0.7, p_e = 0.5*0.6 + 0.5*0.4 = 0.5
    a, b = _table(20, 5, 10, 15)
    assert kappa(a, b) == pytest.approx((0.7 - 0.5) / (1 - 0.5))


def test_kappa_extremes():
    truth = np.random.default_rng(0).random(200) < 0.3
    assert kappa(truth, truth.copy()) == 1.0
    assert kappa(np.zeros(200, bool), truth) == 0.0  # a constant labeler
    pa = truth.mean()
    pe = 2 * pa * (1 - pa)  # a labeler that always disagrees: p_o = 0
    assert kappa(truth, ~truth) == pytest.approx(-pe / (1 - pe))
    assert kappa(np.ones(5, bool), np.ones(5, bool)) == 1.0  # scikit-learn: NaN


def test_kappa_matrix_is_symmetric():
    rng = np.random.default_rng(1)
    labels = {k: rng.random(50) < 0.4 for k in "abc"}
    names, m = kappa_matrix(labels)
    assert names == ["a", "b", "c"]
    np.testing.assert_allclose(m, m.T)
    np.testing.assert_allclose(np.diag(m), 1.0)
    assert m[0, 1] == pytest.approx(kappa(labels["a"], labels["b"]))


def test_agreement_table_precision_recall():
    truth = np.array([True, True, False, False, False, False])
    flags = np.array([True, True, True, True, False, False])  # recall 1, precision 0.5
    row = agreement_table({"rouge": flags}, truth, ~truth)[0]
    assert row["recall"] == 1.0
    assert row["precision"] == 0.5
    assert row["flag_rate"] == pytest.approx(4 / 6)
    assert row["kappa_faithfulness"] == pytest.approx(kappa(flags, ~truth))


def test_mcnemar_p_is_the_binomial_tail():
    a = np.array([True] * 8 + [False] * 2 + [True] * 30)
    b = np.array([False] * 8 + [True] * 2 + [True] * 30)
    bb, c, p = mcnemar_exact(a, b)
    assert (bb, c) == (8, 2)
    assert p == pytest.approx(2 * binom.cdf(2, 10, 0.5))
    assert p == pytest.approx(112 / 1024)
    assert mcnemar_exact(a, a) == (0, 0, 1.0)


def test_bootstrap_kappa_diff_and_prompt_switch():
    rng = np.random.default_rng(2)
    truth = rng.random(300) < 0.4
    corr = truth.copy()
    corr[:15] = ~corr[:15]  # 15 errors
    faith = truth.copy()
    faith[:90] = ~faith[:90]  # 90 errors, a superset
    est, low, high = bootstrap_kappa_diff(corr, truth, faith, truth, n_resamples=500)
    assert est == pytest.approx(kappa(corr, truth) - kappa(faith, truth))
    assert 0 < low <= est <= high
    s = prompt_switch("j", truth, faith, corr, n_resamples=500)
    assert s.delta == pytest.approx(est)
    assert (s.b, s.c) == (0, 75)  # only the correctness prompt is right on 75 items
    assert s.p_mcnemar < 1e-10
    assert s.significant_gain
    same = bootstrap_kappa_diff(truth, truth, truth, truth, n_resamples=200)
    assert same == (0.0, 0.0, 0.0)


def test_flag_rates_by_type_and_auroc():
    flags = np.array([True, False, True, True, False])
    types = ["exact", "exact", "alias", "alias", "verbose"]
    assert flag_rates_by_type(flags, types) == {"alias": 1.0, "exact": 0.5, "verbose": 0.0}
    assert list(flag_rates_by_type(flags, types, order=["verbose", "missing", "exact"])) == [
        "verbose",
        "exact",
    ]
    y = np.array([False, False, True, True])
    got = detector_auroc(np.array([0.1, 0.2, 0.8, 0.9]), {"truth": y, "flat": np.zeros(4, bool)})
    assert got["truth"] == 1.0
    assert np.isnan(got["flat"])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: kappa([True, False], [True]), "same length"),
        (lambda: kappa([], []), "empty"),
        (lambda: kappa([0.5, 1.0], [1, 0]), "must be boolean"),
        (lambda: flag_rates_by_type(np.array([True]), ["a", "b"]), "same length"),
        (
            lambda: bootstrap_kappa_diff([True] * 3, [True] * 3, [True] * 2, [True] * 3),
            "same length",
        ),
        (
            lambda: bootstrap_kappa_diff(
                [True, False], [True, False], [True, False], [True, False], n_resamples=5
            ),
            "n_resamples",
        ),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_compare_labelers_on_controlled_answers():
    from halluc_labels.analysis import compare_labelers
    from halluc_labels.data import LabeledAnswer, controlled_answers, make_examples
    from halluc_labels.labelers import ExactMatch, RougeL, TokenF1
    from paper_common.facts import World

    world = World(seed=2, n_people=24, n_cities=10, n_companies=8, n_countries=4)
    answers = controlled_answers(world, make_examples(world, "onetoken"))
    got = compare_labelers(answers, [ExactMatch(), TokenF1(), RougeL(0.5)], switches=[("EM", "F1")])
    rows = {r["labeler"]: r for r in got.agreement}
    # exact match against the reference and its listed aliases *is* the faithfulness criterion,
    # except on abstentions (they claim nothing: faithful, but EM flags them)
    unfaithful = np.array([not a.faithful for a in answers])
    em = got.flags["EM"]
    differ = {a.answer_type for a, f, u in zip(answers, em, unfaithful, strict=True) if f != u}
    assert differ == {"abstention"}
    assert rows["EM"]["kappa_correctness"] < 0.5
    assert got.flag_rates["EM"]["exact"] == 0.0
    assert got.flag_rates["EM"]["verbose_correct"] == 1.0
    assert got.names == ["EM", "F1", "ROUGE-L@0.5"]
    np.testing.assert_allclose(got.kappa, got.kappa.T)
    assert got.switches[0].n == len(answers)
    # human labels only: no faithfulness column
    human = [LabeledAnswer(a.example, a.answer, a.correct, None, "", "g") for a in answers]
    assert "kappa_faithfulness" not in compare_labelers(human, [ExactMatch()]).agreement[0]
    with pytest.raises(ValueError, match="correctness label"):
        compare_labelers([LabeledAnswer(answers[0].example, "x", None, None)], [ExactMatch()])
    with pytest.raises(ValueError, match="unique"):
        compare_labelers(answers, [ExactMatch(), ExactMatch()])
    with pytest.raises(ValueError, match="names a labeler"):
        compare_labelers(answers, [ExactMatch()], switches=[("EM", "judge")])
