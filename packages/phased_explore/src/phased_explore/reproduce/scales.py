"""The experiment's size at each scale."""

from __future__ import annotations

from dataclasses import dataclass

from paper_common.experiment import MIN_SEEDS


@dataclass(frozen=True)
class Scale:
    """One scale of the reproduction.

    Attributes:
        noisy_H, noisy_A: horizon and actions of the noisy lock (claims 1 and 4).
        ns: agents per phase of the certificate-vs-N sweep (claim 1).
        lock_H: horizon of the deterministic lock (A = 2) of the frontier (claims 2 and 3).
        rhos: numbers of phases of the frontier.
        n_grid_max_log2: the agent grid of the frontier runs over 2^(k/2) up to 2^this.
        agents_per_layer: trajectories per layer at equal total trajectories (claim 4).
        seeds: independent replicates (MDP draws and agents' randomness).
        success: the success rate that defines the minimal number of agents N_min.
        eps: certificate / H below which a lock run counts as a success.
        extra_steps: grid steps run past the first N reaching ``success`` (so a bootstrap
            resample of the seeds that needs a larger N still finds it).
        n_boot: bootstrap resamples of the seeds.
    """

    noisy_H: int
    noisy_A: int
    ns: tuple[int, ...]
    lock_H: int
    rhos: tuple[int, ...]
    n_grid_max_log2: int
    agents_per_layer: int
    seeds: int
    success: float = 0.9
    eps: float = 0.05
    extra_steps: int = 2
    n_boot: int = 1000

    def __post_init__(self) -> None:
        if self.seeds < MIN_SEEDS:
            raise ValueError(
                f"seeds must be >= {MIN_SEEDS} (an interval over seeds); got {self.seeds}"
            )
        if len(self.ns) < 2 or len(self.rhos) < 2:
            raise ValueError("need at least two agent counts ns and two phase counts rhos")


SCALES = {
    "smoke": Scale(4, 2, (50, 200), 6, (1, 2, 6), 9, 100, 4, n_boot=200),
    "quick": Scale(6, 3, (100, 200, 400, 800, 1600, 3200), 12, (1, 2, 3, 4, 6, 12), 15, 800, 10),
    "full": Scale(8, 3, (100, 200, 400, 800, 1600, 3200, 6400, 12800), 16, (1, 2, 4, 8, 16), 18,
                  3200, 20),
}  # fmt: skip
