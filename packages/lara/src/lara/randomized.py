r"""LARA and LARA++: softmax attention as self-normalised (multiple) importance sampling.

For one query, softmax attention is an expectation (Zheng, Wang, Kong, ICML 2022). With positive
random features ``xi(x, w) = exp(w.x - |x|^2 / 2)`` (``E_{w~N(0,I)} xi(q,w) xi(k,w) = exp(q.k)``):

    SA(q_n) = E_{w ~ p_n}[f(w)],   p_n(w) ∝ N(w; 0, I) xi(q_n, w) sum_m xi(k_m, w),
    f(w) = sum_m softmax_m(log xi(k_m, w)) v_m            (does not depend on the query).

RFA/Performer is the self-normalised estimate with the single proposal ``N(0, I)``. **LARA** draws one
sample from each of ``C`` proposals ``N(mu_c, I)`` (``w_c ~ N(mu_c, I)`` in training, ``w_c = mu_c`` at
evaluation) and combines them with query-dependent multiple-importance weights ``alpha_nc``
(the reference code's ``mis-opt``: balance heuristic plus a centred softmax over the queries of
``q_n . q_bar_c``; see :class:`LARA`):

    LARA(q_n) = sum_c iw_nc f(w_c),  iw_nc = softmax_c(log alpha_nc + log xi(q_n, w_c)
                                                      + log sum_m xi(k_m, w_c) - log xi(mu_c, w_c)),

where ``-log xi(mu, w) = log N(w; 0, I) / N(w; mu, I)``. Because ``f`` and the key sums factor out,
this is linear attention with query log features ``log alpha_nc + log xi(q_n, w_c) - log xi(mu_c, w_c)``
and key log features ``log xi(k_m, w_c)``: chunked and recurrent forms come from
:mod:`lara.linear`. As published, ``mu_c`` are sums of segment means of queries and keys (pooled over
the whole sequence: non-causal only). For causal attention we use a learned bank of means per head
(initialised by k-means on real ``q + k`` by :meth:`LARA.calibrate`) - our choice, the paper's
reference code has no causal LARA (the softmax over queries becomes one over the queries seen so
far, a running normaliser: :func:`running_logsumexp`).

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
import warnings
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lara.attention import KernelizedAttention, log_positive_features, register, segment_means
from lara.linear import NEG

__all__ = ["LARA", "LARAPlusPlus", "kmeans_means", "running_logsumexp"]

Proposals = Literal["auto", "landmarks", "learned"]
Init = Literal["calibrate", "random"]
ProposalGen = Literal["adaptive-1d", "seg-means"]
MIS = Literal["mis-opt", "mis-bh"]


def kmeans_means(points: torch.Tensor, k: int, seed: int = 0) -> torch.Tensor:
    """k-means centres per head: ``points (h, n, d) -> (h, k, d)`` (scikit-learn's KMeans)."""
    from sklearn.cluster import KMeans

    out = []
    for p in points.detach().double().cpu().numpy():
        if len(p) <= k:  # fewer points than centres: reuse points, jittered - and say so
            warnings.warn(
                f"kmeans_means: {len(p)} points for {k} centres; the centres are the points "
                "themselves, repeated with 1e-3 jitter (calibrate on more tokens to avoid this)",
                stacklevel=2,
            )
            rng = np.random.default_rng(seed)
            out.append(p[rng.integers(0, len(p), k)] + 1e-3 * rng.standard_normal((k, p.shape[1])))
            continue
        km = KMeans(n_clusters=k, n_init=1, max_iter=50, random_state=seed).fit(p)
        out.append(km.cluster_centers_)
    return torch.as_tensor(np.stack(out), dtype=points.dtype, device=points.device)


def running_logsumexp(x: torch.Tensor, block: int = 256) -> torch.Tensor:
    """``torch.logcumsumexp(x, dim=-2)``, computed in blocks of ``block`` rows: inside a block
    ``log cumsum exp(x - block max) + block max``, blocks joined by the running log-sum of the
    earlier blocks' totals. About 3x faster than ``logcumsumexp`` on the CPU; where a partial sum
    would underflow (a row more than ~69 nats below its block's maximum with nothing larger
    before it), the exact ``logcumsumexp`` is used instead."""
    *lead, n, c = x.shape
    size = max(1, min(block, n))
    nb = -(-n // size)
    pad = nb * size - n
    xb = F.pad(x, (0, 0, 0, pad), value=-math.inf) if pad else x
    xb = xb.reshape(*lead, nb, size, c)
    top = xb.amax(-2, keepdim=True).clamp_min(NEG)
    cs = torch.cumsum(torch.exp(xb - top), dim=-2)
    tiny = 1e-30
    # cs is non-decreasing within a block: if its first row is large enough, every row is
    if bool((cs[..., :1, :] < tiny).any()) and bool(((cs < tiny) & torch.isfinite(xb)).any()):
        return torch.logcumsumexp(x, dim=-2)
    out = torch.log(cs) + top
    if nb > 1:
        before = torch.logcumsumexp(out[..., -1, :], dim=-2)  # (..., nb, c): through block j
        first = torch.full_like(before[..., :1, :], -math.inf)
        out = torch.logaddexp(out, torch.cat([first, before[..., :-1, :]], dim=-2)[..., None, :])
    return out.reshape(*lead, nb * size, c)[..., :n, :]


def _causal_pairs(
    qs: torch.Tensor,
    ks: torch.Tensor,
    n_points: int,
    seed: int,
    key_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """``q_n + k_m`` for random pairs ``m <= n`` of real (not padding) positions of one sequence,
    pooled over the batch: ``(h, n_points, d)``."""
    n = qs.shape[2]
    keep = _keep(qs, key_mask)  # (b, n)
    gen = torch.Generator().manual_seed(seed)
    flat = keep.flatten().nonzero()[:, 0]
    pick = flat[torch.randint(0, len(flat), (n_points,), generator=gen)]
    bi, ni = pick // n, pick % n
    # the r-th real position of row bi, r uniform over the real positions up to ni
    seen = keep.long().cumsum(-1)[bi, ni]
    r = (torch.rand(n_points, generator=gen) * seen).long()
    order = torch.argsort((~keep).long(), dim=-1, stable=True)  # real positions first, in order
    mi = order[bi, r]
    return (qs[bi, :, ni] + ks[bi, :, mi]).transpose(0, 1)


def _keep(x: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
    """``(b, n)`` bool, True at real positions; refuses a mask of the wrong shape or all padding."""
    b, n = x.shape[0], x.shape[2]
    if key_mask is None:
        return torch.ones(b, n, dtype=torch.bool, device=x.device)
    if key_mask.shape != (b, n):
        raise ValueError(f"key_mask must be (batch, n) = {(b, n)}; got {tuple(key_mask.shape)}")
    keep = key_mask.to(torch.bool)
    if not bool(keep.any()):
        raise ValueError("key_mask marks every position as padding: nothing to calibrate on")
    return keep


class _ProposalAttention(KernelizedAttention):
    """Shared machinery: scaled inputs, proposal means (landmarks or a learned bank), calibration.

    The learned bank is random until :meth:`calibrate` fits it to real queries and keys (or a
    calibrated ``state_dict`` is loaded); using it before raises, unless ``init="random"`` asks for
    the random bank on purpose (timing runs, tests of the forms).
    """

    log_space = True

    def __init__(
        self,
        head_dim: int,
        num_heads: int,
        num_proposals: int,
        proposals: Proposals,
        seed: int,
        init: Init = "calibrate",
        **kwargs,  # type: ignore[no-untyped-def]
    ) -> None:
        super().__init__(head_dim, num_heads, **kwargs)
        if not isinstance(num_proposals, int) or num_proposals < 1:
            raise ValueError(f"num_proposals must be a positive int; got {num_proposals!r}")
        if proposals not in ("auto", "landmarks", "learned"):
            raise ValueError(
                f"proposals must be 'auto', 'landmarks' or 'learned'; got {proposals!r}"
            )
        if init not in ("calibrate", "random"):
            raise ValueError(f"init must be 'calibrate' or 'random'; got {init!r}")
        if proposals == "landmarks" and self.form == "recurrent":
            raise ValueError("landmark proposals pool the whole sequence: no recurrent form")
        self.num_proposals, self.proposals, self.seed = num_proposals, proposals, seed
        self.bank_init = init
        gen = torch.Generator().manual_seed(seed)
        # a learned bank: N(0, I / 2) until calibrate() fits it to real activations
        self.means = nn.Parameter(
            torch.randn(num_heads, num_proposals, head_dim, generator=gen) / math.sqrt(2)
        )
        self.register_buffer("calibrated", torch.tensor(False))

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, proposals={self.proposals!r}, init={self.bank_init!r}"

    def _uses_landmarks(self, causal: bool) -> bool:
        if self.proposals == "landmarks":
            if causal:
                raise ValueError(
                    "landmark proposals pool over the whole sequence and would leak the future; "
                    "use proposals='learned' (or 'auto') for causal attention"
                )
            return True
        return self.proposals == "auto" and not causal

    def _bank(self, param: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        if self.bank_init == "calibrate" and not bool(self.calibrated):
            raise ValueError(
                f"{self.name}'s learned proposal bank is random until fitted: call "
                "attn.calibrate(q, k) on real queries and keys first (distill() does), load a "
                "calibrated state_dict, or pass init='random' to use the random bank on purpose"
            )
        return param.to(dtype)[None]

    def _means(self, qs: torch.Tensor, ks: torch.Tensor, causal: bool) -> torch.Tensor:
        """Proposal means ``(b or 1, h, c, d)``."""
        if self._uses_landmarks(causal):
            return segment_means(qs, self.num_proposals) + segment_means(ks, self.num_proposals)
        return self._bank(self.means, qs.dtype)

    @torch.no_grad()
    def calibrate(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        causal: bool = True,
        key_mask: torch.Tensor | None = None,
    ) -> None:
        """Initialise the learned bank by k-means on ``q'_n + k'_m`` (scaled, random causal pairs
        of real positions: ``key_mask (batch, n)`` is False at padding)."""
        s = math.sqrt(self.scale(None))
        n_points = min(4096, max(8 * self.num_proposals, 4 * q.shape[0] * q.shape[2]))
        pts = _causal_pairs(q * s, k * s, n_points, self.seed, key_mask)
        self.means.copy_(kmeans_means(pts, self.num_proposals, self.seed).to(self.means.dtype))
        self.calibrated.fill_(True)


@register
class LARA(_ProposalAttention):
    """Linear randomized attention (Zheng, Wang, Kong, ICML 2022) with the reference code's options.

    Args:
        num_proposals: ``C``, proposals = samples (one each).
        proposals: ``"landmarks"`` (segment means, as published; non-causal), ``"learned"`` (a
            per-head bank, causal and recurrent; ours) or ``"auto"`` (landmarks when non-causal,
            the bank when causal).
        proposal_gen: ``"adaptive-1d"`` (the reference code's option for sequences: queries and
            keys pass through learned ``LayerNorm(Linear(.))`` per head-dim channel before the
            segment means) or ``"seg-means"`` (no parameters).
        mis: ``"mis-opt"`` (the reference default: balance heuristic plus ``alpha_coeff`` times the
            centred query-softmax term) or ``"mis-bh"`` (balance heuristic alone).
        alpha_coeff: weight of the query-softmax term in ``mis-opt``.
        init: ``"calibrate"`` (the bank must be fitted before use) or ``"random"``.
        seed: initial bank and calibration seed.
    """

    name = "lara"

    def __init__(
        self,
        head_dim: int,
        num_heads: int = 1,
        num_proposals: int = 64,
        proposals: Proposals = "auto",
        proposal_gen: ProposalGen = "adaptive-1d",
        mis: MIS = "mis-opt",
        alpha_coeff: float = 1.0,
        init: Init = "calibrate",
        seed: int = 0,
        **kwargs,  # type: ignore[no-untyped-def]
    ) -> None:
        super().__init__(head_dim, num_heads, num_proposals, proposals, seed, init, **kwargs)
        if proposal_gen not in ("adaptive-1d", "seg-means"):
            raise ValueError(
                f"proposal_gen must be 'adaptive-1d' or 'seg-means'; got {proposal_gen!r}"
            )
        if mis not in ("mis-opt", "mis-bh"):
            raise ValueError(f"mis must be 'mis-opt' or 'mis-bh'; got {mis!r}")
        if not math.isfinite(alpha_coeff) or alpha_coeff < 0:
            raise ValueError(f"alpha_coeff must be a finite float >= 0; got {alpha_coeff!r}")
        self.proposal_gen, self.mis, self.alpha_coeff = proposal_gen, mis, float(alpha_coeff)
        d = head_dim
        if proposal_gen == "adaptive-1d":  # shared over heads, as the reference's 'light' module
            self.q_bar_gen = nn.Sequential(nn.Linear(d, d), nn.LayerNorm(d))
            self.k_bar_gen = nn.Sequential(nn.Linear(d, d), nn.LayerNorm(d))
            with torch.no_grad():  # ours: start from the identity map (a pretrained teacher)
                for gen in (self.q_bar_gen, self.k_bar_gen):
                    gen[0].weight.copy_(torch.eye(d))
                    gen[0].bias.zero_()
        gen = torch.Generator().manual_seed(seed + 2)
        # the query landmarks of the causal bank (ours), for the query-softmax term
        self.query_means = nn.Parameter(
            torch.randn(num_heads, num_proposals, head_dim, generator=gen) / math.sqrt(2)
        )

    @property
    def num_features(self) -> int:
        return self.num_proposals

    def draw(self, batch, dtype, device):  # type: ignore[no-untyped-def]
        """``w_c = mu_c + eps_c``, ``eps ~ N(0, I)`` per sequence in training; ``w_c = mu_c`` in eval."""
        if not self.training:
            return {}
        shape = (batch, self.num_heads, self.num_proposals, self.head_dim)
        return {"noise": torch.randn(shape, dtype=dtype, device=device)}

    def init_state(self, batch, value_dim, dtype=torch.float32, device=None):  # type: ignore[no-untyped-def]
        """The decoding state; with ``mis-opt`` it also keeps the running log-normaliser of the
        query softmax over the queries decoded so far."""
        state = super().init_state(batch, value_dim, dtype, device)
        if self.mis == "mis-opt":
            lse = torch.full((batch, self.num_heads, self.num_proposals), -math.inf)
            state.aux = {**state.aux, "t_lse": lse.to(dtype=state.S.dtype, device=state.S.device)}
        return state

    @torch.no_grad()
    def calibrate(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        causal: bool = True,
        key_mask: torch.Tensor | None = None,
    ) -> None:
        """The bank of ``mu`` by k-means on ``q'_n + k'_m`` and, for the query-softmax term, the
        bank of query landmarks by k-means on ``q'_n`` (real positions only)."""
        super().calibrate(q, k, causal, key_mask)
        s = math.sqrt(self.scale(None))
        real = _keep(q, key_mask).flatten()  # (b n,)
        qs = (q * s).permute(1, 0, 2, 3).flatten(1, 2)[:, real]  # (h, real b n, d)
        gen = torch.Generator().manual_seed(self.seed)
        pick = torch.randperm(qs.shape[1], generator=gen)[:4096]
        bank = kmeans_means(qs[:, pick], self.num_proposals, self.seed)
        self.query_means.copy_(bank.to(self.query_means.dtype))

    def _landmarks(self, qs: torch.Tensor, ks: torch.Tensor, causal: bool, s: float):  # type: ignore[no-untyped-def]
        """``(mu, q_bar)``, each ``(b or 1, h, c, d)``, in the scaled space (``x' = x s``)."""
        if not self._uses_landmarks(causal):
            return self._bank(self.means, qs.dtype), self._bank(self.query_means, qs.dtype)
        if self.proposal_gen == "adaptive-1d":
            # as the reference: LayerNorm(Linear(.)) of the *unscaled* q and k, whose landmark
            # w enters the kernel as w . (x d^-1/2) = (w s) . x': in our space the landmark is w s
            q2 = _linear_norm(self.q_bar_gen, qs / s) * s
            k2 = _linear_norm(self.k_bar_gen, ks / s) * s
        else:
            q2, k2 = qs, ks
        q_bar = segment_means(q2, self.num_proposals)
        return q_bar + segment_means(k2, self.num_proposals), q_bar

    def _query_logits(self, qs: torch.Tensor, q_bar: torch.Tensor) -> torch.Tensor:
        return qs @ q_bar.transpose(-2, -1)  # (b, h, n, c)

    def features(self, q, k, scale, q_pos, k_pos, causal, draws=None):  # type: ignore[no-untyped-def]
        draws = draws or {}
        s = math.sqrt(scale)
        qs, ks = q * s, k * s
        mu, q_bar = self._landmarks(qs, ks, causal, s)
        # fewer tokens than proposals: every token is its own landmark (as the reference)
        w = mu + draws["noise"][..., : mu.shape[-2], :] if "noise" in draws else mu
        # log N(w_c; mu_c', I) up to terms in w_c alone: (b', h, c, c')
        log_n = w @ mu.transpose(-2, -1) - 0.5 * (mu * mu).sum(-1)[..., None, :]
        own = torch.diagonal(log_n, dim1=-2, dim2=-1)  # log proposal density of w_c
        mix = torch.logsumexp(log_n, dim=-1)
        if self.mis == "mis-bh":
            log_alpha, log_prop = torch.zeros_like(own)[..., None, :], mix
        else:
            bh = torch.exp(own - mix)[..., None, :]  # balance heuristic (b', h, 1, c)
            logits = self._query_logits(qs, q_bar)
            pooled = logits  # padding queries take no part in the softmax over queries
            if "query_mask" in draws:
                pooled = logits.masked_fill(~draws["query_mask"][:, None, :, None], -math.inf)
            if causal:  # ours: the query softmax over the queries seen so far
                if q.shape[2] != k.shape[2] and "t_lse" not in draws:
                    raise ValueError(
                        "causal mis-opt LARA normalises over every earlier query, which a cache "
                        "does not keep: decode with form='recurrent', or use mis='mis-bh'"
                    )
                lse = running_logsumexp(pooled)
                if "t_lse" in draws:
                    lse = torch.logaddexp(draws["t_lse"][..., None, :], lse)
                if "query_mask" in draws or "t_lse" in draws:  # leading padding: -inf so far
                    lse = torch.where(torch.isfinite(lse), lse, logits)
            else:
                lse = torch.logsumexp(pooled, dim=-2, keepdim=True)
            t = torch.exp(logits - lse)
            alpha = bh + self.alpha_coeff * (t - t.mean(-1, keepdim=True))
            log_alpha, log_prop = torch.log(alpha.clamp_min(1e-8)), own
        fq = log_alpha + log_positive_features(qs, w) - log_prop[..., None, :]
        return fq, log_positive_features(ks, w)

    def advance(self, draws, q, scale, keep=None):  # type: ignore[no-untyped-def]
        if "t_lse" not in draws:
            return draws
        qs = q * math.sqrt(scale)
        logits = self._query_logits(qs, self._bank(self.query_means, qs.dtype))[:, :, 0]
        if keep is not None:  # a padding query takes no part in the softmax over queries
            logits = logits.masked_fill(~keep.to(torch.bool)[:, None, None], -math.inf)
        return {**draws, "t_lse": torch.logaddexp(draws["t_lse"], logits)}

    def importance_weights(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Non-causal LARA as a mixture: ``(iw (b, h, n, C), f (b, h, C, d_v))`` with
        ``iw.sum(-1) == 1`` and output ``iw @ f``."""
        sc = self.scale(scale)
        k_pos = torch.arange(k.shape[2], device=q.device)
        draws = self.draw(q.shape[0], q.dtype, q.device)
        fq, fk = self.features(q, k, sc, k_pos[-q.shape[2] :], k_pos, False, draws)
        iw = torch.softmax(fq + torch.logsumexp(fk, dim=-2)[..., None, :], dim=-1)
        f = torch.softmax(fk, dim=-2).transpose(-2, -1) @ v
        return iw, f


def _linear_norm(gen: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """``LayerNorm(Linear(x))`` in ``x``'s dtype (the module may be stored in half precision)."""
    lin, norm = gen[0], gen[1]
    y = F.linear(x, lin.weight.to(x.dtype), lin.bias.to(x.dtype))
    return F.layer_norm(y, norm.normalized_shape, norm.weight.to(x.dtype), norm.bias.to(x.dtype))


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
        init: Init = "calibrate",
        seed: int = 0,
        **kwargs,  # type: ignore[no-untyped-def]
    ) -> None:
        super().__init__(head_dim, num_heads, num_proposals, proposals, seed, init, **kwargs)
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
        return self._bank(self.means, qs.dtype)

    def draw(self, batch, dtype, device):  # type: ignore[no-untyped-def]
        """Fresh antithetic noise per sequence in training (with ``resample``), else none."""
        if self.training and self.resample:
            return {"noise": self._antithetic(None).to(device=device, dtype=dtype)}
        return {}

    def features(self, q, k, scale, q_pos, k_pos, causal, draws=None):  # type: ignore[no-untyped-def]
        s = math.sqrt(scale)
        qs, ks = q * s, k * s
        mu = self._means(qs, ks, causal)  # (b', h, c, d)
        c, n_s = mu.shape[-2], self.samples_per_proposal
        sigma = torch.exp(self.log_sigma.to(q.dtype))[None, :, :c]  # (1, h, c)
        noise = (draws or {}).get("noise", self.noise).to(q.dtype)[:, :c]
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
