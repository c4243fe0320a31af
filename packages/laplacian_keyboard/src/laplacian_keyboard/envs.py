"""Gymnasium environments: tabular gridworlds with an exact transition model, a 2-D point-mass maze,
and adapters that enumerate the transition graph of other discrete environments.

Gridworld conventions (used throughout the package):

* states are the free cells in row-major order; ``observation_space = Discrete(n_states)``;
* actions ``0..3`` are up, right, down, left; bumping into a wall leaves the agent in place;
* the reward is paid on *arrival*: ``R(s, a, s') = reward[s']``;
* ``transition_matrix()`` returns ``P`` of shape ``(n_states, 4, n_states)``, rows summing to 1.

Layout characters: ``#`` wall, ``.`` free, ``S`` start, ``G`` goal (reward +1), ``L`` lava
(reward -1), and ``^ > v <`` one-way cells that push the agent one step in the arrow's direction
whatever it chooses (a directed transition graph).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = [
    "LAYOUTS",
    "GridWorld",
    "PointMaze",
    "enumerate_transitions",
    "register_envs",
    "transition_model",
]

MOVES = np.array([[-1, 0], [0, 1], [1, 0], [0, -1]])  # up, right, down, left
ARROWS = {"^": 0, ">": 1, "v": 2, "<": 3}

LAYOUTS: dict[str, str] = {
    "open_room": """
#########
#S......#
#.......#
#.......#
#.......#
#.......#
#......G#
#########
""",
    # Sutton, Precup & Singh (1999) four rooms, 104 free cells
    "four_rooms": """
#############
#S....#.....#
#.....#.....#
#...........#
#.....#.....#
#.....#.....#
##.####.....#
#.....###.###
#.....#.....#
#.....#.....#
#...........#
#.....#....G#
#############
""",
    "maze": """
###########
#S..#.....#
#.#.#.###.#
#.#...#...#
#.#####.###
#...#...#.#
###.#.#.#.#
#...#.#...#
#.###.###.#
#.....#..G#
###########
""",
    # two rooms joined by a one-way corridor (east only) and an open door further south
    "one_way": """
###########
#S...#....#
#....#....#
#....>>...#
#....#....#
#.........#
#....#...G#
###########
""",
}


def _parse(layout: str) -> np.ndarray:
    rows = [r for r in layout.strip("\n").splitlines() if r.strip()]
    width = max(len(r) for r in rows)
    grid = np.array([list(r.ljust(width, "#")) for r in rows])
    allowed = set("#.SGL") | set(ARROWS)
    bad = set(np.unique(grid)) - allowed
    if bad:
        raise ValueError(
            f"layout has unknown characters {sorted(bad)}; allowed: {''.join(sorted(allowed))}"
        )
    return grid


class GridWorld(gym.Env):
    """A tabular gridworld with an exact transition model.

    Args:
        layout: a name in :data:`LAYOUTS` or a layout string.
        slip: probability that the chosen action is replaced by a uniformly random one.
        reward: ``(n_states,)`` arrival rewards; default from the layout (``G`` +1, ``L`` -1).
        start: start state index, ``"random"`` (uniform over free cells) or ``None`` (the ``S`` cell,
            else state 0).
        terminal: optional ``(n_states,)`` bool mask; arriving there ends the episode.
        render_mode: ``None`` or ``"rgb_array"``.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 8}

    def __init__(
        self,
        layout: str = "four_rooms",
        slip: float = 0.0,
        reward: Sequence[float] | np.ndarray | None = None,
        start: int | str | None = None,
        terminal: Sequence[bool] | np.ndarray | None = None,
        render_mode: str | None = None,
    ) -> None:
        if not 0.0 <= slip <= 1.0:
            raise ValueError(f"slip must be in [0, 1]; got {slip}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array'; got {render_mode!r}")
        self.layout_name = layout if layout in LAYOUTS else "custom"
        self.grid = _parse(LAYOUTS.get(layout, layout))
        free = self.grid != "#"
        self.cells = np.argwhere(free)  # (n_states, 2) row, col
        if len(self.cells) < 2:
            raise ValueError("layout needs at least two free cells")
        self.index = -np.ones(self.grid.shape, dtype=int)
        self.index[free] = np.arange(len(self.cells))
        self.n_states = len(self.cells)
        self.slip = float(slip)
        chars = self.grid[free]
        if reward is None:
            reward = np.where(chars == "G", 1.0, 0.0) - np.where(chars == "L", 1.0, 0.0)
        self.reward = self._state_array(reward, "reward", float)
        self.terminal = (
            np.zeros(self.n_states, bool)
            if terminal is None
            else self._state_array(terminal, "terminal", bool)
        )
        if start is None:
            s = np.flatnonzero(chars == "S")
            start = int(s[0]) if s.size else 0
        if start != "random" and not (
            isinstance(start, int | np.integer) and 0 <= start < self.n_states
        ):
            raise ValueError(
                f"start must be a state index in [0, {self.n_states}) or 'random'; got {start!r}"
            )
        self.start = start
        self.render_mode = render_mode
        self.observation_space = spaces.Discrete(self.n_states)
        self.action_space = spaces.Discrete(4)
        self._P = self._build_model()
        self._cdf = np.cumsum(self._P, axis=2)
        self.state = 0

    def _state_array(self, x: Any, name: str, dtype: type) -> np.ndarray:
        arr = np.asarray(x, dtype=dtype)
        if arr.shape != (self.n_states,):
            raise ValueError(
                f"{name} must have shape ({self.n_states},) (one value per free cell); got {arr.shape}"
            )
        return arr

    def _deterministic_next(self) -> np.ndarray:
        """``(n_states, 4)`` successor of each state under each action without slip."""
        pos = self.cells[:, None, :] + MOVES[None, :, :]  # (S, 4, 2)
        h, w = self.grid.shape
        inside = (pos[..., 0] >= 0) & (pos[..., 0] < h) & (pos[..., 1] >= 0) & (pos[..., 1] < w)
        pos = np.where(inside[..., None], pos, self.cells[:, None, :])
        nxt = self.index[pos[..., 0], pos[..., 1]]
        nxt = np.where(nxt < 0, np.arange(self.n_states)[:, None], nxt)
        chars = self.grid[self.cells[:, 0], self.cells[:, 1]]
        for ch, a in ARROWS.items():  # one-way cells: every action follows the arrow
            rows = np.flatnonzero(chars == ch)
            nxt[rows] = nxt[rows, a][:, None]
        return nxt

    def _build_model(self) -> np.ndarray:
        nxt = self._deterministic_next()
        S = self.n_states
        det = np.zeros((S, 4, S))
        np.put_along_axis(det, nxt[..., None], 1.0, axis=2)
        return (1.0 - self.slip) * det + self.slip * det.mean(axis=1, keepdims=True)

    def transition_matrix(self) -> np.ndarray:
        """``P[s, a, s']``, shape ``(n_states, 4, n_states)`` (a copy)."""
        return self._P.copy()

    def coords(self, states: np.ndarray | int | None = None) -> np.ndarray:
        """``(..., 2)`` cell coordinates (row, col) scaled to [0, 1], a feature for deep learners."""
        cells = self.cells if states is None else self.cells[np.asarray(states)]
        return cells / np.maximum(np.array(self.grid.shape) - 1, 1)

    def to_grid(self, values: np.ndarray) -> np.ndarray:
        """Place per-state ``values`` on the grid (walls NaN), for plotting."""
        out = np.full(self.grid.shape, np.nan)
        out[self.cells[:, 0], self.cells[:, 1]] = values
        return out

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[int, dict]:
        super().reset(seed=seed)
        start = (options or {}).get("start", self.start)
        if start == "random":
            self.state = int(self.np_random.integers(self.n_states))
        else:
            self.state = int(start)
        return self.state, {"position": tuple(self.cells[self.state])}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict]:
        if not self.action_space.contains(action):
            raise ValueError(f"action must be in 0..3; got {action!r}")
        nxt = int(
            np.searchsorted(
                self._cdf[self.state, int(action)], self.np_random.random(), side="right"
            )
        )
        self.state = min(nxt, self.n_states - 1)
        return (
            self.state,
            float(self.reward[self.state]),
            bool(self.terminal[self.state]),
            False,
            {"position": tuple(self.cells[self.state])},
        )

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        colours = {
            "#": (40, 40, 48),
            ".": (245, 245, 245),
            "S": (245, 245, 245),
            "G": (0, 158, 115),
            "L": (213, 94, 0),
        }
        img = np.array(
            [[colours.get(c, (200, 200, 200)) for c in row] for row in self.grid], dtype=np.uint8
        )
        r, c = self.cells[self.state]
        img[r, c] = (0, 114, 178)
        return np.kron(img, np.ones((16, 16, 1), dtype=np.uint8))


class PointMaze(gym.Env):
    """A point mass in the unit square with rectangular walls; reach the goal disc.

    Observation ``Box(0, 1, (2,))`` (x, y); actions ``0..3`` move ``step`` up/right/down/left with
    Gaussian noise ``noise``; a move that would enter a wall or leave the square is cancelled.
    Reward 1 on reaching the goal (episode ends), 0 otherwise.

    Args:
        walls: ``(n, 4)`` rectangles ``(x0, y0, x1, y1)``; default two rooms joined by a gap.
        goal: goal centre; ``goal_radius`` its radius.
        start: start position (``None``: ``(0.1, 0.1)``), or ``"random"`` (uniform free position).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 10}
    DEFAULT_WALLS = ((0.45, 0.0, 0.55, 0.7),)

    def __init__(
        self,
        walls: Sequence[Sequence[float]] | None = None,
        goal: Sequence[float] = (0.9, 0.9),
        goal_radius: float = 0.08,
        start: Sequence[float] | str | None = None,
        step: float = 0.05,
        noise: float = 0.01,
        render_mode: str | None = None,
    ) -> None:
        self.walls = np.asarray(
            self.DEFAULT_WALLS if walls is None else walls, dtype=float
        ).reshape(-1, 4)
        if np.any(self.walls[:, 2] <= self.walls[:, 0]) or np.any(
            self.walls[:, 3] <= self.walls[:, 1]
        ):
            raise ValueError("each wall must be (x0, y0, x1, y1) with x1 > x0 and y1 > y0")
        if step <= 0 or noise < 0 or goal_radius <= 0:
            raise ValueError(
                f"step and goal_radius must be > 0 and noise >= 0; got {step}, {goal_radius}, {noise}"
            )
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array'; got {render_mode!r}")
        self.goal = np.asarray(goal, dtype=float)
        self.goal_radius, self.step_size, self.noise = float(goal_radius), float(step), float(noise)
        self.start = (0.1, 0.1) if start is None else start
        if self.start != "random" and self.blocked(np.asarray(self.start, float)[None])[0]:
            raise ValueError(f"start {self.start} is inside a wall or outside the unit square")
        self.render_mode = render_mode
        self.observation_space = spaces.Box(0.0, 1.0, (2,), dtype=np.float32)
        self.action_space = spaces.Discrete(4)
        self._moves = np.array([[0, 1], [1, 0], [0, -1], [-1, 0]], dtype=float) * self.step_size
        self.pos = np.zeros(2)

    def blocked(self, xy: np.ndarray) -> np.ndarray:
        """``(n,)`` bool: positions ``xy (n, 2)`` inside a wall or outside the unit square."""
        xy = np.atleast_2d(xy)
        outside = np.any((xy < 0) | (xy > 1), axis=1)
        w = self.walls
        inside = (
            (xy[:, None, 0] >= w[None, :, 0])
            & (xy[:, None, 0] <= w[None, :, 2])
            & (xy[:, None, 1] >= w[None, :, 1])
            & (xy[:, None, 1] <= w[None, :, 3])
        )
        return outside | inside.any(axis=1)

    def sample_free(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``(n, 2)`` positions drawn uniformly from the free space (rejection sampling)."""
        out = np.empty((0, 2))
        while len(out) < n:
            xy = rng.random((2 * n + 8, 2))
            out = np.concatenate([out, xy[~self.blocked(xy)]])
        return out[:n]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        start = (options or {}).get("start", self.start)
        self.pos = (
            self.sample_free(1, self.np_random)[0]
            if start == "random"
            else np.asarray(start, float).copy()
        )
        return self.pos.astype(np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if not self.action_space.contains(action):
            raise ValueError(f"action must be in 0..3; got {action!r}")
        new = self.pos + self._moves[int(action)] + self.noise * self.np_random.standard_normal(2)
        mid = 0.5 * (self.pos + new)
        if not self.blocked(np.stack([mid, new])).any():
            self.pos = new
        reached = bool(np.linalg.norm(self.pos - self.goal) <= self.goal_radius)
        return self.pos.astype(np.float32), float(reached), reached, False, {}

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        n = 128
        g = (np.stack(np.meshgrid(np.arange(n), np.arange(n)[::-1]), -1).reshape(-1, 2) + 0.5) / n
        img = np.full((n * n, 3), 245, np.uint8)
        img[self.blocked(g)] = (40, 40, 48)
        img[np.linalg.norm(g - self.goal, axis=1) <= self.goal_radius] = (0, 158, 115)
        img[np.linalg.norm(g - self.pos, axis=1) <= 0.03] = (0, 114, 178)
        return img.reshape(n, n, 3)


def transition_model(env: gym.Env) -> np.ndarray:
    """``P[s, a, s']`` of a discrete environment.

    Uses ``transition_matrix()`` when the environment has one (:class:`GridWorld`), else the
    ``P[s][a] = [(prob, next, reward, done), ...]`` table of Gymnasium's toy-text environments
    (FrozenLake, CliffWalking, Taxi). For anything else use :func:`enumerate_transitions`.
    """
    base = env.unwrapped
    if hasattr(base, "transition_matrix"):
        return base.transition_matrix()
    table = getattr(base, "P", None)
    if isinstance(table, dict):
        S, A = base.observation_space.n, base.action_space.n
        P = np.zeros((S, A, S))
        for s, row in table.items():
            for a, outcomes in row.items():
                for prob, nxt, _reward, _done in outcomes:
                    P[s, a, nxt] += prob
        return P
    raise TypeError(
        f"{type(base).__name__} exposes no transition model; use enumerate_transitions(env, key=...) "
        "to build one by search"
    )


def enumerate_transitions(
    env: gym.Env,
    key: Callable[[gym.Env], Hashable],
    n_samples: int = 1,
    max_states: int = 100_000,
    seed: int = 0,
) -> tuple[np.ndarray, list[Hashable]]:
    """Build ``P`` by breadth-first search over snapshots of any discrete-action environment.

    Works for MiniGrid-style environments whose full state can be copied with ``copy.deepcopy`` and
    named by ``key(env.unwrapped)`` (for MiniGrid: ``lambda e: (*e.agent_pos, e.agent_dir)``).
    Each (state, action) is stepped ``n_samples`` times from a copy (1 is exact for deterministic
    dynamics; more gives an empirical estimate). Terminated transitions are treated as self-loops.

    Returns:
        ``P`` of shape ``(n_states, n_actions, n_states)`` and the state keys in index order.
    """
    if not isinstance(env.action_space, spaces.Discrete):
        raise TypeError(
            f"enumerate_transitions needs a Discrete action space; got {env.action_space}"
        )
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1; got {n_samples}")
    env.reset(seed=seed)
    root = copy.deepcopy(env.unwrapped)
    keys: list[Hashable] = [key(root)]
    index = {keys[0]: 0}
    snapshots = [root]
    edges: list[tuple[int, int, int]] = []
    n_actions = int(env.action_space.n)
    i = 0
    while i < len(snapshots):
        for a in range(n_actions):
            for _ in range(n_samples):
                sim = copy.deepcopy(snapshots[i])
                _, _, terminated, _, _ = sim.step(a)
                k = key(sim)
                if terminated:
                    k = keys[i]
                if k not in index:
                    if len(keys) >= max_states:
                        raise ValueError(
                            f"more than max_states={max_states} states reachable; raise max_states"
                        )
                    index[k] = len(keys)
                    keys.append(k)
                    snapshots.append(sim)
                edges.append((i, a, index[k]))
        i += 1
    P = np.zeros((len(keys), n_actions, len(keys)))
    e = np.array(edges)
    np.add.at(P, (e[:, 0], e[:, 1], e[:, 2]), 1.0 / n_samples)
    return P, keys


def register_envs() -> list[str]:
    """Register the package's environments with Gymnasium (idempotent); returns their ids."""
    specs = {
        "laplacian_keyboard/OpenRoom-v0": {"layout": "open_room"},
        "laplacian_keyboard/FourRooms-v0": {"layout": "four_rooms"},
        "laplacian_keyboard/Maze-v0": {"layout": "maze"},
        "laplacian_keyboard/OneWaySlippery-v0": {"layout": "one_way", "slip": 0.1},
    }
    ids = []
    for env_id, kwargs in specs.items():
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=GridWorld, kwargs=kwargs, max_episode_steps=100)
        ids.append(env_id)
    if "laplacian_keyboard/PointMaze-v0" not in gym.registry:
        gym.register(
            "laplacian_keyboard/PointMaze-v0", entry_point=PointMaze, max_episode_steps=200
        )
    ids.append("laplacian_keyboard/PointMaze-v0")
    return ids
