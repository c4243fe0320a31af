"""Shared fixtures: a briefly trained task LM (float64) and untrained tiny Llama / GPT-2 models."""

import pytest

torch = pytest.importorskip("torch")

from skill_commutator.task import TaskConfig, agent_task, build_task_lm  # noqa: E402

SMALL = TaskConfig(n_layers=2, d_model=32, n_heads=2, steps=150, n_texts=800)


@pytest.fixture(scope="session")
def task_lm():
    """Trained on one thread (torch and BLAS): the same weights on any machine."""
    from paper_common.device import pinned_threads

    with pinned_threads(1, torch=True):
        model, tok, info = build_task_lm(SMALL, seed=0, cache=False, progress=False)
    return model, tok, info


@pytest.fixture(scope="session")
def spec():
    return agent_task(SMALL.language(), n_contexts=6, n_contrast=12, seed=0)


@pytest.fixture(scope="session", params=["llama", "gpt2"])
def any_lm(request, task_lm):
    """A float64 tiny model of each architecture sharing the task LM's tokenizer."""
    from paper_common.lm import float64_exact, tiny_causal_lm

    _, tok, _ = task_lm
    model = tiny_causal_lm(tok, request.param, n_layers=2, d_model=32, n_heads=2, seed=3)
    return float64_exact(model).requires_grad_(False), tok
