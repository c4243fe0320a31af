"""Skill realizations on any Hugging Face causal LM: coordinates ``z`` -> readout ``r(z)``.

A realization holds a frozen model, a batch of contexts and one coordinate block of ``m`` numbers
per skill; the joint coordinates ``z`` are ``(batch, n_skills * m)`` (row ``i`` is context ``i``'s own
point). The readout ``r(z)`` is the residual stream after the last block, before the final norm, at
each context's last token: ``(batch, d_model)``.

- :class:`ActivationRealization`: ``h_l += sum_s U_s z_s`` at every position of layer ``l``
  (:func:`caa_basis`: the CAA difference of means plus the top principal components of the skill's
  contrast differences, orthonormalised and scaled to the layer's RMS residual norm).
- :class:`PrefixRealization`: ``p`` soft embeddings ``E0 + reshape(sum_s P_s z_s, (p, d))`` inserted
  after the first token, as ``inputs_embeds`` (:func:`prefix_basis`: the top-``m`` right singular
  vectors of ``dO_s / d prefix`` over contexts, scaled to the RMS embedding norm).
- :class:`KVPrefixRealization`: a key/value prefix in peft's ``PrefixTuningConfig(num_virtual_tokens=p,
  prefix_projection=False)`` layout, ``W0 + reshape(sum_s K_s z_s)``, passed as ``past_key_values``.

On every realization: the objective ``O_s(r) = log sum_{t in targets} softmax(W_U norm(r))_t``
(the logit lens of the readout), the Jacobian ``J_s = dr / dz_s`` (``m`` forward-mode products, or
``jacrev``), the metric ``g = J^T J``, the skill field ``v_s = (g + delta I)^-1 J^T grad_r O_s`` with
``delta = 1e-3 tr(g) / m`` (block ``s`` of the joint coordinates; other blocks still), its flow by RK4
and the control cost ``1 / sqrt(grad O^T J g^-1 J^T grad O)``. Use a float64 model
(:func:`paper_common.lm.float64_exact`) for finite differences: commutators divide by ``h^2``.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import nn

from skill_commutator.commutator import Flow, rk4_flow
from skill_commutator.task import Skill, check_targets

__all__ = [
    "ActivationRealization",
    "KVPrefixRealization",
    "PrefixRealization",
    "Realization",
    "caa_basis",
    "kv_prefix_basis",
    "prefix_basis",
]


def _decoder_blocks(model: nn.Module) -> nn.ModuleList:
    from paper_common.lm import decoder_layers

    return decoder_layers(model)


def _block_output(out: Any) -> torch.Tensor:
    return out[0] if isinstance(out, tuple) else out


def _dtype(model: nn.Module) -> torch.dtype:
    return next(model.parameters()).dtype


@contextlib.contextmanager
def _hooks(handles: list[Any]) -> Iterator[None]:
    try:
        yield
    finally:
        for h in handles:
            h.remove()


class Realization:
    """Base class: a frozen causal LM, contexts, skills and their coordinate blocks.

    Subclasses implement :meth:`_forward` (``z -> final residual at every position``) and set
    ``self.last`` (each context's readout position).
    """

    kind = "base"

    def __init__(
        self, model: nn.Module, tok: Any, contexts: Sequence[str], skills: Sequence[Skill], m: int
    ):
        self.model, self.tok = model, tok
        self.contexts = list(contexts)
        if not self.contexts or not all(isinstance(c, str) and c.strip() for c in self.contexts):
            raise ValueError("contexts must be a non-empty list of non-empty strings")
        if len(skills) < 1:
            raise ValueError("a realization needs at least one skill")
        names = [s.name for s in skills]
        if len(set(names)) != len(names):
            raise ValueError(f"skill names must be distinct; got {names}")
        if not isinstance(m, int) or m < 1:
            raise ValueError(f"m must be a positive int; got {m!r}")
        self.skills = list(skills)
        self.names = names
        self.m = m
        self.target_ids = [check_targets(tok, s) for s in skills]
        self.dtype = _dtype(model)
        self.device = next(model.parameters()).device
        vocab = model.get_output_embeddings().weight.shape[0]
        self._target_mask = torch.full(
            (len(skills), vocab), -torch.inf, dtype=self.dtype, device=self.device
        )
        for i, ids in enumerate(self.target_ids):
            self._target_mask[i, ids] = 0.0
        self.d_model = int(model.get_input_embeddings().weight.shape[1])
        self._norm = _final_norm(model)
        self._unembed = model.get_output_embeddings()

    def _set_bases(self, bases: Sequence[torch.Tensor], rows: int, what: str) -> None:
        """Check one ``(rows, m)`` basis per skill and keep them side by side as ``self.basis``."""
        for skill, b in zip(self.skills, bases, strict=True):
            if tuple(b.shape) != (rows, self.m):
                raise ValueError(
                    f"basis of skill {skill.name!r} must be ({what}, m) = ({rows}, {self.m}); "
                    f"got {tuple(b.shape)}"
                )
        self.basis = torch.cat([b.to(self.dtype) for b in bases], dim=1).to(self.device)

    _PER_CONTEXT = ("ids", "mask", "embeds", "head", "tail", "last")

    def subset(self, n: int) -> Realization:
        """The same realization (same skills and bases) on its first ``n`` contexts."""
        import copy

        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive int; got {n!r}")
        sub = copy.copy(self)
        sub.contexts = self.contexts[:n]
        for name in self._PER_CONTEXT:
            if hasattr(self, name):
                setattr(sub, name, getattr(self, name)[:n])
        return sub

    # ------------------------------------------------------------------ coordinates
    @property
    def batch(self) -> int:
        return len(self.contexts)

    @property
    def n_coords(self) -> int:
        return self.m * len(self.skills)

    def index(self, skill: str | int) -> int:
        if isinstance(skill, int):
            if not 0 <= skill < len(self.skills):
                raise ValueError(f"skill index {skill} out of range 0..{len(self.skills) - 1}")
            return skill
        if skill not in self.names:
            raise ValueError(f"unknown skill {skill!r}; this realization has {self.names}")
        return self.names.index(skill)

    def block(self, skill: str | int) -> slice:
        i = self.index(skill)
        return slice(i * self.m, (i + 1) * self.m)

    def zeros(self, copies: int = 1) -> torch.Tensor:
        """The origin for every context, ``copies`` times over: ``(copies * B, n_coords)``."""
        return torch.zeros(copies * self.batch, self.n_coords, dtype=self.dtype, device=self.device)

    def _check_z(self, z: torch.Tensor) -> torch.Tensor:
        """``z`` is ``(n * B, n_coords)``: ``n`` stacked copies of the contexts' points."""
        if (
            not isinstance(z, torch.Tensor)
            or z.ndim != 2
            or z.shape[1] != self.n_coords
            or z.shape[0] % self.batch
            or z.shape[0] == 0
        ):
            got = tuple(z.shape) if isinstance(z, torch.Tensor) else type(z).__name__
            raise ValueError(
                f"z must have shape (n * contexts, n_skills * m) = (n * {self.batch}, {self.n_coords}); "
                f"got {got}"
            )
        return z.to(self.dtype)

    def _rows(self, skills: torch.Tensor | int | str, n_rows: int) -> torch.Tensor:
        if isinstance(skills, torch.Tensor):
            if skills.shape != (n_rows,):
                raise ValueError(
                    f"one skill index per row: expected ({n_rows},), got {tuple(skills.shape)}"
                )
            if int(skills.min()) < 0 or int(skills.max()) >= len(self.skills):
                raise ValueError(f"skill indices must be in 0..{len(self.skills) - 1}")
            return skills.to(self.device, torch.long)
        return torch.full((n_rows,), self.index(skills), dtype=torch.long, device=self.device)

    # ------------------------------------------------------------------ readout and objective
    def _forward(self, z: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def _tile(self, t: torch.Tensor, n_rows: int) -> torch.Tensor:
        return t.repeat(n_rows // self.batch, *([1] * (t.ndim - 1)))

    def readout(self, z: torch.Tensor) -> torch.Tensor:
        """``r(z)``: the final residual (before the final norm) at each context's last token,
        ``(n * B, d)`` for ``z`` of ``(n * B, n_coords)``."""
        z = self._check_z(z)
        hidden = self._forward(z)
        rows = torch.arange(z.shape[0], device=self.device)
        return hidden[rows, self._tile(self.last, z.shape[0])]

    def objective(self, r: torch.Tensor, skill: torch.Tensor | int | str) -> torch.Tensor:
        """``O_s(r)``: log-probability of the skill's target tokens read through the final norm and
        the unembedding; ``r``: ``(R, d)`` -> ``(R,)``. ``skill``: one skill, or one index per row."""
        rows = self._rows(skill, r.shape[0])
        logp = torch.log_softmax(self._unembed(self._norm(r)), dim=-1)
        return torch.logsumexp(logp + self._target_mask[rows], dim=-1)

    def objective_grad(self, r: torch.Tensor, skill: torch.Tensor | int | str) -> torch.Tensor:
        """``grad_r O_s``, ``(R, d)`` (rows are independent)."""
        return self._objective_grad(r.detach(), self._rows(skill, r.shape[0]))

    def _objective_grad(self, r: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        return torch.func.grad(lambda x: self.objective(x, rows).sum())(r)

    # ------------------------------------------------------------------ geometry
    def jacobian(
        self, z: torch.Tensor, skill: torch.Tensor | int | str, method: str = "jvp"
    ) -> torch.Tensor:
        """``J_s = dr / dz_s`` at ``z``: ``(R, d, m)``. ``"jvp"``: one forward-mode product of ``m``
        stacked copies; ``"jacrev"``: ``torch.func.jacrev`` of the whole batch (its block diagonal)."""
        z = self._check_z(z)
        rows = self._rows(skill, z.shape[0])
        if method == "jvp":
            return self._jvp_jacobian(z, rows)[1]
        if method == "jacrev":
            full = torch.func.jacrev(self.readout)(z)  # (R, d, R, K)
            idx = torch.arange(z.shape[0], device=self.device)
            diag = full[idx, :, idx]  # (R, d, K)
            cols = rows[:, None] * self.m + torch.arange(self.m, device=self.device)
            return torch.gather(diag, 2, cols[:, None, :].expand(-1, diag.shape[1], -1))
        raise ValueError(f"method must be 'jvp' or 'jacrev'; got {method!r}")

    def _jvp_jacobian(
        self, z: torch.Tensor, rows: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``r(z)`` and ``J`` (``(R, d, m)``): the ``m`` columns as one jvp over ``m`` stacked copies."""
        n = z.shape[0]
        tangent = torch.zeros(self.m, n, self.n_coords, dtype=z.dtype, device=z.device)
        j = torch.arange(self.m, device=z.device)[:, None]
        tangent[j, torch.arange(n, device=z.device)[None, :], rows[None, :] * self.m + j] = 1.0
        r, cols = torch.func.jvp(
            self.readout, (z.repeat(self.m, 1),), (tangent.reshape(-1, self.n_coords),)
        )
        return r[:n], cols.reshape(self.m, n, -1).permute(1, 2, 0)

    def local(self, z: torch.Tensor, skill: torch.Tensor | int | str) -> dict[str, torch.Tensor]:
        """Everything at ``z`` for one skill (or one per row): readout ``r``, ``J``, ``grad_r O``,
        ``O``, the field's block ``v`` (``(R, m)``), ``rate`` ``dO/dt`` and the control cost ``(R,)``."""
        z = self._check_z(z)
        rows = self._rows(skill, z.shape[0])
        r, jac = self._jvp_jacobian(z, rows)
        r, jac = r.detach(), jac.detach()
        grad = self.objective_grad(r, rows)
        v, rate = _natural_step(jac, grad)
        return {
            "r": r,
            "J": jac,
            "grad": grad,
            "O": self.objective(r, rows).detach(),
            "v": v,
            "rate": rate,
            "cost": rate.clamp_min(1e-300).rsqrt(),
        }

    def at_origin(self) -> dict[str, torch.Tensor]:
        """:meth:`local` of every skill at ``z = 0``, each value ``(n_skills, B, ...)``."""
        n = len(self.skills)
        rows = torch.arange(n, device=self.device).repeat_interleave(self.batch)
        loc = self.local(self.zeros(n), rows)
        return {k: v.view(n, self.batch, *v.shape[1:]) for k, v in loc.items()}

    def field(self, z: torch.Tensor, skill: torch.Tensor | int | str) -> torch.Tensor:
        """The skill's vector field on the joint coordinates, ``(R, n_coords)``: ``v_s`` in block
        ``s``, zeros elsewhere (``skill``: one skill, or one index per row)."""
        z = self._check_z(z)
        rows = self._rows(skill, z.shape[0])
        r, jac = self._jvp_jacobian(z, rows)  # differentiable in z: lie_bracket can take its jvp
        v, _ = _natural_step(jac, self._objective_grad(r, rows))
        out = torch.zeros_like(z)
        cols = rows[:, None] * self.m + torch.arange(self.m, device=self.device)
        return out.scatter(1, cols, v)

    def flow(self, skill: torch.Tensor | int | str, n_steps: int = 4) -> Flow:
        """The flow of :meth:`field` by RK4 (``n_steps`` per call): ``flow(z, h, seed)``."""
        if isinstance(skill, torch.Tensor):
            return rk4_flow(lambda z: self.field(z, skill), n_steps)
        i = self.index(skill)
        return rk4_flow(lambda z: self.field(z, i), n_steps)

    def control_cost(self, z: torch.Tensor, skill: torch.Tensor | int | str) -> torch.Tensor:
        """``1 / sqrt(grad O^T J (g + delta I)^-1 J^T grad O)``: coordinate length per unit of ``O_s``
        along the field, ``(R,)``."""
        return self.local(z, skill)["cost"]


def _basis_width(bases: Sequence[torch.Tensor], skills: Sequence[Skill]) -> int:
    """``m`` of a list of ``(rows, m)`` bases, one per skill."""
    if len(bases) != len(skills):
        raise ValueError(f"one basis per skill: got {len(bases)} bases for {len(skills)} skills")
    return int(bases[0].shape[1]) if bases[0].ndim == 2 else -1


def _natural_step(jac: torch.Tensor, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``v = (g + delta I)^-1 J^T grad`` with ``g = J^T J``, ``delta = 1e-3 tr(g) / m``; and the rate
    ``dO/dt = (J^T grad) . v``. ``jac``: ``(B, d, m)``, ``grad``: ``(B, d)``."""
    m = jac.shape[-1]
    g = jac.transpose(1, 2) @ jac
    delta = 1e-3 * torch.diagonal(g, dim1=1, dim2=2).sum(-1) / m
    eye = torch.eye(m, dtype=g.dtype, device=g.device)
    jtg = (jac.transpose(1, 2) @ grad.unsqueeze(-1)).squeeze(-1)
    v = torch.linalg.solve(g + delta[:, None, None] * eye, jtg)
    return v, (jtg * v).sum(-1)


def _final_norm(model: nn.Module) -> nn.Module:
    from paper_common.lm import final_norm

    return final_norm(model)


def _encode(
    tok: Any, contexts: list[str], device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    from paper_common.lm import pad_id, right_padded

    seqs = [list(x) for x in tok(contexts)["input_ids"]]
    ids, mask, _ = right_padded(seqs, pad_id(tok), device)
    return ids, mask


def _final_hidden(
    model: nn.Module, embeds: torch.Tensor, mask: torch.Tensor, **kwargs: Any
) -> torch.Tensor:
    """The output of the last decoder block at every position (before the final norm); ``kwargs``
    go to the base model's forward (``use_cache`` defaults to False)."""
    kwargs.setdefault("use_cache", False)
    store: dict[str, torch.Tensor] = {}

    def keep(_module: nn.Module, _args: tuple, out: Any) -> None:
        store["h"] = _block_output(out)

    with _hooks([_decoder_blocks(model)[-1].register_forward_hook(keep)]):
        model.base_model(inputs_embeds=embeds, attention_mask=mask, **kwargs)
    return store["h"]


def _scaled(basis: torch.Tensor, scale: float) -> torch.Tensor:
    q, _ = torch.linalg.qr(basis)
    return q * scale


# ============================================================================ activation
class ActivationRealization(Realization):
    """``h_l += sum_s U_s z_s`` at every position of residual layer ``layer`` (``0``: embeddings,
    ``l``: output of block ``l - 1``, as :func:`paper_common.lm.residual_stream`).

    ``bases``: one ``(d_model, m)`` matrix per skill (:func:`caa_basis`).
    """

    kind = "activation"

    def __init__(
        self,
        model: nn.Module,
        tok: Any,
        contexts: Sequence[str],
        skills: Sequence[Skill],
        bases: Sequence[torch.Tensor],
        layer: int,
    ):
        from paper_common.lm import num_layers

        n = num_layers(model)
        if not isinstance(layer, int) or not 0 <= layer < n:
            raise ValueError(
                f"layer must be an int in 0..{n - 1} (the readout is after block {n - 1}); got {layer!r}"
            )
        super().__init__(model, tok, contexts, skills, _basis_width(bases, skills))
        self._set_bases(bases, self.d_model, "d_model")
        self.layer = layer
        self.ids, self.mask = _encode(tok, self.contexts, self.device)
        self.last = self.mask.sum(1) - 1
        with torch.no_grad():
            self.embeds = model.get_input_embeddings()(self.ids).to(self.dtype)

    def _shift(self, delta: torch.Tensor) -> Any:
        """Register the hook that adds ``delta`` (``(B, 1 or seq, d)``) at residual layer ``layer``."""
        blocks = _decoder_blocks(self.model)
        if self.layer == 0:

            def pre(_module: nn.Module, args: tuple, kwargs: dict) -> Any:
                if args:
                    return (args[0] + delta, *args[1:]), kwargs
                return args, {**kwargs, "hidden_states": kwargs["hidden_states"] + delta}

            return blocks[0].register_forward_pre_hook(pre, with_kwargs=True)

        def post(_module: nn.Module, _args: tuple, out: Any) -> Any:
            if isinstance(out, tuple):
                return (out[0] + delta, *out[1:])
            return out + delta

        return blocks[self.layer - 1].register_forward_hook(post)

    def _forward(self, z: torch.Tensor) -> torch.Tensor:
        delta = (z @ self.basis.T)[:, None, :]  # (B, 1, d): the same shift at every position
        n = z.shape[0]
        with _hooks([self._shift(delta)]):
            return _final_hidden(self.model, self._tile(self.embeds, n), self._tile(self.mask, n))

    @torch.no_grad()
    def rollout(
        self, segments: Sequence[torch.Tensor], tokens_per_segment: int = 1
    ) -> dict[str, Any]:
        """Temporal order: greedy decoding in segments, coordinates ``segments[k]`` (``(B,
        n_coords)``) steering the positions that write segment ``k`` (segment 0 is written from the
        context, so the context's positions carry ``segments[0]``; positions generated in segment
        ``k`` carry ``segments[k + 1]`` for the next one). Returns the generated ``tokens``
        (``(B, n_segments * tokens_per_segment)``) and the readout ``r`` at the last position.
        """
        if not segments:
            raise ValueError("rollout needs at least one segment")
        if not isinstance(tokens_per_segment, int) or tokens_per_segment < 1:
            raise ValueError(
                f"tokens_per_segment must be a positive int; got {tokens_per_segment!r}"
            )
        zs = [self._check_z(z) for z in segments]
        if any(z.shape[0] != self.batch for z in zs):
            raise ValueError(f"each segment's coordinates must be ({self.batch}, {self.n_coords})")
        emb = self.model.get_input_embeddings()
        n_new = len(zs) * tokens_per_segment
        tokens = torch.empty(self.batch, n_new, dtype=torch.long, device=self.device)
        reads = torch.empty(self.batch, self.d_model, dtype=self.dtype, device=self.device)
        lengths = self.mask.sum(1)
        for n in lengths.unique().tolist():  # contexts of one length decode together, unpadded
            rows = (lengths == n).nonzero().squeeze(1)
            ids = self.ids[rows, :n]
            shifts = [(zs[0][rows] @ self.basis.T)[:, None].expand(-1, n, -1)]
            for step in range(n_new + 1):
                delta = torch.cat(shifts, dim=1)  # (G, len, d): each position's own coordinates
                with _hooks([self._shift(delta)]):
                    hidden = _final_hidden(
                        self.model, emb(ids).to(self.dtype), torch.ones_like(ids)
                    )[:, -1]
                if step == n_new:
                    break
                nxt = self._unembed(self._norm(hidden)).argmax(-1)
                ids = torch.cat([ids, nxt[:, None]], dim=1)
                # the new position writes the next token: it carries the next token's segment
                seg = min((step + 1) // tokens_per_segment, len(zs) - 1)
                shifts.append((zs[seg][rows] @ self.basis.T)[:, None])
            tokens[rows] = ids[:, n:]
            reads[rows] = hidden
        return {"tokens": tokens, "r": reads}


def caa_basis(
    model: nn.Module, tok: Any, skill: Skill, layer: int, m: int = 4, scale: float | None = None
) -> torch.Tensor:
    """``U_s``, ``(d_model, m)``: the CAA direction (mean residual at the last token of the positive
    contexts minus that of the negative ones) and the top ``m - 1`` principal components of the
    paired differences with that direction projected out; orthonormalised, then scaled by ``scale``
    (default: the RMS residual norm at ``layer`` over the contrast contexts)."""
    from paper_common.lm import residual_stream

    if not isinstance(m, int) or m < 1:
        raise ValueError(f"m must be a positive int; got {m!r}")
    pos = residual_stream(model, tok, list(skill.positive), [layer])[:, 0].double()
    neg = residual_stream(model, tok, list(skill.negative), [layer])[:, 0].double()
    caa = pos.mean(0) - neg.mean(0)
    n = max(len(pos), len(neg))
    diffs = pos[torch.arange(n) % len(pos)] - neg[torch.arange(n) % len(neg)]
    if not caa.norm() > 0:
        raise ValueError(
            f"skill {skill.name!r}: the positive and negative contexts have the same mean residual at "
            f"layer {layer} (CAA direction 0); give contrast contexts that differ"
        )
    unit = caa / caa.norm()
    diffs = diffs - diffs.mean(0)
    diffs = diffs - (diffs @ unit)[:, None] * unit
    if m > 1:
        _, _, vh = torch.linalg.svd(diffs, full_matrices=False)
        if vh.shape[0] < m - 1:
            raise ValueError(
                f"skill {skill.name!r} has too few contrast pairs for m={m} directions"
            )
        basis = torch.cat([unit[:, None], vh[: m - 1].T], dim=1)
    else:
        basis = unit[:, None]
    if scale is None:
        scale = float(torch.cat([pos, neg]).pow(2).sum(-1).mean().sqrt())
    return _scaled(basis, scale).to(_dtype(model))


# ============================================================================ soft prefix
class PrefixRealization(Realization):
    """``p`` soft embeddings ``E0 + reshape(sum_s P_s z_s, (p, d))`` inserted after each context's
    BOS token (in front where the tokenizer adds none) and run as ``inputs_embeds``.

    ``init``: ``E0``, ``(p, d_model)``, e.g. the embeddings of ``p`` filler tokens (so that ``z = 0``
    is an ordinary prompt); ``bases``: one ``(p * d_model, m)`` matrix per skill (:func:`prefix_basis`).
    """

    kind = "prefix"

    def __init__(
        self,
        model: nn.Module,
        tok: Any,
        contexts: Sequence[str],
        skills: Sequence[Skill],
        bases: Sequence[torch.Tensor],
        init: torch.Tensor,
    ):
        if init.ndim != 2:
            raise ValueError(f"init must be (p, d_model); got shape {tuple(init.shape)}")
        super().__init__(model, tok, contexts, skills, _basis_width(bases, skills))
        p = int(init.shape[0])
        if init.shape[1] != self.d_model:
            raise ValueError(f"init must be (p, {self.d_model}); got {tuple(init.shape)}")
        self._set_bases(bases, p * self.d_model, "p * d_model")
        self.p = p
        self.init = init.to(self.device, self.dtype)
        ids, mask = _encode(tok, self.contexts, self.device)
        with torch.no_grad():
            emb = model.get_input_embeddings()(ids).to(self.dtype)
        # after the BOS token where the tokenizer adds one, else in front
        k = int(tok.bos_token_id is not None and bool((ids[:, 0] == tok.bos_token_id).all()))
        self.head, self.tail = emb[:, :k], emb[:, k:]
        ones = torch.ones(self.batch, p, dtype=mask.dtype, device=self.device)
        self.mask = torch.cat([mask[:, :k], ones, mask[:, k:]], dim=1)
        self.last = self.mask.sum(1) - 1

    def prefix(self, z: torch.Tensor) -> torch.Tensor:
        """The soft prefix at ``z``: ``(B, p, d_model)``."""
        return self.init + (z @ self.basis.T).reshape(-1, self.p, self.d_model)

    def _forward(self, z: torch.Tensor) -> torch.Tensor:
        n = z.shape[0]
        embeds = torch.cat(
            [self._tile(self.head, n), self.prefix(z), self._tile(self.tail, n)], dim=1
        )
        return _final_hidden(self.model, embeds, self._tile(self.mask, n))


def prefix_basis(
    model: nn.Module,
    tok: Any,
    skill: Skill,
    contexts: Sequence[str],
    init: torch.Tensor,
    m: int = 4,
    scale: float | None = None,
) -> torch.Tensor:
    """``P_s``, ``(p * d_model, m)``: the top-``m`` right singular vectors of the matrix whose rows are
    ``dO_s / d prefix`` (flattened) at ``E0`` over ``contexts``; orthonormal, times ``scale``
    (default: the RMS norm of the model's input embeddings times ``sqrt(p)``, so a unit coordinate
    moves the prefix by about one embedding per token)."""
    if scale is None:
        w = model.get_input_embeddings().weight.detach().double()
        scale = float(w.pow(2).sum(-1).mean().sqrt()) * init.shape[0] ** 0.5
    return _gradient_basis(PrefixRealization, model, tok, skill, contexts, init, m, scale)


def _gradient_basis(
    cls: type[Realization],
    model: nn.Module,
    tok: Any,
    skill: Skill,
    contexts: Sequence[str],
    init: torch.Tensor,
    m: int,
    scale: float,
) -> torch.Tensor:
    """Top-``m`` right singular vectors of ``dO_s / d init`` (one row per context) times ``scale``."""
    if not isinstance(m, int) or m < 1:
        raise ValueError(f"m must be a positive int; got {m!r}")
    if m > init.numel():
        raise ValueError(f"m={m} exceeds the prefix's {init.numel()} coordinates")
    probe = cls(
        model, tok, contexts, [skill], [torch.zeros(init.numel(), 1, dtype=_dtype(model))], init
    )
    shape = probe.init.shape

    def total(flat: torch.Tensor) -> torch.Tensor:
        probe.init = flat.reshape(shape)
        return probe.objective(probe.readout(probe.zeros()), 0)

    flat0 = probe.init.reshape(-1).clone()
    rows = torch.func.jacrev(total)(flat0)  # (contexts, numel)
    probe.init = flat0.reshape(shape)
    _, _, vh = torch.linalg.svd(rows.detach(), full_matrices=False)
    if vh.shape[0] < m:
        raise ValueError(
            f"need >= m={m} contexts to find {m} prefix directions; got {len(contexts)}"
        )
    return _scaled(vh[:m].T, scale).to(_dtype(model))


# ============================================================================ KV prefix (peft layout)
class KVPrefixRealization(Realization):
    """A key/value prefix of ``p`` virtual tokens, laid out as peft's prefix tuning
    (``PrefixTuningConfig(num_virtual_tokens=p, prefix_projection=False)``): one row of
    ``2 * n_layers * d_model`` numbers per virtual token, ``W0 + reshape(sum_s K_s z_s)``, split into
    every layer's keys and values and passed as ``past_key_values``.

    ``init``: ``W0``, ``(p, 2 * n_layers * d_model)`` (e.g. a peft ``PrefixEncoder``'s embedding
    weight); ``bases``: one ``(p * 2 * n_layers * d_model, m)`` matrix per skill (:func:`kv_prefix_basis`).
    Models with grouped-query attention use ``n_kv_heads * head_dim`` in place of ``d_model``.
    """

    kind = "kv_prefix"

    def __init__(
        self,
        model: nn.Module,
        tok: Any,
        contexts: Sequence[str],
        skills: Sequence[Skill],
        bases: Sequence[torch.Tensor],
        init: torch.Tensor,
    ):
        super().__init__(model, tok, contexts, skills, _basis_width(bases, skills))
        self.n_layers, self.n_kv, self.head_dim = _kv_shape(model)
        width = 2 * self.n_layers * self.n_kv * self.head_dim
        if init.ndim != 2 or init.shape[1] != width:
            raise ValueError(f"init must be (p, {width}) for this model; got {tuple(init.shape)}")
        self.p = int(init.shape[0])
        self._set_bases(bases, self.p * width, "p * 2 * n_layers * kv_width")
        self.width = width
        self.init = init.to(self.device, self.dtype)
        self.ids, mask = _encode(tok, self.contexts, self.device)
        with torch.no_grad():
            self.embeds = model.get_input_embeddings()(self.ids).to(self.dtype)
        ones = torch.ones(self.batch, self.p, dtype=mask.dtype, device=self.device)
        self.mask = torch.cat([ones, mask], dim=1)
        self.last = mask.sum(1) - 1
        self.positions = torch.arange(self.p, self.p + self.ids.shape[1], device=self.device)
        # newer transformers name the argument `cache` (and deprecate `past_key_values`)
        params = inspect.signature(model.base_model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"

    def kv(self, z: torch.Tensor) -> Any:
        """The prefix as a ``DynamicCache`` (peft's split: ``view(B, p, 2 * L, heads, head_dim)``,
        ``permute(2, 0, 3, 1, 4)``, pairs of keys and values per layer)."""
        from transformers import DynamicCache

        w = self.init + (z @ self.basis.T).reshape(-1, self.p, self.width)
        w = w.view(z.shape[0], self.p, 2 * self.n_layers, self.n_kv, self.head_dim)
        w = w.permute(2, 0, 3, 1, 4).split(2)
        cache = DynamicCache()
        for layer, kv in enumerate(w):
            cache.update(kv[0], kv[1], layer)
        return cache

    def _forward(self, z: torch.Tensor) -> torch.Tensor:
        n = z.shape[0]
        return _final_hidden(
            self.model,
            self._tile(self.embeds, n),
            self._tile(self.mask, n),
            **{self._cache_kw: self.kv(z)},
            position_ids=self.positions.expand(n, -1),
            use_cache=True,
        )


def _kv_shape(model: nn.Module) -> tuple[int, int, int]:
    cfg = model.config
    n_layers = cfg.num_hidden_layers
    n_heads = cfg.num_attention_heads
    n_kv = getattr(cfg, "num_key_value_heads", None) or n_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
    return int(n_layers), int(n_kv), int(head_dim)


def kv_prefix_basis(
    model: nn.Module,
    tok: Any,
    skill: Skill,
    contexts: Sequence[str],
    init: torch.Tensor,
    m: int = 4,
    scale: float | None = None,
) -> torch.Tensor:
    """``K_s``: top-``m`` right singular vectors of ``dO_s / d W`` over ``contexts`` at ``W0 = init``,
    orthonormal, times ``scale`` (default: the RMS norm of a row of ``init`` times ``sqrt(p)``)."""
    if scale is None:
        scale = float(init.double().pow(2).sum(-1).mean().sqrt()) * init.shape[0] ** 0.5
    return _gradient_basis(KVPrefixRealization, model, tok, skill, contexts, init, m, scale)
