"""The student attention of one layer: a state update, a feature map, and the interventions (sink
tokens, a short convolution, a fixed-budget exact KV cache routed beside the state).

One rule decides everything that is exact and everything that goes into the state: an exact cache
of ``budget`` entries = ``sinks`` (the first tokens, kept forever) + ``window`` (the most recent
tokens) + ``budget - sinks - window`` routed slots. A token leaving the window enters the routed
pool; when the pool is full one entry is evicted, by ``routing``:

- ``recency``: the oldest (the slots act as a longer window);
- ``score``: the least accumulated attention received so far from the queries that saw it (H2O-like);
- ``self_recall``: the one the state already recalls best, ``|S phi(k) - v|`` smallest (LoLA's
  rule: keep exact what the state would get wrong).

An evicted token is written into the state at that step; with ``budget = 0`` every token is written
at its own step (plain linear attention), with ``update = "none"`` evicted tokens are dropped (a
sliding window, StreamingLLM). The order of writes is a permutation, so the state update still runs
in its chunked form on the written sequence (``writer[t]``: the token written at step ``t``).

Exact part and state combine (``combine``): ``shared`` denominator for normalised states (LoLCATs),
``(sum_exact e^{l_s} v_s + f S phi(q)) / (sum_exact e^{l_s} + f z phi(q))`` with a learned per-head
``f``; a learned per-head ``mix`` for delta states, ``(1 - g_t) o_exact + g_t S q`` with
``g_t = sigmoid(lambda_h)`` once the state holds a token and 0 while it is empty; ``half`` (Liger's
fixed 0.5 / 0.5). The short convolution (causal, depthwise, identity at init) acts on the state's
queries, keys and values only, so the exact part stays the teacher's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from linearize.features import FEATURE_MAPS, FeatureMap
from linearize.updates import FORMS, diagonal_update, scalar_update

__all__ = [
    "COMBINES",
    "ROUTINGS",
    "UPDATES",
    "LinearizeConfig",
    "LinearizedAttention",
    "zero_state",
]

UPDATES = ("linear", "gated", "diag_gated", "delta", "gated_delta", "control", "none")
DELTA_RULES = ("delta", "gated_delta", "control")
ROUTINGS = ("recency", "score", "self_recall")
COMBINES = ("auto", "shared", "mix", "half")


@dataclass(frozen=True)
class LinearizeConfig:
    """How each softmax attention layer is replaced.

    ``update``: one of :data:`UPDATES`; ``feature_map``: one of ``l2, elu1, hedgehog, liger`` (None:
    ``l2`` for the delta rules, ``hedgehog`` otherwise); ``normalize`` (None: True for linear /
    gated / diag_gated, False for the delta rules, which cannot be normalised); ``gate_source``:
    ``learned`` (a small per-head projection of the key) or ``key`` (Liger: ``logsigmoid`` of the
    key pooled to the feature width, divided by 16); ``budget`` exact KV entries, of which ``sinks``
    and ``window``; ``routing`` for the rest; ``conv``: short convolution of ``conv_kernel``;
    ``state_covers``: ``evicted`` (the state holds what the cache does not) or ``all`` (every token,
    as Liger); ``combine``: one of :data:`COMBINES`; ``form``/``chunk_size`` of the state update.
    """

    update: str = "gated_delta"
    feature_map: str | None = None
    feature_dim: int | None = None
    normalize: bool | None = None
    gate_source: str = "learned"
    budget: int = 0
    sinks: int = 0
    window: int = 0
    routing: str = "score"
    conv: bool = False
    conv_kernel: int = 4
    state_covers: str = "evicted"
    combine: str = "auto"
    form: str = "chunked"
    chunk_size: int = 64

    def __post_init__(self) -> None:
        def bad(name: str, allowed: str) -> ValueError:
            return ValueError(f"{name} must be {allowed}; got {getattr(self, name)!r}")

        if self.update not in UPDATES:
            raise bad("update", f"one of {', '.join(UPDATES)}")
        if self.feature_map is not None and self.feature_map not in FEATURE_MAPS:
            raise bad("feature_map", f"None or one of {', '.join(FEATURE_MAPS)}")
        if self.gate_source not in ("learned", "key"):
            raise bad("gate_source", "'learned' or 'key'")
        if self.routing not in ROUTINGS:
            raise bad("routing", f"one of {', '.join(ROUTINGS)}")
        if self.combine not in COMBINES:
            raise bad("combine", f"one of {', '.join(COMBINES)}")
        if self.state_covers not in ("evicted", "all"):
            raise bad("state_covers", "'evicted' or 'all'")
        if self.form not in FORMS:
            raise bad("form", f"one of {', '.join(FORMS)}")
        for name in ("budget", "sinks", "window"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise bad(name, "an int >= 0")
        if self.sinks > self.budget:
            raise ValueError(f"sinks ({self.sinks}) > budget ({self.budget})")
        if self.sinks + self.window > self.budget:
            raise ValueError(
                f"sinks + window ({self.sinks} + {self.window}) exceed the budget ({self.budget})"
            )
        if not isinstance(self.chunk_size, int) or self.chunk_size <= 0:
            raise bad("chunk_size", "an int > 0")
        if not isinstance(self.conv_kernel, int) or self.conv_kernel < 1:
            raise bad("conv_kernel", "an int >= 1")
        if self.update == "none" and self.budget == 0:
            raise ValueError("update='none' keeps no state: it needs budget > 0")
        if self.normalize and self.update in DELTA_RULES:
            raise ValueError(f"a {self.update} state cannot be normalised: leave normalize unset")
        if self.is_normalized and self.map_name in ("l2", "learned"):
            raise ValueError(
                "a normalised state needs a positive feature map (elu1, hedgehog, liger)"
            )

    @property
    def map_name(self) -> str:
        if self.feature_map is not None:
            return self.feature_map
        return "l2" if self.update in DELTA_RULES else "hedgehog"

    @property
    def is_normalized(self) -> bool:
        if self.update in ("none", *DELTA_RULES):
            return False
        return True if self.normalize is None else bool(self.normalize)

    @property
    def routed(self) -> int:
        return self.budget - self.sinks - self.window

    @property
    def combine_rule(self) -> str:
        if self.combine != "auto":
            return self.combine
        return "shared" if self.is_normalized else "mix"


_ZERO_STATE: list[bool] = [False]


@contextlib.contextmanager
def zero_state() -> Iterator[None]:
    """Within this block every :class:`LinearizedAttention` runs with its state zeroed (the exact
    cache alone): the check that a hybrid is not bypassing its state."""
    _ZERO_STATE.append(True)
    try:
        yield
    finally:
        _ZERO_STATE.pop()


class LinearizedAttention(nn.Module):
    """Student attention for one layer, called as ``(q, k, v, causal, key_mask=, scale=)`` with
    ``(batch, heads, n, head_dim)`` queries/keys/values (after RoPE, kv heads repeated), the
    interface of :func:`paper_common.attention.swap_attention`."""

    def __init__(self, config: LinearizeConfig, head_dim: int, n_heads: int):
        super().__init__()
        self.config, self.head_dim, self.n_heads = config, head_dim, n_heads
        cfg = config
        self.has_state = cfg.update != "none"
        if not self.has_state:
            return  # an exact cache alone: no parameters
        self.phi_q = FeatureMap(cfg.map_name, head_dim, n_heads, cfg.feature_dim)
        self.phi_k = FeatureMap(cfg.map_name, head_dim, n_heads, cfg.feature_dim)
        df = self.phi_k.out_dim
        h = n_heads
        if cfg.update in ("gated", "gated_delta") and cfg.gate_source == "learned":
            self.gate_w = nn.Parameter(torch.zeros(h, head_dim))
            self.gate_b = nn.Parameter(torch.full((h,), 3.0))  # a ~ 0.95 at init
        if cfg.update == "diag_gated" and cfg.gate_source == "learned":
            self.gate_w = nn.Parameter(torch.zeros(h, head_dim, df))
            self.gate_b = nn.Parameter(torch.full((h, df), 3.0))
        if cfg.update in DELTA_RULES:
            self.beta_w = nn.Parameter(torch.zeros(h, head_dim))
            self.beta_b = nn.Parameter(torch.full((h,), 2.0))  # b ~ 0.88 at init
        if cfg.update == "control":
            gen = torch.Generator().manual_seed(0)
            self.direction = nn.Parameter(torch.randn(h, df, generator=gen))
        if cfg.conv:
            width = cfg.conv_kernel
            w = torch.zeros(3, h * head_dim, 1, width)
            w[..., -1] = 1.0  # identity at init
            self.conv_weight = nn.Parameter(w)
        if cfg.budget and self.has_state:
            if cfg.combine_rule == "shared":
                self.log_scale = nn.Parameter(torch.zeros(h))
            elif cfg.combine_rule == "mix":
                self.mix = nn.Parameter(torch.zeros(h))

    # ------------------------------------------------------------------ pieces
    def _conv(self, x: torch.Tensor, which: int) -> torch.Tensor:
        b, h, n, d = x.shape
        flat = x.permute(0, 1, 3, 2).reshape(b, h * d, n)
        flat = F.pad(flat, (self.config.conv_kernel - 1, 0))
        out = F.conv1d(flat, self.conv_weight[which, :, 0, None, :], groups=h * d)
        return out.reshape(b, h, d, n).permute(0, 1, 3, 2)

    def _log_gate(self, k: torch.Tensor, width: int) -> torch.Tensor | None:
        """Per-token log gates: ``(b, h, n)`` (scalar) or ``(b, h, n, width)`` (diagonal)."""
        upd = self.config.update
        if upd not in ("gated", "gated_delta", "diag_gated"):
            return None
        if self.config.gate_source == "key":  # Liger: pooled key, logsigmoid / 16
            pooled = F.adaptive_avg_pool1d(k.flatten(0, 2)[:, None], width)[:, 0]
            g = F.logsigmoid(pooled.reshape(*k.shape[:3], width)) / 16
            return g if upd == "diag_gated" else g.mean(-1)
        if upd == "diag_gated":
            return F.logsigmoid(
                torch.einsum("bhnd,hdf->bhnf", k, self.gate_w) + self.gate_b[:, None]
            )
        return F.logsigmoid(torch.einsum("bhnd,hd->bhn", k, self.gate_w) + self.gate_b[:, None])

    def _beta(self, k: torch.Tensor) -> torch.Tensor | None:
        if self.config.update not in DELTA_RULES:
            return None
        return torch.sigmoid(torch.einsum("bhnd,hd->bhn", k, self.beta_w) + self.beta_b[:, None])

    # ------------------------------------------------------------------ routing
    @torch.no_grad()
    def schedule(
        self,
        logits: torch.Tensor | None,
        fk: torch.Tensor,
        v: torch.Tensor,
        log_a: torch.Tensor | None,
        beta: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``writer (b, h, n)``: the token written into the state at step ``t`` (-1: none), and
        ``evicted_at (b, h, n)``: the step a token leaves the exact cache (``n``: never)."""
        cfg = self.config
        b, h, n = fk.shape[:3]
        dev = fk.device
        steps = torch.arange(n, device=dev)
        if cfg.budget == 0:
            return steps.expand(b, h, n).clone(), steps.expand(b, h, n).clone()
        if cfg.routed == 0 or cfg.routing == "recency":
            return self._recency(b, h, n, dev)
        return self._routed_schedule(logits, fk, v, log_a, beta)

    def _recency(
        self, b: int, h: int, n: int, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sinks forever, then first in first out: the routed slots act as a longer window."""
        cfg = self.config
        steps = torch.arange(n, device=device)
        keep = cfg.window + cfg.routed
        leaving = steps - keep
        writer = torch.where(leaving >= cfg.sinks, leaving, -1)
        evicted = torch.where(steps >= cfg.sinks, steps + keep, n).clamp(max=n)
        return writer.expand(b, h, n), evicted.expand(b, h, n)

    def _routed_schedule(self, logits, fk, v, log_a, beta):  # type: ignore[no-untyped-def]
        cfg = self.config
        b, h, n = fk.shape[:3]
        dev = fk.device
        writer = torch.full((b, h, n), -1, dtype=torch.long, device=dev)
        evicted = torch.full((b, h, n), n, dtype=torch.long, device=dev)
        in_cache = torch.zeros(b, h, n, dtype=torch.bool, device=dev)
        in_pool = torch.zeros_like(in_cache)
        score = torch.zeros(b, h, n, dtype=fk.dtype, device=dev)
        norm = self.config.is_normalized
        vv = torch.cat([v, torch.ones_like(v[..., :1])], -1) if norm else v
        state = fk.new_zeros(b, h, vv.shape[-1], fk.shape[-1])
        rows = torch.arange(b, device=dev)[:, None]
        heads = torch.arange(h, device=dev)[None, :]
        pool_size = 0
        for t in range(n):
            in_cache[..., t] = True
            if cfg.routing == "score":
                w = torch.softmax(logits[:, :, t].masked_fill(~in_cache, float("-inf")), -1)
                score += w
            j = t - cfg.window
            if j < cfg.sinks:
                continue
            in_pool[..., j] = True
            pool_size += 1
            if pool_size <= cfg.routed:
                continue
            if cfg.routing == "score":
                crit = score
            else:  # self_recall: the error of reading v_s back from the state
                pred = state @ fk.transpose(-2, -1)  # (b, h, dv', n)
                if norm:
                    pred = pred[:, :, :-1] / pred[:, :, -1:].clamp_min(1e-6)
                crit = (pred.transpose(-2, -1) - v).norm(dim=-1)
            # ties (equal criteria, e.g. a state that reads every token back equally) go to the
            # lowest index, the oldest token in the pool: torch.argmin returns the first minimum
            victim = crit.masked_fill(~in_pool, float("inf")).argmin(-1)  # (b, h)
            in_pool[rows, heads, victim] = False
            in_cache[rows, heads, victim] = False
            pool_size -= 1
            writer[..., t] = victim
            evicted[rows, heads, victim] = t
            if cfg.routing == "self_recall":
                state = self._write(state, fk, vv, log_a, beta, rows, heads, victim)
        return writer, evicted

    def _write(self, state, fk, vv, log_a, beta, rows, heads, idx):  # type: ignore[no-untyped-def]
        """One recurrent step of the update for the tokens ``idx (b, h)``."""
        k = fk[rows, heads, idx]  # (b, h, df)
        v = vv[rows, heads, idx]
        c = 1.0
        if beta is not None:
            bt = beta[rows, heads, idx][..., None, None]
            e = self._erase_dirs(fk)[rows, heads, idx] if self.config.update == "control" else k
            state = state - bt * (state @ e[..., None]) * e[..., None, :]
            c = bt
        if log_a is not None:
            a = log_a[rows, heads, idx].exp()
            state = state * (a[..., None, :] if a.ndim == 3 else a[..., None, None])
        return state + c * v[..., :, None] * k[..., None, :]

    def _erase_dirs(self, fk: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.direction, dim=-1)[None, :, None, :].expand_as(fk)

    # ------------------------------------------------------------------ forward
    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        causal: bool = True,
        key_mask: torch.Tensor | None = None,
        scale: float | None = None,
    ) -> torch.Tensor:
        """``(batch, heads, n, head_dim)`` outputs."""
        cfg = self.config
        if not causal:
            raise ValueError("LinearizedAttention is causal only")
        if q.shape[-1] != self.head_dim or k.shape[-1] != self.head_dim:
            raise ValueError(
                f"head-dim mismatch: built for {self.head_dim}, got q {q.shape[-1]}, k {k.shape[-1]}"
            )
        if q.shape[1] != self.n_heads:
            raise ValueError(f"built for {self.n_heads} heads, got {q.shape[1]}")
        if q.shape[2] != k.shape[2]:
            raise ValueError(
                "queries and keys differ in length (a KV cache): run the model with use_cache=False"
            )
        b, h, n, _ = q.shape
        scale = self.head_dim**-0.5 if scale is None else scale
        logits = (q @ k.transpose(-2, -1)) * scale if cfg.budget else None
        zeroed = _ZERO_STATE[-1]
        o_state = None
        if self.has_state:
            qs, ks, vs = q, k, v
            if cfg.conv:
                qs, ks, vs = (self._conv(x, i) for i, x in enumerate((q, k, v)))
            fq, fk = self.phi_q(qs), self.phi_k(ks)
            if cfg.update in DELTA_RULES:
                fq, fk = F.normalize(fq, dim=-1), F.normalize(fk, dim=-1)
            log_a, beta = self._log_gate(ks, fk.shape[-1]), self._beta(ks)
            if cfg.state_covers == "all":
                writer = torch.arange(n, device=q.device).expand(b, h, n)
                _, evicted = self._recency(b, h, n, q.device)
            else:
                writer, evicted = self.schedule(logits, fk, vs, log_a, beta)
            o_state, den = self._state_output(fq, fk, vs, log_a, beta, writer, key_mask)
            if zeroed:
                o_state = torch.zeros_like(o_state)
                den = None if den is None else torch.zeros_like(den)
            if cfg.budget == 0:
                return o_state if den is None else o_state / (den + 1e-6)
        else:
            _, evicted = self.schedule(logits, k, v, None, None)
        # exact part over the cache
        steps = torch.arange(n, device=q.device)
        allowed = (steps[None, :] <= steps[:, None])[None, None] & (
            evicted[:, :, None, :] > steps[None, None, :, None]
        )
        if key_mask is not None:
            allowed = allowed & key_mask[:, None, None, :]
        lg = logits.masked_fill(~allowed, float("-inf"))
        m = lg.amax(-1, keepdim=True).detach().clamp_min(-1e4)
        p = (lg - m).exp()
        num, den_e = p @ v, p.sum(-1, keepdim=True)
        if o_state is None:
            return num / den_e.clamp_min(1e-30)
        rule = cfg.combine_rule
        if rule == "shared":
            f = self.log_scale.exp()[None, :, None, None]
            return (num + f * o_state) / (den_e + f * den)
        o_exact = num / den_e.clamp_min(1e-30)
        o_s = o_state if den is None else o_state / (den + 1e-6)
        if rule == "half":
            return 0.5 * o_exact + 0.5 * o_s
        filled = ((writer >= 0).long().cumsum(-1) > 0).to(q.dtype)[..., None]  # (b, h, n, 1)
        g = torch.sigmoid(self.mix)[None, :, None, None] * filled
        return (1 - g) * o_exact + g * o_s

    def _state_output(self, fq, fk, v, log_a, beta, writer, key_mask):  # type: ignore[no-untyped-def]
        """State read-out ``S_t phi(q_t)`` after the step-``t`` write, and the normaliser
        ``z_t . phi(q_t)`` for normalised states (else None)."""
        cfg = self.config
        idx = writer.clamp(min=0)
        valid = (writer >= 0).to(fq.dtype)
        if key_mask is not None:
            valid = valid * key_mask[:, None, :].to(fq.dtype).expand_as(valid).gather(-1, idx)

        def take(x: torch.Tensor) -> torch.Tensor:
            return x.gather(2, idx[..., None].expand(*idx.shape, x.shape[-1]))

        kw, vw = take(fk), take(v)
        if cfg.is_normalized:
            vw = torch.cat([vw, torch.ones_like(vw[..., :1])], -1)
        c = valid
        b_erase = e = None
        if beta is not None:
            bw = beta.gather(2, idx) * valid
            c, b_erase = bw, bw
            if cfg.update == "control":
                e = self._erase_dirs(fk)
        la = None
        if log_a is not None:
            la = (take(log_a) if log_a.ndim == 4 else log_a.gather(2, idx)) * (
                valid[..., None] if log_a.ndim == 4 else valid
            )
        kwargs = {"form": cfg.form, "chunk_size": cfg.chunk_size}
        if cfg.update == "diag_gated":
            out, _ = diagonal_update(fq, kw, vw, la, c=c, **kwargs)
        else:
            out, _ = scalar_update(fq, kw, vw, log_a=la, b=b_erase, e=e, c=c, **kwargs)
        if cfg.is_normalized:
            return out[..., :-1], out[..., -1:]
        return out, None
