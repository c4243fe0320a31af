"""One small recall teacher per test session (trained in-process, not cached)."""

from __future__ import annotations

import pytest

from linearize.teachers import TeacherSpec, recall_teacher

SPEC = TeacherSpec(d_model=32, length=8, n_train=300, steps=60, batch_size=16)


@pytest.fixture(scope="session")
def teacher():  # type: ignore[no-untyped-def]
    return recall_teacher(SPEC, cache=False, progress=False)
