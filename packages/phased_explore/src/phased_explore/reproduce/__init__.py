"""``python -m phased_explore reproduce``: phases vs agents in cooperative reward-free exploration.

1. rho = H (layerwise explorer) on the noisy lock: the certificate E_model against N.
2. The deterministic lock (A = 2): minimal N for success >= 0.9 per number of phases rho, simulated
   and in closed form, next to A^{H/rho}; enumerating agents at N = 64; the open lock as a null.
3. Success against rho at fixed N (the frontier).
4. Equal total trajectories on the noisy lock: rho = H vs RF-UCRL and RF-Express (published and
   practical constants; sequential, batched as ours, naive batched), rho = 1 uniform exploration,
   uniform exploration in H phases (the null) and the oracle; planning gaps over a reward battery;
   a Dirichlet sanity case.

Laid out as every package's experiment: :mod:`~phased_explore.reproduce.scales`,
:mod:`~phased_explore.reproduce.run`, :mod:`~phased_explore.reproduce.claims`,
:mod:`~phased_explore.reproduce.figures`.
"""

from __future__ import annotations

import numpy as np

from paper_common import Report
from paper_common.experiment import experiment
from phased_explore.reproduce import figures
from phased_explore.reproduce.claims import (
    decide_claims,
    distance_interval,
    frontier_slope,
    n_min_bounds,
    slope_bounds,
)
from phased_explore.reproduce.run import (
    ALGORITHMS,
    Frontier,
    closed_form,
    closed_form_n_min,
    measure,
    open_lock,
)
from phased_explore.reproduce.scales import SCALES, Scale

__all__ = [
    "SCALES",
    "Frontier",
    "Scale",
    "distance_interval",
    "frontier_slope",
    "n_min_bounds",
    "open_lock",
    "reproduce",
    "slope_bounds",
]


def _frontier_rows(fr: list[Frontier], cfg: Scale, n: int, closed: bool) -> list[dict]:
    rows = []
    for f in fr:
        lo, hi = n_min_bounds(f, np.arange(n), cfg.success)
        row = {"rho": f.rho, "m": f.m, "N_min_low": 2**lo, "N_min_high": 2**hi,
               "censored": not np.isfinite(hi), "largest N tried": f.ns[-1]}  # fmt: skip
        if closed:
            row |= {"N_min_closed_form": closed_form_n_min(cfg, f.rho), "A^m": 2**f.m,
                    "enumerate_N64_success": f.enumerate_n64}  # fmt: skip
        rows.append(row)
    return rows


@experiment("phased_explore", "Phases vs agents in cooperative reward-free exploration", SCALES)
def reproduce(cfg: Scale, report: Report, seed: int) -> None:
    """Run the experiment at ``scale`` and return (and, with ``out_dir``, write) the report."""
    res = measure(cfg, seed)
    n = len(res.seeds)
    for claim in decide_claims(res, cfg):
        report.add_claim(claim)
    report.add_table(
        "scaling",
        [{"N": N, "E_model": float(res.E[:, i].mean()), "E_model_sd": float(res.E[:, i].std()),
          "E_model_over_H": float(res.E[:, i].mean()) / cfg.noisy_H} for i, N in enumerate(cfg.ns)],
    )  # fmt: skip
    frontier = _frontier_rows(res.lock, cfg, n, closed=True)
    report.add_table("frontier", frontier)
    report.add_table(
        "open lock frontier (negative control of claim 2)",
        _frontier_rows(res.open, cfg, n, closed=False),
    )
    report.add_table(
        "lock_success",
        [{"rho": f.rho, "m": f.m, "N": N, "success": float(np.mean(ok)),
          "closed_form_lower_bound": closed_form(cfg, f.rho, N)}
         for f in res.lock for N, ok in zip(f.ns, f.success, strict=True)],
    )  # fmt: skip
    report.add_table(
        "equal_trajectories",
        [{"algorithm": a, "trajectories": res.eq[0]["trajectories"],
          **{k: float(np.mean([r[k] for r in res.eq if r["algorithm"] == a]))
             for k in ("phases", "E_model", "planning_gap_over_H")}} for a in ALGORITHMS],
    )  # fmt: skip
    report.add_table("dirichlet_sanity", res.sanity)
    report.add_figure("frontier", figures.frontier(frontier, cfg))
    report.add_figure("accuracy_vs_agents", figures.accuracy_vs_agents(res.E, res.eq, cfg))
    report.add_figure("visitation", figures.visitation(cfg, res.seeds[0]))
    report.notes = (
        f"{n} replicate seeds (MDP draws and the agents' randomness) derived from seed {seed}. "
        "A lock run succeeds when its certificate / H <= "
        f"{cfg.eps}; N_min is the first agent count of the grid round(2^(k/2)) whose success rate "
        f"over the seeds reaches {cfg.success}, so the true value lies between it and the grid value "
        "before it. The open lock (every action correct) is the frontier's null: the agents a run "
        "needs should not grow with the number of blocks there."
    )
