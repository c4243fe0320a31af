"""Everything the theory needs about an aligned model and a fine-tuning task, measured once,
before any fine-tuning: :class:`AlignedPoint` (the alignment loss, its Fisher and top eigenpairs)
and :class:`TaskGeometry` (the task gradient, ``H g``, ``|H|_2``, the AIC and the onset forecast).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from alignment_geometry.aic import (
    AICResult,
    AICThresholds,
    check_aic,
    forecast_from_terms,
    onset_terms,
)
from alignment_geometry.finetune import task_gradient
from alignment_geometry.fisher import (
    CategoricalFisher,
    FisherDecomposition,
    FlatParams,
    HessianOperator,
    PromptBatch,
    hvp,
    kl_divergence,
    kl_from_reference,
    response_logits,
)

__all__ = ["AlignedPoint", "TaskGeometry", "alignment_monitor"]


@dataclass
class AlignedPoint:
    """The aligned model as a point ``theta0`` with its alignment loss ``u`` and Fisher ``F``.

    ``eigenvalues`` / ``eigenvectors`` hold the top ``d + 1`` Fisher eigenpairs (``M`` is the span
    of the first ``d``). With ``exact=True`` they come from :class:`FisherDecomposition` (every
    nonzero eigenvalue, and the range projection that orthogonalised tasks need); otherwise from
    ``eigsh`` on Fisher-vector products, which scales to large models.
    """

    space: FlatParams
    theta0: torch.Tensor
    logits_fn: Callable[..., torch.Tensor]
    u: Callable[[torch.Tensor], torch.Tensor]
    fisher: CategoricalFisher
    d: int
    eigenvalues: torch.Tensor
    eigenvectors: torch.Tensor
    decomposition: FisherDecomposition | None = None
    refuse_id: int | None = None

    @classmethod
    def measure(
        cls,
        space: FlatParams,
        harmful: PromptBatch,
        d: int = 8,
        exact: bool = True,
        refuse_id: int | None = None,
        eigenpairs: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> AlignedPoint:
        """Measure ``u``, ``F`` and the top ``d + 1`` eigenpairs at the model's current parameters
        (``eigenpairs``: reuse ones measured before, e.g. in another process)."""
        if not isinstance(d, int) or not 1 <= d < space.size:
            raise ValueError(
                f"d must be an int in [1, {space.size - 1}] (the parameter count); got {d!r}"
            )
        theta0 = space.vector()
        logits = response_logits(space, harmful)
        fisher = CategoricalFisher(logits, theta0)
        decomposition = None
        if eigenpairs is not None:
            vals, vecs = eigenpairs
            if vals.shape[0] < d + 1 or vecs.shape != (space.size, vals.shape[0]):
                raise ValueError(f"eigenpairs must hold d + 1 = {d + 1} pairs of size {space.size}")
        elif exact:
            decomposition = fisher.decompose()
            if d + 1 > decomposition.rank:
                raise ValueError(
                    f"d = {d} needs {d + 1} nonzero Fisher eigenvalues; F has rank {decomposition.rank}"
                )
            vals = decomposition.eigenvalues[: d + 1]
            vecs = decomposition.eigenvectors(d + 1)
        else:
            v, w = fisher.top_eigenpairs(d + 1)
            vals, vecs = torch.as_tensor(v.copy()), torch.as_tensor(w.copy())
        return cls(
            space,
            theta0,
            logits,
            kl_from_reference(logits, theta0, z0=fisher.z0),
            fisher,
            d,
            vals,
            vecs,
            decomposition,
            refuse_id,
        )

    @property
    def basis(self) -> torch.Tensor:
        """Orthonormal columns spanning ``M``, shape (P, d)."""
        return self.eigenvectors[:, : self.d]

    def monitor(self, theta: torch.Tensor) -> dict[str, float]:
        """``{"u": KL to the aligned model, "refusal": refusal rate}`` from one forward pass on the
        harmful prompts (the refusal rate only if ``refuse_id`` is set)."""
        return alignment_monitor(self.logits_fn, self.theta0, self.refuse_id, z0=self.fisher.z0)(
            theta
        )


def alignment_monitor(
    logits_fn: Callable[..., torch.Tensor],
    theta0: torch.Tensor,
    refuse_id: int | None = None,
    z0: torch.Tensor | None = None,
) -> Callable[[torch.Tensor], dict[str, float]]:
    """``theta -> {"u", "refusal"}`` for :func:`alignment_geometry.finetune.finetune`: the KL to the
    model at ``theta0`` and the fraction of prompts whose greedy next token is ``refuse_id``."""
    if z0 is None:
        with torch.no_grad():
            z0 = logits_fn(theta0)

    def monitor(theta: torch.Tensor) -> dict[str, float]:
        with torch.no_grad():
            z = logits_fn(theta)
            out = {"u": float(kl_divergence(z0, z))}
            if refuse_id is not None:
                out["refusal"] = float((z.argmax(-1) == refuse_id).double().mean())
        return out

    return monitor


@dataclass
class TaskGeometry:
    """The AIC and the onset forecast of one task at the aligned point."""

    g: torch.Tensor
    hg: torch.Tensor
    hessian_norm: float
    aic: AICResult
    onset_terms: tuple[float, float, float]  # E jg^T C jg, E jg^T C z'', E z''^T C z''

    @classmethod
    def measure(
        cls,
        point: AlignedPoint,
        task_loss: Callable[..., torch.Tensor],
        thresholds: AICThresholds | None = None,
    ) -> TaskGeometry:
        g = task_gradient(task_loss, point.theta0)
        hg = hvp(task_loss, point.theta0, g)
        hnorm = HessianOperator(task_loss, point.theta0).spectral_norm()
        aic = check_aic(point.eigenvalues, point.eigenvectors, g, hg, point.d, thresholds)
        return cls(g, hg, hnorm, aic, onset_terms(point.logits_fn, point.theta0, g, hg))

    @property
    def c2(self) -> float:
        """``(1/2) g^T F g``: the coefficient of a quadratic onset."""
        return 0.5 * self.onset_terms[0]

    @property
    def c4(self) -> float:
        """``(1/8) E z''^T C z''``: the quartic coefficient (the onset when ``F g = 0``)."""
        return self.onset_terms[2] / 8

    def forecast(self, t: np.ndarray | float) -> np.ndarray:
        """The second-order forecast of ``u(t)`` (see :func:`alignment_geometry.aic.onset_forecast`)."""
        return forecast_from_terms(self.onset_terms, t)

    def summary(self) -> dict[str, Any]:
        return {
            "hessian_norm": self.hessian_norm,
            "c2": self.c2,
            "c4": self.c4,
            **{
                k: v
                for k, v in self.aic.to_dict().items()
                if k not in ("eigenvalues", "conditions")
            },
        }
