"""Effective entropy: diversity measured only inside the valid (verified-correct) subspace.

Let ``pi`` be a policy over whole trajectories ``y`` and ``V`` the set a verifier accepts.

* Sequence entropy ``H(pi) = -sum_y pi(y) log pi(y)``: "blind", it counts every trajectory.
* **Effective entropy** ``H_eff(pi) = -sum_{y in V} pi(y) log pi(y)``: the part of ``H(pi)``
  carried by valid trajectories. ``H(pi) - H_eff(pi)`` is the entropy on invalid trajectories;
  their share ``1 - H_eff / H`` is the "illusion of diversity".
* The normalised valid entropy ``H(pi_V)`` of ``pi_V(y) = pi(y) / pi(V)`` on ``V`` is
  ``H_eff / pi(V) + log pi(V)`` (reported as a diagnostic).

Estimators from a group of ``G`` samples ``y_i ~ pi`` with sequence log-probs ``l_i = log pi(y_i)``
and verdicts ``v_i``: ``H ≈ mean(-l_i)``, ``H_eff ≈ mean(v_i * -l_i)`` (both unbiased), ``pi(V) ≈
mean(v_i)``.

Gradient (score function): ``grad H_eff = E_pi[ v(y) (-log pi(y) - 1) grad log pi(y) ]``. So the
per-trajectory weight is ``w(y) = v(y) (-log pi(y) - 1)``: zero for invalid trajectories, growing
as a valid trajectory gets rarer, and positive whenever ``pi(y) < 1/e`` — always, for LM sequences,
whose probabilities are tiny. Adding ``beta * w`` to the advantage pulls probability toward
under-explored valid solutions. The blind sequence-entropy bonus uses ``w(y) = -log pi(y) - 1`` for
every ``y``. Note that ``-pi log pi`` peaks at ``pi = 1/e``: a valid trajectory *more* likely
than that gets a negative weight, so in a regime of short, confident completions (ours) this
objective pushes mass off the dominant valid solution, not only toward rare ones.

The normalised variant maximises ``H(pi_V)`` instead (:func:`valid_entropy_weights`): weights are
centred (leave one out) among the valid samples of a group, so they move mass between valid
trajectories only. Differential Smoothing (:func:`differential_smoothing_weights`), a published
baseline, adds ``-gamma log pi`` on valid and ``+gamma log pi`` on invalid trajectories.
"""

from __future__ import annotations

import torch


def _check(logp: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # on the CPU: float64 does not exist on every accelerator (MPS), and these are summaries
    logp = torch.as_tensor(logp).detach().to("cpu", torch.float64)
    valid = torch.as_tensor(valid).detach().to("cpu", torch.float64)
    if logp.shape != valid.shape:
        raise ValueError(
            f"logp and valid differ in shape: {tuple(logp.shape)} vs {tuple(valid.shape)}"
        )
    if logp.numel() == 0:
        raise ValueError("need at least one trajectory")
    if (logp > 1e-9).any():
        raise ValueError("log-probabilities must be <= 0")
    if not ((valid == 0) | (valid == 1)).all():
        raise ValueError("valid must be 0/1 (or bool)")
    return logp, valid


def _check_group(
    logp: torch.Tensor, valid: torch.Tensor | None, optional: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The weight functions' inputs: ``logp`` ``(groups, G)``, finite and ``<= 0`` (a sum of
    log-probabilities; float rounding up to 1e-6 is allowed); ``valid`` of the same shape, 0/1 or
    bool (``None`` only where ``optional``). Returns ``valid`` in ``logp``'s dtype."""
    logp = torch.as_tensor(logp)
    if logp.ndim != 2:
        raise ValueError(f"logp must be (groups, G); got shape {tuple(logp.shape)}")
    if not torch.isfinite(logp).all() or (logp > 1e-6).any():
        bad = logp[~torch.isfinite(logp) | (logp > 1e-6)].flatten()[:3].tolist()
        raise ValueError(f"logp must be finite log-probabilities <= 0; got values such as {bad}")
    if valid is None:
        if not optional:
            raise ValueError("valid is required (0/1 per trajectory)")
        return logp, None
    valid = torch.as_tensor(valid)
    if valid.shape != logp.shape:
        raise ValueError(f"valid must have shape {tuple(logp.shape)}; got {tuple(valid.shape)}")
    if not ((valid == 0) | (valid == 1)).all():
        bad = valid[(valid != 0) & (valid != 1)].flatten()[:3].tolist()
        raise ValueError(f"valid must be 0/1 (or bool); got values such as {bad}")
    return logp, valid.to(logp.dtype)


def exact_entropies(logp: torch.Tensor, valid: torch.Tensor) -> dict[str, float]:
    """Exact ``H``, ``H_eff``, ``pi(V)``, ``H(pi_V)`` and the invalid share of a full distribution.

    ``logp``: log-probabilities of *every* trajectory (they must sum to 1 in probability).
    """
    logp, valid = _check(logp, valid)
    p = logp.exp()
    if abs(float(p.sum()) - 1) > 1e-6:
        raise ValueError(f"probabilities must sum to 1; got {float(p.sum()):.6f}")
    plogp = torch.where(p > 0, -p * logp, torch.zeros_like(p))
    return _summary(float(plogp.sum()), float((plogp * valid).sum()), float((p * valid).sum()))


def estimate_entropies(logp: torch.Tensor, valid: torch.Tensor) -> dict[str, float]:
    """Monte Carlo estimates of the same quantities from samples ``y_i ~ pi`` (last dim: samples)."""
    logp, valid = _check(logp, valid)
    return _summary(float((-logp).mean()), float((-logp * valid).mean()), float(valid.mean()))


def _summary(h: float, h_eff: float, p_valid: float) -> dict[str, float]:
    import math

    h_valid = h_eff / p_valid + math.log(p_valid) if p_valid > 0 else math.nan
    invalid_share = 1 - h_eff / h if h > 0 else math.nan
    return {
        "sequence_entropy": h,
        "effective_entropy": h_eff,
        "valid_mass": p_valid,
        "valid_entropy": h_valid,
        "invalid_entropy_share": invalid_share,
    }


def entropy_weights(
    logp: torch.Tensor,
    valid: torch.Tensor | None = None,
    baseline: bool = True,
    standardize: bool = False,
) -> torch.Tensor:
    """Per-trajectory weights of the entropy gradient: ``v (-logp - 1)`` (``valid=None``: blind).

    ``logp``: ``(groups, G)`` sequence log-probs; with ``baseline`` the leave-one-out mean of each
    group is subtracted (``G >= 2``); with ``standardize`` the result is divided by the group's
    standard deviation of the raw weights (groups with no spread get 0), the way GRPO scales its
    rewards. Returns a tensor like ``logp``.
    """
    logp, valid = _check_group(logp, valid, optional=True)
    w = -logp - 1
    if valid is not None:
        w = w * valid
    if baseline:
        g = w.shape[1]
        if g < 2:
            raise ValueError("a leave-one-out baseline needs at least 2 samples per group")
        raw = w
        w = w - (w.sum(1, keepdim=True) - w) / (g - 1)
    else:
        raw = w
    if standardize:
        std = raw.std(1, keepdim=True) if raw.shape[1] > 1 else torch.zeros_like(raw[:, :1])
        w = torch.where(std > 1e-8, w / std.clamp(min=1e-8), torch.zeros_like(w))
    return w


def valid_entropy_weights(logp: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Per-trajectory weights of the gradient of the normalised valid entropy ``H(pi_V)``.

    ``grad H(pi_V) = E_pi[ v(y) / pi(V) * (-log pi(y) + log pi(V) - H(pi_V)) grad log pi(y) ]``
    ``= E_{pi_V}[ (l(y) - E_{pi_V} l) grad log pi(y) ]`` with ``l = -log pi``. In a group of ``G``
    samples with ``k`` valid ones: ``w_i = v_i (G / k) (l_i - mean of l over the other valid
    samples)``. The leave-one-out mean keeps it unbiased: a mean that includes ``l_i`` itself
    shrinks every weight by ``(k - 1) / k`` (to half with two valid samples). Given ``k >= 2`` the
    group estimate ``(1/G) sum_i w_i grad log pi(y_i)`` is unbiased for ``grad H(pi_V)``; groups
    with fewer than 2 valid samples get 0. Zero-sum over the valid samples (no push toward or away
    from the valid set as a whole), zero for invalid ones. ``logp``, ``valid``: ``(groups, G)``.
    """
    logp, v = _check_group(logp, valid)
    assert v is not None
    k = v.sum(1, keepdim=True)
    nll = -logp
    others = ((nll * v).sum(1, keepdim=True) - nll * v) / (k - 1).clamp(min=1)
    w = v * (nll - others) * logp.shape[1] / k.clamp(min=1)
    return torch.where(k >= 2, w, torch.zeros_like(w))


def differential_smoothing_weights(
    logp: torch.Tensor, valid: torch.Tensor, gamma_p: float, gamma_n: float
) -> torch.Tensor:
    """What Differential Smoothing (Gai et al. 2025, arXiv 2511.19942) adds to the advantage:
    ``-gamma_p log pi(y)`` on valid trajectories (rarer correct answers gain more) and
    ``+gamma_n log pi(y)`` on invalid ones (rarer wrong answers lose more), with ``log pi`` of the
    policy that sampled them. Not centred, no baseline. ``logp``, ``valid``: ``(groups, G)``."""
    logp, v = _check_group(logp, valid)
    assert v is not None
    for name, g in (("gamma_p", gamma_p), ("gamma_n", gamma_n)):
        if isinstance(g, bool) or not isinstance(g, int | float) or not 0 <= g < float("inf"):
            raise ValueError(f"{name} must be a finite number >= 0; got {g!r}")
    return -gamma_p * v * logp + gamma_n * (1 - v) * logp


def exact_valid_entropy_gradient(logits: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``d H(pi_V) / d logits`` for a softmax policy over enumerated trajectories (autograd)."""
    logits = logits.detach().double().requires_grad_(True)
    logp = torch.log_softmax(logits, -1)
    lv = logp.masked_fill(~valid.bool(), -torch.inf)
    lv = lv - torch.logsumexp(lv, -1)
    pv = lv.exp()
    h = -(pv * torch.where(valid.bool(), lv, torch.zeros_like(lv))).sum()
    (grad,) = torch.autograd.grad(h, logits)
    return grad


def exact_effective_entropy_gradient(logits: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``d H_eff / d logits`` for a softmax policy over enumerated trajectories (autograd)."""
    logits = logits.detach().double().requires_grad_(True)
    logp = torch.log_softmax(logits, -1)
    h_eff = -(logp.exp() * logp * valid.double()).sum()
    (grad,) = torch.autograd.grad(h_eff, logits)
    return grad
