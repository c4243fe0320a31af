"""Shared fixtures: a random-init tiny GPT-2 and Llama on a small World's tokenizer, and the
smoke scale's trained fact LM (cached by ``fact_lm``, shared with the reproduce test)."""

import pytest

torch = pytest.importorskip("torch")

from paper_common.facts import World  # noqa: E402
from paper_common.lm import build_tokenizer, fact_lm, tiny_causal_lm  # noqa: E402
from rce.reproduce import SCALES  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    """Every test with one torch/BLAS thread, as the smoke reproduce runs: trained models (and the
    fact LM's cache key) and the numbers the tests check do not depend on the machine's cores."""
    from paper_common.device import pinned_threads

    with pinned_threads(1, torch=True):
        yield


@pytest.fixture(scope="session")
def small_world():
    return World(seed=5, n_people=12, n_cities=10, n_companies=4, n_countries=3)


@pytest.fixture(scope="session")
def small_tok(small_world):
    return build_tokenizer(small_world.vocabulary_texts())


@pytest.fixture(scope="session", params=["gpt2", "llama"])
def random_lm(request, small_tok):
    return tiny_causal_lm(small_tok, request.param, n_layers=3, d_model=32, n_heads=4, seed=2)


@pytest.fixture(scope="session")
def smoke_world():
    return World(seed=0, **SCALES["smoke"]["world"])


@pytest.fixture(scope="session")
def fact_model(smoke_world):
    cfg = SCALES["smoke"]
    return fact_lm(
        smoke_world,
        size=cfg["size"],
        seed=0,
        arch=cfg["arch"],
        steps=cfg["steps"],
        history=False,
        cues=False,
        progress=False,
    )
