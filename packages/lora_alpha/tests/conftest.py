import pytest

from paper_common.device import pinned_threads
from paper_common.facts import World

SMALL_WORLD = {"n_people": 8, "n_cities": 6, "n_companies": 4, "n_countries": 3}


@pytest.fixture(scope="session")
def world() -> World:
    return World(seed=0, **SMALL_WORLD)


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """Every test module with one torch/BLAS thread, as the smoke reproduce runs: the runs the
    tests train (and the fact LM's cache key) do not depend on the machine's core count."""
    with pinned_threads(1, torch=True):
        yield
