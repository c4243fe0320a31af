"""Device choice, seeding, peak memory and timing: the small pieces every experiment and benchmark needs.

torch is imported only inside the helpers that need it, so numpy-only packages never pay for it.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import os
import random
import statistics
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

__all__ = [
    "MemoryUsage",
    "Timer",
    "Timing",
    "gc_paused",
    "map_jobs",
    "peak_memory",
    "pick_device",
    "pinned_threads",
    "seed_everything",
    "set_threads",
    "thread_info",
]

DEVICE_ENV = "PAPER_DEVICE"


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised only without torch
        raise ImportError(
            "this helper needs torch; install the package's torch extra (e.g. pip install 'paper-common[lm]')"
        ) from exc
    return torch


def pick_device(prefer: str | None = None) -> Any:
    """Return the best available ``torch.device``: cuda > mps > cpu.

    ``prefer`` (or the ``PAPER_DEVICE`` environment variable, e.g. ``PAPER_DEVICE=cpu``) overrides the
    choice; asking for a device that is not available raises ``ValueError``.
    """
    torch = _torch()
    wanted = prefer if prefer is not None else os.environ.get(DEVICE_ENV, "").strip() or None
    if wanted is not None:
        try:
            device = torch.device(wanted)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"{DEVICE_ENV}/prefer={wanted!r} is not a torch device name") from exc
        available = {
            "cpu": True,
            "cuda": torch.cuda.is_available(),
            "mps": getattr(torch.backends, "mps", None) is not None
            and torch.backends.mps.is_available(),
        }
        if not available.get(device.type, False):
            raise ValueError(
                f"device {wanted!r} was asked for ({DEVICE_ENV}/prefer) but is not available"
            )
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int) -> np.random.Generator:
    """Seed Python's ``random``, NumPy's global state and torch (if installed); return a fresh Generator.

    Library code should still pass explicit generators around; this makes scripts and third-party code
    that draw from global state repeatable too.
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"seed must be an int; got {type(seed).__name__}")
    if not 0 <= int(seed) < 2**32:
        raise ValueError(f"seed must be in [0, 2**32); got {seed}")
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - legacy global state, seeded on purpose
    if "torch" in sys.modules or importlib.util.find_spec("torch") is not None:
        torch = _torch()
        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
    return np.random.default_rng(seed)


def thread_info() -> dict[str, Any]:
    """The thread counts that change floating-point results: torch's intra-op threads (when torch
    is imported), the BLAS and OpenMP libraries' threads, and the CPU's vector instruction set as
    torch sees it.
    Reports record them; model caches are keyed by them."""
    from threadpoolctl import threadpool_info

    pools = threadpool_info()
    info: dict[str, Any] = {
        f"{api}_threads": sorted({p["num_threads"] for p in pools if p["user_api"] == api})
        for api in ("blas", "openmp")
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        info["torch_threads"] = torch.get_num_threads()
        info["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    return info


@contextlib.contextmanager
def pinned_threads(n: int | None, torch: bool | None = None) -> Iterator[None]:
    """Run the block with torch's intra-op threads and the BLAS and OpenMP libraries' threads set to
    ``n``, restored after; ``None`` leaves them as the environment set them.

    The order of a parallel reduction depends on the thread count, so a model trained with 1 thread
    differs from one trained with 2 (and can flip a claim). Pinning makes a result independent of the
    machine's core count and of ``OMP_NUM_THREADS``; more threads than cores only costs speed.
    ``torch=None`` pins torch only if it is already imported (a numpy-only package never loads it);
    ``True`` imports it first (for code that imports torch inside the block).

    A BLAS or OpenMP library first loaded inside the block (scipy's own OpenBLAS, scikit-learn's
    libgomp) reads its thread count from the environment when it loads: the block sets
    ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS`` to ``n`` (restored after),
    and scipy's linear algebra is loaded first, so the libraries loaded so far are pinned and restored.
    A library first loaded inside the block keeps ``n`` threads after it.
    """
    if n is None:
        yield
        return
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"threads must be a positive int or None; got {n!r}")
    import scipy.linalg  # noqa: F401 - its OpenBLAS, so that it is limited and restored
    from threadpoolctl import threadpool_limits

    lib = _torch() if torch else sys.modules.get("torch")
    before = lib.get_num_threads() if lib is not None else None
    env = {k: os.environ.get(k) for k in _THREAD_ENV}
    os.environ.update(dict.fromkeys(_THREAD_ENV, str(n)))
    if lib is not None:
        lib.set_num_threads(n)
    try:
        with threadpool_limits(limits=n):  # BLAS and OpenMP (scikit-learn's, torch's libgomp)
            yield
    finally:
        if lib is not None and before is not None:
            lib.set_num_threads(before)
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def set_threads(n: int) -> None:
    """Set torch's (if installed), the BLAS and the OpenMP thread counts to ``n`` for the rest of
    the process: the one line a script or notebook needs so that what it trains does not depend on
    the machine's core count. Library code uses :func:`pinned_threads`, which restores them."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"threads must be a positive int; got {n!r}")
    import scipy.linalg  # noqa: F401 - load its OpenBLAS now, so that it is limited too
    from threadpoolctl import threadpool_limits

    os.environ.update(dict.fromkeys(_THREAD_ENV, str(n)))  # for libraries loaded later
    if "torch" in sys.modules or importlib.util.find_spec("torch") is not None:
        _torch().set_num_threads(n)
    threadpool_limits(limits=n)  # applied now, kept: the limiter is not used as a context


@dataclass
class MemoryUsage:
    """Filled in when the :func:`peak_memory` block exits. ``peak_bytes`` is above the block's start."""

    mode: str
    peak_bytes: int = 0

    @property
    def peak_mib(self) -> float:
        return self.peak_bytes / 2**20


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Run Python's garbage collector now and keep it off inside the block (restored after).

    Memory counters read "in use now minus in use at the start": a collection inside the block that
    frees garbage left by earlier code pulls the count below its start and hides the block's own
    peak (seen as a 0 MiB peak under a busy test run).
    """
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def peak_memory(
    mode: Literal["auto", "cuda", "tracemalloc", "rss"] = "auto",
    device: Any = None,
    interval_s: float = 0.001,
) -> Iterator[MemoryUsage]:
    """Measure peak memory allocated inside the block, above what was in use when it started.

    Modes: ``cuda`` (``torch.cuda.max_memory_allocated``, exact), ``tracemalloc`` (Python and NumPy
    allocations, exact, but blind to torch's CPU allocator), ``rss`` (resident set size sampled every
    ``interval_s`` by a background thread: sees everything, may miss spikes shorter than the interval;
    Linux only). ``auto`` is ``cuda`` when ``device`` is a CUDA device, else ``tracemalloc``.
    Garbage is collected before and the collector paused inside the block (:func:`gc_paused`).

    >>> with peak_memory() as mem:
    ...     x = np.ones(1_000_000)
    >>> mem.peak_mib > 7
    True
    """
    with gc_paused(), _peak_memory(mode, device, interval_s) as usage:
        yield usage


@contextlib.contextmanager
def _peak_memory(mode: str, device: Any, interval_s: float) -> Iterator[MemoryUsage]:
    if mode == "auto":
        mode = "cuda" if device is not None and str(device).startswith("cuda") else "tracemalloc"
    usage = MemoryUsage(mode=mode)
    if mode == "cuda":
        torch = _torch()
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        try:
            yield usage
        finally:
            torch.cuda.synchronize(device)
            usage.peak_bytes = max(0, torch.cuda.max_memory_allocated(device) - base)
    elif mode == "tracemalloc":
        was_tracing = tracemalloc.is_tracing()
        if not was_tracing:
            tracemalloc.start()
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        try:
            yield usage
        finally:
            _, peak = tracemalloc.get_traced_memory()
            usage.peak_bytes = max(0, peak - base)
            if not was_tracing:
                tracemalloc.stop()
    elif mode == "rss":
        if not os.path.exists("/proc/self/statm"):
            raise ValueError("mode='rss' needs /proc (Linux); use mode='tracemalloc'")
        base = _rss_bytes()
        peak = [base]
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], _rss_bytes())
                stop.wait(interval_s)

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            yield usage
        finally:
            stop.set()
            thread.join()
            peak[0] = max(peak[0], _rss_bytes())
            usage.peak_bytes = max(0, peak[0] - base)
    else:
        raise ValueError(f"mode must be one of auto, cuda, tracemalloc, rss; got {mode!r}")


@dataclass(frozen=True)
class Timing:
    """Wall-clock seconds of repeated runs; report the median, it is robust to a busy machine."""

    times_s: tuple[float, ...] = field(repr=False)

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    @property
    def min_s(self) -> float:
        return min(self.times_s)

    @property
    def iqr_s(self) -> float:
        if len(self.times_s) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.times_s, n=4, method="inclusive")
        return q3 - q1

    def __repr__(self) -> str:
        return f"Timing(median={self.median_s:.4g}s, iqr={self.iqr_s:.2g}s, n={len(self.times_s)})"


class Timer:
    """Time a callable: ``warmup`` untimed calls, then ``repeat`` timed ones; returns a :class:`Timing`.

    CUDA work is synchronised before each clock read when torch has been imported and CUDA is in use.

    >>> timing = Timer(repeat=3, warmup=0)(sum, range(1000))
    >>> len(timing.times_s)
    3
    """

    def __init__(self, repeat: int = 5, warmup: int = 1) -> None:
        if repeat < 1:
            raise ValueError(f"repeat must be >= 1; got {repeat}")
        if warmup < 0:
            raise ValueError(f"warmup must be >= 0; got {warmup}")
        self.repeat = repeat
        self.warmup = warmup

    @staticmethod
    def _sync() -> None:
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()

    def __call__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Timing:
        for _ in range(self.warmup):
            fn(*args, **kwargs)
        times = []
        for _ in range(self.repeat):
            self._sync()
            start = time.perf_counter()
            fn(*args, **kwargs)
            self._sync()
            times.append(time.perf_counter() - start)
        return Timing(tuple(times))


class Stopwatch:
    """Wall-clock seconds of the consecutive stages of a run (a ``reproduce``, say).

    ``lap(name)`` closes the stage that ends now; ``laps`` holds ``{"stage", "seconds"}`` rows ready
    for ``Report.add_table``.

    >>> watch = Stopwatch()
    >>> watch.lap("setup")
    >>> [row["stage"] for row in watch.laps]
    ['setup']
    """

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self._last = self.start
        self.laps: list[dict[str, Any]] = []

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.laps.append({"stage": stage, "seconds": now - self._last})
        self._last = now

    @property
    def elapsed_s(self) -> float:
        """Seconds since the stopwatch was made."""
        return time.perf_counter() - self.start


def map_jobs(
    fn: Callable[[Any], Any],
    jobs: list[Any],
    workers: int = 1,
    start_method: Literal["fork", "spawn", "forkserver"] | None = None,
) -> list[Any]:
    """``[fn(j) for j in jobs]``, in order; with ``workers > 1`` in a process pool.

    With one worker the jobs run in this process and torch's thread count is restored after them.
    ``start_method`` defaults to ``fork`` on Linux, so workers share what the parent has already
    imported (import heavy libraries before calling, and run no torch op in the parent first, so no
    thread pool is copied), and to ``spawn`` elsewhere. ``fn`` must be a module-level function.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if workers == 1:
        # a job that pins its own thread count (as a worker process would) must not leave the
        # caller pinned: restore torch's count after the jobs
        torch = sys.modules.get("torch")
        before = torch.get_num_threads() if torch is not None else None
        try:
            return [fn(j) for j in jobs]
        finally:
            if torch is not None and before is not None:
                torch.set_num_threads(before)
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    method = start_method or ("fork" if sys.platform == "linux" else "spawn")
    with ProcessPoolExecutor(workers, mp_context=mp.get_context(method)) as pool:
        return list(pool.map(fn, jobs))
