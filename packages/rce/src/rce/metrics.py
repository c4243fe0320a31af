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

from paper_common.lm import (
    logit_lens,
    next_token_logprobs,
    num_layers,
    pad_id,
    right_padded,
    token_rank,
)
from rce.attacks import (
    BUDGETS,
    attack_success,
    lens_candidates,
    output_candidates,
    rephrase_candidates,
)
from rce.requests import EditRequest, answer_id, answer_ids

__all__ = [
    "ATTACKS",
    "among_successful",
    "answer_ids",
    "concat",
    "evaluate_requests",
    "greedy_match",
    "wilson",
]

ATTACKS = ("output", "output_raw", "hp", "pd", "ir")


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (scipy)."""
    if n < 1:
        return (float("nan"), float("nan"))
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(confidence, method="wilson")
    return float(ci.low), float(ci.high)


def greedy_match(
    model: Any, tok: Any, prompts: Sequence[str], answers: Sequence[str], batch_size: int = 64
) -> np.ndarray:
    """Per prompt: is ``answer`` the greedy continuation, every token the argmax after the prompt
    and the answer's earlier tokens (teacher forced)? ``(n,)`` bool; a one-token answer reduces to
    ``argmax == answer``."""
    if len(prompts) != len(answers):
        raise ValueError(f"{len(prompts)} prompts for {len(answers)} answers")
    if not prompts:
        return np.zeros(0, dtype=bool)
    dev = next(model.parameters()).device
    p_ids = [list(x) for x in tok(list(prompts))["input_ids"]]
    a_ids = [answer_ids(tok, a) for a in answers]
    out = []
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(p_ids), batch_size):
            sl = slice(start, start + batch_size)
            seqs = [p + a[:-1] for p, a in zip(p_ids[sl], a_ids[sl], strict=True)]
            ids, mask, _ = right_padded(seqs, pad_id(tok), dev)
            with torch.no_grad():
                pred = model(input_ids=ids, attention_mask=mask).logits.argmax(-1).cpu()
            for j, (p, a) in enumerate(zip(p_ids[sl], a_ids[sl], strict=True)):
                at = torch.arange(len(p) - 1, len(p) - 1 + len(a))
                out.append(bool((pred[j, at] == torch.tensor(a)).all()))
    finally:
        model.train(was_training)
    return np.array(out, dtype=bool)


def among_successful(results: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The per-request arrays of ``results`` restricted to the requests whose edit took
    (``edit_success``): a failed edit leaves the true answer on top, which every attack "recovers",
    so leakage is read among successful edits only."""
    if "edit_success" not in results:
        raise ValueError("results have no 'edit_success' array (from evaluate_requests)")
    keep = np.asarray(results["edit_success"], dtype=bool)
    n = len(keep)
    return {k: np.asarray(v)[keep] for k, v in results.items() if np.ndim(v) and len(v) == n}


def evaluate_requests(
    model: Any,
    tok: Any,
    requests: Sequence[EditRequest],
    utility: Sequence[tuple[str, str]] = (),
    budgets: Sequence[int] = BUDGETS,
    k: int = 4,
    n_samples: int = 5,
    seed: int = 0,
    erasure: bool = False,
) -> dict[str, np.ndarray]:
    """Attack every request's fact on ``model`` (any Hugging Face causal LM) as it is now, and
    measure fidelity. True answers are one token (the rank attacks); targets, neighbour and
    utility answers any length. ``erasure``: the edit deleted the fact without a target (Patil et
    al.'s erasure mode): it took when the true token left the top-1, and the Output Attack
    excludes nothing."""
    if not requests:
        raise ValueError("requests must not be empty")
    budgets = sorted({int(b) for b in budgets})
    if budgets[0] < 1:
        raise ValueError(f"budgets must be >= 1; got {budgets}")
    top_b = budgets[-1]
    n, n_layers = len(requests), num_layers(model)
    true = torch.tensor([answer_id(tok, r.true) for r in requests])
    target = torch.tensor([answer_ids(tok, r.target)[0] for r in requests])
    lens = logit_lens(model, tok, [r.text() for r in requests], list(range(n_layers + 1)))
    final = lens[:, -1]
    vocab = final.shape[1]
    out: dict[str, np.ndarray] = {
        "true_rank": token_rank(final, true).numpy(),
        "lens_rank": token_rank(lens.reshape(-1, vocab), true.repeat_interleave(n_layers + 1))
        .reshape(n, n_layers + 1)
        .numpy(),
        "target_top1": greedy_match(model, tok, [r.text() for r in requests],
                                    [r.target for r in requests]),
    }  # fmt: skip
    out["edit_success"] = out["true_rank"] > 1 if erasure else out["target_top1"].copy()
    # the attacks' candidate lists, longest budget once (all but HP/PD are prefixes of it)
    ranked = {
        "output": output_candidates(final, top_b, None if erasure else target.tolist()),
        "output_raw": output_candidates(final, top_b),
    }
    probs = lens.exp()
    # held-out prompts: paraphrase fidelity on every one of them; the IR attack on each request's
    # first p_min (every request the same number, so IR's budgets compare across requests)
    counts = [len(r.attack_prompts) for r in requests]
    neigh = [(p, a, i) for i, r in enumerate(requests) for p, a in r.neighbours]
    if min(counts) > 0:
        p_min = min(counts)
        first = [r.text(t) for r in requests for t in r.attack_prompts[:p_min]]
        a_lp = next_token_logprobs(model, tok, first).reshape(n, p_min, vocab)
        ranked["ir"] = rephrase_candidates(a_lp, n_samples, top_b, seed)
    if sum(counts):
        prompts = [r.text(t) for r in requests for t in r.attack_prompts]
        hits = greedy_match(
            model, tok, prompts, [r.target for r in requests for _ in r.attack_prompts]
        )
        owner = np.repeat(np.arange(n), counts)
        got = np.bincount(owner, weights=hits.astype(float), minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            out["paraphrase"] = np.where(np.asarray(counts) > 0, got / np.asarray(counts), np.nan)
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
        ok = torch.from_numpy(
            greedy_match(model, tok, [p for p, _, _ in neigh], [a for _, a, _ in neigh])
        ).float()
        owner = torch.tensor([i for _, _, i in neigh])
        hits = torch.zeros(n).index_add_(0, owner, ok)
        counts = torch.zeros(n).index_add_(0, owner, torch.ones_like(ok))
        # a request without neighbours has no neighbourhood accuracy (NaN), not 0
        acc = torch.where(counts > 0, hits / counts.clamp(min=1), torch.nan)
        out["neighbour_acc"] = acc.numpy()
    else:
        out["neighbour_acc"] = np.full(n, np.nan)
    if utility:
        u_ok = greedy_match(model, tok, [q for q, _ in utility], [a for _, a in utility])
        out["utility_acc"] = np.full(n, float(u_ok.mean()))
    else:
        out["utility_acc"] = np.full(n, np.nan)
    return out


def concat(parts: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Join per-request results of several evaluations (e.g. one per ROME edit)."""
    if not parts:
        raise ValueError("nothing to join")
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
