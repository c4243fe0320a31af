"""A Gymnasium view of one agent in a ``TabularMDP`` (for code that expects ``reset`` / ``step``).

Observation: ``h * S + s`` in ``Discrete((H + 1) * S)`` (the step is part of the state because the
dynamics are time-inhomogeneous). The reward is 0 (reward-free) unless a reward array
``(H, S, A)`` is given. The episode terminates after ``H`` steps.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from .mdp import TabularMDP, _categorical


class TabularMDPEnv(gym.Env):
    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, mdp: TabularMDP, reward: np.ndarray | None = None) -> None:
        self.mdp = mdp
        if reward is not None and np.shape(reward) != (mdp.H, mdp.S, mdp.A):
            raise ValueError(f"reward must be (H, S, A) = {(mdp.H, mdp.S, mdp.A)}")
        self.reward = None if reward is None else np.asarray(reward, dtype=float)
        self.observation_space = gym.spaces.Discrete((mdp.H + 1) * mdp.S)
        self.action_space = gym.spaces.Discrete(mdp.A)
        self._h, self._s = 0, 0

    def _obs(self) -> int:
        return self._h * self.mdp.S + self._s

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):  # type: ignore[override]
        super().reset(seed=seed)
        self._h = 0
        self._s = int(_categorical(np.cumsum(self.mdp.init)[None], self.np_random)[0])
        return self._obs(), {"step": 0, "state": self._s}

    def step(self, action: int):  # type: ignore[override]
        if self._h >= self.mdp.H:
            raise RuntimeError("episode is over; call reset()")
        a = int(action)
        if not self.action_space.contains(a):
            raise ValueError(f"action must be in [0, {self.mdp.A})")
        r = 0.0 if self.reward is None else float(self.reward[self._h, self._s, a])
        cum = np.cumsum(self.mdp.P[self._h, self._s, a])[None]
        self._s = int(_categorical(cum, self.np_random)[0])
        self._h += 1
        return self._obs(), r, self._h == self.mdp.H, False, {"step": self._h, "state": self._s}
