"""Sweeps over alpha x learning rate x rank, the optimal-alpha power law, and the alpha/lr test.

* :func:`sweep` runs :func:`~lora_alpha.finetune` on a grid and returns a :class:`SweepResult`
  (one row per run) with loss/score surfaces and the best alpha per rank.
* :func:`fit_power_law` fits ``y = c * x**b`` by least squares in log-log space with a bootstrap CI;
  :func:`fit_optimal_alpha` does it for the best alpha vs rank, bootstrapping over seeds.
* :func:`scaling_interaction` asks whether scaling the learning rate by ``k`` is the same as
  scaling alpha by ``k``: both series from one base point, with their Signal-Drift numbers.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from lora_alpha.baselines import Method
from lora_alpha.diagnostics import signal_drift
from lora_alpha.tasks import Task
from lora_alpha.train import finetune


def _positive(name: str, values: Sequence[float]) -> list[float]:
    values = list(values)
    if not values or any(not (math.isfinite(v) and v > 0) for v in values):
        raise ValueError(f"{name} must be a non-empty list of finite numbers > 0; got {values}")
    return values


def _better(metric: str) -> str:
    return "max" if metric.removeprefix("val_") in ("score", "accuracy") else "min"


@dataclass
class SweepResult:
    """Rows of a :func:`sweep`: ``r, alpha, lr, seed, loss, score, ...`` (one per run)."""

    rows: list[dict[str, Any]]

    def values(self, key: str) -> list[Any]:
        return sorted({row[key] for row in self.rows})

    def mean(self, metric: str = "loss") -> dict[tuple[int, float, float], float]:
        """``{(r, alpha, lr): mean over seeds}``; a diverged run counts as ``inf`` loss / ``-inf`` score."""
        groups: dict[tuple[int, float, float], list[float]] = defaultdict(list)
        for row in self.rows:
            groups[(row["r"], row["alpha"], row["lr"])].append(float(row[metric]))
        return {k: float(np.mean(v)) for k, v in groups.items()}

    def surface(self, r: int, metric: str = "loss") -> tuple[list[float], list[float], np.ndarray]:
        """``(alphas, lrs, table[alpha, lr])`` of the seed-mean ``metric`` at rank ``r``."""
        means = self.mean(metric)
        alphas = sorted({a for rr, a, _ in means if rr == r})
        lrs = sorted({lr for rr, _, lr in means if rr == r})
        if not alphas:
            raise ValueError(f"rank {r} is not in this sweep; ranks: {self.values('r')}")
        table = np.array([[means.get((r, a, lr), np.nan) for lr in lrs] for a in alphas])
        return alphas, lrs, table

    def optimal_alpha(
        self, metric: str = "val_loss", lr: float | None = None, refine: bool = True
    ) -> dict[int, float]:
        """Best alpha per rank (at learning rate ``lr``; default: the smallest swept), located on
        ``metric`` (default: the validation loss; ``"loss"`` picks on the test split it reports)."""
        return _optimal_alpha(self.rows, metric, lr, refine)

    def table(self, metric: str = "loss") -> list[dict[str, Any]]:
        """Seed-mean rows ``{r, alpha, lr, <metric>}`` for a report."""
        return [
            {"r": r, "alpha": a, "lr": lr, metric: v}
            for (r, a, lr), v in sorted(self.mean(metric).items())
        ]


def _optimal_alpha(
    rows: list[dict[str, Any]], metric: str, lr: float | None, refine: bool
) -> dict[int, float]:
    missing = [row for row in rows if metric not in row]
    if missing:
        raise ValueError(
            f"metric {metric!r} is not in the sweep's rows (keys: {sorted(missing[0])}); the "
            "validation metrics need sweep(..., validate=True); metric='loss' picks on test"
        )
    lrs = sorted({row["lr"] for row in rows})
    lr = lrs[0] if lr is None else lr
    if lr not in lrs:
        raise ValueError(f"lr {lr} is not in this sweep; learning rates: {lrs}")
    sign = -1.0 if _better(metric) == "max" else 1.0
    groups: dict[int, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row["lr"] == lr:
            groups[row["r"]][row["alpha"]].append(sign * float(row[metric]))
    out = {}
    for r, by_alpha in sorted(groups.items()):
        alphas = np.array(sorted(by_alpha))
        vals = np.array([np.mean(by_alpha[a]) for a in alphas])
        out[r] = best_on_grid(alphas, vals, refine)
    return out


def best_on_grid(x: np.ndarray, y: np.ndarray, refine: bool = True) -> float:
    """The ``x`` minimising ``y`` on a log-spaced grid; with ``refine``, the vertex of the parabola
    in ``log x`` through the best point and its two neighbours (kept inside them).

    Non-finite ``y`` (a diverged run) never wins; exact ties go to the smallest ``x``. NaN when no
    ``y`` is finite: every point diverged, so the grid has no optimum (not its first point).
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if not np.isfinite(y).any():
        return math.nan
    y = np.where(np.isfinite(y), y, np.inf)
    i = int(np.argmin(y))  # the first of equal minima
    if not refine or i == 0 or i == len(x) - 1 or not np.isfinite(y[i - 1 : i + 2]).all():
        return float(x[i])
    lx = np.log(x[i - 1 : i + 2])
    a, b, _ = np.polyfit(lx, y[i - 1 : i + 2], 2)
    if a <= 0:
        return float(x[i])
    return float(np.exp(np.clip(-b / (2 * a), lx[0], lx[2])))


@dataclass(frozen=True)
class PowerLawFit:
    """``y = coefficient * x**exponent`` with bootstrap confidence intervals.

    ``excluded``: the ``x`` left out of the fit because they have no ``y`` (for the optimal alpha:
    ranks where every alpha diverged). With fewer than two ``x`` left every number is NaN.
    """

    exponent: float
    coefficient: float
    exponent_ci: tuple[float, float]
    coefficient_ci: tuple[float, float]
    r2: float
    n_boot: int
    excluded: tuple[float, ...] = ()

    @property
    def defined(self) -> bool:
        return math.isfinite(self.exponent) and math.isfinite(self.coefficient)

    def predict(self, x: Any) -> np.ndarray:
        return self.coefficient * np.asarray(x, dtype=float) ** self.exponent


def _loglog(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    lx, ly = np.log(x), np.log(y)
    b, a = np.polyfit(lx, ly, 1)
    resid = ly - (a + b * lx)
    ss = float(((ly - ly.mean()) ** 2).sum())
    return float(b), float(np.exp(a)), 1.0 - float((resid**2).sum()) / ss if ss > 0 else 1.0


def fit_power_law(
    x: Sequence[float], y: Sequence[float], n_boot: int = 2000, ci: float = 0.95, seed: int = 0
) -> PowerLawFit:
    """Fit ``y = c * x**b`` (least squares on ``log y``); CI by resampling the points."""
    x_arr = np.asarray(_positive("x", x), dtype=float)
    y_arr = np.asarray(_positive("y", y), dtype=float)
    if len(x_arr) != len(y_arr):
        raise ValueError(f"x and y differ in length: {len(x_arr)} vs {len(y_arr)}")
    if len(np.unique(x_arr)) < 2:
        raise ValueError("a power law needs at least two distinct x values")
    b, c, r2 = _loglog(x_arr, y_arr)
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        idx = rng.integers(0, len(x_arr), len(x_arr))
        if len(np.unique(x_arr[idx])) >= 2:
            boots.append(_loglog(x_arr[idx], y_arr[idx])[:2])
    return _with_ci(b, c, r2, np.array(boots), ci)


def _with_ci(
    b: float, c: float, r2: float, boots: np.ndarray, ci: float, excluded: tuple[float, ...] = ()
) -> PowerLawFit:
    if not 0 < ci < 1:
        raise ValueError(f"ci must be in (0, 1); got {ci}")
    if len(boots) == 0:
        return PowerLawFit(b, c, (b, b), (c, c), r2, 0, excluded)
    lo, hi = 100 * (1 - ci) / 2, 100 * (1 + ci) / 2
    eb = np.percentile(boots[:, 0], [lo, hi])
    ec = np.percentile(boots[:, 1], [lo, hi])
    return PowerLawFit(
        b, c, (float(eb[0]), float(eb[1])), (float(ec[0]), float(ec[1])), r2, len(boots), excluded
    )


def _fit_defined(best: Mapping[int, float]) -> tuple[float, float, float] | None:
    """``_loglog`` over the ranks with a finite optimum; None with fewer than two of them."""
    ranks = np.array([r for r in sorted(best) if math.isfinite(best[r])], dtype=float)
    if len(ranks) < 2:
        return None
    return _loglog(ranks, np.array([best[int(r)] for r in ranks]))


def fit_optimal_alpha(
    result: SweepResult,
    metric: str = "val_loss",
    lr: float | None = None,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> PowerLawFit:
    """Fit ``alpha*(r) = c * r**b`` to the sweep's best alpha per rank; CI by resampling seeds.

    A rank where every alpha diverged has no optimum: it is left out of the fit and listed in
    ``excluded`` (likewise in each bootstrap resample; a resample with fewer than two ranks left
    is dropped). With fewer than two ranks left the fit is NaN.
    """
    best = result.optimal_alpha(metric, lr)
    if len(best) < 2:
        raise ValueError("fitting alpha* vs rank needs a sweep over at least two ranks")
    excluded = tuple(float(r) for r in sorted(best) if not math.isfinite(best[r]))
    point = _fit_defined(best)
    if point is None:
        nan = math.nan
        return PowerLawFit(nan, nan, (nan, nan), (nan, nan), nan, 0, excluded)
    b, c, r2 = point
    seeds = result.values("seed")
    rng = np.random.default_rng(seed)
    boots = []
    if len(seeds) > 1:
        by_seed = defaultdict(list)
        for row in result.rows:
            by_seed[row["seed"]].append(row)
        for _ in range(n_boot):
            draw = rng.choice(seeds, len(seeds), replace=True)
            rows = [
                {**row, "seed": (j, row["seed"])} for j, s in enumerate(draw) for row in by_seed[s]
            ]
            fit = _fit_defined(_optimal_alpha(rows, metric, lr, True))
            if fit is not None:
                boots.append(fit[:2])
    return _with_ci(b, c, r2, np.array(boots), ci, excluded)


def sweep(
    task: Task,
    alpha_grid: Sequence[float],
    lr_grid: Sequence[float],
    rank_grid: Sequence[int],
    seeds: Sequence[int] = (0,),
    steps: int = 200,
    batch_size: int = 32,
    rule: str = "standard",
    progress: bool | None = None,
    validate: bool = True,
) -> SweepResult:
    """Fine-tune ``task`` at every ``(r, alpha, lr, seed)``; ``alpha`` is peft's ``lora_alpha``.

    ``rule="standard"`` applies ``alpha / r`` (the grid is in peft's usual units);
    ``rule="rslora"`` applies ``alpha / sqrt(r)``. ``progress``: a tqdm bar (None: only on a
    terminal). ``validate=True`` (the default) adds the validation split's ``val_loss`` / ``val_score``
    to each row: optima are located on them (``optimal_alpha()``'s default), the test metrics are
    reported; ``validate=False`` for a task without a validation split.
    """
    alphas = _positive("alpha_grid", alpha_grid)
    lrs = _positive("lr_grid", lr_grid)
    ranks = list(rank_grid)
    if not ranks or any(isinstance(r, bool) or not isinstance(r, int) or r < 1 for r in ranks):
        raise ValueError(f"rank_grid must be a non-empty list of ints >= 1; got {ranks}")
    if rule not in ("standard", "rslora"):
        raise ValueError(f"rule must be 'standard' or 'rslora'; got {rule!r}")
    if not seeds:
        raise ValueError("seeds must be non-empty")
    grid = list(itertools.product(ranks, alphas, lrs, seeds))
    rows = []
    for r, a, lr, s in tqdm(
        grid, desc=f"sweep {task.name}", disable=None if progress is None else not progress
    ):
        res = finetune(
            task,
            Method(rule, alpha=a),
            r=r,
            lr=lr,
            steps=steps,
            batch_size=batch_size,
            seed=s,
            validate=validate,
        )
        rows.append({**res.row(), "alpha": a, "diverged": res.diverged})
    return SweepResult(rows)


def scaling_interaction(
    task: Task,
    r: int = 8,
    alpha: float = 16.0,
    lr: float = 1e-4,
    factors: Sequence[float] = (1, 2, 4, 8, 16, 32),
    seeds: Sequence[int] = (0,),
    steps: int = 200,
    batch_size: int = 32,
    references: Mapping[str, Mapping[str, torch.Tensor]] | None = None,
    progress: bool | None = None,
    freeze_a: bool = False,
) -> list[dict[str, Any]]:
    """From ``(alpha, lr)`` scale alpha by ``k`` or the learning rate by ``k`` (standard rule).

    One row per ``(kind, factor, seed)`` with the final loss and score and, for every named
    reference direction (e.g. ``{"full_ft": ..., "gradient": ...}``), the Signal-Drift of the final
    update: ``drift_ratio_<name>`` and ``cosine_<name>``. With Adam, ``k * lr`` and ``k * alpha``
    would give the same ``dW`` trajectory only if ``A`` did not move; the table measures how far
    apart they are. A diverged run's drift ratio is ``+inf`` (censored) and its cosine NaN.
    ``freeze_a=True`` trains ``B`` only: then (Adam, no weight decay) the two series give the same
    ``dW`` up to Adam's eps, the control under which the two must not differ.
    """
    factors = _positive("factors", factors)
    runs = [(kind, k, s) for k in factors for kind in ("lr", "alpha") for s in seeds]
    rows = []
    for kind, k, s in tqdm(
        runs, desc=f"alpha vs lr {task.name}", disable=None if progress is None else not progress
    ):
        if kind == "alpha" and k == 1:
            # the base point is the same run in both series
            base = [row for row in rows if row["factor"] == 1 and row["seed"] == s]
            if base:
                rows.append({**base[0], "kind": "alpha"})
                continue
        a, l_ = (alpha * k, lr) if kind == "alpha" else (alpha, lr * k)
        res = finetune(
            task,
            Method("standard", alpha=a),
            r=r,
            lr=l_,
            steps=steps,
            batch_size=batch_size,
            seed=s,
            keep_delta=references is not None,
            freeze_a=freeze_a,
        )
        row = {"kind": kind, "factor": k, "seed": s, "alpha": a, "lr": l_, **res.metrics}
        row["diverged"] = res.diverged
        for name, ref in (references or {}).items():
            sd = signal_drift(res.delta, ref)
            # a diverged run (non-finite, or a finite blow-up past finetune's limit) drifted past
            # every finite value: censored at +inf, as signal_drift does for non-finite weights
            row[f"drift_ratio_{name}"] = math.inf if res.diverged else sd.drift_ratio
            row[f"cosine_{name}"] = math.nan if res.diverged else sd.cosine
            row["update_norm"] = sd.update_norm
        rows.append(row)
    return rows
