"""Ways to fine-tune without losing alignment, behind one interface, and Safe LoRA on peft.

A :class:`Mitigation` changes the gradient-descent update direction given the current ``theta``,
the aligned ``theta0`` and the task gradient ``g``:

* :class:`PlainGD` - no change;
* :class:`SubspaceProjection` - project every update onto ``M^perp`` (``M`` the top-d Fisher span);
* :class:`EWC` - Elastic Weight Consolidation (Kirkpatrick et al., arXiv 1612.00796): the penalty
  ``(strength / 2) sum_j F_jj (theta_j - theta0_j)^2`` with the diagonal Fisher;
* :class:`FisherPenalty` - the AlignGuard-LoRA subspace penalty (arXiv 2508.02079)
  ``strength * sum_i lambda_i <b_i, theta - theta0>^2``.

Safe LoRA (Hsu et al., arXiv 2405.16833) acts after LoRA training: :func:`safe_lora`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

__all__ = [
    "EWC",
    "FisherPenalty",
    "Mitigation",
    "PlainGD",
    "SubspaceProjection",
    "add_lora",
    "safe_lora",
]


class Mitigation:
    """The interface: ``direction`` maps the task gradient to the update direction; ``after_step``
    may correct the parameters after each step (identity by default)."""

    name = "mitigation"

    def direction(self, theta: torch.Tensor, theta0: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def after_step(self, theta: torch.Tensor, theta0: torch.Tensor) -> torch.Tensor:
        return theta


class PlainGD(Mitigation):
    name = "gd"

    def direction(self, theta: torch.Tensor, theta0: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return g


def _orthonormal(basis: torch.Tensor) -> torch.Tensor:
    if basis.ndim != 2 or basis.shape[1] > basis.shape[0]:
        raise ValueError(f"basis must be (P, d) with d <= P; got {tuple(basis.shape)}")
    gram = basis.T @ basis
    if not torch.allclose(gram, torch.eye(gram.shape[0], dtype=gram.dtype), atol=1e-8):
        raise ValueError("basis columns must be orthonormal (e.g. Fisher eigenvectors)")
    return basis


class SubspaceProjection(Mitigation):
    """Every update projected onto the orthogonal complement of ``span(basis)``."""

    name = "project"

    def __init__(self, basis: torch.Tensor) -> None:
        self.basis = _orthonormal(basis)

    def direction(self, theta: torch.Tensor, theta0: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return g - self.basis @ (self.basis.T @ g)


class EWC(Mitigation):
    """The gradient of ``(strength / 2) sum_j F_jj (theta_j - theta0_j)^2`` added to ``g``."""

    name = "ewc"

    def __init__(self, fisher_diagonal: torch.Tensor, strength: float) -> None:
        if not strength > 0:
            raise ValueError(f"strength must be > 0; got {strength}")
        if torch.any(fisher_diagonal < 0):
            raise ValueError("a Fisher diagonal cannot be negative")
        self.fisher_diagonal = fisher_diagonal
        self.strength = float(strength)

    def direction(self, theta: torch.Tensor, theta0: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return g + self.strength * self.fisher_diagonal * (theta - theta0)


class FisherPenalty(Mitigation):
    """The gradient of ``strength * sum_i lambda_i <b_i, theta - theta0>^2`` added to ``g``."""

    name = "fisher_penalty"

    def __init__(self, basis: torch.Tensor, eigenvalues: torch.Tensor, strength: float) -> None:
        if not strength > 0:
            raise ValueError(f"strength must be > 0; got {strength}")
        self.basis = _orthonormal(basis)
        if eigenvalues.shape != (basis.shape[1],):
            raise ValueError("one eigenvalue per basis column")
        self.eigenvalues = eigenvalues
        self.strength = float(strength)

    def direction(self, theta: torch.Tensor, theta0: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        coef = self.eigenvalues * (self.basis.T @ (theta - theta0))
        return g + 2 * self.strength * (self.basis @ coef)


DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def add_lora(
    model: nn.Module,
    r: int = 4,
    alpha: float = 8.0,
    targets: Sequence[str] = DEFAULT_LORA_TARGETS,
    seed: int = 0,
) -> Any:
    """Wrap ``model`` with peft LoRA adapters (B = 0, so outputs are unchanged at the start)."""
    from peft import LoraConfig, get_peft_model

    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    targets = [t for t in targets if t in present]
    if not targets:
        raise ValueError("none of the LoRA target modules exist in the model; pass targets=")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        peft_model = get_peft_model(
            model, LoraConfig(r=r, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0)
        )
    dtype = next(model.parameters()).dtype
    return peft_model.to(dtype)


def _weight_name(lora_a_name: str) -> str:
    """``...q_proj.lora_A.default.weight`` -> ``q_proj.weight`` relative to the wrapped model."""
    prefix = lora_a_name.split(".lora_A.")[0]
    prefix = prefix.removeprefix("base_model.model.")
    return prefix + ".weight"


@torch.no_grad()
def safe_lora(
    peft_model: nn.Module,
    base: nn.Module,
    aligned_weights: dict[str, torch.Tensor],
    tau: float = 0.5,
) -> list[dict[str, Any]]:
    """Safe LoRA, in place: per LoRA layer, ``V = W_aligned - W_base``, ``C = V V^T / |V|_F``; the
    update ``dW = s B A`` becomes ``C dW`` (``B <- C B``) when ``cos(dW, C dW) < tau``.

    ``aligned_weights``: the aligned model's weights by name (``dict(model.named_parameters())``
    before wrapping). Returns one row per layer: its name, the cosine and whether it was projected.
    """
    if not 0 <= tau <= 1:
        raise ValueError(f"tau must be in [0, 1]; got {tau}")
    base_params = dict(base.named_parameters())
    params = dict(peft_model.named_parameters())
    rows = []
    for name, a in params.items():
        if ".lora_A." not in name:
            continue
        b = params[name.replace(".lora_A.", ".lora_B.")]
        wname = _weight_name(name)
        if wname not in base_params or wname not in aligned_weights:
            raise ValueError(f"{wname} is missing from the base or the aligned weights")
        v = aligned_weights[wname] - base_params[wname]
        norm = torch.linalg.norm(v)
        if norm == 0:
            rows.append({"layer": wname, "cosine": float("nan"), "projected": False})
            continue
        c = v @ v.T / norm
        dw = b @ a
        cdw = c @ dw
        denom = torch.linalg.norm(dw) * torch.linalg.norm(cdw)
        cos = float((dw * cdw).sum() / denom) if denom > 0 else 1.0
        projected = cos < tau
        if projected:
            b.copy_(c @ b)
        rows.append({"layer": wname, "cosine": cos, "projected": bool(projected)})
    return rows
