"""Cooperative reward-free exploration of tabular MDPs in phases: how many agents few phases need.

Tabular MDPs with batched rollouts and the hard instances (combination locks), the phased protocol,
the layer-by-layer H-phase explorer and its rho-phase generalisation, RF-UCRL, RF-Express and
uniform baselines, exact planning with the simulation-lemma certificate, and the lock's lower bound in
closed form.
"""

from .algorithms import (
    RFUCRL,
    BlockExplorer,
    LayerwiseExplorer,
    OracleExplorer,
    UniformExplorer,
    reach_policies,
)
from .env import TabularMDPEnv
from .lower_bound import block_sizes, lock_success_probability, minimal_agents
from .mdp import (
    TabularMDP,
    Trajectories,
    combination_lock,
    double_chain,
    noisy_lock,
    random_layered,
)
from .planning import (
    Plan,
    certificate,
    planning_gap,
    policy_value,
    reward_battery,
    value_iteration,
)
from .protocol import Explorer, History, Run, empirical_model, run
from .reward_free import RFExpress, rf_beta, rf_error_bound

__all__ = [
    "RFUCRL",
    "BlockExplorer",
    "Explorer",
    "History",
    "LayerwiseExplorer",
    "OracleExplorer",
    "Plan",
    "RFExpress",
    "Run",
    "TabularMDP",
    "TabularMDPEnv",
    "Trajectories",
    "UniformExplorer",
    "block_sizes",
    "certificate",
    "combination_lock",
    "double_chain",
    "empirical_model",
    "lock_success_probability",
    "minimal_agents",
    "noisy_lock",
    "planning_gap",
    "policy_value",
    "random_layered",
    "reach_policies",
    "reward_battery",
    "rf_beta",
    "rf_error_bound",
    "run",
    "value_iteration",
]
