"""Per-fact measurements of an edited model: attack success at every budget, ranks, fidelity.

:func:`evaluate_requests` returns a flat dict of per-request arrays (so evaluations of separate
edits concatenate): ``"success/<attack>/<B>"`` for the attacks of :mod:`rce.attacks`,
``"chance/<B>"`` (the Output Attack scored against the request's decoy, a value the model never
saw for this subject), ``true_rank`` (final), ``lens_rank`` (per residual layer ``0..L``),
``target_top1``, ``paraphrase`` (share of held-out prompts answering the target),
``neighbour_acc`` and ``utility_acc``. :func:`wilson` gives the binomial confidence interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from scipy import stats

from paper_common.lm import logit_lens, next_token_logprobs, num_layers, token_rank
from rce.attacks import (
    BUDGETS,
    attack_success,
    lens_candidates,
    output_candidates,
    rephrase_candidates,
)
from rce.requests import EditRequest, answer_id

__all__ = ["ATTACKS", "concat", "evaluate_requests", "wilson"]

ATTACKS = ("output", "output_raw", "hp", "pd", "ir")


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (scipy)."""
    if n < 1:
        return (float("nan"), float("nan"))
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(confidence, method="wilson")
    return float(ci.low), float(ci.high)


def evaluate_requests(
    model: Any,
    tok: Any,
    requests: Sequence[EditRequest],
    utility: Sequence[tuple[str, str]] = (),
    budgets: Sequence[int] = BUDGETS,
    k: int = 4,
    n_samples: int = 5,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Attack every request's fact on ``model`` as it is now, and measure fidelity."""
    if not requests:
        raise ValueError("requests must not be empty")
    budgets = sorted({int(b) for b in budgets})
    if budgets[0] < 1:
        raise ValueError(f"budgets must be >= 1; got {budgets}")
    top_b = budgets[-1]
    n, n_layers = len(requests), num_layers(model)
    true = torch.tensor([answer_id(tok, r.true) for r in requests])
    target = torch.tensor([answer_id(tok, r.target) for r in requests])
    lens = logit_lens(model, tok, [r.text() for r in requests], list(range(n_layers + 1)))
    final = lens[:, -1]
    vocab = final.shape[1]
    out: dict[str, np.ndarray] = {
        "true_rank": token_rank(final, true).numpy(),
        "lens_rank": token_rank(lens.reshape(-1, vocab), true.repeat_interleave(n_layers + 1))
        .reshape(n, n_layers + 1)
        .numpy(),
        "target_top1": (final.argmax(1) == target).numpy(),
    }
    # the attacks' candidate lists, longest budget once (all but HP/PD are prefixes of it)
    ranked = {
        "output": output_candidates(final, top_b, target.tolist()),
        "output_raw": output_candidates(final, top_b),
    }
    probs = lens.exp()
    # one batch for the rephrased prompts, the neighbours and the utility questions
    n_att = {len(r.attack_prompts) for r in requests}
    attack_prompts = [r.text(t) for r in requests for t in r.attack_prompts]
    neigh = [(p, a, i) for i, r in enumerate(requests) for p, a in r.neighbours]
    flat = attack_prompts + [p for p, _, _ in neigh] + [q for q, _ in utility]
    lp = next_token_logprobs(model, tok, flat) if flat else torch.zeros(0, vocab)
    a_lp, rest = lp[: len(attack_prompts)], lp[len(attack_prompts) :]
    if len(n_att) == 1 and 0 not in n_att:
        p = n_att.pop()
        a_lp = a_lp.reshape(n, p, vocab)
        ranked["ir"] = rephrase_candidates(a_lp, n_samples, top_b, seed)
        out["paraphrase"] = (a_lp.argmax(-1) == target[:, None]).float().mean(1).numpy()
    else:
        out["paraphrase"] = np.full(n, np.nan)
    for b in budgets:
        for name, cands in ranked.items():
            out[f"success/{name}/{b}"] = attack_success(cands, true.tolist(), b)
        out[f"success/hp/{b}"] = attack_success(
            lens_candidates(lens[:, 1:], b, k), true.tolist(), b
        )
        out[f"success/pd/{b}"] = attack_success(
            lens_candidates(probs.diff(dim=1), b, k), true.tolist(), b
        )
        if all(r.decoy for r in requests):
            decoy = [answer_id(tok, r.decoy) for r in requests]  # type: ignore[arg-type]
            out[f"chance/{b}"] = attack_success(ranked["output"], decoy, b)
    if neigh:
        n_lp = rest[: len(neigh)]
        ok = (n_lp.argmax(1) == torch.tensor([answer_id(tok, a) for _, a, _ in neigh])).float()
        owner = torch.tensor([i for _, _, i in neigh])
        hits = torch.zeros(n).index_add_(0, owner, ok)
        counts = torch.zeros(n).index_add_(0, owner, torch.ones_like(ok))
        # a request without neighbours has no neighbourhood accuracy (NaN), not 0
        acc = torch.where(counts > 0, hits / counts.clamp(min=1), torch.nan)
        out["neighbour_acc"] = acc.numpy()
    else:
        out["neighbour_acc"] = np.full(n, np.nan)
    if utility:
        u_lp = rest[len(neigh) :]
        gold = torch.tensor([answer_id(tok, a) for _, a in utility])
        out["utility_acc"] = np.full(n, float((u_lp.argmax(1) == gold).float().mean()))
    else:
        out["utility_acc"] = np.full(n, np.nan)
    return out


def concat(parts: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Join per-request results of several evaluations (e.g. one per ROME edit)."""
    if not parts:
        raise ValueError("nothing to join")
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
