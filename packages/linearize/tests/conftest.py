"""One small recall teacher per test session (trained in-process, not cached); every test module
runs with one torch/BLAS thread, as the smoke reproduce does, so the models the tests train and the
numbers they check do not depend on the machine's core count."""

from __future__ import annotations

import pytest

from linearize.teachers import TeacherSpec, recall_teacher
from paper_common.device import pinned_threads

SPEC = TeacherSpec(d_model=32, length=8, n_train=300, steps=60, batch_size=16)


@pytest.fixture(scope="session")
def teacher():  # type: ignore[no-untyped-def]
    with pinned_threads(1, torch=True):  # a session fixture is built before any module's pin
        return recall_teacher(SPEC, cache=False, progress=False)


@pytest.fixture(scope="module", autouse=True)
def _one_thread():  # type: ignore[no-untyped-def]
    with pinned_threads(1, torch=True):
        yield
