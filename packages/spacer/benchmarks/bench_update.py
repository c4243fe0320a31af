"""Update throughput of every sketch on a Zipf(1.0) stream, against Apache DataSketches.

    make bench PKG=spacer            (N=10^7 items; DataSketches' Python binding updates item by item,
                                      so it is timed on the first 10^6 and reported per item)

Prints updates/s, the ratio to DataSketches' frequent_items_sketch, memory in words and serialised bytes.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from paper_common import markdown_table
from spacer import (
    CountMin,
    CountSketch,
    LearnedCountMin,
    MisraGries,
    PredictedExact,
    PredictionCountSketch,
    SpaceR,
    SpaceSaving,
    perfect_oracle,
    zipf_stream,
)


def feed(sketch, stream: np.ndarray, batch: int) -> float:
    start = time.perf_counter()
    for i in range(0, stream.size, batch):
        sketch.update(stream[i : i + batch])
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--memory", type=int, default=1000, help="budget B in words")
    ap.add_argument("--batch", type=int, default=1 << 16)
    args = ap.parse_args()
    stream = zipf_stream(args.n, 1_000_000, 1.0, seed=0)
    B = args.memory
    pred = perfect_oracle(stream, B // 4)
    sketches = {
        "SpaceR": SpaceR(B),
        "Count-Min": CountMin.with_memory(B),
        "Count-Min (CU)": CountMin.with_memory(B, conservative=True),
        "Count-Sketch": CountSketch.with_memory(B),
        "Misra-Gries": MisraGries.with_memory(B),
        "SpaceSaving": SpaceSaving.with_memory(B),
        "Learned Count-Min": LearnedCountMin(B, pred),
        "Prediction Count-Sketch": PredictionCountSketch(B, pred),
        "Trivial (exact on predictions)": PredictedExact(B, perfect_oracle(stream, B // 2)),
    }
    rows = []
    ds_rate = None
    try:
        from datasketches import PyStringsSerDe, frequent_items_sketch

        n_ds = min(args.n, 1_000_000)
        lg_k = max(3, int(np.log2(B // 2)))
        ds = frequent_items_sketch(lg_k)
        items = stream[:n_ds].astype(str).tolist()
        start = time.perf_counter()
        for it in items:
            ds.update(it)
        ds_rate = n_ds / (time.perf_counter() - start)
        rows.append(
            {
                "sketch": f"DataSketches frequent_items (lg_k={lg_k}, {n_ds:,} items)",
                "updates/s": ds_rate,
                "vs DataSketches": 1.0,
                "words": None,
                "bytes": ds.get_serialized_size_bytes(PyStringsSerDe()),
            }
        )
    except ImportError:
        print("datasketches not installed (pip install 'spacer[bench]'): no production anchor")
    for name, sk in sketches.items():
        seconds = feed(sk, stream, args.batch)
        rate = args.n / seconds
        rows.append(
            {
                "sketch": name,
                "updates/s": rate,
                "vs DataSketches": rate / ds_rate if ds_rate else None,
                "words": sk.memory_words,
                "bytes": len(sk.to_bytes()),
            }
        )
    print(f"Zipf 1.0 stream, N={args.n:,}, universe 10^6, B={B} words, batch {args.batch}")
    print(markdown_table(rows))


if __name__ == "__main__":
    main()
