"""Shared fixtures: a small drift world, its unseen subjects, and random-init tiny LMs on its tokenizer."""

import pytest

torch = pytest.importorskip("torch")

from drift_probe.data import drift_world, unseen_subjects  # noqa: E402
from paper_common.lm import build_tokenizer, tiny_causal_lm  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    """Every test with one torch/BLAS thread, as the smoke reproduce runs: trained snapshots (and
    their cache keys) do not depend on the machine's cores."""
    from paper_common.device import pinned_threads

    with pinned_threads(1, torch=True):
        yield


@pytest.fixture(scope="session")
def world():
    return drift_world(seed=3, n_people=30, n_cities=12, n_companies=8, n_countries=4)


@pytest.fixture(scope="session")
def unseen(world):
    return unseen_subjects(world, 0.2, seed=0)


@pytest.fixture(scope="session")
def tok(world):
    return build_tokenizer(world.vocabulary_texts())


@pytest.fixture(scope="session", params=["llama", "gpt2"])
def random_lm(request, tok):
    return tiny_causal_lm(tok, request.param, n_layers=3, d_model=32, n_heads=4, seed=1)
