r"""LARA and LARA++: softmax attention as self-normalised (multiple) importance sampling.

For one query, softmax attention is an expectation (Zheng, Wang, Kong, ICML 2022). With positive
random features ``xi(x, w) = exp(w.x - |x|^2 / 2)`` (``E_{w~N(0,I)} xi(q,w) xi(k,w) = exp(q.k)``):

    SA(q_n) = E_{w ~ p_n}[f(w)],   p_n(w) ∝ N(w; 0, I) xi(q_n, w) sum_m xi(k_m, w),
    f(w) = sum_m softmax_m(log xi(k_m, w)) v_m            (does not depend on the query).

RFA/Performer is the self-normalised estimate with the single proposal ``N(0, I)``. **LARA** draws one
sample from each of ``C`` proposals ``N(mu_c, I)`` (``w_c ~ N(mu_c, I)`` in training, ``w_c = mu_c`` at
evaluation) and combines them with query-dependent multiple-importance weights
``alpha_nc ∝ exp(q_n . mu_c)``:

    LARA(q_n) = sum_c iw_nc f(w_c),  iw_nc = softmax_c(log alpha_nc + log xi(q_n, w_c)
                                                      + log sum_m xi(k_m, w_c) - log xi(mu_c, w_c)),

where ``-log xi(mu, w) = log N(w; 0, I) / N(w; mu, I)``. Because ``f`` and the key sums factor out,
this is linear attention with query log features ``log alpha_nc + log xi(q_n, w_c) - log xi(mu_c, w_c)``
and key log features ``log xi(k_m, w_c)``: chunked and recurrent forms come from
:mod:`lara.linear`. As published, ``mu_c`` are sums of segment means of queries and keys (pooled over
the whole sequence: non-causal only). For causal attention we use a learned bank of means per head
(initialised by k-means on real ``q + k`` by :meth:`LARA.calibrate`) - our choice, the paper's
reference code has no causal LARA.

**LARA++** (the 2026 paper's method; the paper was not available, so this rule is ours, written from its
one-line description "importance sampling with adaptive proposal distributions"):

1. adaptive proposals ``N(mu_c, sigma_c^2 I)``: means (a learned bank, or segment-mean landmarks passed
   through learned per-head linear maps for non-causal use) and per-proposal scales ``sigma_c``,
   fitted to the softmax teacher by distillation (gradients flow through reparameterised samples);
2. ``S`` samples per proposal (antithetic pairs, fixed at evaluation, redrawn in training);
3. query-conditioned mixture weights ``beta_nc = softmax_c(q_n . mu_c + g_c . q_n + b_c)`` with learned
   ``g, b`` (zero at initialisation, i.e. LARA's ``alpha``);
4. the weighted balance heuristic over all ``C S`` samples (deterministic-mixture MIS): the weight of
   sample ``w_j`` is ``beta_{n c_j} p~_n(w_j) / sum_c beta_nc N(w_j; mu_c, sigma_c^2 I)``, which is
   a valid MIS weighting because ``sum_c beta_nc N_c(w) / sum_c' beta_nc' N_c'(w) = 1`` for every ``w``.

Step 4 costs ``O(N C^2 S)`` per head on top of the linear attention: the price of the better estimator.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch
from torch import nn

from lara.attention import KernelizedAttention, log_positive_features, register, segment_means

__all__ = ["LARA", "LARAPlusPlus", "kmeans_means"]

Proposals = Literal["auto", "landmarks", "learned"]


def kmeans_means(points: torch.Tensor, k: int, seed: int = 0) -> torch.Tensor:
    """k-means centres per head: ``points (h, n, d) -> (h, k, d)`` (scikit-learn's KMeans)."""
    from sklearn.cluster import KMeans

    out = []
    for p in points.detach().double().cpu().numpy():
        if len(p) <= k:  # fewer points than centres: reuse points, jittered
            rng = np.random.default_rng(seed)
            out.append(p[rng.integers(0, len(p), k)] + 1e-3 * rng.standard_normal((k, p.shape[1])))
            continue
        km = KMeans(n_clusters=k, n_init=1, max_iter=50, random_state=seed).fit(p)
        out.append(km.cluster_centers_)
    return torch.as_tensor(np.stack(out), dtype=points.dtype, device=points.device)


def _causal_pairs(qs: torch.Tensor, ks: torch.Tensor, n_points: int, seed: int) -> torch.Tensor:
    """``q_n + k_m`` for random pairs ``m <= n``, pooled over the batch: ``(h, n_points, d)``."""
    b, _h, n, _d = qs.shape
    gen = torch.Generator().manual_seed(seed)
    bi = torch.randint(0, b, (n_points,), generator=gen)
    ni = torch.randint(0, n, (n_points,), generator=gen)
    mi = (torch.rand(n_points, generator=gen) * (ni + 1)).long()
    return (qs[bi, :, ni] + ks[bi, :, mi]).transpose(0, 1)


class _ProposalAttention(KernelizedAttention):
    """Shared machinery: scaled inputs, proposal means (landmarks or a learned bank), calibration."""

    log_space = True

    def __init__(
        self,
        head_dim: int,
        num_heads: int,
        num_proposals: int,
        proposals: Proposals,
        seed: int,
        **kwargs,  # type: ignore[no-untyped-def]
    ) -> None:
        super().__init__(head_dim, num_heads, **kwargs)
        if not isinstance(num_proposals, int) or num_proposals < 1:
            raise ValueError(f"num_proposals must be a positive int; got {num_proposals!r}")
        if proposals not in ("auto", "landmarks", "learned"):
            raise ValueError(
                f"proposals must be 'auto', 'landmarks' or 'learned'; got {proposals!r}"
            )
        if proposals == "landmarks" and self.form == "recurrent":
            raise ValueError("landmark proposals pool the whole sequence: no recurrent form")
        self.num_proposals, self.proposals, self.seed = num_proposals, proposals, seed
        gen = torch.Generator().manual_seed(seed)
        # a learned bank: N(0, I / 2) until calibrate() fits it to real activations
        self.means = nn.Parameter(
            torch.randn(num_heads, num_proposals, head_dim, generator=gen) / math.sqrt(2)
        )

    def _uses_landmarks(self, causal: bool) -> bool:
        if self.proposals == "landmarks":
            if causal:
                raise ValueError(
                    "landmark proposals pool over the whole sequence and would leak the future; "
                    "use proposals='learned' (or 'auto') for causal attention"
                )
            return True
        return self.proposals == "auto" and not causal

    def _means(self, qs: torch.Tensor, ks: torch.Tensor, causal: bool) -> torch.Tensor:
        """Proposal means ``(b or 1, h, c, d)``."""
        if self._uses_landmarks(causal):
            return segment_means(qs, self.num_proposals) + segment_means(ks, self.num_proposals)
        return self.means.to(qs.dtype)[None]

    @torch.no_grad()
    def calibrate(self, q: torch.Tensor, k: torch.Tensor, causal: bool = True) -> None:
        """Initialise the learned bank by k-means on ``q'_n + k'_m`` (scaled, random causal pairs)."""
        s = math.sqrt(self.scale(None))
        n_points = min(4096, max(8 * self.num_proposals, 4 * q.shape[0] * q.shape[2]))
        pts = _causal_pairs(q * s, k * s, n_points, self.seed)
        self.means.copy_(kmeans_means(pts, self.num_proposals, self.seed).to(self.means.dtype))


@register
class LARA(_ProposalAttention):
    """Linear randomized attention (Zheng, Wang, Kong, ICML 2022).

    Args:
        num_proposals: ``C``, proposals = samples (one each).
        proposals: ``"landmarks"`` (segment means of queries + keys, as published; non-causal),
            ``"learned"`` (a per-head bank, causal and recurrent) or ``"auto"`` (landmarks when
            non-causal, the bank when causal).
        seed: initial bank and calibration seed.
    """

    name = "lara"

    def __init__(
        self,
        head_dim: int,
        num_heads: int = 1,
        num_proposals: int = 64,
        proposals: Proposals = "auto",
        seed: int = 0,
        **kwargs,  # type: ignore[no-untyped-def]
    ) -> None:
        super().__init__(head_dim, num_heads, num_proposals, proposals, seed, **kwargs)

    @property
    def num_features(self) -> int:
        return self.num_proposals

    def samples(self, mu: torch.Tensor) -> torch.Tensor:
        """``w_c ~ N(mu_c, I)`` in training mode, ``w_c = mu_c`` in eval mode."""
        return mu + torch.randn_like(mu) if self.training else mu

    def features(self, q, k, scale, q_pos, k_pos, causal):  # type: ignore[no-untyped-def]
        s = math.sqrt(scale)
        qs, ks = q * s, k * s
        mu = self._means(qs, ks, causal)
        w = self.samples(mu)
        log_alpha = qs @ mu.transpose(-2, -1)
        log_ratio = -((w * mu).sum(-1) - 0.5 * (mu * mu).sum(-1))  # log N(w;0,I) / N(w;mu,I)
        fq = log_alpha + log_positive_features(qs, w) + log_ratio[..., None, :]
        return fq, log_positive_features(ks, w)

    def importance_weights(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Non-causal LARA as a mixture: ``(iw (b, h, n, C), f (b, h, C, d_v))`` with
        ``iw.sum(-1) == 1`` and output ``iw @ f``."""
        sc = self.scale(scale)
        k_pos = torch.arange(k.shape[2], device=q.device)
        fq, fk = self.features(q, k, sc, k_pos[-q.shape[2] :], k_pos, causal=False)
        iw = torch.softmax(fq + torch.logsumexp(fk, dim=-2)[..., None, :], dim=-1)
        f = torch.softmax(fk, dim=-2).transpose(-2, -1) @ v
        return iw, f


@register
class LARAPlusPlus(_ProposalAttention):
    """LARA++: adaptive proposals with learned scales, several samples each, query-conditioned
    mixture weights and balance-heuristic MIS weights (see the module docstring for the exact rule).

    Args:
        num_proposals: ``C``.
        samples_per_proposal: ``S`` (even: antithetic pairs); ``C * S`` random features.
        proposals: as :class:`LARA`; landmarks go through learned per-head linear maps.
        resample: draw fresh samples on every training forward (fixed samples at evaluation).
        seed: seed of the evaluation samples and the initial bank.
    """

    name = "lara++"

    def __init__(
        self,
        head_dim: int,
        num_heads: int = 1,
        num_proposals: int = 16,
        samples_per_proposal: int = 4,
        proposals: Proposals = "auto",
        resample: bool = True,
        seed: int = 0,
        **kwargs,  # type: ignore[no-untyped-def]
    ) -> None:
        super().__init__(head_dim, num_heads, num_proposals, proposals, seed, **kwargs)
        if not isinstance(samples_per_proposal, int) or samples_per_proposal < 1:
            raise ValueError(
                f"samples_per_proposal must be a positive int; got {samples_per_proposal!r}"
            )
        self.samples_per_proposal, self.resample = samples_per_proposal, resample
        h, c, d = num_heads, num_proposals, head_dim
        self.log_sigma = nn.Parameter(torch.zeros(h, c))
        self.gate = nn.Parameter(torch.zeros(h, c, d))
        self.gate_bias = nn.Parameter(torch.zeros(h, c))
        self.landmark_q = nn.Parameter(torch.eye(d).repeat(h, 1, 1))
        self.landmark_k = nn.Parameter(torch.eye(d).repeat(h, 1, 1))
        gen = torch.Generator().manual_seed(seed + 1)
        self.register_buffer("noise", self._antithetic(gen))

    def _antithetic(self, gen: torch.Generator | None) -> torch.Tensor:
        h, c, s, d = self.num_heads, self.num_proposals, self.samples_per_proposal, self.head_dim
        half = torch.randn(h, c, (s + 1) // 2, d, generator=gen)
        return torch.cat([half, -half], dim=2)[:, :, :s]

    @property
    def num_features(self) -> int:
        return self.num_proposals * self.samples_per_proposal

    def _means(self, qs, ks, causal):  # type: ignore[no-untyped-def]
        if self._uses_landmarks(causal):
            ql = segment_means(qs, self.num_proposals) @ self.landmark_q.to(qs.dtype)
            kl = segment_means(ks, self.num_proposals) @ self.landmark_k.to(qs.dtype)
            return ql + kl
        return self.means.to(qs.dtype)[None]

    def features(self, q, k, scale, q_pos, k_pos, causal):  # type: ignore[no-untyped-def]
        s = math.sqrt(scale)
        qs, ks = q * s, k * s
        mu = self._means(qs, ks, causal)  # (b', h, c, d)
        c, n_s = mu.shape[-2], self.samples_per_proposal
        sigma = torch.exp(self.log_sigma.to(q.dtype))[None, :, :c]  # (1, h, c)
        if self.training and self.resample:
            noise = self._antithetic(None).to(q.dtype)[:, :c]
        else:
            noise = self.noise.to(q.dtype)[:, :c]
        w = (mu[..., None, :] + sigma[..., None, None] * noise).flatten(-3, -2)  # (b', h, cS, d)
        # log N(w_j; mu_c, sigma_c^2 I) for every sample j and proposal c (2 pi terms cancel)
        d = q.shape[-1]
        diff = w[..., :, None, :] - mu[..., None, :, :]  # (b', h, cS, c, d)
        log_nc = (
            -0.5 * (diff * diff).sum(-1) / sigma[..., None, :] ** 2
            - d * torch.log(sigma)[..., None, :]
        )
        log_n0 = -0.5 * (w * w).sum(-1)  # log N(w_j; 0, I)
        # query-conditioned mixture weights beta_nc (b, h, n, c)
        logits = qs @ (mu + self.gate.to(q.dtype)[None, :, :c]).transpose(-2, -1)
        beta = torch.softmax(logits + self.gate_bias.to(q.dtype)[None, :, None, :c], -1)
        # log sum_c beta_nc N_c(w_j) through a matmul: O(n cS) memory, O(n cS c) flops
        top = log_nc.amax(-1, keepdim=True)  # (b', h, cS, 1)
        mix = beta @ torch.exp(log_nc - top).transpose(-2, -1)  # (b, h, n, cS)
        log_mix = torch.log(mix.clamp_min(1e-30)) + top[..., 0][..., None, :]
        log_beta_own = torch.log(beta.clamp_min(1e-30)).repeat_interleave(n_s, dim=-1)
        fq = log_beta_own + log_positive_features(qs, w) + log_n0[..., None, :] - log_mix
        return fq, log_positive_features(ks, w)
