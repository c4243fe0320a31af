"""Planning time of the structured optimum for n = 10^3 .. 10^6 units, against exhaustive references.

    make bench PKG=screening

References in the same run: the window search over every start (``search="all"``) where it is
feasible, and brute force over all subsets at n = 14. K = 20% of n, m = 100 (m = 3 for brute force).
"""

from __future__ import annotations

import time

import numpy as np

from paper_common import Timer, markdown_table, peak_memory
from screening import OptimalPlanner, brute_force_plan


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
        with peak_memory() as mem:
            t_ours = Timer(repeat=3, warmup=1)(OptimalPlanner().plan, p, k, m).median_s
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


if __name__ == "__main__":
    main()
