"""ROME, MEMIT and norm-bounded fine-tuning on any Hugging Face causal LM, with one edit objective.

The MLP output projection (:func:`paper_common.lm.mlp_down_proj`) is the memory: its input at the
subject's last token is the *key* ``k``, its output the *value* written to the residual stream.

- **ROME** (Meng et al. 2022): ``k*`` is the mean key over the edit prompt behind random prefixes
  the model itself wrote; ``v*`` is found by Adam on :mod:`rce.objectives`'s objective plus a KL
  term on an essence prompt (``"{} is a"``) and weight decay, with a norm clamp and early stop; the
  rank-one update is ``dW = (v* - W k*) (C^-1 k*)^T / ((C^-1 k*)^T k*)``, C the uncentred second
  moment of keys over a corpus (:func:`second_moment`).
- **MEMIT** (Meng et al. 2023): ``z`` is optimised on the residual after the last edited layer;
  for each edited layer in turn ``dW = R K^T (lam C + K K^T)^-1`` (float64 solve) with R the
  remaining residual split over the remaining layers (:func:`memit_solve`); many edits at once.
- **FT**: Adam on the same objective over one MLP projection's weight, kept within an L-inf ball
  of its original value (ROME's FT-L baseline).

:func:`edit` returns an :class:`EditHandle` whose ``restore()`` puts every touched weight back bit
for bit. :func:`trace_layers` is ROME's causal tracing (restore a window of MLP outputs at the
lookup token in a run with a noised subject: noise 3 x the subjects' embedding std, a window of 10
blocks) to choose the layer; :func:`scaled_window` keeps the window's share of the depth on models
with fewer blocks than GPT-2 XL's 48 (ours).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from paper_common.lm import (
    capture_mlp,
    decoder_layers,
    down_proj_weight,
    final_norm,
    mlp_down_proj,
    num_layers,
    pad_id,
    right_padded,
    sample,
)
from rce.objectives import Defence, defence_term
from rce.requests import EditRequest, answer_id

__all__ = [
    "EditHandle",
    "FTConfig",
    "MEMITConfig",
    "ROMEConfig",
    "RankOneUpdate",
    "TraceResult",
    "apply_rank_one",
    "check_stats_texts",
    "context_templates",
    "edit",
    "first_argmax",
    "memit_solve",
    "revs_demote",
    "rome_keys",
    "rome_updates",
    "scaled_window",
    "second_moment",
    "subject_embedding_std",
    "trace_layers",
]


# ============================================================================ configs
FactToken = Literal["subject_last", "last"]
FACT_TOKENS = ("subject_last", "last")


@dataclass(frozen=True)
class ROMEConfig:
    """ROME's settings (defaults are ROME's GPT-2 XL hyper-parameters where they transfer).

    Attributes:
        layer: the edited block; ``None`` = chosen by :func:`trace_layers` on the requests.
        steps: Adam steps for v*; lr: its learning rate.
        weight_decay: ``wd * ||delta|| / ||v_init||^2`` (ROME's form).
        clamp_norm_factor: ``||delta|| <= factor * ||v_init||`` after every step.
        kl_factor: weight of the KL term on the essence prompt.
        early_stop: stop a request's optimisation once its loss is below this.
        contexts: ``(length, count)`` pairs of prefixes sampled from the model (ROME: 10 of 5
            tokens and 10 of 10); the bare prompt is always included.
        ridge: ``C + ridge * mean(diag C) * I`` before solving (0 = ROME's plain solve).
        essence: the KL prompt template.
        fact_token: where keys are read and v* is written: ``"subject_last"`` (ROME's default,
            the subject's last token) or ``"last"`` (the prompt's last token, ROME's other
            option; what small models use, see :func:`trace_layers`).
    """

    layer: int | None = None
    steps: int = 20
    lr: float = 0.5
    weight_decay: float = 0.5
    clamp_norm_factor: float = 4.0
    kl_factor: float = 0.0625
    early_stop: float = 5e-2
    contexts: tuple[tuple[int, int], ...] = ((5, 10), (10, 10))
    ridge: float = 1e-4
    essence: str = "{} is a"
    fact_token: FactToken = "subject_last"

    def __post_init__(self) -> None:
        _check_common(self)


@dataclass(frozen=True)
class MEMITConfig:
    """MEMIT's settings (defaults: MEMIT's GPT-J hyper-parameters where they transfer).

    Attributes:
        layers: the edited blocks (z is optimised after the last); ``None`` = the traced layer
            and the one before it.
        mom2_weight: lambda in ``(lam C + K K^T)``; C is a *mean* second moment, so lambda counts
            how many "preserved keys" each edit is weighed against.
        (the rest as :class:`ROMEConfig`; MEMIT clamps z harder: 0.75)
    """

    layers: tuple[int, ...] | None = None
    steps: int = 25
    lr: float = 0.5
    weight_decay: float = 0.5
    clamp_norm_factor: float = 0.75
    kl_factor: float = 0.0625
    early_stop: float = 5e-2
    contexts: tuple[tuple[int, int], ...] = ((5, 10),)
    mom2_weight: float = 15000.0
    ridge: float = 0.0
    essence: str = "{} is a"
    fact_token: FactToken = "subject_last"

    def __post_init__(self) -> None:
        _check_common(self)
        if self.mom2_weight < 0:
            raise ValueError(f"mom2_weight must be >= 0; got {self.mom2_weight}")
        if self.layers is not None and (
            not self.layers or sorted(self.layers) != list(self.layers)
        ):
            raise ValueError(f"layers must be a non-empty increasing tuple; got {self.layers}")


@dataclass(frozen=True)
class FTConfig:
    """Norm-bounded fine-tuning of one MLP output projection (ROME's FT-L).

    Attributes:
        layer: the tuned block (``None``: traced); steps, lr: Adam; norm_bound: L-inf radius around
        the original weight; kl_factor: optional KL on the essence prompt (FT-L: 0).
    """

    layer: int | None = None
    steps: int = 25
    lr: float = 5e-4
    norm_bound: float = 5e-4
    kl_factor: float = 0.0
    early_stop: float = 5e-2
    contexts: tuple[tuple[int, int], ...] = ()
    essence: str = "{} is a"
    fact_token: FactToken = "subject_last"

    def __post_init__(self) -> None:
        _check_common(self)
        if self.norm_bound <= 0:
            raise ValueError(f"norm_bound must be > 0; got {self.norm_bound}")


def _check_common(cfg: Any) -> None:
    if cfg.steps < 1 or cfg.lr <= 0:
        raise ValueError(f"steps must be >= 1 and lr > 0; got {cfg.steps}, {cfg.lr}")
    if cfg.kl_factor < 0:
        raise ValueError("kl_factor must be >= 0")
    for length, count in cfg.contexts:
        if length < 1 or count < 1:
            raise ValueError(f"contexts are (length >= 1, count >= 1) pairs; got {cfg.contexts}")
    if getattr(cfg, "clamp_norm_factor", 1.0) <= 0:
        raise ValueError("clamp_norm_factor must be > 0")
    if getattr(cfg, "ridge", 0.0) < 0:
        raise ValueError("ridge must be >= 0")
    if cfg.fact_token not in FACT_TOKENS:
        raise ValueError(f"fact_token must be one of {FACT_TOKENS}; got {cfg.fact_token!r}")
    if cfg.essence.count("{}") != 1:
        raise ValueError(f"essence needs one '{{}}' for the subject; got {cfg.essence!r}")


# ============================================================================ handle
@dataclass
class EditHandle:
    """What an edit changed. ``restore()`` copies every touched weight back, bit for bit.

    Also a context manager: ``with edit(...) as h: ...`` restores on exit.
    """

    method: str
    layers: list[int]
    saved: dict[str, torch.Tensor] = field(repr=False)
    model: nn.Module = field(repr=False)
    info: dict[str, Any] = field(default_factory=dict)
    restored: bool = False

    def restore(self) -> None:
        if self.restored:
            raise RuntimeError("this edit was already restored")
        params = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, value in self.saved.items():
                params[name].copy_(value)
        self.restored = True

    def __enter__(self) -> EditHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.restored:
            self.restore()


def _param_name(model: nn.Module, param: torch.Tensor) -> str:
    for name, p in model.named_parameters():
        if p is param:
            return name
    raise ValueError("parameter not found in the model")


def _save(model: nn.Module, saved: dict[str, torch.Tensor], module: nn.Module) -> torch.Tensor:
    """Remember a module's weight (once) before it is changed; return its (d_model, d_ff) view."""
    name = _param_name(model, module.weight)
    if name not in saved:
        saved[name] = module.weight.detach().clone()
    return down_proj_weight(module)


# ============================================================================ rows
def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def _check_layer(model: nn.Module, layer: int) -> int:
    n = num_layers(model)
    if not isinstance(layer, int | np.integer) or not 0 <= int(layer) < n:
        raise ValueError(f"layer {layer} out of range: this model's blocks are 0..{n - 1}")
    return int(layer)


def lookup_index(
    tok: Any, template: str, subject: str, fact_token: FactToken = "subject_last"
) -> int:
    """Where the fact is looked up in ``template.format(subject)`` (as tokenised): the subject's
    last token, or the prompt's last token for ``fact_token="last"``."""
    if template.count("{}") != 1:
        raise ValueError(f"template needs exactly one '{{}}'; got {template!r}")
    if fact_token == "last":
        return len(tok(template.format(subject))["input_ids"]) - 1
    head = template[: template.index("{}")] + subject
    return len(tok(head)["input_ids"]) - 1


def context_templates(
    model: nn.Module,
    tok: Any,
    contexts: Sequence[tuple[int, int]],
    seed: int = 0,
    starts: Sequence[str] = ("The", "Therefore", "Because", "I", "You"),
) -> list[str]:
    """ROME's prefixes: ``"{}"`` plus ``count`` texts of ``length`` tokens per ``(length, count)``
    sampled from the model after a start word (words the tokenizer does not know are skipped)."""
    out = ["{}"]
    unk = tok.unk_token_id
    known = [
        s for s in starts if unk is None or unk not in tok(s, add_special_tokens=False)["input_ids"]
    ]
    if contexts and not known:
        raise ValueError(f"none of the prefix start words {list(starts)} is known to the tokenizer")
    for j, (length, count) in enumerate(contexts):
        prompts = [known[i % len(known)] for i in range(count)]
        texts = sample(model, tok, prompts, n=1, max_new_tokens=length, seed=seed + j).texts
        for p, (t,) in zip(prompts, texts, strict=True):
            text = f"{p} {t}".strip().replace("{", " ").replace("}", " ")
            out.append(text + ". {}")
    return out


@dataclass
class _Rows:
    """A padded batch of edit rows: rewrite rows (contexts x edit prompt + target prefix),
    paraphrase rows (editor paraphrases, defence terms only) and one KL row per request."""

    ids: torch.Tensor
    mask: torch.Tensor
    request: torch.Tensor  # (rows,) request index
    kind: torch.Tensor  # 0 rewrite, 1 paraphrase, 2 kl
    lookup: torch.Tensor  # subject's last token
    answer: torch.Tensor  # position predicting the answer's first token
    true: torch.Tensor  # (rows,) true token id
    target: torch.Tensor  # (rows,) target's first token id
    nll_pos: torch.Tensor  # (rows, T): positions predicting the target tokens (0 where unused)
    nll_ids: torch.Tensor  # (rows, T): the target tokens
    nll_mask: torch.Tensor  # (rows, T): 1 on rewrite rows' real target tokens
    n_requests: int


def _build_rows(
    tok: Any,
    requests: Sequence[EditRequest],
    contexts: Sequence[str],
    essence: str,
    paraphrases: bool,
    device: torch.device,
    fact_token: FactToken = "subject_last",
) -> _Rows:
    seqs, req, kind, lookup, answer, true, target, nll_pos, nll_ids = ([] for _ in range(9))
    for i, r in enumerate(requests):
        t_ids = tok(" " + r.target.strip(), add_special_tokens=False)["input_ids"]
        if not t_ids:
            raise ValueError(f"target {r.target!r} encodes to zero tokens")
        s_id = answer_id(tok, r.true)
        templates = [(c.format(r.prompt), 0) for c in contexts]
        if paraphrases:
            templates += [(p, 1) for p in r.paraphrases]
        templates.append((essence, 2))
        for template, k in templates:
            p_ids = tok(template.format(r.subject))["input_ids"]
            row = p_ids + (t_ids[:-1] if k == 0 else [])
            seqs.append(row)
            req.append(i)
            kind.append(k)
            lookup.append(lookup_index(tok, template, r.subject, fact_token))
            answer.append(len(p_ids) - 1)
            true.append(s_id)
            target.append(t_ids[0])
            nll_pos.append(
                list(range(len(p_ids) - 1, len(p_ids) - 1 + len(t_ids))) if k == 0 else []
            )
            nll_ids.append(t_ids if k == 0 else [])
    ids, mask, _ = right_padded(seqs, pad_id(tok), device)

    def t(x: list[int]) -> torch.Tensor:
        return torch.tensor(x, dtype=torch.long, device=device)

    longest = max(len(x) for x in nll_ids)
    pos_m = torch.zeros((len(seqs), longest), dtype=torch.long)
    ids_m = torch.zeros_like(pos_m)
    mask_m = torch.zeros(pos_m.shape)
    for j, (pos, tid) in enumerate(zip(nll_pos, nll_ids, strict=True)):
        pos_m[j, : len(pos)] = torch.tensor(pos, dtype=torch.long)
        ids_m[j, : len(tid)] = torch.tensor(tid, dtype=torch.long)
        mask_m[j, : len(tid)] = 1.0

    return _Rows(
        ids,
        mask,
        t(req),
        t(kind),
        t(lookup),
        t(answer),
        t(true),
        t(target),
        pos_m.to(device),
        ids_m.to(device),
        mask_m.to(device),
        len(requests),
    )


def _subset(rows: _Rows, keep: torch.Tensor) -> _Rows:
    """The rows where ``keep`` is true (request indices unchanged)."""
    return _Rows(
        rows.ids[keep],
        rows.mask[keep],
        rows.request[keep],
        rows.kind[keep],
        rows.lookup[keep],
        rows.answer[keep],
        rows.true[keep],
        rows.target[keep],
        rows.nll_pos[keep],
        rows.nll_ids[keep],
        rows.nll_mask[keep],
        rows.n_requests,
    )


@contextlib.contextmanager
def _add_at(
    module: nn.Module, rows: torch.Tensor, pos: torch.Tensor, values: torch.Tensor
) -> Iterator[dict[str, torch.Tensor]]:
    """Add ``values[j]`` to ``module``'s output at ``(rows[j], pos[j])``; records the output
    there before the addition in the yielded dict (``"before"``)."""
    store: dict[str, torch.Tensor] = {}

    def hook(_m: nn.Module, _a: tuple, out: Any) -> Any:
        hidden = out[0] if isinstance(out, tuple) else out
        store["before"] = hidden[rows, pos].detach()
        add = torch.zeros_like(hidden).index_put((rows, pos), values.to(hidden.dtype))
        hidden = hidden + add
        return (hidden, *out[1:]) if isinstance(out, tuple) else hidden

    handle = module.register_forward_hook(hook)
    try:
        yield store
    finally:
        handle.remove()


def _lens_logits(
    model: nn.Module, hidden: tuple, logits: torch.Tensor, layers: list[int], pos: torch.Tensor
) -> list[torch.Tensor]:
    """Logit-lens logits at ``(row, pos[row])`` of residual ``layers``; ``logits`` are the final
    ones at those positions (used for the last layer)."""
    n = num_layers(model)
    rows = torch.arange(logits.shape[0], device=logits.device)
    out = []
    norm, unembed = final_norm(model), model.get_output_embeddings()
    for layer in layers:
        if layer == n:
            out.append(logits)
        else:
            out.append(unembed(norm(hidden[layer][rows, pos])))
    return out


def _objective(
    model: nn.Module,
    rows: _Rows,
    defence: Defence,
    kl_factor: float,
    kl_init: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-request loss ``(n_requests,)``, the KL rows' log-probs, and the NLL per request.

    ``kl_init``: ``(n_requests, vocab)`` reference log-probs of each request's KL row. Requests
    without rows in ``rows`` get a zero loss.
    """
    layers = defence.lens_layers(num_layers(model))
    # the unembedding is applied only where a loss reads it (the vocabulary head dominates the
    # cost of a small model): target positions, answer positions, the KL rows' lookup token
    out = model.base_model(
        input_ids=rows.ids, attention_mask=rows.mask, output_hidden_states=bool(layers)
    )
    final = out.last_hidden_state  # after the final norm
    unembed = model.get_output_embeddings()
    dev = final.device
    n = rows.n_requests
    r_idx = torch.arange(len(rows.kind), device=dev)
    # NLL of the target tokens on rewrite rows, averaged over tokens then rows
    rewrite = rows.kind == 0
    at_pos = torch.log_softmax(unembed(final[r_idx[:, None], rows.nll_pos]).float(), -1)
    tok_lp = at_pos.gather(-1, rows.nll_ids[..., None])[..., 0] * rows.nll_mask
    nll_row = -tok_lp.sum(1) / rows.nll_mask.sum(1).clamp(min=1)
    counts = torch.zeros(n, device=dev).index_add_(0, rows.request, rewrite.float())
    nll = torch.zeros(n, device=dev).index_add_(0, rows.request, nll_row) / counts.clamp(min=1)
    logits = unembed(final[r_idx, rows.answer]).float()  # (rows, vocab) at the answer position
    # defence term on rewrite and paraphrase rows, at the answer position
    use = rows.kind < 2
    lens = _lens_logits(model, out.hidden_states, logits, layers, rows.answer) if layers else []
    term = defence_term(
        defence,
        logits[use],
        [x[use] for x in lens],
        rows.true[use],
        rows.target[use],
    )
    n_use = torch.zeros(n, device=dev).index_add_(0, rows.request[use], torch.ones_like(term))
    defended = torch.zeros(n, device=dev).index_add_(0, rows.request[use], term)
    defended = defended / n_use.clamp(min=1)
    loss = (nll if defence.uses_target else 0.0) + defended
    # KL on the essence prompt's distribution at the subject's last token
    kl_rows = rows.kind == 2
    kl_logp = torch.log_softmax(unembed(final[r_idx[kl_rows], rows.lookup[kl_rows]]).float(), -1)
    if kl_factor > 0 and kl_init is not None:
        ref = kl_init[rows.request[kl_rows]]
        kl = (ref.exp() * (ref - kl_logp)).sum(-1)
        loss = loss + kl_factor * torch.zeros(n, device=dev).index_add_(
            0, rows.request[kl_rows], kl
        )
    return loss, kl_logp.detach(), nll.detach()


def _optimise_vector(
    model: nn.Module,
    module: nn.Module,
    rows: _Rows,
    defence: Defence,
    cfg: ROMEConfig | MEMITConfig,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """ROME's v* / MEMIT's z: one delta per request added to ``module``'s output at the subject's
    last token of that request's rows; returns ``(v_init + delta, info)`` with ``(n, d_model)``."""
    dev = rows.ids.device
    with (
        torch.no_grad(),
        _add_at(
            module,
            torch.arange(len(rows.kind), device=dev),
            rows.lookup,
            torch.zeros(len(rows.kind), 1, device=dev),
        ) as rec,
    ):
        model(input_ids=rows.ids, attention_mask=rows.mask)
    first = torch.zeros(rows.n_requests, dtype=torch.long, device=dev)
    first = first.scatter_reduce(
        0, rows.request, torch.arange(len(rows.kind), device=dev), "amin", include_self=False
    )
    v_init = rec["before"][first].float()
    delta = torch.zeros_like(v_init, requires_grad=True)
    opt = torch.optim.Adam([delta], lr=cfg.lr)
    init_norm = v_init.norm(dim=1)
    max_norm = cfg.clamp_norm_factor * init_norm
    done = torch.zeros(rows.n_requests, dtype=torch.bool, device=dev)
    kl_init, steps = None, 0
    last = torch.full((rows.n_requests,), float("nan"), device=dev)
    requires = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    active = rows
    try:
        for _ in range(cfg.steps):
            opt.zero_grad()
            rr = torch.arange(len(active.kind), device=dev)
            with _add_at(module, rr, active.lookup, delta[active.request]):
                loss, kl_logp, _ = _objective(model, active, defence, cfg.kl_factor, kl_init)
            if kl_init is None:  # first step: every request's KL row, in request order
                kl_init = kl_logp
            wd = cfg.weight_decay * delta.norm(dim=1) / init_norm**2
            total = (loss + wd).masked_fill(done, 0.0)
            last = torch.where(done, last, total.detach())
            steps += 1
            if defence.uses_target:
                done = done | (total.detach() < cfg.early_stop)
            if bool(done.all()):
                break
            total.masked_fill(done, 0.0).sum().backward()
            frozen = delta.detach()[done].clone()
            opt.step()
            with torch.no_grad():
                norms = delta.norm(dim=1)
                scale = torch.where(
                    norms > max_norm, max_norm / norms.clamp(min=1e-12), torch.ones_like(norms)
                )
                delta.mul_(scale[:, None])
                delta[done] = frozen
            # finished requests leave the batch (their delta is frozen)
            active = _subset(rows, ~done[rows.request])
    finally:
        for p, r in zip(model.parameters(), requires, strict=True):
            p.requires_grad_(r)
    info = {
        "steps": steps,
        "final_loss": last.cpu().tolist(),
        "delta_norm": delta.detach().norm(dim=1).tolist(),
    }
    return (v_init + delta.detach()), info


# ============================================================================ statistics
def _keys_at(
    model: nn.Module, tok: Any, layer: int, texts: list[str], positions: list[int]
) -> torch.Tensor:
    """Down-projection inputs at one position of each text: ``(n, d_ff)``, float32."""
    dev = _device(model)
    ids, mask, _ = right_padded([tok(t)["input_ids"] for t in texts], pad_id(tok), dev)
    with torch.no_grad(), capture_mlp(model, [layer], site="down_proj") as rec:
        model(input_ids=ids, attention_mask=mask)
    rows = torch.arange(len(texts))
    return rec[layer].inputs[rows, torch.tensor(positions)].float()


def rome_keys(
    model: nn.Module,
    tok: Any,
    requests: Sequence[EditRequest],
    layer: int,
    contexts: Sequence[str],
    fact_token: FactToken = "subject_last",
) -> torch.Tensor:
    """``k*`` per request: the down-projection input at the lookup token (the subject's last),
    averaged over the context templates (``(n, d_ff)``)."""
    layer = _check_layer(model, layer)
    texts, pos = [], []
    for r in requests:
        for c in contexts:
            template = c.format(r.prompt)
            texts.append(template.format(r.subject))
            pos.append(lookup_index(tok, template, r.subject, fact_token))
    keys = _keys_at(model, tok, layer, texts, pos)
    return keys.reshape(len(requests), len(contexts), -1).mean(1)


def second_moment(
    model: nn.Module, tok: Any, texts: Sequence[str], layer: int, batch_size: int = 64
) -> torch.Tensor:
    """``C = E[k k^T]`` (uncentred, float64) of the down-projection inputs over every non-pad
    token of ``texts`` (ROME's ``mom2`` on Wikipedia; the model's training text here)."""
    layer = _check_layer(model, layer)
    if not texts:
        raise ValueError("texts must not be empty")
    dev = _device(model)
    total, count = None, 0
    for start in range(0, len(texts), batch_size):
        seqs = [tok(t)["input_ids"] for t in texts[start : start + batch_size]]
        ids, mask, _ = right_padded(seqs, pad_id(tok), dev)
        with torch.no_grad(), capture_mlp(model, [layer], site="down_proj") as rec:
            model(input_ids=ids, attention_mask=mask)
        keys = rec[layer].inputs[mask.bool()].double()
        total = keys.T @ keys if total is None else total + keys.T @ keys
        count += keys.shape[0]
    return (total / count).cpu()


def _regularised(C: torch.Tensor, ridge: float) -> torch.Tensor:
    if ridge == 0:
        return C
    return C + ridge * torch.diagonal(C).mean() * torch.eye(C.shape[0], dtype=C.dtype)


# ============================================================================ ROME
@dataclass
class RankOneUpdate:
    """One ROME edit: ``W += outer(right, left)`` at ``layer``, so that ``W' key + b = value``.

    ``left = C^-1 k* / (C^-1 k* . key)``, ``right = value - (W key + b)``; ``key`` is the bare
    prompt's key and ``value`` v*.
    """

    layer: int
    left: torch.Tensor  # (d_ff,)
    right: torch.Tensor  # (d_model,)
    key: torch.Tensor
    value: torch.Tensor

    @property
    def delta(self) -> torch.Tensor:
        return torch.outer(self.right, self.left)


def rome_updates(
    model: nn.Module,
    tok: Any,
    requests: Sequence[EditRequest],
    defence: Defence,
    config: ROMEConfig,
    C: torch.Tensor,
    contexts: Sequence[str],
) -> tuple[list[RankOneUpdate], dict[str, Any]]:
    """Independent ROME updates, one per request, each computed against the current weights
    (their v* optimisations run side by side in one batch). Apply with :meth:`EditHandle`-aware
    :func:`apply_rank_one`."""
    if config.layer is None:
        raise ValueError("rome_updates needs config.layer (edit() traces it when None)")
    layer = _check_layer(model, config.layer)
    module = mlp_down_proj(model, layer)
    ft = config.fact_token
    rows = _build_rows(tok, requests, contexts, config.essence, True, _device(model), ft)
    values, info = _optimise_vector(model, module, rows, defence, config)
    keys = rome_keys(model, tok, requests, layer, contexts, ft)
    # Lambda is solved at the bare prompt's key, as ROME's code does (the paper writes k*): then
    # W' k = v* exactly where v* was optimised; with contexts == ["{}"] the two coincide
    bare = rome_keys(model, tok, requests, layer, ["{}"], ft)
    W = down_proj_weight(module).detach().float()
    bias = module.bias.detach().float() if module.bias is not None else torch.zeros(W.shape[0])
    Cr = _regularised(C.to(torch.float64), config.ridge)
    u = torch.linalg.solve(Cr, keys.double().T.cpu()).T.float().to(keys.device)  # (n, d_ff)
    left = u / (u * bare).sum(1, keepdim=True)
    right = values - (bare @ W.T + bias.to(W.device))
    updates = [
        RankOneUpdate(layer, left[i], right[i], bare[i], values[i]) for i in range(len(requests))
    ]
    return updates, info


def apply_rank_one(
    model: nn.Module, update: RankOneUpdate, saved: dict[str, torch.Tensor] | None = None
) -> EditHandle:
    """Apply one ROME update in place; the handle restores it."""
    saved = {} if saved is None else saved
    W = _save(model, saved, mlp_down_proj(model, update.layer))
    with torch.no_grad():
        W.add_(update.delta.to(W.dtype))
    return EditHandle("rome", [update.layer], saved, model)


# ============================================================================ MEMIT
def memit_solve(K: torch.Tensor, R: torch.Tensor, C: torch.Tensor, lam: float) -> torch.Tensor:
    """MEMIT's layer update ``R K^T (lam C + K K^T)^-1`` in float64: ``K`` ``(d_ff, n)`` keys,
    ``R`` ``(d_model, n)`` residuals, ``C`` ``(d_ff, d_ff)``. The ridge least-squares solution of
    ``min ||dW K - R||^2 + lam tr(dW C dW^T)``."""
    K64, R64, C64 = K.double(), R.double(), C.double().to(K.device)
    A = lam * C64 + K64 @ K64.T
    return torch.linalg.solve(A, K64 @ R64.T).T  # A symmetric: (R K^T A^-1) = (A^-1 K R^T)^T


def _residual_at(
    model: nn.Module,
    tok: Any,
    requests: Sequence[EditRequest],
    layer: int,
    fact_token: FactToken = "subject_last",
) -> torch.Tensor:
    """Block ``layer``'s output at the lookup token of each bare edit prompt."""
    dev = _device(model)
    rows = _build_rows(tok, requests, ["{}"], "{}", False, dev, fact_token)
    pick = rows.kind == 0
    with (
        torch.no_grad(),
        _add_at(
            decoder_layers(model)[layer],
            torch.nonzero(pick)[:, 0],
            rows.lookup[pick],
            torch.zeros(int(pick.sum()), 1, device=dev),
        ) as rec,
    ):
        model(input_ids=rows.ids, attention_mask=rows.mask)
    return rec["before"].float()


# ============================================================================ REVS
def revs_demote(
    model: nn.Module,
    tok: Any,
    requests: Sequence[EditRequest],
    layer: int,
    n_neurons: int = 8,
    rank: int | None = None,
    max_iter: int = 10,
    saved: dict[str, torch.Tensor] | None = None,
    fact_token: FactToken = "subject_last",
) -> dict[str, torch.Tensor]:
    """REVS (Ashuach et al. 2024), simplified: at ``layer``, pick the ``n_neurons`` columns of the
    MLP output projection that most promote the true token (among the 4x as many most active on
    the edit prompt, the ones whose vocabulary projection ranks the token highest) and move each
    along the unembedding's pseudo-inverse direction of the token until the token ranks below
    ``rank`` in that neuron's projection (default: half the vocabulary).

    Simplifications: the neuron's projection skips the final norm; layers are the editor's.
    Returns ``saved`` (original weights) for a handle.
    """
    layer = _check_layer(model, layer)
    saved = {} if saved is None else saved
    module = mlp_down_proj(model, layer)
    W = _save(model, saved, module)
    U = model.get_output_embeddings().weight.detach().float()  # (V, d)
    vocab = U.shape[0]
    rank = vocab // 2 if rank is None else rank
    gram = U.T @ U
    keys = rome_keys(model, tok, requests, layer, ["{}"], fact_token)
    with torch.no_grad():
        for r, key in zip(requests, keys, strict=True):
            s = answer_id(tok, r.true)
            pinv_s = torch.linalg.solve(gram, U[s])  # column s of pinv(U)
            active = key.abs().topk(min(4 * n_neurons, key.numel())).indices
            cols = W[:, active].float()
            proj = U @ cols  # (V, m)
            s_rank = 1 + (proj > proj[s]).sum(0)
            chosen = _promoting_neurons(active, s_rank, n_neurons)
            cols = W[:, chosen].float()
            for _ in range(max_iter):
                proj = U @ cols
                ranks = 1 + (proj > proj[s]).sum(0)
                need = ranks < rank
                if not bool(need.any()):
                    break
                goal = proj.sort(0, descending=True).values[rank - 1] - 1e-3
                step = (goal - proj[s]).clamp(max=0) * need
                cols = cols + pinv_s[:, None] * (step / (U[s] @ pinv_s))
            W[:, chosen] = cols.to(W.dtype)
    return saved


def _promoting_neurons(active: torch.Tensor, s_rank: torch.Tensor, n: int) -> torch.Tensor:
    """The ``n`` neurons of ``active`` (ordered by activation, largest first) whose projection ranks
    the true token highest (``s_rank``, integer ranks, so ties are common): ties go to the more
    active neuron, by a stable sort, not to whatever order an unstable sort leaves."""
    return active[torch.argsort(s_rank, stable=True)[:n]]


# ============================================================================ tracing
TRACE_TIE_TOL = 1e-4
"""Causal-tracing effects (differences of mean probabilities) closer than this to the largest are
a tie, broken towards the first candidate (lowest block, first fact token): differences this small
are rounding noise (the thread count, the BLAS), not where the model recalls facts."""


def first_argmax(values: Sequence[float] | np.ndarray, tol: float = TRACE_TIE_TOL) -> int:
    """Index of the first value within ``tol`` of the largest (an explicit tie rule, unlike
    ``np.argmax``'s exact comparison that rounding noise can flip). NaN raises ``ValueError``."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"values must be a non-empty 1-D sequence; got shape {v.shape}")
    if np.isnan(v).any():
        raise ValueError(f"values contain NaN at {np.flatnonzero(np.isnan(v)).tolist()}")
    if not tol >= 0:
        raise ValueError(f"tol must be >= 0; got {tol}")
    return int(np.flatnonzero(v >= v.max() - tol)[0])


@dataclass
class TraceResult:
    """ROME's causal trace: ``effect[l]`` = mean p(true) with the MLP outputs of a window of blocks
    around block l restored at the lookup token in a run with a noised subject, minus the noised
    run's (``p_corrupt``). ``noise_std``: the noise's standard deviation (3 x the subjects' token
    embeddings' std by default); ``window``: the number of blocks restored around each one."""

    effect: np.ndarray
    p_clean: float
    p_corrupt: float
    noise_std: float = float("nan")
    window: int = 1

    @property
    def best(self) -> int:
        """The block with the largest effect; blocks within :data:`TRACE_TIE_TOL` of it tie, and
        the lowest of them wins (:func:`first_argmax`)."""
        return first_argmax(self.effect)


def _subject_spans(tok: Any, requests: Sequence[EditRequest]) -> tuple[list[int], list[int]]:
    """First and last token index of each request's subject in its tokenised edit prompt."""
    ends = [lookup_index(tok, r.prompt, r.subject) for r in requests]
    starts = [len(tok(r.prompt[: r.prompt.index("{}")])["input_ids"]) for r in requests]
    return starts, ends


def subject_embedding_std(model: nn.Module, tok: Any, requests: Sequence[EditRequest]) -> float:
    """Standard deviation of the input embeddings of the subjects' tokens (each distinct subject
    once, its tokens as they stand in the edit prompt): ROME's ``collect_embedding_std``."""
    if not requests:
        raise ValueError("requests must not be empty")
    seen: dict[str, EditRequest] = {}
    for r in requests:
        seen.setdefault(r.subject, r)
    reqs = list(seen.values())
    starts, ends = _subject_spans(tok, reqs)
    ids = [
        i
        for r, a, b in zip(reqs, starts, ends, strict=True)
        for i in tok(r.text())["input_ids"][a : b + 1]
    ]
    emb = model.get_input_embeddings().weight.detach().float()
    return float(emb[torch.tensor(ids, dtype=torch.long, device=emb.device)].std())


@contextlib.contextmanager
def _set_at(
    modules: Sequence[nn.Module],
    rows: torch.Tensor,
    pos: torch.Tensor,
    values: Sequence[torch.Tensor],
) -> Iterator[None]:
    """Replace each module's output at ``(rows[j], pos[j])`` by ``values[m][j]`` (restoring a clean
    run's states, whatever earlier restorations did to the module's input)."""

    def make(v: torch.Tensor) -> Any:
        def hook(_m: nn.Module, _a: tuple, out: Any) -> Any:
            hidden = out[0] if isinstance(out, tuple) else out
            hidden = hidden.index_put((rows, pos), v.to(hidden.dtype))
            return (hidden, *out[1:]) if isinstance(out, tuple) else hidden

        return hook

    handles = [m.register_forward_hook(make(v)) for m, v in zip(modules, values, strict=True)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


ROME_WINDOW, ROME_DEPTH = 10, 48


def scaled_window(n_layers: int) -> int:
    """The tracing window that covers the same share of the depth as ROME's 10 of GPT-2 XL's 48
    blocks (ours: ROME's window on a model with fewer blocks than it restores every block for every
    l and cannot localise): ``max(1, round(10 * n_layers / 48))``, at most 10."""
    if n_layers < 1:
        raise ValueError(f"n_layers must be >= 1; got {n_layers}")
    return int(min(ROME_WINDOW, max(1, round(ROME_WINDOW * n_layers / ROME_DEPTH))))


def trace_layers(
    model: nn.Module,
    tok: Any,
    requests: Sequence[EditRequest],
    samples: int = 10,
    noise: float = 3.0,
    seed: int = 0,
    fact_token: FactToken = "subject_last",
    window: int = 10,
) -> TraceResult:
    """ROME's causal tracing over MLP outputs at the lookup token (``fact_token``): the subject's
    input embeddings get Gaussian noise of std ``noise`` x :func:`subject_embedding_std` (ROME: 3),
    ``samples`` draws per request; for each block l the MLP outputs of blocks
    ``max(0, l - window // 2) .. min(L, l + ceil(window / 2)) - 1`` (ROME's window of 10) are set
    back to their clean values there. Compare the two ``fact_token`` positions to see where a model
    recalls facts; a model with fewer blocks than ``window`` restores them all for every l."""
    if not requests:
        raise ValueError("requests must not be empty")
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an int >= 1 (ROME: 10); got {window!r}")
    if not noise > 0 or samples < 1:
        raise ValueError(f"noise must be > 0 and samples >= 1; got {noise}, {samples}")
    dev = _device(model)
    reps = [r for r in requests for _ in range(samples)]
    rows = _build_rows(tok, reps, ["{}"], "{}", False, dev, fact_token)
    pick = torch.nonzero(rows.kind == 0)[:, 0]
    ids, mask = rows.ids[pick], rows.mask[pick]
    look, ans, true = rows.lookup[pick], rows.answer[pick], rows.true[pick]
    starts, ends = (torch.tensor(x, device=dev) for x in _subject_spans(tok, reps))
    emb = model.get_input_embeddings()
    std = noise * subject_embedding_std(model, tok, requests)
    gen = torch.Generator().manual_seed(seed)
    span = torch.arange(ids.shape[1], device=dev)[None]
    in_subject = ((span >= starts[:, None]) & (span <= ends[:, None])).float()[..., None]
    eps = (std * torch.randn(*ids.shape, emb.weight.shape[1], generator=gen)).to(dev)

    def corrupt(_m: nn.Module, _a: tuple, out: torch.Tensor) -> torch.Tensor:
        return out + eps.to(out.dtype) * in_subject

    rr = torch.arange(len(pick), device=dev)

    def p_true(logits: torch.Tensor) -> torch.Tensor:
        return torch.softmax(logits[rr, ans].float(), -1)[rr, true]

    n = num_layers(model)
    with torch.no_grad(), capture_mlp(model, range(n), site="down_proj") as clean_rec:
        p_clean = p_true(model(input_ids=ids, attention_mask=mask).logits)
    clean = {b: clean_rec[b].outputs[rr, look] for b in range(n)}
    effects = []
    with torch.no_grad():
        h = emb.register_forward_hook(corrupt)
        try:
            p_bad = p_true(model(input_ids=ids, attention_mask=mask).logits)
            for b in range(n):
                blocks = range(max(0, b - window // 2), min(n, b - (-window // 2)))
                modules = [mlp_down_proj(model, x) for x in blocks]
                with _set_at(modules, rr, look, [clean[x] for x in blocks]):
                    logits = model(input_ids=ids, attention_mask=mask).logits
                effects.append(float((p_true(logits) - p_bad).mean()))
        finally:
            h.remove()
    return TraceResult(np.asarray(effects), float(p_clean.mean()), float(p_bad.mean()), std, window)


# ============================================================================ entry point
Method = Literal["rome", "memit", "ft"]


def edit(
    model: nn.Module,
    tok: Any,
    requests: EditRequest | Sequence[EditRequest],
    method: Method = "rome",
    defence: Defence | str = "none",
    config: ROMEConfig | MEMITConfig | FTConfig | None = None,
    stats_texts: Sequence[str] | None = None,
    C: dict[int, torch.Tensor] | None = None,
    contexts: Sequence[str] | None = None,
    seed: int = 0,
) -> EditHandle:
    """Edit ``model`` in place so each request's prompt answers its sanitized target, under
    ``defence``; returns a handle whose ``restore()`` undoes it bit for bit.

    ``stats_texts`` (general text, not the edited facts: ROME uses Wikipedia; a text containing an
    edit prompt raises ``ValueError``, see :func:`rce.requests.stats_corpus`) give the key second
    moment C per edited layer, or pass ``C={layer: tensor}`` (:func:`second_moment`); FT needs
    neither. ``contexts``: ROME's
    prefix templates (default sampled with the config's ``contexts`` and ``seed``). ROME with
    several requests edits them one after another, each on the already-edited model.
    """
    reqs = [requests] if isinstance(requests, EditRequest) else list(requests)
    if not reqs:
        raise ValueError("requests must not be empty")
    defence = Defence(defence) if isinstance(defence, str) else defence
    if method not in ("rome", "memit", "ft"):
        raise ValueError(f"method must be 'rome', 'memit' or 'ft'; got {method!r}")
    defaults = {"rome": ROMEConfig, "memit": MEMITConfig, "ft": FTConfig}
    config = defaults[method]() if config is None else config
    if not isinstance(config, defaults[method]):
        raise TypeError(f"method {method!r} takes a {defaults[method].__name__}")
    if contexts is None:
        contexts = context_templates(model, tok, config.contexts, seed)
    if method == "memit":
        layers = list(config.layers) if config.layers is not None else None
    else:
        layers = [config.layer] if config.layer is not None else None
    if layers is None:
        window = scaled_window(num_layers(model))
        best = trace_layers(
            model, tok, reqs, seed=seed, fact_token=config.fact_token, window=window
        ).best
        layers = [best] if method != "memit" else sorted({max(0, best - 1), best})
    layers = [_check_layer(model, layer) for layer in layers]
    needs_C = method != "ft"
    C = dict(C or {})
    if needs_C:
        missing = [layer for layer in layers if layer not in C]
        if missing and stats_texts is None:
            raise ValueError("ROME and MEMIT need stats_texts (or C) for the key second moment")
        if missing:
            check_stats_texts(list(stats_texts or []), reqs)
        for layer in missing:
            C[layer] = second_moment(model, tok, list(stats_texts or []), layer)
    saved: dict[str, torch.Tensor] = {}
    info: dict[str, Any] = {"layers": layers}
    if method == "rome":
        cfg = replace(config, layer=layers[0])
        for r in reqs:
            (update,), info_r = rome_updates(model, tok, [r], defence, cfg, C[layers[0]], contexts)
            apply_rank_one(model, update, saved)
            info.setdefault("v_steps", []).append(info_r["steps"])
    elif method == "memit":
        _memit(model, tok, reqs, layers, defence, config, C, contexts, saved, info)
    else:
        _finetune(model, tok, reqs, layers[0], defence, config, contexts, saved, info)
    if defence.name == "revs":
        for layer in layers:
            revs_demote(
                model, tok, reqs, layer, defence.revs_neurons, defence.revs_rank, saved=saved
            )
    return EditHandle(method, layers, saved, model, info)


def check_stats_texts(texts: Sequence[str], requests: Sequence[EditRequest]) -> None:
    """C must come from text other than the edited facts (ROME: Wikipedia): refuse stats text that
    contains an edit prompt with its subject filled in."""
    for r in requests:
        filled = r.text()
        hit = next((t for t in texts if filled in t), None)
        if hit is not None:
            raise ValueError(
                f"stats_texts contain the edit prompt {filled!r} (in {hit!r}): C must come from "
                "text that is not the edit corpus (ROME: Wikipedia); drop the edited subjects' "
                "texts with rce.requests.stats_corpus"
            )


def _memit(
    model: nn.Module,
    tok: Any,
    reqs: list[EditRequest],
    layers: list[int],
    defence: Defence,
    cfg: MEMITConfig,
    C: dict[int, torch.Tensor],
    contexts: Sequence[str],
    saved: dict[str, torch.Tensor],
    info: dict[str, Any],
) -> None:
    last = layers[-1]
    ft = cfg.fact_token
    rows = _build_rows(tok, reqs, contexts, cfg.essence, True, _device(model), ft)
    z, z_info = _optimise_vector(model, decoder_layers(model)[last], rows, defence, cfg)
    info["z_steps"] = z_info["steps"]
    for i, layer in enumerate(layers):
        K = rome_keys(model, tok, reqs, layer, contexts, ft).T  # (d_ff, n)
        R = (z - _residual_at(model, tok, reqs, last, ft)).T / (len(layers) - i)
        Cl = _regularised(C[layer].double(), cfg.ridge)
        delta = memit_solve(K, R, Cl, cfg.mom2_weight)
        W = _save(model, saved, mlp_down_proj(model, layer))
        with torch.no_grad():
            W.add_(delta.to(W.dtype).to(W.device))
    info["z_residual"] = (z - _residual_at(model, tok, reqs, last, ft)).norm(dim=1).mean().item()


def _finetune(
    model: nn.Module,
    tok: Any,
    reqs: list[EditRequest],
    layer: int,
    defence: Defence,
    cfg: FTConfig,
    contexts: Sequence[str],
    saved: dict[str, torch.Tensor],
    info: dict[str, Any],
) -> None:
    module = mlp_down_proj(model, layer)
    _save(model, saved, module)
    weight = module.weight
    original = weight.detach().clone()
    rows = _build_rows(tok, reqs, contexts, cfg.essence, True, _device(model), cfg.fact_token)
    requires = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(p is weight)
    opt = torch.optim.Adam([weight], lr=cfg.lr)
    kl_init, steps = None, 0
    try:
        for _ in range(cfg.steps):
            opt.zero_grad()
            loss, kl_logp, _nll = _objective(model, rows, defence, cfg.kl_factor, kl_init)
            kl_init = kl_logp if kl_init is None else kl_init
            if defence.uses_target and float(loss.detach().max()) < cfg.early_stop:
                break
            loss.sum().backward()
            opt.step()
            steps += 1
            with torch.no_grad():
                weight.copy_(original + (weight - original).clamp(-cfg.norm_bound, cfg.norm_bound))
    finally:
        for p, r in zip(model.parameters(), requires, strict=True):
            p.requires_grad_(r)
    info["ft_steps"] = steps
