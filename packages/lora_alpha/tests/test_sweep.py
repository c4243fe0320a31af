import numpy as np
import pytest

from lora_alpha import RegressionTask, SweepResult, fit_optimal_alpha, fit_power_law, sweep
from lora_alpha.sweep import best_on_grid, scaling_interaction


def test_power_law_recovers_planted_exponent():
    rng = np.random.default_rng(0)
    x = np.repeat([1, 2, 4, 8, 16, 32, 64], 3).astype(float)
    y = 40 * x**0.5 * np.exp(rng.normal(0, 0.05, len(x)))
    fit = fit_power_law(x, y, n_boot=500)
    assert fit.exponent == pytest.approx(0.5, abs=0.03)
    assert fit.coefficient == pytest.approx(40, rel=0.1)
    assert fit.exponent_ci[0] < 0.5 < fit.exponent_ci[1]
    assert fit.r2 > 0.98


def test_best_on_grid_finds_the_vertex_in_log_space():
    x = np.geomspace(1, 1000, 7)
    y = (np.log(x) - np.log(42.0)) ** 2
    assert best_on_grid(x, y) == pytest.approx(42.0, rel=1e-6)
    assert best_on_grid(x, y, refine=False) in set(x)
    assert best_on_grid(x, -y) in (x[0], x[-1])  # a maximum, not a minimum: no interior vertex


def test_fit_optimal_alpha_on_planted_surface():
    rng = np.random.default_rng(1)
    rows = []
    alphas = [2.0**k for k in range(2, 14)]
    for r in (1, 4, 16, 64):
        best = 30 * r**0.5
        for s in range(4):
            for a in alphas:
                loss = (np.log(a) - np.log(best)) ** 2 + rng.normal(0, 0.01)
                rows.append(
                    {"r": r, "alpha": a, "lr": 1e-4, "seed": s, "loss": loss, "score": -loss}
                )
    res = SweepResult(rows)
    fit = fit_optimal_alpha(res, "loss", n_boot=200)
    assert fit.exponent == pytest.approx(0.5, abs=0.05)
    assert fit.coefficient == pytest.approx(30, rel=0.2)
    # score is maximised where loss is minimised
    assert fit_optimal_alpha(res, "score", n_boot=0).exponent == pytest.approx(fit.exponent)
    with pytest.raises(ValueError, match="lr"):
        res.optimal_alpha("loss", lr=0.5)


def test_sweep_runs_the_grid():
    task = RegressionTask(d_in=4, hidden=8, d_out=2, shift_rank=2, n_train=64, n_test=32)
    res = sweep(task, [8, 64], [1e-3], [1, 2], seeds=[0, 1], steps=5, batch_size=16, progress=False)
    assert len(res.rows) == 8
    alphas, lrs, table = res.surface(2)
    assert alphas == [8, 64]
    assert lrs == [1e-3]
    assert table.shape == (2, 1)
    assert np.isfinite(table).all()
    with pytest.raises(ValueError, match="rank 3"):
        res.surface(3)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"alpha_grid": []}, "alpha_grid"), ({"lr_grid": [0.0]}, "lr_grid"),
     ({"rank_grid": [0]}, "rank_grid"), ({"rule": "dora"}, "rule"), ({"seeds": []}, "seeds")],
)  # fmt: skip
def test_sweep_bad_input(kwargs, match):
    args = {"alpha_grid": [8], "lr_grid": [1e-3], "rank_grid": [1], "seeds": [0], **kwargs}
    with pytest.raises(ValueError, match=match):
        sweep(RegressionTask(d_in=2, hidden=4, d_out=2, n_train=8, n_test=8), **args)


def test_fit_power_law_bad_input():
    with pytest.raises(ValueError, match="distinct"):
        fit_power_law([2, 2], [1, 3])
    with pytest.raises(ValueError, match="y must be"):
        fit_power_law([1, 2], [1, -3])


def test_scaling_interaction_shares_the_base_point():
    task = RegressionTask(d_in=4, hidden=8, d_out=2, shift_rank=2, n_train=64, n_test=32)
    rows = scaling_interaction(task, 2, 16, 1e-3, (1, 4), steps=5, batch_size=16, progress=False)
    assert len(rows) == 4
    base = [r for r in rows if r["factor"] == 1]
    assert base[0]["loss"] == base[1]["loss"]
    by = {(r["kind"], r["factor"]): r for r in rows}
    assert by[("alpha", 4)]["alpha"] == 64
    assert by[("lr", 4)]["lr"] == pytest.approx(4e-3)


def test_best_on_grid_has_no_optimum_when_every_point_diverged():
    x = np.geomspace(1, 1000, 4)
    assert np.isnan(best_on_grid(x, np.full(4, np.inf)))  # was x[0]: the smallest alpha
    assert np.isnan(best_on_grid(x, np.array([np.nan, np.inf, np.nan, np.inf])))
    assert best_on_grid(x, np.array([np.inf, 3.0, 2.0, np.nan]), refine=False) == x[2]
    assert best_on_grid(x, np.array([1.0, 1.0, 2.0, 3.0]), refine=False) == x[0]  # ties: smallest


def test_fit_optimal_alpha_leaves_out_ranks_where_every_alpha_diverged():
    rows = []
    for r in (1, 4, 16, 64):
        for s in range(2):
            for a in (2.0**k for k in range(2, 12)):
                loss = (np.log(a) - np.log(30 * r**0.5)) ** 2
                if r == 64:
                    loss = np.inf  # planted: every alpha diverged at rank 64
                rows.append({"r": r, "alpha": a, "lr": 1e-4, "seed": s, "loss": loss})
    res = SweepResult(rows)
    assert np.isnan(res.optimal_alpha("loss")[64])
    fit = fit_optimal_alpha(res, "loss", n_boot=50)
    assert fit.excluded == (64.0,)
    assert fit.exponent == pytest.approx(0.5, abs=0.05)
    assert fit.n_boot == 50
    few = SweepResult([row for row in rows if row["r"] in (1, 64)])
    empty = fit_optimal_alpha(few, "loss", n_boot=10)
    assert not empty.defined
    assert empty.excluded == (64.0,)


class _SecondRunBlowsUp(RegressionTask):
    """Planted: the second run's final test evaluation (scaling_interaction runs lr x 1, then lr x
    10; each run evaluates before and after training) is a finite but absurd loss."""

    calls = 0

    def evaluate(self, model, split="test"):
        out = super().evaluate(model, split)
        self.calls += 1
        return {**out, "loss": 2.6e14} if self.calls == 4 else out


def test_a_finite_blow_up_is_censored_in_the_drift_ratio():
    """Issue 44 audit: a run flagged diverged by the finite-blow-up rule kept its finite drift
    ratio; it is censored at +inf like a run with non-finite weights."""
    from lora_alpha.baselines import standard
    from lora_alpha.config import get_lora_alpha_model
    from lora_alpha.diagnostics import reference_gradient

    task = _SecondRunBlowsUp(d_in=4, hidden=8, d_out=2, shift_rank=2, n_train=64, n_test=32)
    model = get_lora_alpha_model(task.base_model(), standard().lora_config(2, task.target_modules))
    ref = {"gradient": reference_gradient(model, task.loss, task.reference_batch())}
    rows = scaling_interaction(task, 2, 16.0, 1e-3, (1, 10), (0,), 5, 16, ref, progress=False)
    blown = next(r for r in rows if r["kind"] == "lr" and r["factor"] == 10)
    assert blown["diverged"]
    assert blown["drift_ratio_gradient"] == np.inf
    ok = next(r for r in rows if r["kind"] == "lr" and r["factor"] == 1)
    assert np.isfinite(ok["drift_ratio_gradient"])
