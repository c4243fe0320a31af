import pytest

from paper_common.facts import World

SMALL_WORLD = {"n_people": 8, "n_cities": 6, "n_companies": 4, "n_countries": 3}


@pytest.fixture(scope="session")
def world() -> World:
    return World(seed=0, **SMALL_WORLD)
