"""The Laplacian Keyboard: Laplacian eigenvectors as a reward basis, a behaviour library that holds an
optimal policy for every reward in their span, and a meta-policy that stitches those behaviours to
solve rewards outside it.

Environments register on import as ``laplacian_keyboard/FourRooms-v0`` and friends.
"""

from laplacian_keyboard.agents import (
    LaplacianKeyboard,
    LearningCurve,
    SMDPQLearning,
    StationaryPolicy,
    evaluate,
    key_combinations,
)
from laplacian_keyboard.allo import (
    ALLOConfig,
    LaplacianEncoder,
    eigenvector_similarity,
    subspace_similarity,
    train_allo,
)
from laplacian_keyboard.baselines import (
    DQN,
    cumulant_library,
    eigenoptions,
    gpi_over_policies,
    q_learning,
)
from laplacian_keyboard.continuous import (
    USFA,
    PPOKeyboard,
    Transitions,
    discretise,
    sample_transitions,
    train_usfa,
    usfa_controller,
)
from laplacian_keyboard.control import (
    TD3,
    ContinuousUSFA,
    ControlData,
    FixedTargetReacher,
    KeyboardTD3,
    TD3Config,
    collect_exploration,
    laplacian_features,
    random_features,
    train_usfa_td3,
    usfa_policy,
    zero_shot_w,
)
from laplacian_keyboard.envs import (
    LAYOUTS,
    GridWorld,
    PointMaze,
    enumerate_transitions,
    register_envs,
    transition_model,
)
from laplacian_keyboard.keyboard import (
    BehaviourLibrary,
    Behaviours,
    Projection,
    build_library,
    project_reward,
    value_gap,
    zero_shot_bounds,
)
from laplacian_keyboard.laplacian import (
    laplacian_eigenvectors,
    laplacian_matrix,
    sr_eigenvectors,
    state_graph,
)
from laplacian_keyboard.mdp import (
    gpi_policy,
    optimal_policy,
    policy_evaluation,
    successor_features,
    value_iteration,
)

register_envs()

__all__ = [
    "DQN",
    "LAYOUTS",
    "TD3",
    "USFA",
    "ALLOConfig",
    "BehaviourLibrary",
    "Behaviours",
    "ContinuousUSFA",
    "ControlData",
    "FixedTargetReacher",
    "GridWorld",
    "KeyboardTD3",
    "LaplacianEncoder",
    "LaplacianKeyboard",
    "LearningCurve",
    "PPOKeyboard",
    "PointMaze",
    "Projection",
    "SMDPQLearning",
    "StationaryPolicy",
    "TD3Config",
    "Transitions",
    "build_library",
    "collect_exploration",
    "cumulant_library",
    "discretise",
    "eigenoptions",
    "eigenvector_similarity",
    "enumerate_transitions",
    "evaluate",
    "gpi_over_policies",
    "gpi_policy",
    "key_combinations",
    "laplacian_eigenvectors",
    "laplacian_features",
    "laplacian_matrix",
    "optimal_policy",
    "policy_evaluation",
    "project_reward",
    "q_learning",
    "random_features",
    "register_envs",
    "sample_transitions",
    "sr_eigenvectors",
    "state_graph",
    "subspace_similarity",
    "successor_features",
    "train_allo",
    "train_usfa",
    "train_usfa_td3",
    "transition_model",
    "usfa_controller",
    "usfa_policy",
    "value_gap",
    "value_iteration",
    "zero_shot_bounds",
    "zero_shot_w",
]
