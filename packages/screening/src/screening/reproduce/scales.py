"""The experiment's size at each scale."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from paper_common.experiment import MIN_SEEDS


@dataclass(frozen=True)
class Scale:
    """One scale of the reproduction.

    Attributes:
        n_small_instances: random instances (n = 10) solved by brute force, per replicate seed.
        n_medium: units of the medium instances checked by swap local search.
        n_population: units of each swept population.
        sigmas: consumption-noise levels of the PMT populations (aleatoric uncertainty).
        concentrations: Beta concentrations of the score populations.
        n_app: held-out units of the cash-transfer application.
        demining_side: side of the demining grid (side^2 parcels).
        seeds: independent replicates (instances, populations, classifiers).
    """

    n_small_instances: int
    n_medium: int
    n_population: int
    sigmas: tuple[float, ...]
    concentrations: tuple[float, ...]
    n_app: int
    demining_side: int
    seeds: int = 3

    def __post_init__(self) -> None:
        if self.seeds < MIN_SEEDS:
            raise ValueError(
                f"seeds must be >= {MIN_SEEDS} (an interval over seeds); got {self.seeds}"
            )
        if len(self.sigmas) + len(self.concentrations) < 3:
            raise ValueError("the sweep needs at least 3 populations for a rank correlation")


SCALES = {
    "smoke": Scale(20, 24, 400, (0.2, 0.8, 2.0), (0.5, 5.0), 600, 16),
    "quick": Scale(
        300,
        40,
        2000,
        (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0),
        (0.3, 0.5, 1, 2, 5, 10, 30),
        4000,
        40,
    ),
    "full": Scale(
        2000,
        80,
        20000,
        tuple(float(x) for x in np.round(np.geomspace(0.02, 5, 20), 3)),
        (0.2, 0.3, 0.5, 1, 2, 5, 10, 30, 100),
        40000,
        120,
        seeds=5,
    ),
}
