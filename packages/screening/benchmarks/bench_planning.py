"""Planning time of the structured optimum for n = 10^3 .. 10^6 units, against exhaustive references,
and in the window size m up to 10^4 at n = 10^6 against the O(m^3) planner it replaced.

    make bench PKG=screening

References in the same run: the window search over every start (``search="all"``) where it is
feasible, and brute force over all subsets at n = 14. K = 20% of n, m = 100 (m = 3 for brute force).
The second table times the sliding-window planner against the old one-recursion-per-window search
(kept in ``tests/test_fast_planner.py``) where the old one runs in reasonable time (m <= 1000).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from paper_common import Timer, markdown_table, peak_memory
from screening import OptimalPlanner, brute_force_plan

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_fast_planner import old_choose  # the reference lives with its tests


def window_size_scaling() -> list[dict]:
    """n = 10^6, K = 2 10^5: the window search (sort + band, what changed) of the new planner for
    m = 10^2 .. 10^4 and of the old one up to m = 10^3; ``plan()`` adds the plan's exact value and
    variance (one O(m^2) recursion) and its bookkeeping over all n units."""
    rng = np.random.default_rng(1)
    n = 1_000_000
    p = rng.beta(2, 3, n)
    k = n // 5
    rows = []
    for m in (100, 300, 1_000, 3_000, 10_000):
        planner = OptimalPlanner()
        start = time.perf_counter()
        units = planner.choose(p, k, m)
        t_new = time.perf_counter() - start
        with peak_memory() as mem:  # a separate call: tracemalloc slows every allocation it traces
            planner.choose(p, k, m)
        start = time.perf_counter()
        planner.plan(p, k, m)
        t_plan = time.perf_counter() - start
        row = {"n": n, "K": k, "m": m, "new search (s)": t_new, "new plan() (s)": t_plan,
               "new peak MiB": mem.peak_mib, "old search (s)": None, "old / new": None,
               "same plan": None}  # fmt: skip
        if m <= 1_000:
            start = time.perf_counter()
            old_units, _ = old_choose(p, k, m)
            t_old = time.perf_counter() - start
            row.update(
                {
                    "old search (s)": t_old,
                    "old / new": t_old / t_new,
                    "same plan": np.array_equal(old_units, units),
                }
            )
        rows.append(row)
    return rows


def main() -> None:
    rng = np.random.default_rng(0)
    rows = []
    p = rng.beta(2, 3, 14)
    start = time.perf_counter()
    brute = brute_force_plan(p, 3, 3)
    t_brute = time.perf_counter() - start
    t_ours = Timer(repeat=5)(OptimalPlanner().plan, p, 3, 3).median_s
    same = abs(OptimalPlanner().plan(p, 3, 3).expected_value - brute.expected_value) < 1e-9
    rows.append(
        {
            "n": 14,
            "m": 3,
            "ours (s)": t_ours,
            "reference": "brute force, C(14,3)",
            "reference (s)": t_brute,
            "speed-up": t_brute / t_ours,
            "same value": same,
            "peak MiB": None,
        }
    )
    for n in (1_000, 10_000, 100_000, 1_000_000):
        p = rng.beta(2, 3, n)
        k, m = n // 5, 100
        t_ours = Timer(repeat=3, warmup=1)(OptimalPlanner().plan, p, k, m).median_s
        with peak_memory() as mem:  # apart from the timing: tracemalloc slows traced allocations
            OptimalPlanner().plan(p, k, m)
        row = {
            "n": n,
            "m": m,
            "ours (s)": t_ours,
            "reference": "-",
            "reference (s)": None,
            "speed-up": None,
            "same value": None,
            "peak MiB": mem.peak_mib,
        }
        if n <= 10_000:
            start = time.perf_counter()
            full = OptimalPlanner(search="all").plan(p, k, m)
            t_ref = time.perf_counter() - start
            row.update(
                {
                    "reference": "every window start",
                    "reference (s)": t_ref,
                    "speed-up": t_ref / t_ours,
                    "same value": abs(
                        full.expected_value - OptimalPlanner().plan(p, k, m).expected_value
                    )
                    < 1e-9,
                }
            )
        rows.append(row)
    print(markdown_table(rows))
    print()
    print(markdown_table(window_size_scaling()))


if __name__ == "__main__":
    main()
