"""The measurements, each over replicate seeds: the certificate against N with rho = H phases, the
deterministic lock's frontier (success per phases and agents), the same frontier on an open lock (the
negative control of claim 2), and the equal-trajectory comparison."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from paper_common.experiment import replicate_seeds
from phased_explore.algorithms import (
    RFUCRL,
    BlockExplorer,
    LayerwiseExplorer,
    OracleExplorer,
    RFExpress,
    UniformExplorer,
)
from phased_explore.lower_bound import lock_success_probability, minimal_agents
from phased_explore.mdp import TabularMDP, combination_lock, noisy_lock, random_layered
from phased_explore.planning import certificate, planning_gap, reward_battery
from phased_explore.protocol import run
from phased_explore.reproduce.scales import Scale

ALGORITHMS = (
    "layerwise (rho = H)",
    "uniform (rho = 1)",
    "RF-UCRL sequential (rho = T)",
    "RF-Express sequential (rho = T)",
    "RF-UCRL sequential, practical constants (rho = T)",
    "RF-Express sequential, practical constants (rho = T)",
    "RF-UCRL batched (rho = H, ours)",
    "RF-Express batched (rho = H, ours)",
    "RF-UCRL batched, practical constants (rho = H, ours)",
    "RF-Express batched, practical constants (rho = H, ours)",
    "RF-UCRL naive batched (rho = H, one policy)",
    "uniform in H phases (rho = H, no adaptation)",
    "oracle reach (rho = H)",
)
SEQUENTIAL = ALGORITHMS[2:6]  # the published sequential baselines (claim 4's reference)
BATCHED = ALGORITHMS[6:10]  # our batched variant at rho = H
NULL = ALGORITHMS[11]  # claim 4's negative control: the protocol with adaptation switched off


def explorers(mdp: TabularMDP, T: int, H: int) -> dict[str, tuple[object, int, int]]:
    """Each algorithm of the equal-trajectory comparison: (explorer, agents per phase, phases)."""
    N = T // H
    out: dict[str, tuple[object, int, int]] = {
        ALGORITHMS[0]: (LayerwiseExplorer(), N, H),
        ALGORITHMS[1]: (UniformExplorer(), T, 1),
    }
    for i, const in enumerate(("paper", "practical")):
        out[SEQUENTIAL[2 * i]] = (RFUCRL(constants=const), 1, T)
        out[SEQUENTIAL[2 * i + 1]] = (RFExpress(constants=const), 1, T)
        out[BATCHED[2 * i]] = (RFUCRL(constants=const), N, H)
        out[BATCHED[2 * i + 1]] = (RFExpress(constants=const), N, H)
    out[ALGORITHMS[10]] = (RFUCRL(batch="same"), N, H)
    out[NULL] = (UniformExplorer(n_phases=H), N, H)
    out[ALGORITHMS[12]] = (OracleExplorer(mdp), N, H)
    return out


def agent_grid(cfg: Scale) -> list[int]:
    """Agents per phase tried on the lock: round(2^(k/2)) for k = 2 .. 2 * n_grid_max_log2."""
    return sorted({round(2 ** (k / 2)) for k in range(2, 2 * cfg.n_grid_max_log2 + 1)})


def open_lock(H: int, A: int) -> TabularMDP:
    """The deterministic lock with every action correct: nothing to search, so the agents a run
    needs cannot grow with the number of blocks (the planted-absent effect of claim 2)."""
    lock = combination_lock(H, A, seed=0, deterministic=True)
    P = lock.P.copy()
    P[: H - 1, 0, :, :] = 0.0
    P[: H - 1, 0, :, 0] = 1.0
    P[H - 1, 0, :, :] = 0.0
    P[H - 1, 0, :, 2] = 1.0
    return TabularMDP(P, lock.init)


@dataclass
class Frontier:
    """Per number of phases ``rho``: the agent counts tried and each seed's success at each."""

    rho: int
    m: int
    ns: list[int] = field(default_factory=list)
    success: list[list[bool]] = field(default_factory=list)  # (len(ns), n_seeds)
    enumerate_n64: bool | None = None


def frontier(cfg: Scale, seeds: list[int], mdp_of: str = "lock") -> list[Frontier]:
    """Success (certificate / H <= eps) of :class:`BlockExplorer` with each ``rho`` on the
    deterministic lock (``mdp_of="lock"``, one lock per seed) or the open lock, over the agent grid
    until ``extra_steps`` steps past the first N whose success rate reaches ``cfg.success``."""
    L, out = cfg.lock_H, []
    for rho in cfg.rhos:
        f = Frontier(rho, math.ceil(L / rho))
        first = None
        for i, n in enumerate(agent_grid(cfg)):
            ok = []
            for s in seeds:
                mdp = (
                    combination_lock(L, 2, seed=s, deterministic=True)
                    if mdp_of == "lock"
                    else open_lock(L, 2)
                )
                ok.append(
                    certificate(mdp, run(BlockExplorer(rho), mdp, n, rho, seed=s).P_hat) / L
                    <= cfg.eps
                )
            f.ns.append(n)
            f.success.append(ok)
            if first is None and np.mean(ok) >= cfg.success:
                first = i
            if first is not None and i >= first + cfg.extra_steps:
                break
        if mdp_of == "lock":
            lock = combination_lock(L, 2, seed=seeds[0], deterministic=True)
            res = run(BlockExplorer(rho, "enumerate"), lock, 64, rho, seed=seeds[0])
            f.enumerate_n64 = bool(certificate(lock, res.P_hat) / L <= cfg.eps)
        out.append(f)
    return out


def scaling(cfg: Scale, seeds: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """``E[s, i]``: the certificate of the layerwise explorer (rho = H) on seed ``s``'s noisy lock
    with ``cfg.ns[i]`` agents per phase; ``E_null[s, i]``: the same run with the agents beyond
    ``cfg.ns[0]`` switched off (``cfg.ns[0]`` agents, fresh randomness for each ``i``), claim 1's
    negative control."""
    H, A = cfg.noisy_H, cfg.noisy_A
    E = np.empty((len(seeds), len(cfg.ns)))
    E_null = np.empty_like(E)
    for j, s in enumerate(seeds):
        mdp = noisy_lock(H, A, seed=s)
        for i, n in enumerate(cfg.ns):
            E[j, i] = certificate(mdp, run(LayerwiseExplorer(), mdp, n, H, seed=s).P_hat)
            null_seed = int(np.random.SeedSequence([s, i]).generate_state(1)[0])
            null = run(LayerwiseExplorer(), mdp, cfg.ns[0], H, seed=null_seed)
            E_null[j, i] = certificate(mdp, null.P_hat)
    return E, E_null


def equal_trajectories(cfg: Scale, seeds: list[int]) -> list[dict]:
    """Every algorithm at T = H * agents_per_layer trajectories on each seed's noisy lock."""
    H, A = cfg.noisy_H, cfg.noisy_A
    T = H * cfg.agents_per_layer
    rows = []
    for s in seeds:
        mdp = noisy_lock(H, A, seed=s)
        battery = reward_battery(H, mdp.S, A, seed=s)
        for name, (algo, n, phases) in explorers(mdp, T, H).items():
            r = run(algo, mdp, n, phases, seed=s)  # type: ignore[arg-type]
            rows.append(
                {
                    "seed": s,
                    "algorithm": name,
                    "trajectories": r.trajectories,
                    "phases": r.phases_used,
                    "E_model": certificate(mdp, r.P_hat),
                    "planning_gap_over_H": planning_gap(mdp, r.P_hat, battery) / H,
                }
            )
    return rows


def dirichlet_sanity(cfg: Scale, seeds: list[int]) -> list[dict]:
    """Layerwise vs uniform on random layered MDPs (no lock): neither should dominate."""
    H, A = cfg.noisy_H, cfg.noisy_A
    T = H * cfg.agents_per_layer
    rows = []
    for s in seeds[:3]:
        mdp = random_layered(5, A, H, seed=s)
        lw = run(LayerwiseExplorer(), mdp, T // H, H, seed=s)
        uni = run(UniformExplorer(), mdp, T, 1, seed=s)
        rows.append(
            {
                "seed": s,
                "layerwise": certificate(mdp, lw.P_hat),
                "uniform": certificate(mdp, uni.P_hat),
            }
        )
    return rows


@dataclass
class Results:
    seeds: list[int]
    E: np.ndarray
    lock: list[Frontier]
    open: list[Frontier]
    eq: list[dict]
    sanity: list[dict]
    E_null: np.ndarray | None = None  # claim 1's null: agents beyond the smallest N switched off


def measure(cfg: Scale, seed: int) -> Results:
    seeds = replicate_seeds(seed, cfg.seeds)
    E, E_null = scaling(cfg, seeds)
    return Results(
        seeds=seeds,
        E=E,
        E_null=E_null,
        lock=frontier(cfg, seeds, "lock"),
        open=frontier(cfg, seeds, "open"),
        eq=equal_trajectories(cfg, seeds),
        sanity=dirichlet_sanity(cfg, seeds),
    )


def closed_form(cfg: Scale, rho: int, n: int) -> float:
    return lock_success_probability(cfg.lock_H, 2, rho, n)


def closed_form_n_min(cfg: Scale, rho: int) -> int:
    return minimal_agents(cfg.lock_H, 2, rho, cfg.success)
