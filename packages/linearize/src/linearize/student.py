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
import copy
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
    "DecodeState",
    "LinearizeConfig",
    "LinearizedAttention",
    "scale_state",
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
    as Liger); ``combine``: one of :data:`COMBINES`; ``form``/``chunk_size`` of the state update;
    ``control_seed``: the seed of the ``control`` update's initial key-independent direction.
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
    control_seed: int = 0

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
        for name in ("budget", "sinks", "window", "control_seed"):
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


_STATE_SCALE: list[float] = [1.0]


def zero_state() -> contextlib.AbstractContextManager[None]:
    """Within this block every :class:`LinearizedAttention` runs with its state zeroed (the exact
    cache alone): the check that a hybrid is not bypassing its state."""
    return scale_state(0.0)


@contextlib.contextmanager
def scale_state(factor: float) -> Iterator[None]:
    """Within this block every :class:`LinearizedAttention` multiplies its state's read-out (and
    normaliser) by ``factor`` in ``[0, 1]``: 0 zeroes it (:func:`zero_state`); a factor near 1 is the
    placebo of that check (a perturbation that must cost nothing)."""
    if not 0.0 <= float(factor) <= 1.0:
        raise ValueError(f"factor must be in [0, 1]; got {factor!r}")
    _STATE_SCALE.append(float(factor))
    try:
        yield
    finally:
        _STATE_SCALE.pop()


def _scaled(o_state: torch.Tensor, den: torch.Tensor | None):  # type: ignore[no-untyped-def]
    f = _STATE_SCALE[-1]
    if f == 1.0:
        return o_state, den
    if f == 0.0:  # zeros, not 0 * x (a non-finite read-out stays out)
        return torch.zeros_like(o_state), None if den is None else torch.zeros_like(den)
    return f * o_state, None if den is None else f * den


class LinearizedAttention(nn.Module):
    """Student attention for one layer, called as ``(q, k, v, causal, key_mask=, scale=)`` with
    ``(batch, heads, n, head_dim)`` queries/keys/values (after RoPE, kv heads repeated), the
    interface of :func:`paper_common.attention.swap_attention`."""

    def __init__(self, config: LinearizeConfig, head_dim: int, n_heads: int):
        super().__init__()
        self.config, self.head_dim, self.n_heads = config, head_dim, n_heads
        cfg = config
        self.has_state = cfg.update != "none"
        self.decoding: DecodeState | None = None  # set by convert.recurrent
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
            gen = torch.Generator().manual_seed(cfg.control_seed)
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
    @property
    def slots(self) -> int:
        """Columns of the exact cache per step: the budget, plus one under score / self-recall
        routing (at the step a token enters the full routed pool the cache holds ``budget + 1``
        tokens until one is evicted; the column of the evicted one is then empty)."""
        cfg = self.config
        if cfg.budget and cfg.routed and cfg.routing != "recency" and cfg.state_covers == "evicted":
            return cfg.budget + 1
        return cfg.budget

    @torch.no_grad()
    def schedule(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        fk: torch.Tensor,
        v: torch.Tensor,
        log_a: torch.Tensor | None = None,
        beta: torch.Tensor | None = None,
        scale: float | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``writer (b, h, n)``: the token written into the state at step ``t`` (-1: none), and
        ``cache (b, h, n, slots)``: the tokens in the exact cache after step ``t`` (-1: an empty
        slot). ``q, k``: the teacher's queries and keys (score routing); ``fk, v``: the state's
        keys (features) and values (self-recall routing). Memory ``O(n * slots)``; score and
        self-recall routing take one pass over the tokens with ``O(slots)`` work each."""
        cfg = self.config
        b, h, n = k.shape[:3]
        if cfg.budget == 0:
            steps = torch.arange(n, device=k.device)
            return steps.expand(b, h, n).clone(), steps.new_zeros(b, h, n, 0)
        if cfg.routed == 0 or cfg.routing == "recency":
            return self._recency(b, h, n, k.device)
        scale = self.head_dim**-0.5 if scale is None else scale
        return self._routed_schedule(q, k, fk, v, log_a, beta, scale)

    def _recency(
        self, b: int, h: int, n: int, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sinks forever, then first in first out: the routed slots act as a longer window."""
        cfg = self.config
        steps = torch.arange(n, device=device)
        keep = cfg.window + cfg.routed
        leaving = steps - keep
        writer = torch.where(leaving >= cfg.sinks, leaving, -1)
        sinks = torch.arange(cfg.sinks, device=device).expand(n, cfg.sinks)
        sinks = torch.where(sinks <= steps[:, None], sinks, -1)
        win = steps[:, None] - keep + 1 + torch.arange(keep, device=device)
        win = torch.where(win >= cfg.sinks, win, -1)
        cache = torch.cat([sinks, win], 1)
        return writer.expand(b, h, n), cache.expand(b, h, n, cache.shape[1])

    def _victim(
        self,
        t: int,
        tok: torch.Tensor,
        score: torch.Tensor,
        state: torch.Tensor | None,
        fk_slots: torch.Tensor | None,
        v_slots: torch.Tensor | None,
    ) -> torch.Tensor | None:
        """The slot ``(b, h)`` evicted at step ``t`` (after token ``t`` entered), or None when the
        routed pool is not over its size. The pool: tokens past the window, not sinks. Ties go to
        the oldest token (lowest index)."""
        cfg = self.config
        entered = t - cfg.window  # the token that left the window at step t
        if entered < cfg.sinks or entered - cfg.sinks + 1 <= cfg.routed:
            return None
        pool = (tok >= cfg.sinks) & (tok <= entered)
        if cfg.routing == "score":
            crit = score
        else:  # self_recall: the error of reading v_s back from the state
            pred = fk_slots.new_zeros(v_slots.shape) if state is None else None
            if state is not None:
                pred = (state @ fk_slots.transpose(-2, -1)).transpose(-2, -1)  # (b, h, c, dv')
                if cfg.is_normalized:
                    pred = pred[..., :-1] / pred[..., -1:].clamp_min(1e-6)
            crit = (pred - v_slots).norm(dim=-1)
        crit = crit.masked_fill(~pool, float("inf"))
        lowest = crit.amin(-1, keepdim=True)
        tie_break = torch.where(pool & (crit == lowest), tok, torch.iinfo(tok.dtype).max)
        return tie_break.argmin(-1)

    def _routed_schedule(self, q, k, fk, v, log_a, beta, scale):  # type: ignore[no-untyped-def]
        cfg = self.config
        b, h, n = k.shape[:3]
        dev = k.device
        c = self.slots
        writer = torch.full((b, h, n), -1, dtype=torch.long, device=dev)
        cache = torch.full((b, h, n, c), -1, dtype=torch.long, device=dev)
        tok = torch.full((b, h, c), -1, dtype=torch.long, device=dev)
        score = k.new_zeros(b, h, c)
        vv = torch.cat([v, torch.ones_like(v[..., :1])], -1) if cfg.is_normalized else v
        state = None
        if cfg.routing == "self_recall" and self.has_state:
            state = fk.new_zeros(b, h, vv.shape[-1], fk.shape[-1])
        for t in range(n):
            free = (tok < 0).to(torch.int8).argmax(-1, keepdim=True)
            tok = tok.scatter(-1, free, t)
            score = score.scatter(-1, free, 0.0)
            if cfg.routing == "score":
                lg = torch.einsum("bhd,bhcd->bhc", q[:, :, t], _take(k, tok)) * scale
                score = score + torch.softmax(lg.masked_fill(tok < 0, float("-inf")), -1)
            slots_fk = _take(fk, tok) if cfg.routing == "self_recall" else None
            slots_v = _take(v, tok) if cfg.routing == "self_recall" else None
            victim = self._victim(t, tok, score, state, slots_fk, slots_v)
            if victim is not None:
                gone = tok.gather(-1, victim[..., None])
                writer[..., t] = gone[..., 0]
                tok = tok.scatter(-1, victim[..., None], -1)
                if state is not None:
                    state = self._write(
                        state, *(_at(x, gone[..., 0]) for x in (fk, vv)),
                        None if log_a is None else _at(log_a, gone[..., 0]),
                        None if beta is None else _at(beta, gone[..., 0]),
                    )  # fmt: skip
            cache[:, :, t] = tok
        return writer, cache

    def _write(self, state, k, v, log_a, beta, mask=None):  # type: ignore[no-untyped-def]
        """One recurrent step of the update: write key ``k (b, h, df)`` and value ``v (b, h, dv')``
        with the token's gate ``log_a`` (``(b, h)`` or ``(b, h, df)``) and ``beta (b, h)``; where
        ``mask (b, h)`` is False the state is left as it is."""
        c = 1.0
        new = state
        if beta is not None:
            bt = beta[..., None, None]
            e = k
            if self.config.update == "control":
                e = F.normalize(self.direction, dim=-1)[None].expand_as(k)
            new = new - bt * (new @ e[..., None]) * e[..., None, :]
            c = bt
        if log_a is not None:
            a = log_a.exp()
            new = new * (a[..., None, :] if a.ndim == 3 else a[..., None, None])
        new = new + c * v[..., :, None] * k[..., None, :]
        return new if mask is None else torch.where(mask[..., None, None], new, state)

    def _erase_dirs(self, fk: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.direction, dim=-1)[None, :, None, :].expand_as(fk)

    # ------------------------------------------------------------------ forward
    def _check_inputs(self, q: torch.Tensor, k: torch.Tensor, causal: bool) -> None:
        if not causal:
            raise ValueError("LinearizedAttention is causal only")
        if q.shape[-1] != self.head_dim or k.shape[-1] != self.head_dim:
            raise ValueError(
                f"head-dim mismatch: built for {self.head_dim}, got q {q.shape[-1]}, k {k.shape[-1]}"
            )
        if q.shape[1] != self.n_heads:
            raise ValueError(f"built for {self.n_heads} heads, got {q.shape[1]}")

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        causal: bool = True,
        key_mask: torch.Tensor | None = None,
        scale: float | None = None,
    ) -> torch.Tensor:
        """``(batch, heads, n, head_dim)`` outputs, in time and memory linear in ``n``.

        ``key_mask (batch, n)``: True at real tokens (None: all real). Padding takes no place in
        the sequence: each row's real tokens are moved to the front in order (so sinks, window,
        routing and the state see the row as if it were unpadded, whatever side the tokenizer pads
        on), and the outputs are moved back; outputs at padding positions are meaningless."""
        self._check_inputs(q, k, causal)
        if self.decoding is not None:  # inside convert.recurrent: one token, the fixed state
            out, self.decoding = self.step(q, k, v, self.decoding, scale)
            return out
        if q.shape[2] != k.shape[2]:
            raise ValueError(
                "queries and keys differ in length (a KV cache): run the model with use_cache=False, "
                "or decode with init_decode / step"
            )
        scale = self.head_dim**-0.5 if scale is None else scale
        if key_mask is None or bool(key_mask.all()):
            return self._forward(q, k, v, scale)
        if key_mask.shape != (q.shape[0], q.shape[2]):
            raise ValueError(
                f"key_mask must be (batch, n) = {(q.shape[0], q.shape[2])}; got {tuple(key_mask.shape)}"
            )
        order = torch.sort((~key_mask.bool()).to(torch.int8), dim=-1, stable=True).indices
        idx = order[:, None, :, None]

        def move(x: torch.Tensor) -> torch.Tensor:
            return x.gather(2, idx.expand(-1, x.shape[1], -1, x.shape[-1]))

        out = self._forward(move(q), move(k), move(v), scale)
        return torch.zeros_like(out).scatter(2, idx.expand_as(out), out)

    def _features(self, q, k, v):  # type: ignore[no-untyped-def]
        """The state side of ``(b, h, n, d)`` inputs: features ``fq, fk``, values, gates, betas."""
        cfg = self.config
        fq, fk = self.phi_q(q), self.phi_k(k)
        if cfg.update in DELTA_RULES:
            fq, fk = F.normalize(fq, dim=-1), F.normalize(fk, dim=-1)
        return fq, fk, v, self._log_gate(k, fk.shape[-1]), self._beta(k)

    def _forward(self, q, k, v, scale):  # type: ignore[no-untyped-def]
        cfg = self.config
        b, h, n, _ = q.shape
        if not self.has_state:
            _, cache = self.schedule(q, k, k, v, scale=scale)
            num, den_e = _exact(q, k, v, cache, scale)
            return num / den_e.clamp_min(1e-30)
        qs, ks, vs = q, k, v
        if cfg.conv:
            qs, ks, vs = (self._conv(x, i) for i, x in enumerate((q, k, v)))
        fq, fk, vs, log_a, beta = self._features(qs, ks, vs)
        if cfg.state_covers == "all":
            writer = torch.arange(n, device=q.device).expand(b, h, n)
            _, cache = self._recency(b, h, n, q.device)
        else:
            writer, cache = self.schedule(q, k, fk, vs, log_a, beta, scale)
        o_state, den = self._state_output(fq, fk, vs, log_a, beta, writer)
        o_state, den = _scaled(o_state, den)
        if cfg.budget == 0:
            return o_state if den is None else o_state / (den + 1e-6)
        num, den_e = _exact(q, k, v, cache, scale)
        filled = ((writer >= 0).long().cumsum(-1) > 0).to(q.dtype)[..., None]  # (b, h, n, 1)
        return self._combine(num, den_e, o_state, den, filled)

    def _combine(self, num, den_e, o_state, den, filled):  # type: ignore[no-untyped-def]
        rule = self.config.combine_rule
        if rule == "shared":
            f = self.log_scale.exp()[None, :, None, None]
            return (num + f * o_state) / (den_e + f * den)
        o_exact = num / den_e.clamp_min(1e-30)
        o_s = o_state if den is None else o_state / (den + 1e-6)
        if rule == "half":
            return 0.5 * o_exact + 0.5 * o_s
        g = torch.sigmoid(self.mix)[None, :, None, None] * filled
        return (1 - g) * o_exact + g * o_s

    def _state_output(self, fq, fk, v, log_a, beta, writer):  # type: ignore[no-untyped-def]
        """State read-out ``S_t phi(q_t)`` after the step-``t`` write, and the normaliser
        ``z_t . phi(q_t)`` for normalised states (else None)."""
        cfg = self.config
        idx = writer.clamp(min=0)
        valid = (writer >= 0).to(fq.dtype)

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

    # ------------------------------------------------------------------ decoding
    def init_decode(
        self,
        batch: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> DecodeState:
        """The empty :class:`DecodeState` of ``batch`` sequences, for :meth:`step`."""
        if not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be an int >= 1; got {batch!r}")
        ref = next(self.parameters(), None)
        device = device if device is not None else (ref.device if ref is not None else "cpu")
        dtype = dtype if dtype is not None else (ref.dtype if ref is not None else torch.float32)
        cfg, b, h, d, c = self.config, batch, self.n_heads, self.head_dim, self.slots

        def z(*shape: int) -> torch.Tensor:
            return torch.zeros(*shape, device=device, dtype=dtype)

        st = DecodeState(
            t=0,
            tok=torch.full((b, h, c), -1, dtype=torch.long, device=device),
            score=z(b, h, c),
            k=z(b, h, c, d),
            v=z(b, h, c, d),
            filled=torch.zeros(b, h, dtype=torch.bool, device=device),
        )
        if not self.has_state:
            return st
        df = self.phi_k.out_dim
        dv = d + 1 if cfg.is_normalized else d
        st.state = z(b, h, dv, df)
        st.fk, st.vs = z(b, h, c, df), z(b, h, c, dv)
        if cfg.update == "diag_gated":
            st.log_a = z(b, h, c, df)
        elif cfg.update in ("gated", "gated_delta"):
            st.log_a = z(b, h, c)
        if cfg.update in DELTA_RULES:
            st.beta = z(b, h, c)
        if cfg.conv:
            st.conv = z(3, b, h, cfg.conv_kernel - 1, d)
        return st

    def step(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        state: DecodeState,
        scale: float | None = None,
    ) -> tuple[torch.Tensor, DecodeState]:
        """One decoding step: ``q, k, v (batch, heads, 1, head_dim)`` of the next token ->
        its output ``(batch, heads, 1, head_dim)`` and the updated state. The state holds the
        recurrent state, the exact cache of ``slots`` entries and the convolution's last
        ``conv_kernel - 1`` inputs: its size does not depend on how many tokens were decoded.
        Gives the outputs of :meth:`forward` on the whole sequence (to round-off)."""
        self._check_inputs(q, k, True)
        if q.shape[2] != 1 or k.shape[2] != 1 or v.shape[2] != 1:
            raise ValueError(f"step takes one token: got q, k, v of length {q.shape[2]}")
        if state.tok.shape[:2] != (q.shape[0], self.n_heads):
            raise ValueError(
                f"state is for batch {state.tok.shape[0]}, got {q.shape[0]}: use init_decode"
            )
        cfg, t = self.config, state.t
        scale = self.head_dim**-0.5 if scale is None else scale
        st = copy.copy(state)
        st.t = t + 1
        q1, k1, v1 = q[:, :, 0], k[:, :, 0], v[:, :, 0]  # (b, h, d)
        new: dict[str, torch.Tensor | None] = {}
        if self.has_state:
            qs, ks, vs = q1, k1, v1
            if cfg.conv:
                hist = torch.cat([st.conv, torch.stack([q1, k1, v1])[:, :, :, None]], 3)
                w = self.conv_weight[:, :, 0].reshape(3, self.n_heads, self.head_dim, -1)
                qs, ks, vs = torch.einsum("xbhkd,xhdk->xbhd", hist, w).unbind(0)
                st.conv = hist[:, :, :, 1:]
            fq, fk, vs, log_a, beta = (
                None if x is None else x[:, :, 0]
                for x in self._features(qs[:, :, None], ks[:, :, None], vs[:, :, None])
            )
            vv = torch.cat([vs, torch.ones_like(vs[..., :1])], -1) if cfg.is_normalized else vs
            new = {"fk": fk, "vs": vv, "log_a": log_a, "beta": beta}
            if cfg.budget == 0 or cfg.state_covers == "all":
                st.state = self._write(st.state, fk, vv, log_a, beta)
                st.filled = torch.ones_like(st.filled)
        if cfg.budget:
            recency = cfg.routed == 0 or cfg.routing == "recency" or cfg.state_covers == "all"
            if recency and t - cfg.window - cfg.routed >= cfg.sinks:  # leaves before t enters
                self._evict(st, (st.tok == t - cfg.window - cfg.routed).to(torch.int8).argmax(-1))
            free = (st.tok < 0).to(torch.int8).argmax(-1, keepdim=True)  # (b, h, 1)
            st.tok = st.tok.scatter(-1, free, t)
            st.score = st.score.scatter(-1, free, 0.0)
            st.k, st.v = (_put(x, free, y) for x, y in ((st.k, k1), (st.v, v1)))
            for name, val in new.items():
                if val is not None and getattr(st, name) is not None:
                    setattr(st, name, _put(getattr(st, name), free, val))
            if not recency:
                if cfg.routing == "score":
                    lg = torch.einsum("bhd,bhcd->bhc", q1, st.k) * scale
                    st.score = st.score + torch.softmax(
                        lg.masked_fill(st.tok < 0, float("-inf")), -1
                    )
                recall = cfg.routing == "self_recall"
                fks = vss = None
                if recall:
                    fks = st.fk if self.has_state else st.k
                    vss = st.vs[..., : self.head_dim] if self.has_state else st.v
                victim = self._victim(t, st.tok, st.score, st.state, fks, vss)
                if victim is not None:
                    self._evict(st, victim)
        o_state = den = None
        if self.has_state:
            read = (st.state @ fq[..., None])[..., 0]  # (b, h, dv')
            o_state, den = (read[..., :-1], read[..., -1:]) if cfg.is_normalized else (read, None)
            o_state, den = _scaled(o_state, den)
            if cfg.budget == 0:
                out = o_state if den is None else o_state / (den + 1e-6)
                return out[:, :, None], st
        lg = torch.einsum("bhd,bhcd->bhc", q1, st.k) * scale
        lg = lg.masked_fill(st.tok < 0, float("-inf"))
        m = lg.amax(-1, keepdim=True).clamp_min(-1e4)
        p = (lg - m).exp()
        num, den_e = torch.einsum("bhc,bhcd->bhd", p, st.v), p.sum(-1, keepdim=True)
        if o_state is None:
            return (num / den_e.clamp_min(1e-30))[:, :, None], st
        out = self._combine(
            *(None if x is None else x[:, :, None] for x in (num, den_e, o_state, den)),
            st.filled[..., None, None].to(q.dtype),
        )
        return out, st

    def _evict(self, st: DecodeState, victim: torch.Tensor) -> None:
        """Empty slot ``victim (b, h)`` of ``st``, writing its token into the state (in place)."""
        if self.has_state and self.config.state_covers == "evicted":
            sel = victim[..., None]
            st.state = self._write(
                st.state, _get(st.fk, sel), _get(st.vs, sel),
                None if st.log_a is None else _get(st.log_a, sel),
                None if st.beta is None else _get(st.beta, sel),
            )  # fmt: skip
            st.filled = torch.ones_like(st.filled)
        st.tok = st.tok.scatter(-1, victim[..., None], -1)

    def decode(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None
    ) -> torch.Tensor:
        """``(batch, heads, n, head_dim)`` outputs by :meth:`step` over the tokens one at a time
        (the recurrent form of :meth:`forward`)."""
        self._check_inputs(q, k, True)
        st = self.init_decode(q.shape[0], q.device, q.dtype)
        outs = []
        for t in range(q.shape[2]):
            o, st = self.step(q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], st, scale)
            outs.append(o)
        return torch.cat(outs, 2)


@dataclass
class DecodeState:
    """What one :class:`LinearizedAttention` keeps between decoding steps; its size is fixed by
    the config (budget, widths), not by the number of tokens decoded. ``t``: tokens seen;
    ``state (b, h, dv, df)``: the recurrent state; per cache slot ``(b, h, slots, ...)``: the
    token's position ``tok`` (-1: empty), accumulated attention ``score``, the teacher's ``k, v``
    (exact part) and the state's ``fk, vs, log_a, beta`` (written when the token is evicted);
    ``conv (3, b, h, kernel - 1, d)``: the last inputs of the short convolution; ``filled
    (b, h)``: the state holds a token."""

    t: int
    tok: torch.Tensor
    score: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    filled: torch.Tensor
    state: torch.Tensor | None = None
    fk: torch.Tensor | None = None
    vs: torch.Tensor | None = None
    log_a: torch.Tensor | None = None
    beta: torch.Tensor | None = None
    conv: torch.Tensor | None = None

    def numel(self) -> int:
        """Elements held (every tensor together): constant in ``t``."""
        return sum(x.numel() for x in vars(self).values() if isinstance(x, torch.Tensor))


def _take(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``x (b, h, n, d)`` at the token indices ``idx (b, h, c)`` (-1 read as 0) -> ``(b, h, c, d)``."""
    i = idx.clamp(min=0)
    return x.gather(2, i[..., None].expand(*i.shape, x.shape[-1]))


def _at(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``x (b, h, n, ...)`` at one token per row ``idx (b, h)`` -> ``(b, h, ...)``."""
    if x.ndim == 3:
        return x.gather(2, idx[..., None])[..., 0]
    return x.gather(2, idx[..., None, None].expand(*idx.shape, 1, x.shape[-1]))[:, :, 0]


def _get(x: torch.Tensor, sel: torch.Tensor) -> torch.Tensor:
    """Slot ``sel (b, h, 1)`` of per-slot ``x (b, h, c, ...)`` -> ``(b, h, ...)``."""
    return _at(x, sel[..., 0])


def _put(x: torch.Tensor, sel: torch.Tensor, val: torch.Tensor) -> torch.Tensor:
    """``x (b, h, c, ...)`` with slot ``sel (b, h, 1)`` set to ``val (b, h, ...)``."""
    if x.ndim == 3:
        return x.scatter(2, sel, val[..., None])
    return x.scatter(2, sel[..., None].expand(*sel.shape, x.shape[-1]), val[:, :, None])


def _exact(q, k, v, cache, scale):  # type: ignore[no-untyped-def]
    """Softmax numerator ``(b, h, n, d)`` and denominator ``(b, h, n, 1)`` of each query over its
    step's cache ``(b, h, n, slots)``, both scaled by ``e^{-m}`` with ``m`` the row's largest
    logit: ``O(n * slots)``, never an ``(n, n)`` matrix."""
    b, h, n, c = cache.shape
    i = cache.clamp(min=0).reshape(b, h, n * c, 1)
    kc = k.gather(2, i.expand(-1, -1, -1, k.shape[-1])).reshape(b, h, n, c, -1)
    vc = v.gather(2, i.expand(-1, -1, -1, v.shape[-1])).reshape(b, h, n, c, -1)
    lg = torch.einsum("bhnd,bhncd->bhnc", q, kc) * scale
    lg = lg.masked_fill(cache < 0, float("-inf"))
    m = lg.amax(-1, keepdim=True).detach().clamp_min(-1e4)
    p = (lg - m).exp()
    return torch.einsum("bhnc,bhncd->bhnd", p, vc), p.sum(-1, keepdim=True)
