"""Stage 1 (per-layer width-sparsity laws) and Stage 2 (regressing them on layer geometry).

Stage 1 fits ``log FVU`` over a layer's ``(width n, L0 k)`` grid with ``scipy.optimize.least_squares``:

* ``"gao"``: Gao et al. (2024, §3)'s joint law
  ``FVU = exp(c0 + c_k log k + c_n log n + c_kn log k log n) + exp(d0 + d_k log k)``; the width
  exponent at sparsity ``k`` is ``alpha(k) = -(c_n + c_kn log k)`` (positive when FVU falls with n);
* ``"power"``: ``FVU = E + A n^-alpha + B k^-beta`` with ``alpha, beta in [0, 3]``, ``A, B, E >= 0``:
  ``E`` is the floor.

Uncertainty: a residual bootstrap (refits on the fitted values plus resampled log residuals). A floor
is *identified* only if the widths span at least ``min_decades`` (1.5) decades and the 90% bootstrap
CI of ``E`` is narrower than ``E`` itself; otherwise it is reported as not identified.

The wall hypothesis (ours, not the paper's; derivation in the seeds note): ``N`` affine patches of
radius ``r ~ N^(-1/d)`` on a ``d``-manifold of curvature ``kappa`` leave a normal error
``kappa r^2 / 2``, so ``FVU ~ kappa^2 N^(-4/d)`` when each patch can hold a full tangent frame
(``k >= d + 1``) and only the first-order ``N^(-2/d)`` when it cannot (``k <= d``):
:func:`wall_exponent`.

Stage 2: ridge regression (scikit-learn, on z-scored summaries) of a per-layer parameter on the
geometric summaries, scored by leave-one-layer-out R^2 and by transfer (fit on one set of layers,
predict another); baselines: one universal law, a regression on relative depth, PR alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from scipy.optimize import least_squares

__all__ = [
    "LayerFit",
    "Stage2Result",
    "aic",
    "fit_layer",
    "fit_release",
    "fit_shared_exponent",
    "fit_universal",
    "loo_r2",
    "predict_fvu",
    "predict_shared",
    "transfer",
    "wall_exponent",
]

Form = Literal["gao", "power"]
PARAMS: dict[str, tuple[str, ...]] = {
    "gao": ("c0", "c_k", "c_n", "c_kn", "d0", "d_k"),
    "power": ("log_A", "alpha", "log_B", "beta", "E"),
}


def _check_grid(n: Any, k: Any, fvu: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n, k, y = (np.asarray(v, dtype=np.float64).ravel() for v in (n, k, fvu))
    if not len(n) == len(k) == len(y):
        raise ValueError(
            f"n, k and fvu must have the same length; got {len(n)}, {len(k)}, {len(y)}"
        )
    if not (np.isfinite(y).all() and np.isfinite(n).all() and np.isfinite(k).all()):
        raise ValueError("n, k and fvu must be finite")
    if (y <= 0).any() or (n <= 0).any() or (k <= 0).any():
        raise ValueError("n, k and fvu must be positive (FVU is fitted on a log scale)")
    if (k > n).any():
        raise ValueError("every k must be <= its width n (a TopK SAE cannot keep more latents)")
    if len(np.unique(n)) < 3:
        raise ValueError(
            f"a width law needs at least 3 distinct widths; got {sorted(set(n.tolist()))}"
        )
    return n, k, y


def predict_fvu(form: Form, params: np.ndarray, n: Any, k: Any) -> np.ndarray:
    """The law ``form`` with ``params`` (order of ``PARAMS[form]``) at widths ``n``, sparsities ``k``."""
    ln, lk = np.log(np.asarray(n, float)), np.log(np.asarray(k, float))
    p = np.asarray(params, float)
    if form == "gao":
        return np.exp(p[0] + p[1] * lk + p[2] * ln + p[3] * lk * ln) + np.exp(p[4] + p[5] * lk)
    if form == "power":
        return np.exp(p[0] - p[1] * ln) + np.exp(p[2] - p[3] * lk) + p[4]
    raise ValueError(f"form must be 'gao' or 'power'; got {form!r}")


def _starts(form: Form, ln: np.ndarray, lk: np.ndarray, ly: np.ndarray) -> list[np.ndarray]:
    slope = -np.polyfit(ln, ly, 1)[0] if np.ptp(ln) > 0 else 0.5
    floor = float(np.exp(ly.min()))
    if form == "gao":
        base = float(ly.mean())
        return [
            np.array([base, 0.0, -slope, 0.0, np.log(floor * 0.5), 0.0]),
            np.array([base + 1, -0.5, -max(slope, 0.3), 0.0, np.log(floor * 0.1), -0.5]),
        ]
    return [
        np.array([float(ly.max()) + ln.min() * s, s, np.log(floor * 0.3), 0.5, floor * f])
        for s in (max(min(slope, 2.9), 0.05), 1.0)
        for f in (0.0, 0.5)
    ]


def _bounds(form: Form) -> tuple[np.ndarray, np.ndarray]:
    if form == "gao":
        return np.full(6, -np.inf), np.full(6, np.inf)
    return np.array([-50, 0, -50, 0, 0]), np.array([50, 3, 50, 3, np.inf])


def _solve(form: Form, ln: np.ndarray, lk: np.ndarray, ly: np.ndarray, starts: list) -> np.ndarray:
    lo, hi = _bounds(form)
    n, k = np.exp(ln), np.exp(lk)

    def resid(p: np.ndarray) -> np.ndarray:
        return np.log(np.maximum(predict_fvu(form, p, n, k), 1e-300)) - ly

    best, cost = None, np.inf
    for x0 in starts:
        x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)
        sol = least_squares(resid, x0, bounds=(lo, hi), method="trf", max_nfev=2000)
        if sol.cost < cost:
            best, cost = sol.x, sol.cost
    return best


@dataclass(frozen=True)
class LayerFit:
    """A Stage-1 fit of one layer.

    ``params`` in the order of ``PARAMS[form]``; ``width_exponent`` is ``alpha`` (power) or
    ``alpha(k)`` at the geometric-mean ``k`` of the grid (gao); ``ci`` holds 90% bootstrap intervals
    per named quantity; ``floor`` is ``E`` (power) or ``None``; ``floor_identified`` applies the
    floor rule. ``rss`` is on log FVU; ``n_points`` grid cells (seeds included).
    """

    form: Form
    params: np.ndarray
    width_exponent: float
    ci: dict[str, tuple[float, float]]
    rss: float
    n_points: int
    floor: float | None = None
    floor_identified: bool = False
    width_decades: float = 0.0
    k_ref: float = 0.0
    exponents_by_k: dict[float, float] = field(default_factory=dict)

    @property
    def n_params(self) -> int:
        return len(self.params)

    @property
    def aic(self) -> float:
        return aic(self.rss, self.n_points, self.n_params)

    def named(self) -> dict[str, float]:
        return dict(zip(PARAMS[self.form], map(float, self.params), strict=True))


def aic(rss: float, n_points: int, n_params: int) -> float:
    """Gaussian AIC of a least-squares fit: ``N log(RSS / N) + 2 p``."""
    return float(n_points * np.log(max(rss, 1e-300) / n_points) + 2 * n_params)


def _interval(values: np.ndarray) -> tuple[float, float]:
    """The 90% percentile interval of bootstrap values (NaN without resamples)."""
    if len(values) == 0:
        return (float("nan"), float("nan"))
    lo, hi = np.quantile(values, [0.05, 0.95])
    return (float(lo), float(hi))


def _width_exponent(form: Form, p: np.ndarray, k: float) -> float:
    return float(-(p[2] + p[3] * np.log(k))) if form == "gao" else float(p[1])


def fit_layer(
    n: Sequence[float],
    k: Sequence[float],
    fvu: Sequence[float],
    form: Form = "power",
    n_boot: int = 200,
    seed: int = 0,
    min_decades: float = 1.5,
) -> LayerFit:
    """Fit one layer's law to FVU measured at widths ``n`` and sparsities ``k`` (one entry per SAE;
    repeated cells, e.g. seeds, are allowed). Raises ``ValueError`` on fewer than 3 widths, ``k > n``,
    non-positive or non-finite values."""
    if form not in PARAMS:
        raise ValueError(f"form must be one of {sorted(PARAMS)}; got {form!r}")
    if not isinstance(n_boot, int) or n_boot < 0:
        raise ValueError(f"n_boot must be an int >= 0; got {n_boot!r}")
    n_arr, k_arr, y = _check_grid(n, k, fvu)
    if len(y) <= len(PARAMS[form]):
        raise ValueError(
            f"the {form!r} law has {len(PARAMS[form])} parameters; need more than that many "
            f"FVU values, got {len(y)}"
        )
    ln, lk, ly = np.log(n_arr), np.log(k_arr), np.log(y)
    p = _solve(form, ln, lk, ly, _starts(form, ln, lk, ly))
    fitted = np.log(predict_fvu(form, p, n_arr, k_arr))
    resid = ly - fitted
    k_ref = float(np.exp(np.unique(lk).mean()))
    ks = np.unique(k_arr)
    rng = np.random.default_rng(seed)
    boots = np.array(
        [
            _solve(form, ln, lk, fitted + rng.choice(resid, size=len(resid)), [p])
            for _ in range(n_boot)
        ]
    ).reshape(n_boot, len(p))
    ci = {name: _interval(boots[:, j]) for j, name in enumerate(PARAMS[form])}
    ci["width_exponent"] = _interval(np.array([_width_exponent(form, b, k_ref) for b in boots]))
    decades = float(np.log10(n_arr.max() / n_arr.min()))
    floor, identified = None, False
    if form == "power":
        floor = float(p[4])
        lo, hi = ci["E"]
        identified = bool(decades >= min_decades and np.isfinite(hi) and (hi - lo) < floor)
    return LayerFit(
        form=form,
        params=p,
        width_exponent=_width_exponent(form, p, k_ref),
        ci=ci,
        rss=float(resid @ resid),
        n_points=len(y),
        floor=floor,
        floor_identified=identified,
        width_decades=decades,
        k_ref=k_ref,
        exponents_by_k={float(kk): _width_exponent(form, p, kk) for kk in ks},
    )


def fit_universal(
    grids: Sequence[tuple[Sequence[float], Sequence[float], Sequence[float]]], form: Form = "power"
) -> LayerFit:
    """One law for all layers: the ``(n, k, fvu)`` grids pooled (no bootstrap)."""
    if not grids:
        raise ValueError("fit_universal needs at least one layer's grid")
    n = np.concatenate([np.asarray(g[0], float) for g in grids])
    k = np.concatenate([np.asarray(g[1], float) for g in grids])
    y = np.concatenate([np.asarray(g[2], float) for g in grids])
    return fit_layer(n, k, y, form=form, n_boot=0)


def fit_shared_exponent(
    grids: Sequence[tuple[Sequence[float], Sequence[float], Sequence[float]]],
    starts: Sequence[LayerFit],
    universal: LayerFit | None = None,
) -> tuple[np.ndarray, float, int, int]:
    """The power law with one width exponent ``alpha`` shared by all layers and everything else
    per layer: layer ``i`` has ``exp(a_i - alpha ln n) + exp(b_i - beta_i ln k) + E_i`` (the null of
    "the width exponent differs across layers": the layers may still differ in error level, in
    their sparsity exponent and in their floor). Fitted on log FVU from the per-layer fits
    ``starts`` (their median and mean width exponents, offsets re-anchored at each layer's mean log
    width) and from the universal fit (``universal``; :func:`fit_universal` of ``grids`` if None),
    which is a point of this model, so the returned RSS is never above the universal fit's.

    Returns ``(params, rss, n_points, n_params)``, params ``[alpha, a_1.., b_1.., beta_1.., E_1..]``.
    """
    if not grids or len(grids) != len(starts):
        raise ValueError("fit_shared_exponent needs one per-layer fit per grid")
    arrays = [_check_grid(*g) for g in grids]
    layer = np.concatenate([np.full(len(g[2]), i) for i, g in enumerate(arrays)])
    ln = np.log(np.concatenate([g[0] for g in arrays]))
    lk = np.log(np.concatenate([g[1] for g in arrays]))
    ly = np.log(np.concatenate([g[2] for g in arrays]))
    n_layers = len(arrays)
    per = np.array([f.params for f in starts], dtype=float)  # (L, 5): a, alpha, b, beta, E
    uni = (universal or fit_universal(grids)).params
    ln_mean = np.array([np.log(g[0]).mean() for g in arrays])

    def resid(p: np.ndarray) -> np.ndarray:
        a, b, beta, e = (p[1 + j * n_layers : 1 + (j + 1) * n_layers][layer] for j in range(4))
        pred = np.exp(a - p[0] * ln) + np.exp(b - beta * lk) + e
        return np.log(np.maximum(pred, 1e-300)) - ly

    lo = np.concatenate([[0], np.full(2 * n_layers, -50.0), np.zeros(2 * n_layers)])
    hi = np.concatenate([[3], np.full(2 * n_layers, 50.0), np.full(n_layers, 3.0)])
    hi = np.concatenate([hi, np.full(n_layers, np.inf)])
    ones = np.ones(n_layers)
    x_uni = np.concatenate([[uni[1]], uni[0] * ones, uni[2] * ones, uni[3] * ones, uni[4] * ones])
    x_starts = [x_uni]
    for alpha in (float(np.median(per[:, 1])), float(np.mean(per[:, 1]))):
        # each layer's offset re-anchored at its mean log width for the shared exponent
        a0 = per[:, 0] + (alpha - per[:, 1]) * ln_mean
        x_starts.append(np.concatenate([[alpha], a0, per[:, 2], per[:, 3], per[:, 4]]))
    best = np.clip(x_uni, lo, hi)  # the universal law: the fit below can only improve on it
    cost = float(resid(best) @ resid(best)) / 2
    for x0 in x_starts:
        x0 = np.clip(x0, lo + 1e-9, np.where(np.isfinite(hi), hi - 1e-9, x0 + 1))
        sol = least_squares(resid, x0, bounds=(lo, hi), method="trf", max_nfev=4000)
        if sol.cost < cost:
            best, cost = sol.x, sol.cost
    r = resid(best)
    return best, float(r @ r), len(ly), len(best)


def predict_shared(params: np.ndarray, layer: int, n_layers: int, n: Any, k: Any) -> np.ndarray:
    """FVU of layer ``layer`` under :func:`fit_shared_exponent`'s ``params``."""
    p = np.asarray(params, float)
    a, b, beta, e = (p[1 + j * n_layers + layer] for j in range(4))
    return predict_fvu("power", np.array([a, p[0], b, beta, e]), n, k)


def fit_release(
    rows: Sequence[dict[str, Any]],
    form: Form = "power",
    n_boot: int = 200,
    seed: int = 0,
    min_decades: float = 1.5,
) -> tuple[dict[Any, LayerFit], dict[Any, str]]:
    """Stage 1 on released checkpoints (rows of :func:`~sae_geometry.load.evaluate_release`:
    ``layer``, ``width``, measured ``l0``, ``fvu``): one law per layer in the measured L0.

    Returns ``(fits, skipped)``: ``skipped`` maps each layer that cannot be fitted to the reason
    (fewer than 3 widths, too few checkpoints for the law, a checkpoint that never fires). Released
    grids are uneven, so a skipped layer is a result, not an error.
    """
    by_layer: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        by_layer.setdefault(r["layer"], []).append(r)
    fits: dict[Any, LayerFit] = {}
    skipped: dict[Any, str] = {}
    for layer, sel in by_layer.items():
        dead = [r for r in sel if not (r["l0"] > 0 and r["fvu"] > 0)]
        if dead:
            skipped[layer] = (
                f"{len(dead)} checkpoint(s) with L0 or FVU of 0 (a log law cannot fit them)"
            )
            continue
        try:
            fits[layer] = fit_layer(
                [r["width"] for r in sel], [r["l0"] for r in sel], [r["fvu"] for r in sel],
                form=form, n_boot=n_boot, seed=seed, min_decades=min_decades,
            )  # fmt: skip
        except ValueError as err:
            skipped[layer] = str(err)
    return fits, skipped


def wall_exponent(d: float, k: float) -> float:
    """The hypothesis's width exponent: ``4/d`` when ``k >= d + 1`` (second-order patches),
    ``2/d`` when ``k <= d`` (first-order)."""
    if d <= 0 or k < 1:
        raise ValueError(f"need d > 0 and k >= 1; got d={d}, k={k}")
    return 4.0 / d if k >= d + 1 else 2.0 / d


# ============================================================================ Stage 2
@dataclass(frozen=True)
class Stage2Result:
    """Leave-one-layer-out predictions of one target: ``r2`` (``1 - SS_res / SS_tot`` of the LOO
    predictions), ``spearman``, the predictions and the coefficients of the fit on all layers (on
    z-scored predictors)."""

    r2: float
    spearman: float
    predictions: np.ndarray
    coefficients: np.ndarray


def _design(x: Any, name: str = "X") -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError(f"{name} must be (n_layers, n_features); got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} has non-finite values")
    return a


def _model(alpha: float) -> Any:
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), Ridge(alpha=alpha))


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    ss = float(((y - y.mean()) ** 2).sum())
    return float(1 - ((y - pred) ** 2).sum() / ss) if ss > 0 else float("nan")


def _spearman(y: np.ndarray, pred: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if np.ptp(pred) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(y, pred).statistic)


def loo_r2(x: Any, y: Any, alpha: float = 1.0) -> Stage2Result:
    """Ridge of ``y`` ``(L,)`` on ``x`` ``(L, p)`` (z-scored within each training fold), scored by
    leave-one-layer-out. ``x`` with zero columns is the intercept-only (universal) baseline."""
    from sklearn.model_selection import LeaveOneOut, cross_val_predict

    yv = np.asarray(y, dtype=np.float64).ravel()
    if len(yv) < 3:
        raise ValueError(f"leave-one-out needs at least 3 layers; got {len(yv)}")
    if not np.isfinite(yv).all():
        raise ValueError("y has non-finite values")
    a = _design(x) if np.size(x) else np.zeros((len(yv), 0))
    if len(a) != len(yv):
        raise ValueError(f"x has {len(a)} rows but y has {len(yv)}")
    if a.shape[1] == 0:  # the training-fold mean
        pred = (yv.sum() - yv) / (len(yv) - 1)
        return Stage2Result(_r2(yv, pred), float("nan"), pred, np.zeros(0))
    pred = cross_val_predict(_model(alpha), a, yv, cv=LeaveOneOut())
    coef = _model(alpha).fit(a, yv)[-1].coef_
    return Stage2Result(_r2(yv, pred), _spearman(yv, pred), pred, coef)


def transfer(
    x_train: Any, y_train: Any, x_test: Any, y_test: Any, alpha: float = 1.0
) -> Stage2Result:
    """Fit the Stage-2 ridge on one set of layers (scaler included) and predict another's."""
    a, b = _design(x_train, "x_train"), _design(x_test, "x_test")
    ya = np.asarray(y_train, float).ravel()
    yb = np.asarray(y_test, float).ravel()
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"x_train has {a.shape[1]} features, x_test {b.shape[1]}")
    if len(a) != len(ya) or len(b) != len(yb):
        raise ValueError("each x must have one row per y value")
    model = _model(alpha).fit(a, ya)
    pred = model.predict(b)
    return Stage2Result(_r2(yb, pred), _spearman(yb, pred), pred, model[-1].coef_)
