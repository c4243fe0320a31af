"""Signal-Drift diagnostics of a LoRA update, computed during training.

For every adapted weight ``W0`` (shape ``(out, in)``) peft's effective update is
``dW = s * B @ A`` (``s`` the applied scale). Stack all adapted layers into one vector ``u = vec(dW)``
and take a reference task direction ``g`` (by default the full-fine-tuning descent direction
``-grad_W L(W0)`` on a reference batch, one block per adapted layer). Then

* update norm ``||u||`` (Frobenius over all layers),
* task signal ``S = <u, g> / ||g||``: the length of the update along the task direction,
* drift ``D = ||u - S g/||g|| ||``: what the update does orthogonally to it,
* drift ratio ``D / |S|`` and cosine ``S / ||u||``.

Spectral suppression: singular values of each ``dW``; the stable rank ``||dW||_F^2 / ||dW||_2^2``
and the share of ``||dW||_F^2`` in the top singular value. Sharpness: the top eigenvalue of the
Hessian of the loss with respect to the trainable parameters, by power iteration on Hessian-vector
products (double backward) on a fixed batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

LossFn = Callable[[nn.Module, Any], torch.Tensor]


_PEFT_PREFIX = "base_model.model."


def base_name(name: str) -> str:
    """A module's name in the unwrapped model (peft's ``base_model.model.`` prefix removed)."""
    return name[len(_PEFT_PREFIX) :] if name.startswith(_PEFT_PREFIX) else name


def lora_layers(model: nn.Module, adapter: str | None = None) -> dict[str, nn.Module]:
    """The peft LoRA layers of ``model`` that carry ``adapter`` (default: the active one).

    Keys are the names in the unwrapped model (``model.layers.0.self_attn.q_proj``), so updates
    from LoRA and from full fine-tuning of the same base model line up.
    """
    out = {}
    for name, module in model.named_modules():
        a = getattr(module, "lora_A", None)
        if not isinstance(a, nn.ModuleDict) or not hasattr(module, "get_delta_weight"):
            continue
        key = adapter if adapter is not None else _active(module)
        if key in a:
            out[base_name(name)] = module
    if not out:
        raise ValueError("model has no LoRA layers; wrap it with get_lora_alpha_model first")
    return out


def _active(module: nn.Module) -> str:
    active = getattr(module, "active_adapters", None) or ["default"]
    return active[0]


@torch.no_grad()
def delta_weights(model: nn.Module, adapter: str | None = None) -> dict[str, torch.Tensor]:
    """``{layer: s * B @ A}`` in the base weight's layout (peft's ``get_delta_weight``)."""
    return {
        name: m.get_delta_weight(adapter or _active(m)).detach().float()
        for name, m in lora_layers(model, adapter).items()
    }


def reference_gradient(
    model: nn.Module, loss_fn: LossFn, batch: Any, adapter: str | None = None
) -> dict[str, torch.Tensor]:
    """Full-fine-tuning descent direction ``-dL/dW`` at the base weights, one block per LoRA layer.

    Computed with the adapters disabled, so it is the first step full fine-tuning would take from
    the pretrained model on ``batch``.
    """
    layers = lora_layers(model, adapter)
    weights = {name: m.get_base_layer().weight for name, m in layers.items()}
    flags = {name: w.requires_grad for name, w in weights.items()}
    try:
        for w in weights.values():
            w.requires_grad_(True)
        ctx = model.disable_adapter() if hasattr(model, "disable_adapter") else _null()
        with ctx:
            loss = loss_fn(model, batch)
        grads = torch.autograd.grad(loss, list(weights.values()), allow_unused=True)
    finally:
        for name, w in weights.items():
            w.requires_grad_(flags[name])
    out = {}
    for name, g in zip(weights, grads, strict=True):
        if g is None:
            raise ValueError(f"the loss does not depend on layer {name}")
        out[name] = -g.detach().float()
    return out


def full_finetune_delta(
    model: nn.Module,
    loss_fn: LossFn,
    batches: Any,
    modules: list[str],
    lr: float = 1e-3,
    steps: int = 200,
) -> dict[str, torch.Tensor]:
    """``W - W0`` of each module in ``modules`` after full fine-tuning them (Adam) on ``batches``.

    ``model`` is the unwrapped base model (it is trained in place: pass a copy); ``modules`` are
    full module names as :func:`lora_layers` reports them. The result is the full-fine-tuning
    reference direction of Signal-Drift.
    """
    named = dict(model.named_modules())
    missing = [m for m in modules if m not in named]
    if missing:
        raise ValueError(f"modules {missing} not in {type(model).__name__}")
    for p in model.parameters():
        p.requires_grad_(False)
    weights = {m: named[m].weight for m in modules}
    start = {m: w.detach().clone() for m, w in weights.items()}
    for w in weights.values():
        w.requires_grad_(True)
    opt = torch.optim.Adam(list(weights.values()), lr=lr)
    model.train()
    for _ in range(steps):
        loss = loss_fn(model, next(batches))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return {m: (weights[m].detach() - start[m]).float() for m in modules}


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


@dataclass(frozen=True)
class SignalDrift:
    """Decomposition of an update along a reference task direction (see module docstring)."""

    update_norm: float
    signal: float
    drift: float
    drift_ratio: float
    cosine: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def signal_drift(
    delta: Mapping[str, torch.Tensor], reference: Mapping[str, torch.Tensor]
) -> SignalDrift:
    """Signal, drift and their ratio of ``delta`` against ``reference`` (same keys and shapes).

    Edge cases, explicit: a zero update has ratio and cosine NaN (0/0); an update orthogonal to
    the reference has ratio ``inf``; an update with a non-finite entry (a diverged run) has drift
    ratio ``+inf``, censored (it drifted past every finite value), norm ``inf`` and signal, drift
    and cosine NaN. A non-finite reference raises ``ValueError``.
    """
    if set(delta) != set(reference):
        raise ValueError(
            f"delta and reference cover different layers: {sorted(set(delta) ^ set(reference))}"
        )
    for k in delta:
        if delta[k].shape != reference[k].shape:
            raise ValueError(f"layer {k}: delta {delta[k].shape} vs reference {reference[k].shape}")
    keys = sorted(delta)
    u = torch.cat([delta[k].double().flatten() for k in keys])
    g = torch.cat([reference[k].double().flatten() for k in keys])
    if not torch.isfinite(g).all():
        raise ValueError("the reference direction has non-finite entries")
    g_norm = g.norm()
    if g_norm == 0:
        raise ValueError("the reference direction is zero")
    if not torch.isfinite(u).all():
        return SignalDrift(math.inf, math.nan, math.nan, math.inf, math.nan)
    norm = float(u.norm())
    signal = float(u @ g / g_norm)
    drift = math.sqrt(norm**2 - signal**2) if norm**2 > signal**2 else 0.0  # both finite here
    ratio = drift / abs(signal) if signal != 0 else math.inf if drift > 0 else math.nan
    cosine = signal / norm if norm > 0 else math.nan
    return SignalDrift(norm, signal, drift, ratio, cosine)


def spectrum(delta_w: torch.Tensor) -> torch.Tensor:
    """Singular values of one update ``(out, in)``, descending."""
    if delta_w.ndim != 2:
        raise ValueError(f"delta_w must be 2-D (out, in); got shape {tuple(delta_w.shape)}")
    return torch.linalg.svdvals(delta_w.double()).float()


def spectral_summary(delta: Mapping[str, torch.Tensor]) -> dict[str, float]:
    """Mean over layers of the stable rank and of the top singular value's energy share."""
    stable, top = [], []
    for w in delta.values():
        sv = spectrum(w)
        energy = float((sv**2).sum())
        if energy == 0:
            continue
        stable.append(energy / float(sv[0] ** 2))
        top.append(float(sv[0] ** 2) / energy)
    if not stable:
        return {"stable_rank": math.nan, "top1_energy": math.nan}
    return {"stable_rank": sum(stable) / len(stable), "top1_energy": sum(top) / len(top)}


def top_hessian_eigenvalue(
    model: nn.Module,
    loss_fn: LossFn,
    batch: Any,
    params: list[torch.Tensor] | None = None,
    iters: int = 20,
    tol: float = 1e-3,
    seed: int = 0,
) -> float:
    """Largest-magnitude Hessian eigenvalue of ``loss_fn(model, batch)`` in ``params``.

    Power iteration with Hessian-vector products (``torch.autograd.grad`` twice); ``params``
    defaults to the trainable parameters. Stops when the estimate changes by less than ``tol``
    relative. Works on transformers models: attention runs through SDPA's math kernel here, which
    supports double backward.
    """
    if iters < 1:
        raise ValueError(f"iters must be >= 1; got {iters}")
    params = [p for p in model.parameters() if p.requires_grad] if params is None else params
    if not params:
        raise ValueError("no parameters to take the Hessian in")
    # fused attention kernels have no double backward: the math kernel does
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        loss = loss_fn(model, batch)
        grads = torch.autograd.grad(loss, params, create_graph=True)
    gen = torch.Generator().manual_seed(seed)
    v = [torch.randn(p.shape, generator=gen).to(p) for p in params]
    norm = torch.sqrt(sum((x * x).sum() for x in v))
    v = [x / norm for x in v]
    eig = 0.0
    for i in range(iters):
        hv = torch.autograd.grad(grads, params, grad_outputs=v, retain_graph=True)
        new = float(sum((a * b).sum() for a, b in zip(hv, v, strict=True)))
        norm = torch.sqrt(sum((x * x).sum() for x in hv))
        if norm == 0:
            return 0.0
        v = [x / norm for x in hv]
        if i > 0 and abs(new - eig) <= tol * max(abs(eig), 1e-12):
            return new
        eig = new
    return eig


class SignalDriftCallback:
    """Records Signal-Drift, spectrum and (optionally) sharpness every ``every`` steps.

    Use in a plain loop (``cb.on_step(model, step, loss)``) or with ``transformers.Trainer``
    (``Trainer(..., callbacks=[cb.trainer_callback()])``). ``history`` is a list of dicts.

    Args:
        reference: the task direction (e.g. :func:`reference_gradient`); None skips Signal-Drift.
        every: record every ``every`` steps (and always at step 0 when called).
        sharpness: ``(loss_fn, batch)`` to track :func:`top_hessian_eigenvalue`, or None.
        sharpness_every: steps between sharpness estimates (a multiple of ``every``).
    """

    def __init__(
        self,
        reference: Mapping[str, torch.Tensor] | None = None,
        every: int = 10,
        sharpness: tuple[LossFn, Any] | None = None,
        sharpness_every: int = 50,
        sharpness_iters: int = 10,
    ) -> None:
        if every < 1 or sharpness_every < 1:
            raise ValueError(
                f"every and sharpness_every must be >= 1; got {every}, {sharpness_every}"
            )
        self.reference = dict(reference) if reference is not None else None
        self.every = every
        self.sharpness = sharpness
        self.sharpness_every = sharpness_every
        self.sharpness_iters = sharpness_iters
        self.history: list[dict[str, float]] = []

    def on_step(
        self, model: nn.Module, step: int, loss: float | None = None, force: bool = False
    ) -> None:
        """Record at ``step`` if it is a multiple of ``every`` (or ``force``)."""
        if step % self.every and not force:
            return
        row: dict[str, float] = {"step": float(step)}
        if loss is not None:
            row["loss"] = float(loss)
        delta = delta_weights(model)
        if self.reference is not None:
            row.update(signal_drift(delta, self.reference).as_dict())
        else:
            row["update_norm"] = float(torch.sqrt(sum((d**2).sum() for d in delta.values())))
        row.update(spectral_summary(delta))
        if self.sharpness is not None and step % self.sharpness_every == 0:
            loss_fn, batch = self.sharpness
            row["sharpness"] = top_hessian_eigenvalue(
                model, loss_fn, batch, iters=self.sharpness_iters
            )
        self.history.append(row)

    def trainer_callback(self) -> Any:
        """A ``transformers.TrainerCallback`` that feeds this recorder after every step."""
        from transformers import TrainerCallback

        outer = self

        class _Callback(TrainerCallback):
            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                loss = state.log_history[-1].get("loss") if state.log_history else None
                outer.on_step(kwargs["model"], state.global_step, loss)

        return _Callback()
