"""Evaluation: pass@k, distinct valid solutions, and the entropies of a policy's samples."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from scipy.special import comb

from vepo.entropy import estimate_entropies
from vepo.tasks import Problem, normalize


def pass_at_k(n: Any, c: Any, k: int) -> np.ndarray:
    """Unbiased pass@k (Chen et al. 2021): ``1 - C(n - c, k) / C(n, k)`` per problem.

    ``n``: samples drawn, ``c``: how many were correct (arrays of the same shape); ``k <= n``.
    """
    n, c = np.asarray(n), np.asarray(c)
    if n.shape != c.shape:
        raise ValueError(f"n and c differ in shape: {n.shape} vs {c.shape}")
    if k < 1 or (n < k).any():
        raise ValueError(f"need 1 <= k <= n; got k={k}, min n={int(n.min())}")
    if ((c < 0) | (c > n)).any():
        raise ValueError("c must be in [0, n]")
    return 1.0 - comb(n - c, k, exact=False) / comb(n, k, exact=False)


def distinct_valid(completions: Sequence[str], problem: Problem) -> int:
    """How many different valid solutions (token-normalised) are among ``completions``."""
    return len({normalize(c.strip().split("\n")[0]) for c in completions if problem.check(c)})


@torch.no_grad()
def evaluate_policy(
    model: Any,
    tok: Any,
    problems: Sequence[Problem],
    n: int = 16,
    ks: Sequence[int] = (1, 8, 16),
    temperature: float = 1.0,
    max_new_tokens: int = 16,
    seed: int = 0,
) -> dict[str, float]:
    """Sample ``n`` completions per problem and report pass@k, diversity and entropies.

    Returns ``pass@k`` for each ``k``; ``distinct_valid`` (mean number of different valid solutions
    per problem); ``token_entropy`` (mean next-token entropy along the samples); the Monte Carlo
    ``sequence_entropy``, ``effective_entropy``, ``valid_mass`` and ``invalid_entropy_share`` of
    :func:`vepo.entropy.estimate_entropies` averaged over problems, and ``sequence_entropy_se``,
    the Monte Carlo standard error of ``sequence_entropy`` (the standard deviation of ``-log pi(y)``
    over all samples over the square root of their number; NaN for a single sample). The share is
    NaN when the sequence entropy is 0 (a collapsed policy: every sample has probability 1).
    """
    from paper_common.lm import sample

    if not problems:
        raise ValueError("problems is empty")
    out = sample(model, tok, [p.prompt for p in problems], n=n, temperature=temperature,
                 max_new_tokens=max_new_tokens, seed=seed)  # fmt: skip
    correct = np.array(
        [[p.check(t) for t in texts] for p, texts in zip(problems, out.texts, strict=True)]
    )
    res: dict[str, float] = {}
    for k in ks:
        res[f"pass@{k}"] = float(pass_at_k(np.full(len(problems), n), correct.sum(1), k).mean())
    res["distinct_valid"] = float(
        np.mean([distinct_valid(t, p) for p, t in zip(problems, out.texts, strict=True)])
    )
    stats, nll = [], []
    for i in range(len(problems)):
        logp = torch.stack([lp.double().sum() for lp in out.logprobs[i]]).clamp(max=0)
        stats.append(estimate_entropies(logp, torch.as_tensor(correct[i])))
        nll.append(-logp)
    for key in ("sequence_entropy", "effective_entropy", "valid_mass"):
        res[key] = float(np.mean([s[key] for s in stats]))
    res["invalid_entropy_share"] = invalid_share(res["effective_entropy"], res["sequence_entropy"])
    all_nll = torch.cat(nll)
    res["sequence_entropy_se"] = (
        float(all_nll.std() / len(all_nll) ** 0.5) if len(all_nll) > 1 else math.nan
    )
    res["token_entropy"] = _token_entropy(model, tok, problems, out)
    return res


def invalid_share(effective_entropy: float, sequence_entropy: float) -> float:
    """``1 - H_eff / H``: the share of the entropy on invalid trajectories; NaN when ``H`` is 0
    (a collapsed policy has no entropy to share out)."""
    if not sequence_entropy > 0:
        return math.nan
    return 1 - effective_entropy / sequence_entropy


def _token_entropy(model: Any, tok: Any, problems: Sequence[Problem], out: Any) -> float:
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for p, ids in zip(problems, out.token_ids, strict=True):
        prompt = tok(p.prompt)["input_ids"]
        seqs = [prompt + t.tolist() for t in ids]
        width = max(map(len, seqs))
        pad = tok.pad_token_id
        x = torch.full((len(seqs), width), pad, dtype=torch.long)
        m = torch.zeros_like(x)
        for j, s in enumerate(seqs):
            x[j, : len(s)] = torch.tensor(s)
            m[j, : len(s)] = 1
        logits = model(input_ids=x.to(device), attention_mask=m.to(device)).logits.float()
        logp = torch.log_softmax(logits[:, len(prompt) - 1 : -1], -1)
        ent = -(logp.exp() * logp).sum(-1)
        mask = m[:, len(prompt) :].to(device).float()
        total += float((ent * mask).sum())
        count += int(mask.sum())
    return total / count if count else math.nan  # no generated token: nothing measured
