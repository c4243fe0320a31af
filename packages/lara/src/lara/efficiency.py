"""Efficiency harness: forward (+ backward) wall clock and peak memory against sequence length, and
autoregressive decoding (KV cache vs recurrent state), for any set of methods in one process.

Times are medians of repeated runs (CUDA events on a GPU, ``time.perf_counter`` on the CPU) with
the range of the runs, ``[time_lo, time_hi]``: a distribution-free interval for the median
(coverage ``1 - 2^(1 - repeat)``, 94% for 5 runs). A chunked kernelized method is timed at its best
chunk size for each length (:data:`CHUNK_SIZES`, picked by one tuning run each, then timed afresh
so the pick's luck does not bias the time); SDPA has no chunk size to tune. Peak
memory is ``torch.cuda.max_memory_allocated`` on a GPU; on the CPU it is the peak of the
bytes allocated through glibc's ``malloc`` (``mallinfo2``: what torch's CPU allocator holds), sampled
by a thread while the work runs (the resident set size where glibc is missing).
Results are rows of plain dicts (a table); :func:`crossovers` reads where a kernelized method starts
to beat softmax and :func:`plot_efficiency` draws the curves.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch

from lara.attention import Attention, KernelizedAttention, make_attention
from paper_common import peak_memory
from paper_common.device import gc_paused

__all__ = [
    "crossovers",
    "decoding_sweep",
    "efficiency_sweep",
    "measure",
    "median_coverage",
    "plot_decoding",
    "plot_efficiency",
]

log = logging.getLogger(__name__)
_WARM = False
#: chunk sizes the causal chunked form is tuned over (each no longer than the sequence)
CHUNK_SIZES = (16, 32, 64, 128, 256)


def median_coverage(repeat: int) -> float:
    """Coverage of ``[min, max]`` of ``repeat`` i.i.d. runs as an interval for their median."""
    return 1.0 - 2.0 ** (1 - repeat)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost",
    )]  # fmt: skip


def _malloc_counter() -> Callable[[], int] | None:
    """Bytes currently allocated through glibc malloc (heap + mmap), or None off glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2

    def allocated() -> int:
        info = fn()
        return int(info.uordblks + info.hblkhd)

    return allocated


class _Peak:
    peak_bytes = 0

    @property
    def peak_mib(self) -> float:
        return self.peak_bytes / 2**20


@contextlib.contextmanager
def _malloc_peak(interval_s: float = 0.0001) -> Iterator[_Peak]:
    """Peak bytes allocated through malloc above the start (torch's CPU allocator uses malloc).

    The counter is read after every torch operation (a dispatch mode: deterministic, sees every
    op's outputs and what it left allocated) and by a sampling thread (temporaries inside fused
    kernels), with the GIL switch interval lowered so the thread gets to run. Garbage is collected
    before and the collector paused inside the block (``paper_common.device.gc_paused``). The peak
    is the largest rise above the lowest reading so far, not above the first one: memory freed
    during the block that it did not allocate (by another thread, or a reference dropped inside
    it) would otherwise pull the count below its start and hide the block's own allocations. A
    free and an allocation with no reading between them still net out.
    """
    counter = _malloc_counter()
    if counter is None:  # not glibc: fall back on the resident set size
        with peak_memory("rss", interval_s=interval_s) as mem:
            yield mem  # type: ignore[misc]
        return
    import threading

    from torch.utils._python_dispatch import TorchDispatchMode

    rise, low = [0], [counter()]
    lock = threading.Lock()

    def read() -> None:
        # one reader at a time: a reading taken before a free and applied after a later, lower
        # reading would count the freed memory as a rise (the sampler racing the dispatch hook)
        with lock:
            now = counter()
            low[0] = min(low[0], now)
            rise[0] = max(rise[0], now - low[0])

    class _AfterEachOp(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            read()
            return out

    global _WARM
    if not _WARM:  # the first dispatch mode allocates for itself: not the measured code's memory
        with _AfterEachOp():
            torch.zeros(2) + 1
        _WARM = True
    with gc_paused():
        usage = _Peak()
        rise[0], low[0] = 0, counter()
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                read()
                stop.wait(interval_s)

        switch = sys.getswitchinterval()
        sys.setswitchinterval(1e-5)
        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            with _AfterEachOp():
                yield usage
        finally:
            stop.set()
            thread.join()
            sys.setswitchinterval(switch)
            read()
            usage.peak_bytes = rise[0]


def _timed(
    fn: Callable[[], Any], device: torch.device, repeat: int, warmup: int
) -> tuple[float, float, float]:
    """``(median, min, max)`` seconds of ``repeat`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(device)
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), max(times)


def _tunable(attn: Attention, causal: bool) -> bool:
    return isinstance(attn, KernelizedAttention) and attn.form == "chunked" and causal


@contextlib.contextmanager
def _memory(device: torch.device) -> Iterator[Any]:
    if device.type == "cuda":
        with peak_memory("cuda", device) as mem:
            yield mem
    else:
        with _malloc_peak() as mem:
            yield mem


def _as_methods(
    methods: Mapping[str, Attention] | Sequence[str],
    head_dim: int,
    heads: int,
    method_kwargs: Mapping[str, Mapping[str, Any]] | None,
) -> dict[str, Attention]:
    if isinstance(methods, Mapping):
        return dict(methods)
    kwargs = method_kwargs or {}
    return {name: make_attention(name, head_dim, heads, **kwargs.get(name, {})) for name in methods}


def measure(
    attn: Attention,
    seq_len: int,
    batch: int = 1,
    heads: int = 4,
    head_dim: int = 64,
    causal: bool = True,
    backward: bool = False,
    repeat: int = 5,
    warmup: int = 1,
    device: Any = "cpu",
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
    chunk_sizes: Sequence[int] | None = CHUNK_SIZES,
) -> dict[str, Any]:
    """Median seconds (with the runs' range) and peak MiB of one forward (and backward) pass at
    ``seq_len``; a causal chunked kernelized method at its fastest of ``chunk_sizes``."""
    if not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be a positive int; got {repeat!r}")
    device = torch.device(device)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    shape = (batch, heads, seq_len, head_dim)
    q, k, v = (torch.randn(shape, generator=gen, dtype=dtype).to(device) for _ in range(3))
    attn = attn.to(device=device, dtype=dtype).eval()
    original = getattr(attn, "chunk_size", None)
    if backward:
        for t in (q, k, v):
            t.requires_grad_(True)

    def run() -> torch.Tensor:
        if backward:
            out = attn(q, k, v, causal)
            out.sum().backward()
            return out.detach()
        with torch.no_grad():
            return attn(q, k, v, causal)

    chunk = getattr(attn, "chunk_size", None)
    if _tunable(attn, causal) and chunk_sizes:
        candidates = [c for c in chunk_sizes if c <= seq_len] or [min(chunk_sizes)]
        tried = {}
        for i, c in enumerate(candidates):  # one warm-up for the method, then one run each
            attn.chunk_size = c
            tried[c] = _timed(run, device, 1, warmup if i == 0 else 0)[0]
        chunk = min(tried, key=tried.__getitem__)
        attn.chunk_size = chunk
    try:
        seconds, low, high = _timed(run, device, repeat, warmup)
        peak = 0.0
        # the larger of two sampled peaks; the output is held to the end of the block
        for _ in range(min(repeat, 2)):
            with _memory(device) as mem:
                out = run()
            del out
            peak = max(peak, mem.peak_mib)
    finally:
        if chunk is not None:
            attn.chunk_size = original
    return {
        "time_s": seconds,
        "time_lo": low,
        "time_hi": high,
        "peak_mib": peak,
        "chunk_size": chunk if _tunable(attn, causal) else None,
    }


def efficiency_sweep(
    methods: Mapping[str, Attention] | Sequence[str],
    seq_lens: Sequence[int],
    batch: int = 1,
    heads: int = 4,
    head_dim: int = 64,
    causal: bool = True,
    backward: bool = False,
    repeat: int = 5,
    device: Any = "cpu",
    dtype: torch.dtype = torch.float32,
    method_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    max_seconds: float | None = None,
    progress: bool | None = None,
    chunk_sizes: Sequence[int] | None = CHUNK_SIZES,
) -> list[dict[str, Any]]:
    """Rows ``{method, seq_len, time_s, time_lo, time_hi, peak_mib, chunk_size, pass}`` for every
    method and length (``chunk_size`` the tuned one, None where there is none to tune).

    ``methods`` are names (built with ``method_kwargs[name]``) or ready modules. A method whose run
    at some length took more than ``max_seconds`` is skipped at longer lengths (row with NaN).
    """
    if not seq_lens or any(not isinstance(n, int) or n < 1 for n in seq_lens):
        raise ValueError(f"seq_lens must be positive ints; got {list(seq_lens)!r}")
    mods = _as_methods(methods, head_dim, heads, method_kwargs)
    from tqdm.auto import tqdm

    show = sys.stderr.isatty() if progress is None else progress
    rows, too_slow = [], set()
    jobs = [(n, name) for n in sorted(seq_lens) for name in mods]
    for n, name in tqdm(jobs, desc="efficiency", disable=not show, leave=False):
        row: dict[str, Any] = {
            "method": name,
            "seq_len": n,
            "pass": "fwd+bwd" if backward else "fwd",
        }
        if name in too_slow or (causal and not mods[name].supports_causal):
            nan = float("nan")
            row.update(time_s=nan, time_lo=nan, time_hi=nan, peak_mib=nan, chunk_size=None)
        else:
            row.update(
                measure(
                    mods[name],
                    n,
                    batch,
                    heads,
                    head_dim,
                    causal,
                    backward,
                    repeat,
                    1,
                    device,
                    dtype,
                    chunk_sizes=chunk_sizes,
                )
            )
            if max_seconds is not None and row["time_s"] > max_seconds:
                too_slow.add(name)
        rows.append(row)
    return rows


def decoding_sweep(
    methods: Mapping[str, Attention] | Sequence[str],
    lengths: Sequence[int],
    batch: int = 1,
    heads: int = 4,
    head_dim: int = 64,
    window: int = 16,
    device: Any = "cpu",
    dtype: torch.dtype = torch.float32,
    method_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Decode ``max(lengths)`` tokens one at a time per method; at each length in ``lengths`` record
    the state size (KV cache or recurrent state, bytes) and the median seconds per token over the
    next ``window`` steps. Methods without a recurrent form are skipped."""
    if not lengths or any(not isinstance(n, int) or n < 1 for n in lengths):
        raise ValueError(f"lengths must be positive ints; got {list(lengths)!r}")
    device = torch.device(device)
    mods = _as_methods(methods, head_dim, heads, method_kwargs)
    marks = sorted(set(lengths))
    total = marks[-1] + window
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (
        torch.randn(total, batch, heads, head_dim, generator=gen, dtype=dtype) for _ in range(3)
    )
    q, k, v = q.to(device), k.to(device), v.to(device)
    rows = []
    for name, attn in mods.items():
        if not attn.supports_recurrent:
            continue
        attn = attn.to(device=device, dtype=dtype).eval()
        with torch.no_grad():
            state = attn.init_state(batch, head_dim, dtype=dtype, device=device)
            t, times = 0, []
            for mark in marks:
                while t < mark:
                    _, state = attn.step(state, q[t], k[t], v[t])
                    t += 1
                nbytes = state.nbytes()
                times = []
                for _ in range(window):
                    t0 = time.perf_counter()
                    _, state = attn.step(state, q[t], k[t], v[t])
                    if device.type == "cuda":
                        torch.cuda.synchronize(device)
                    times.append(time.perf_counter() - t0)
                    t += 1
                rows.append(
                    {
                        "method": name,
                        "tokens": mark,
                        "state_mib": nbytes / 2**20,
                        "s_per_token": statistics.median(times),
                    }
                )
    return rows


def crossovers(
    rows: Sequence[Mapping[str, Any]],
    baseline: str = "softmax",
    metric: str = "time_s",
    key: str = "seq_len",
) -> dict[str, int | None]:
    """For each method, the shortest length from which it beats ``baseline`` on ``metric`` at every
    longer measured length (None: it never does within the sweep)."""
    table: dict[str, dict[int, float]] = {}
    for r in rows:
        table.setdefault(r["method"], {})[r[key]] = r[metric]
    if baseline not in table:
        raise ValueError(f"baseline {baseline!r} not among the measured methods {sorted(table)}")
    base = table[baseline]
    out: dict[str, int | None] = {}
    for name, vals in table.items():
        if name == baseline:
            continue
        lens = sorted(n for n in vals if n in base)
        wins = [vals[n] < base[n] for n in lens]
        out[name] = None
        for i, n in enumerate(lens):
            if all(wins[i:]):
                out[name] = n
                break
    return out


def _plot_curves(
    rows: Sequence[Mapping[str, Any]],
    x: str,
    metrics: tuple[str, str],
    ylabels: tuple[str, str],
    xlabel: str,
) -> Any:
    """Two log-log panels, one line per method (softmax in bold black)."""
    from paper_common import new_figure

    fig, axes = new_figure(1, 2, size=(11, 4))
    for name in dict.fromkeys(r["method"] for r in rows):
        pts = [r for r in rows if r["method"] == name]
        style = {"lw": 2.5, "color": "black"} if name == "softmax" else {}
        for ax, metric in zip(axes, metrics, strict=True):
            ax.plot([p[x] for p in pts], [p[metric] for p in pts], marker="o", label=name, **style)
    for ax, label in zip(axes, ylabels, strict=True):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=7)
    return fig


def plot_efficiency(rows: Sequence[Mapping[str, Any]], title: str = "") -> Any:
    """Time and peak memory against sequence length (log-log), one line per method."""
    fig = _plot_curves(
        rows,
        "seq_len",
        ("time_s", "peak_mib"),
        ("seconds (median)", "peak memory (MiB)"),
        "sequence length",
    )
    if title:
        fig.suptitle(title)
    return fig


def plot_decoding(rows: Sequence[Mapping[str, Any]]) -> Any:
    """Decoding state size and seconds per token against tokens generated."""
    return _plot_curves(
        rows,
        "tokens",
        ("state_mib", "s_per_token"),
        ("state (MiB): KV cache vs recurrent", "seconds per token"),
        "tokens decoded",
    )
