import pytest

from paper_common.device import pinned_threads


@pytest.fixture
def one_thread():
    """Torch and BLAS on one thread: a model trained here is the same on any machine."""
    with pinned_threads(1, torch=True):
        yield
