"""Every test with one torch/BLAS thread, as the smoke reproduce trains its models: trained models,
their cache keys and the numbers the tests check do not depend on the machine's cores."""

import pytest


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    from paper_common.device import pinned_threads

    with pinned_threads(1, torch=True):
        yield
