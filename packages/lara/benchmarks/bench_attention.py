"""Causal forward time and peak memory of every method vs SDPA softmax, as ratios (``make bench PKG=lara``)."""

from lara.efficiency import efficiency_sweep
from lara.reproduce import efficiency_methods
from paper_common import markdown_table

if __name__ == "__main__":
    lens = (512, 2048, 8192)
    rows = efficiency_sweep(
        efficiency_methods(4, 64, max(lens)), lens, heads=4, head_dim=64, repeat=3
    )
    base = {r["seq_len"]: r for r in rows if r["method"] == "softmax"}
    table = [
        {
            "method": r["method"],
            "seq_len": r["seq_len"],
            "time_ms": 1e3 * r["time_s"],
            "time / sdpa": r["time_s"] / base[r["seq_len"]]["time_s"],
            "peak_mib": r["peak_mib"],
            "memory / sdpa": r["peak_mib"] / max(base[r["seq_len"]]["peak_mib"], 1e-9),
        }
        for r in rows
    ]
    print(markdown_table(table))
