"""Why LK does not learn on the torque-cost Reacher (the limitation table; the claim itself runs
with control weight 0, a state-based reward), measured.

    OMP_NUM_THREADS=1 python packages/laplacian_keyboard/benchmarks/diagnose_control.py [seed]

One seed of the quick pipeline's pieces (20 000 random-policy transitions, ALLO d = 8 after 2 000
steps, the offline USFA after 3 000 TD3 steps, 64 units), and for each policy the episode return
split into Reacher's two reward terms (``reward_dist`` = -|fingertip - target|, ``reward_ctrl`` =
-|a|^2, both per step):

1. the reference policies: uniform random actions, zero torque;
2. how much of the task's reward the basis can express: R^2 of the least-squares fit of the
   rewards on ``phi(s')`` (the zero-shot projection) and on ``phi(s')`` with the control cost
   removed (the distance term alone);
3. the USFA's behaviours: the zero-shot policy and the policies for the first basis directions
   ``e_j``, with the share of their action components within 5% of the torque limit.

Runs in about 15 s on one core.
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from laplacian_keyboard.allo import ALLOConfig
from laplacian_keyboard.control import (
    FixedTargetReacher,
    TD3Config,
    collect_exploration,
    laplacian_features,
    train_usfa_td3,
    usfa_policy,
    zero_shot_w,
)
from paper_common import markdown_table


def _split(policy, episodes: int = 5) -> dict[str, float]:
    """Mean per-episode return and its distance / control parts (evaluation seeds 10 000 on)."""
    env = FixedTargetReacher()
    dist = ctrl = 0.0
    for ep in range(episodes):
        obs, _ = env.reset(seed=10_000 + ep)
        done = False
        while not done:
            obs, _, term, trunc, info = env.step(policy(obs))
            dist += float(info["reward_dist"])
            ctrl += float(info["reward_ctrl"])
            done = term or trunc
    return {
        "return": (dist + ctrl) / episodes,
        "distance part": dist / episodes,
        "control part": ctrl / episodes,
    }


def _r2(x: np.ndarray, y: np.ndarray) -> float:
    w, *_ = np.linalg.lstsq(x, y, rcond=None)
    return float(1.0 - np.var(y - x @ w) / np.var(y))


def main(seed: int = 0) -> None:
    torch.set_num_threads(1)
    env = FixedTargetReacher()
    max_a = env.action_space.high
    rng = np.random.default_rng(seed)
    rows = [
        {"policy": "uniform random", **_split(lambda o: rng.uniform(-max_a, max_a))},
        {"policy": "zero torque", **_split(lambda o: np.zeros_like(max_a))},
    ]
    data = collect_exploration(FixedTargetReacher(), 20_000, seed=seed)
    basis = laplacian_features(data, 8, ALLOConfig(d=9, steps=2000, hidden=64), seed=seed)(8)
    phi = basis.embed(data.next_obs)
    ctrl = -(data.actions.astype(float) ** 2).sum(1)  # Reacher's reward_ctrl (weight 1)
    ones = np.ones((len(phi), 1))
    print(
        f"R^2 of the task's reward on [1, phi(s')]: {_r2(np.hstack([ones, phi]), data.rewards):.3f}"
    )
    print(
        "R^2 of its distance term alone on [1, phi(s')]: "
        f"{_r2(np.hstack([ones, phi]), data.rewards - ctrl):.3f}"
    )
    print(
        f"control term's share of the reward's variance: {np.var(ctrl) / np.var(data.rewards):.3f}"
    )
    usfa = train_usfa_td3(data, basis, 8, max_a, 3000, TD3Config(hidden=64), seed=seed)
    ws = {"zero-shot w": zero_shot_w(data, basis)}
    ws |= {f"e_{j}": np.eye(8)[j] for j in range(3)}
    for name, w in ws.items():
        pol = usfa_policy(usfa, w, max_a)
        acts = np.array([pol(o) for o in data.obs[:2000]])
        saturated = float((np.abs(acts) > 0.95 * max_a).mean())
        rows.append({"policy": f"USFA, {name}", **_split(pol), "saturated": saturated})
    print(markdown_table(rows))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
