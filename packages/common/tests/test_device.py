import importlib.util
import random

import numpy as np
import pytest

from paper_common.device import Timer, Timing, peak_memory, pick_device, seed_everything

HAS_TORCH = importlib.util.find_spec("torch") is not None


def test_seed_everything_makes_global_state_repeatable():
    rng = seed_everything(123)
    first = (random.random(), np.random.rand(), rng.normal())  # noqa: NPY002
    rng = seed_everything(123)
    assert (random.random(), np.random.rand(), rng.normal()) == first  # noqa: NPY002


def test_seed_everything_rejects_bad_seeds():
    with pytest.raises(TypeError, match="int"):
        seed_everything(1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2\\*\\*32"):
        seed_everything(-1)


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed in this environment")
def test_seed_everything_seeds_torch():
    import torch

    seed_everything(5)
    a = torch.rand(3)
    seed_everything(5)
    assert torch.equal(a, torch.rand(3))


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed in this environment")
def test_pick_device_honours_override(monkeypatch):
    monkeypatch.setenv("PAPER_DEVICE", "cpu")
    assert str(pick_device()) == "cpu"
    monkeypatch.setenv("PAPER_DEVICE", "not-a-device")
    with pytest.raises(ValueError, match="not a torch device"):
        pick_device()


@pytest.mark.skipif(HAS_TORCH, reason="checks the message given when torch is missing")
def test_pick_device_without_torch_says_what_to_install():
    with pytest.raises(ImportError, match="paper-common\\[lm\\]"):
        pick_device()


def test_tracemalloc_peak_sees_a_numpy_allocation():
    with peak_memory() as mem:
        x = np.ones(2_000_000)  # 16 MB
        del x
    assert mem.mode == "tracemalloc"
    assert 15.0 < mem.peak_mib < 17.0


def test_rss_peak_sees_touched_pages():
    with peak_memory("rss") as mem:
        x = np.ones(8_000_000)  # 64 MB, written so the pages are resident
        x.sum()
    assert mem.peak_mib > 40.0
    del x


def test_peak_memory_rejects_unknown_mode():
    with pytest.raises(ValueError, match="mode"), peak_memory("gpu"):  # type: ignore[arg-type]
        pass


def test_timer_counts_calls_and_orders_statistics():
    calls = []
    timing = Timer(repeat=4, warmup=2)(lambda: calls.append(sum(range(10_000))))
    assert len(calls) == 6
    assert len(timing.times_s) == 4
    assert timing.min_s <= timing.median_s <= max(timing.times_s)
    assert Timing((1.0, 2.0, 3.0, 10.0)).median_s == 2.5
    with pytest.raises(ValueError, match="repeat"):
        Timer(repeat=0)


def test_stopwatch_laps_add_up_to_the_elapsed_time():
    from paper_common import Stopwatch

    watch = Stopwatch()
    sum(range(100_000))
    watch.lap("a")
    sum(range(100_000))
    watch.lap("b")
    assert [r["stage"] for r in watch.laps] == ["a", "b"]
    assert all(r["seconds"] >= 0 for r in watch.laps)
    total = sum(r["seconds"] for r in watch.laps)
    assert total <= watch.elapsed_s


def test_map_jobs_keeps_order_in_and_out_of_a_pool():
    import math

    from paper_common import map_jobs

    jobs = [1.0, 4.0, 9.0, 16.0]
    assert map_jobs(math.sqrt, jobs) == [1.0, 2.0, 3.0, 4.0]
    assert map_jobs(math.sqrt, jobs, workers=2) == [1.0, 2.0, 3.0, 4.0]
    assert map_jobs(math.sqrt, jobs, workers=2, start_method="spawn") == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="workers"):
        map_jobs(math.sqrt, jobs, workers=0)


def test_gc_paused_collects_first_and_restores_the_collector():
    import gc
    import weakref

    from paper_common.device import gc_paused

    class Node:
        pass

    a = Node()
    a.self = a  # a reference cycle: freed only by the collector
    alive = weakref.ref(a)
    del a
    with gc_paused():
        assert alive() is None  # collected on entry
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a collector that was off stays off
    finally:
        gc.enable()


def _blas_threads() -> set[int]:
    from threadpoolctl import threadpool_info

    return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}


def test_pinned_threads_pins_torch_and_blas_and_restores_them():
    torch = pytest.importorskip("torch")
    from paper_common.device import pinned_threads, thread_info

    before, blas = torch.get_num_threads(), _blas_threads()
    target = 3 if before != 3 else 2  # more threads than cores is allowed: only the count matters
    with pinned_threads(target, torch=True):
        assert torch.get_num_threads() == target
        assert _blas_threads() == {target}
        assert thread_info()["torch_threads"] == target
    assert torch.get_num_threads() == before
    assert _blas_threads() == blas
    with pinned_threads(None):
        assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="threads"), pinned_threads(0):
        pass


def test_pin_threads_runs_a_reproduce_with_the_scales_count():
    torch = pytest.importorskip("torch")
    from paper_common.reproduce import THREADS, pin_threads

    seen = {}

    @pin_threads(torch=True)
    def reproduce(scale="quick", seed=0, out_dir=None):
        seen[scale] = torch.get_num_threads()
        return scale

    before = torch.get_num_threads()
    assert reproduce("smoke") == "smoke"
    assert reproduce(scale="quick") == "quick"
    assert seen == {"smoke": THREADS["smoke"], "quick": THREADS["quick"]}
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="scale"):
        reproduce("medium")


def test_map_jobs_in_process_does_not_leave_a_jobs_thread_count_behind():
    torch = pytest.importorskip("torch")
    from paper_common import map_jobs
    from paper_common.device import pinned_threads

    with pinned_threads(2, torch=True):
        assert map_jobs(_pin_one_thread, [1, 2]) == [1, 1]
        assert torch.get_num_threads() == 2


def _pin_one_thread(_: int) -> int:
    import torch

    torch.set_num_threads(1)  # what a worker-process job does
    return torch.get_num_threads()


def test_set_threads_pins_for_the_rest_of_a_script():
    torch = pytest.importorskip("torch")
    from paper_common.device import pinned_threads, set_threads

    with pinned_threads(2, torch=True):  # restores what set_threads changes
        set_threads(1)
        assert torch.get_num_threads() == 1
        assert _blas_threads() == {1}
    with pytest.raises(ValueError, match="threads"):
        set_threads(0)


def test_a_library_loaded_inside_the_pin_is_pinned_too():
    """scipy's OpenBLAS and scikit-learn's libgomp load lazily and read OMP_NUM_THREADS then: a
    smoke run with OMP_NUM_THREADS=2 differed from one with 1 in the last digits until the pin
    covered them."""
    import os
    import subprocess
    import sys

    code = (
        "import os, threadpoolctl, numpy\n"
        "from paper_common.device import pinned_threads\n"
        "with pinned_threads(1):\n"
        "    import sklearn.cluster\n"
        "    inside = sorted({p['num_threads'] for p in threadpoolctl.threadpool_info()})\n"
        "print(inside, os.environ['OMP_NUM_THREADS'])\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    env.pop("OPENBLAS_NUM_THREADS", None)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["[1]", "2"]  # pinned inside, the environment restored after
