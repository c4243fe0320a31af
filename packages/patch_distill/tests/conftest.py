"""Every test module runs with one torch/BLAS thread, as the smoke reproduce does: the models the
tests train, and the numbers they check, do not depend on the machine's core count."""

import pytest

from paper_common.device import pinned_threads


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    with pinned_threads(1, torch=True):
        yield
