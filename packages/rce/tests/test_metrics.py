"""Per-request measurements: what a request without a neighbourhood gets."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rce.metrics import evaluate_requests  # noqa: E402
from rce.requests import EditRequest  # noqa: E402


def test_a_request_without_neighbours_has_no_neighbourhood_accuracy(
    random_lm, small_tok, small_world
):
    people, cities = small_world.entities["person"], small_world.entities["city"]
    with_n = EditRequest(
        "{} was born in",
        people[0],
        cities[0],
        cities[1],
        neighbours=((f"{people[1]} was born in", cities[2]),),
    )
    without = EditRequest("{} was born in", people[2], cities[3], cities[4])
    out = evaluate_requests(random_lm, small_tok, [with_n, without], budgets=(1,))
    acc = out["neighbour_acc"]
    assert np.isfinite(acc[0])
    assert acc[0] in (0.0, 1.0)
    assert np.isnan(acc[1])  # was 0.0: "every neighbour changed" for a request that has none
