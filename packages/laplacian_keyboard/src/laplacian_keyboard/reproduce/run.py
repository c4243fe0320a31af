"""The measurements: tabular tasks (exact libraries, learners on out-of-span rewards, bounds) and
the continuous-control pipeline (TD3, LK on the ALLO basis, LK on a random basis, a basis sweep)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch

from laplacian_keyboard.agents import (
    LaplacianKeyboard,
    LearningCurve,
    SMDPQLearning,
    StationaryPolicy,
    evaluate,
)
from laplacian_keyboard.allo import ALLOConfig
from laplacian_keyboard.baselines import (
    DQN,
    cumulant_library,
    eigenoptions,
    gpi_over_policies,
    q_learning,
)
from laplacian_keyboard.control import (
    TD3,
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
from laplacian_keyboard.envs import GridWorld
from laplacian_keyboard.keyboard import Behaviours, build_library, project_reward, zero_shot_bounds
from laplacian_keyboard.laplacian import laplacian_eigenvectors
from laplacian_keyboard.mdp import optimal_policy, policy_evaluation
from laplacian_keyboard.reproduce.claims import EVAL_EVERY
from laplacian_keyboard.reproduce.scales import (
    FAMILIES,
    GAMMA,
    HORIZON,
    MIN_OPT,
    THRESHOLD,
    D,
    K,
    Scale,
)
from paper_common.experiment import replicate_seeds
from paper_common.stats import Bounds, censored_median


def steps_median(steps: list[float] | np.ndarray, budget: int) -> Bounds:
    """Median over tasks of the steps to the target return; a run that never reached it within
    ``budget`` steps (``inf``, or a value beyond a common ``budget`` shorter than its own) is
    censored there: only known to need more than ``budget``."""
    s = np.asarray(steps, dtype=float)
    cens = s > budget
    return censored_median(np.where(cens, budget, s), cens)


def _task(
    base: GridWorld, P: np.ndarray, family: str, rng: np.random.Generator, tries: int = 100
) -> tuple[np.ndarray, np.ndarray]:
    """A reward outside the span: a goal (+1, terminal), the goal plus 8 lava cells (-1), or a goal
    that does not end the episode. Draws whose optimal return from the start is below ``MIN_OPT``
    (lava on every route, a goal too far for the time limit) are redrawn, so returns can be
    normalised by the optimum."""
    S = base.n_states
    choices = np.setdiff1d(np.arange(S), [base.start])
    for _ in range(tries):
        goal = int(rng.choice(choices))
        r, terminal = np.zeros(S), np.zeros(S, bool)
        r[goal] = 1.0
        if family != "goal_continuing":
            terminal[goal] = True
        if family == "lava":
            r[rng.choice(np.setdiff1d(choices, [goal]), 8, replace=False)] = -1.0
        if optimal_policy(P, r, GAMMA, terminal)[1][base.start] >= MIN_OPT:
            return r, terminal
    raise RuntimeError(f"no {family} task with an optimal return >= {MIN_OPT} in {tries} draws")


def _make(layout: str, slip: float, r: np.ndarray, terminal: np.ndarray) -> gym.Env:
    return gym.wrappers.TimeLimit(
        GridWorld(layout, slip=slip, reward=r, terminal=terminal), HORIZON
    )


def _norm(curve: LearningCurve, opt: float) -> LearningCurve:
    if not opt >= MIN_OPT:
        raise ValueError(f"cannot normalise by an optimal return {opt} < MIN_OPT = {MIN_OPT}")
    return LearningCurve(curve.steps, curve.returns / opt, curve.label)


def measure_tabular(cfg: Scale, seed: int) -> dict:
    """Every gridworld of ``cfg``: the libraries, the in-span gaps, the out-of-span learners and
    the bounds, as rows and curves (keys: inspan_gaps, gpi_gaps, eo_gaps, lib_rows, task_rows, bound_rows, ablation_rows, skipped, curves, eig_pictures)."""
    inspan_gaps, gpi_gaps, eo_gaps = [], [], []  # eo: the in-span claim's negative control
    lib_rows, task_rows, bound_rows, ablation_rows = [], [], [], []
    skipped: list[str] = []  # tasks whose measured optimum is below MIN_OPT (not normalisable)
    curves: dict[str, dict[str, list[np.ndarray]]] = {}
    eig_pictures = None
    for li, (layout, slip) in enumerate(cfg.layouts):
        base = GridWorld(layout, slip=slip)
        P, S, s0 = base.transition_matrix(), base.n_states, base.start
        n_eval = 10 if slip > 0 else 1
        t0 = time.perf_counter()
        lk = LaplacianKeyboard(
            d=D, gamma=GAMMA, k=K, max_policies=cfg.max_policies, seed=seed
        ).pretrain(base, P)
        lib = lk.library
        lib_time = time.perf_counter() - t0
        if eig_pictures is None:
            eig_pictures = (base, laplacian_eigenvectors(P, 4, drop_first=True))
        sizes = {
            f"size d={dd}": len(
                build_library(P, lk.phi[:, :dd], GAMMA, mu=lib.mu, max_policies=cfg.max_policies)
            )
            for dd in range(1, D)
        }
        lib_rows.append(
            {
                "env": layout,
                "states": S,
                **sizes,
                f"size d={D}": len(lib),
                "complete": lib.complete,
                "queries": lib.n_queries,
                "seconds": lib_time,
            }
        )
        eo = eigenoptions(P, lk.phi, GAMMA)
        ok = cumulant_library(P, np.eye(S), GAMMA)
        ok_keys = Behaviours.keyboard(ok, np.eye(S))

        # 1. rewards in the span: the best library member is optimal (exact evaluation)
        rng = np.random.default_rng([seed, S])
        for _ in range(cfg.n_inspan * cfg.seeds):
            w = rng.standard_normal(D)
            r = lk.phi @ w
            V_star = optimal_policy(P, r, GAMMA)[1][s0]
            best = lib.policies[lib.best(w)]
            inspan_gaps.append(V_star - policy_evaluation(P, r, best, GAMMA)[s0])
            gpi_gaps.append(V_star - policy_evaluation(P, r, lib.gpi(w), GAMMA)[s0])
            eo_pi = gpi_over_policies(P, r, eo.actions, GAMMA)  # negative control
            eo_gaps.append(V_star - policy_evaluation(P, r, eo_pi, GAMMA)[s0])

        # 2-4. rewards outside the span
        for s in range(cfg.seeds):
            trng = np.random.default_rng([seed, s, S])
            for fi, family in enumerate(FAMILIES):
                # each task its own seed (learners and episodes), shared by the arms it compares
                ts = int(np.random.SeedSequence([seed, li, s, fi]).generate_state(1)[0])
                r, terminal = _task(base, P, family, trng)
                mk = functools.partial(_make, layout, slip, r, terminal)
                opt = evaluate(
                    mk(), StationaryPolicy(optimal_policy(P, r, GAMMA, terminal)[0]), GAMMA, n_eval
                )
                # the DP optimum passed MIN_OPT; the episodes' (time limit, slip) may not
                if not opt >= MIN_OPT:
                    skipped.append(f"{layout}/{family}/seed {s} (optimum {opt:.3g})")
                    continue
                proj = project_reward(lk.phi, r)
                zs = evaluate(mk(), StationaryPolicy(lk.zero_shot(r)), GAMMA, n_eval)
                gpi = evaluate(
                    mk(),
                    StationaryPolicy(gpi_over_policies(P, r, lib.policies, GAMMA, terminal)),
                    GAMMA,
                    n_eval,
                )
                eo_gpi = evaluate(
                    mk(),
                    StationaryPolicy(gpi_over_policies(P, r, eo.actions, GAMMA, terminal)),
                    GAMMA,
                    n_eval,
                )
                kw = {"eval_every": EVAL_EVERY, "eval_episodes": n_eval, "seed": ts}
                learners = {
                    "LK": lk.meta_learner(seed=ts),
                    "Q-learning": q_learning(S, 4, gamma=GAMMA, seed=ts),
                    "eigenoptions+Q": SMDPQLearning(
                        eo + Behaviours.primitives(S, 4), HORIZON, gamma=GAMMA, seed=ts
                    ),
                    "OK one-hot": SMDPQLearning(ok_keys, K, gamma=GAMMA, seed=ts),
                }
                if family == "goal" and layout in cfg.dqn_layouts:
                    learners["DQN"] = DQN(
                        lambda o, b=base: b.coords(int(o)),
                        2,
                        4,
                        gamma=GAMMA,
                        train_every=4,
                        seed=ts,
                    )
                row = {
                    "env": layout,
                    "family": family,
                    "seed": s,
                    "optimal": opt,
                    "zero-shot": zs / opt,
                    "GPI(library)": gpi / opt,
                    "eigenoptions+GPI": eo_gpi / opt,
                    "proj. rel. error": proj.relative_error,
                }
                for name, learner in learners.items():
                    budget = cfg.dqn_steps if name == "DQN" else cfg.steps
                    c = _norm(learner.learn(mk(), budget, **kw), opt)
                    row[f"{name} final"] = float(c.returns[-1])
                    row[f"{name} steps"] = c.steps_to(THRESHOLD)
                    curves.setdefault(f"{layout}/{family}", {}).setdefault(name, []).append(
                        c.returns
                    )
                if layout in cfg.ablation_layouts and family == "goal":
                    for keys, k in (("combinations", 1), ("library", K), ("library", 1)):
                        var = LaplacianKeyboard(d=D, gamma=GAMMA, k=k, keys=keys, seed=ts)
                        var.library, var.phi = lib, lk.phi
                        c = _norm(var.meta_learner(seed=ts).learn(mk(), cfg.steps, **kw), opt)
                        ablation_rows.append(
                            {
                                "env": layout,
                                "seed": s,
                                "keys": keys,
                                "k": k,
                                "final": float(c.returns[-1]),
                                "steps to 80%": c.steps_to(THRESHOLD),
                            }
                        )
                task_rows.append(row)
                # the bound compares policies on the library's own (continuing) dynamics
                if family == "goal_continuing" or family == "lava":
                    r_c = r
                    b = zero_shot_bounds(P, r_c, proj.reward, GAMMA)
                    pi_zs = lk.zero_shot(r_c)
                    gap = (
                        optimal_policy(P, r_c, GAMMA)[1][s0]
                        - policy_evaluation(P, r_c, pi_zs, GAMMA)[s0]
                    )
                    bound_rows.append(
                        {
                            "env": layout,
                            "family": family + " (continuing)",
                            "seed": s,
                            "gap": gap,
                            **b,
                        }
                    )

    return {
        "inspan_gaps": inspan_gaps,
        "gpi_gaps": gpi_gaps,
        "eo_gaps": eo_gaps,
        "lib_rows": lib_rows,
        "task_rows": task_rows,
        "bound_rows": bound_rows,
        "ablation_rows": ablation_rows,
        "skipped": skipped,
        "curves": curves,
        "eig_pictures": eig_pictures,
    }


def measure_control(cfg: Scale, seed: int) -> tuple[list[dict], list[dict], list[dict]]:
    """The continuous pipeline over ``replicate_seeds(seed, continuous_seeds)``: per-seed rows on
    the claim's task (control weight ``cfg.control_weight``, d = ``control_d``), the basis-size
    sweep's rows, and the limitation rows (each of ``cfg.limitation_weights``: TD3 and LK at
    ``control_d``, no sweep, no random basis)."""
    ctrl_rows, sweep_rows, limit_rows = [], [], []
    for cs in replicate_seeds(seed, cfg.continuous_seeds):
        row, sweep = _control(cfg, cs, cfg.control_weight)
        ctrl_rows.append(row)
        sweep_rows += sweep
        for w in cfg.limitation_weights:
            limit_rows.append(_control(cfg, cs, w, full=False)[0])
    return ctrl_rows, sweep_rows, limit_rows


CONTROL_TASK = "Reacher-v5 (fixed target, no control cost)"
LIMITATION_TASK = "Reacher-v5 (fixed target, Gymnasium's control cost -w|a|^2)"


def _control(
    cfg: Scale, seed: int, control_weight: float, full: bool = True
) -> tuple[dict[str, float], list[dict[str, float]]]:
    """One seed of the continuous pipeline on the fixed-target Reacher with ``control_weight``;
    normalised returns ``(R - R_random) / (0 - R_random)`` (the reward is <= 0: 0 is an upper
    bound no policy reaches). ``full=False``: TD3 and LK at ``control_d`` only."""
    hidden, steps = cfg.control_hidden, cfg.continuous_steps
    dims = cfg.control_dims if full else (cfg.control_d,)
    d_max = max(cfg.control_dims)
    td3_cfg = TD3Config(hidden=hidden)
    every = max(steps // 5, 1)

    def make() -> FixedTargetReacher:
        return FixedTargetReacher(control_weight=control_weight)

    env = make()
    max_a = env.action_space.high
    rng = np.random.default_rng(seed)
    r_random = evaluate(make(), lambda o: rng.uniform(-max_a, max_a), 1.0, 10, seed=10_000)

    def norm(x: np.ndarray | float) -> np.ndarray:
        return (np.asarray(x, float) - r_random) / (0.0 - r_random)

    td3 = TD3(10, 2, max_a, td3_cfg, seed=seed).learn(make(), steps, every, make(), 5, seed=seed)
    data = collect_exploration(make(), cfg.n_transitions, seed=seed)
    lap = laplacian_features(
        data, d_max, ALLOConfig(d=d_max + 1, steps=cfg.allo_steps, hidden=hidden), seed=seed
    )

    diag: dict[str, float] = {}

    def lk_arm(basis_of, d: int) -> tuple[float, LearningCurve]:
        basis = basis_of(d)
        usfa = train_usfa_td3(data, basis, d, max_a, cfg.usfa_steps, td3_cfg, seed=seed)
        zs_policy = usfa_policy(usfa, zero_shot_w(data, basis), max_a)
        zs = evaluate(make(), zs_policy, 1.0, 5, seed=10_000)
        if basis_of is lap and d == cfg.control_d:  # why LK can or cannot learn here, measured
            diag.update(_diagnose(data, basis, zs_policy, control_weight))
        curve = KeyboardTD3(usfa, 10, max_a, K, td3_cfg, seed=seed).learn(
            make(), steps, every, make(), 5, seed=seed
        )
        return zs, curve

    sweep, main = [], {}
    for d in dims:
        zs, c = lk_arm(lap, d)
        main[d] = (zs, c)
        sweep.append(
            {
                "seed": seed,
                "d": d,
                "zero-shot": float(norm(zs)),
                "LK final": float(norm(c.returns[-1])),
                "LK mean over curve": float(norm(c.returns).mean()),
            }
        )
    zs, c_lk = main[cfg.control_d]
    row = {
        "seed": seed,
        "control weight": control_weight,
        "random policy return": r_random,
        "TD3 final": float(norm(td3.returns[-1])),
        "TD3 mean over curve": float(norm(td3.returns).mean()),
        "LK zero-shot": float(norm(zs)),
        "LK final": float(norm(c_lk.returns[-1])),
        "LK mean over curve": float(norm(c_lk.returns).mean()),
    }
    if full:
        zs_r, c_r = lk_arm(random_features(data, d_max, hidden, seed=seed), cfg.control_d)
        row |= {
            "random-basis LK final": float(norm(c_r.returns[-1])),
            "random-basis LK mean over curve": float(norm(c_r.returns).mean()),
            "random-basis zero-shot": float(norm(zs_r)),
        }
    return row | diag, sweep


def _diagnose(
    data: ControlData,
    basis: torch.nn.Module,
    policy: Callable[[np.ndarray], np.ndarray],
    control_weight: float = 1.0,
) -> dict[str, float]:
    """How much of Reacher's reward the basis expresses (R^2 of the least-squares fit on
    ``[1, phi(s')]``: the whole reward, and its distance term alone, the control cost
    ``-control_weight |a|^2`` removed), and the zero-shot behaviour's torque cost ``|a|^2`` per step on the data's states
    (the uniform random policy's is 2/3 with Reacher's unit action box)."""
    phi = basis.embed(data.next_obs)
    x = np.hstack([np.ones((len(phi), 1)), phi])
    r = data.rewards.astype(float)
    dist = r + control_weight * (data.actions.astype(float) ** 2).sum(1)

    def r2(y: np.ndarray) -> float:
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
        return float(1.0 - np.var(y - x @ coef) / np.var(y))

    acts = np.array([policy(o) for o in data.obs[:1000]])
    return {
        "reward R^2 on basis": r2(r),
        "distance-term R^2 on basis": r2(dist),
        "zero-shot |a|^2 per step": float((acts**2).sum(1).mean()),
    }
