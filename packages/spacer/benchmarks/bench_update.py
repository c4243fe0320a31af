"""Update throughput of every sketch on a Zipf(1.0) stream, against Apache DataSketches, each way
labelled.

    make bench PKG=spacer      (N = 10^7 items; the item-by-item ways are timed on a prefix)

Ways, named in the output's ``way`` column:

* ``item by item``: one Python call per item (``sketch.update(x)`` / ``ds.update(x)``); every
  library pays Python's per-call overhead. Timed on ``--n-item`` items.
* ``batch, exact``: spacer's ``update(batch)``: the same answer as item by item (order-dependent
  sketches run their item-by-item rule over the batch inside one call).
* ``batch, pre-aggregated``: the batch counted exactly first (``np.unique``), then one weighted
  update per distinct id: DataSketches' ``update(item, weight)``, spacer's ``update_aggregated``.
  For order-dependent sketches this is not the item-by-item answer and the batch summary is
  memory beside the sketch: its size is the ``batch words`` column.

Prints updates/s (stream items per second), the ratio to DataSketches item by item, memory in
words and serialised bytes.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from paper_common import markdown_table
from spacer import (
    CountMin,
    CountSketch,
    CountSketchPlusPlus,
    FrequencySketch,
    LearnedCountMin,
    MisraGries,
    PredictedExact,
    PredictionCountSketch,
    SpaceR,
    SpaceSaving,
    perfect_oracle,
    zipf_stream,
)


def timed(run: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    run()
    return n / (time.perf_counter() - start)


def datasketches_rows(stream: np.ndarray, B: int, batch: int, n_item: int) -> list[dict]:
    try:
        from datasketches import frequent_items_sketch, frequent_strings_sketch  # noqa: F401
    except ImportError:
        print("datasketches not installed (pip install 'spacer[bench]'): no production anchor")
        return []
    from datasketches import PyStringsSerDe

    lg_k = max(3, int(np.log2(B // 2)))
    rows = []
    ds = frequent_items_sketch(lg_k)
    items = stream[:n_item].astype(str).tolist()

    def one_by_one() -> None:
        for it in items:
            ds.update(it)

    rate = timed(one_by_one, n_item)
    rows.append(("DataSketches frequent_items", "item by item", rate, 0, ds))
    ds2 = frequent_items_sketch(lg_k)

    def aggregated() -> None:
        for i in range(0, stream.size, batch):
            uniq, cnt = np.unique(stream[i : i + batch], return_counts=True)
            for it, c in zip(uniq.astype(str).tolist(), cnt.tolist(), strict=True):
                ds2.update(it, c)

    rate2 = timed(aggregated, stream.size)
    words = 2 * max(np.unique(stream[i : i + batch]).size for i in range(0, stream.size, batch))
    rows.append(("DataSketches frequent_items", "batch, pre-aggregated", rate2, words, ds2))
    return [
        {
            "sketch": f"{name} (lg_k={lg_k})",
            "way": way,
            "updates/s": r,
            "vs DataSketches item by item": r / rate,
            "words": None,
            "batch words": w,
            "bytes": sk.get_serialized_size_bytes(PyStringsSerDe()),
        }
        for name, way, r, w, sk in rows
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--n-item", type=int, default=100_000, help="items timed item by item")
    ap.add_argument("--memory", type=int, default=1000, help="budget B in words")
    ap.add_argument("--batch", type=int, default=1 << 16)
    args = ap.parse_args()
    stream = zipf_stream(args.n, 1_000_000, 1.0, seed=0)
    B, batch = args.memory, args.batch
    pred = perfect_oracle(stream, B // 4)
    makers: dict[str, Callable[[], FrequencySketch]] = {
        "SpaceR": lambda: SpaceR(B),
        "Count-Min": lambda: CountMin.with_memory(B),
        "Count-Min (CU)": lambda: CountMin.with_memory(B, conservative=True),
        "Count-Sketch": lambda: CountSketch.with_memory(B),
        "Misra-Gries": lambda: MisraGries.with_memory(B),
        "SpaceSaving": lambda: SpaceSaving.with_memory(B),
        "Learned Count-Min": lambda: LearnedCountMin(B, pred),
        "Prediction Count-Sketch": lambda: PredictionCountSketch(B, pred),
        "Learned CountSketch++": lambda: CountSketchPlusPlus(B, pred),
        "Trivial (exact on predictions)": lambda: PredictedExact(B, perfect_oracle(stream, B // 2)),
    }
    rows = datasketches_rows(stream, B, batch, args.n_item)
    ds_rate = rows[0]["updates/s"] if rows else None

    def row(name: str, way: str, rate: float, sk: FrequencySketch) -> dict:
        return {
            "sketch": name,
            "way": way,
            "updates/s": rate,
            "vs DataSketches item by item": rate / ds_rate if ds_rate else None,
            "words": sk.memory_words,
            "batch words": sk.batch_words,
            "bytes": len(sk.to_bytes()),
        }

    for name, make in makers.items():
        sk = make()
        items = stream[: args.n_item]
        rate = timed(lambda sk=sk, items=items: [sk.update(x) for x in items.tolist()], items.size)
        rows.append(row(name, "item by item", rate, sk))
        sk = make()
        rate = timed(
            lambda sk=sk: [sk.update(stream[i : i + batch]) for i in range(0, stream.size, batch)],
            stream.size,
        )
        rows.append(row(name, "batch, exact", rate, sk))
        if sk.order_dependent:
            sk = make()
            rate = timed(
                lambda sk=sk: [
                    sk.update_aggregated(stream[i : i + batch])
                    for i in range(0, stream.size, batch)
                ],
                stream.size,
            )
            rows.append(row(name, "batch, pre-aggregated", rate, sk))
    print(
        f"Zipf 1.0 stream, N={args.n:,}, universe 10^6, B={B} words, batch {batch}; item by item "
        f"timed on the first {args.n_item:,} items"
    )
    print(markdown_table(rows))


if __name__ == "__main__":
    main()
