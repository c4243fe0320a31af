"""Shared fixtures: a tiny float64 MLP with categorical outputs, and a small aligned LM."""

import pytest

torch = pytest.importorskip("torch")

from alignment_geometry.system import SystemConfig, build_system  # noqa: E402

SMALL = SystemConfig(pretrain_steps=200, align_steps=150, n_harmful_eval=8, n_align_prompts=200)


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    """Every test with one torch/BLAS thread, as reproduce's jobs train: the cached system's key
    and the numbers the tests check do not depend on the machine's cores."""
    from paper_common.device import pinned_threads

    with pinned_threads(1, torch=True):
        yield


@pytest.fixture(scope="session")
def mlp():
    """A 3-4-5 tanh MLP (41 parameters) in float64 and 6 inputs."""
    gen = torch.Generator().manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 5)
    ).double()
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64))
    x = torch.randn(6, 3, generator=gen, dtype=torch.float64)
    return net, x


@pytest.fixture(scope="session")
def system():
    return build_system(0, SMALL, cache=False)
