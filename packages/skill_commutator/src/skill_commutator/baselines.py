"""What else could predict the ordered-composition gap: predictors from the two skills at the origin.

Each predictor takes the two skills' local quantities (:meth:`Realization.local` at ``z = 0``: ``J``
``(B, d, m)`` and the field's block ``v`` ``(B, m)``) and returns one score per context ``(B,)``;
larger means "the order matters more".

- ``cosine``: ``1 - |cos(J_A v_A, J_B v_B)|``, how differently the two skills move the readout;
- ``norm_product``: ``|J_A v_A| |J_B v_B|``, how strongly they move it;
- ``jacobian_angle``: the mean principal angle between ``col(J_A)`` and ``col(J_B)``;
- ``actadd``: the commutator of constant (context-independent) steering, which is zero up to rounding
  (computed by :func:`skill_commutator.compose.actadd_commutator`, not here).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

__all__ = [
    "PREDICTORS",
    "cosine_predictor",
    "jacobian_angle_predictor",
    "norm_product_predictor",
    "readout_move",
]

Local = Mapping[str, torch.Tensor]


def readout_move(loc: Local) -> torch.Tensor:
    """``J v``: the direction (and speed) a skill's field moves the readout, ``(..., d)``."""
    return (loc["J"] @ loc["v"].unsqueeze(-1)).squeeze(-1)


def cosine_predictor(a: Local, b: Local) -> torch.Tensor:
    """``1 - |cos(J_A v_A, J_B v_B)|`` per context."""
    return 1 - torch.nn.functional.cosine_similarity(readout_move(a), readout_move(b), dim=-1).abs()


def norm_product_predictor(a: Local, b: Local) -> torch.Tensor:
    """``|J_A v_A| |J_B v_B|`` per context."""
    return readout_move(a).norm(dim=-1) * readout_move(b).norm(dim=-1)


def jacobian_angle_predictor(a: Local, b: Local) -> torch.Tensor:
    """Mean principal angle (radians) between ``col(J_A)`` and ``col(J_B)`` per context (batched:
    ``arccos`` of the singular values of ``Q_A^T Q_B``)."""
    qa, _ = torch.linalg.qr(a["J"])
    qb, _ = torch.linalg.qr(b["J"])
    s = torch.linalg.svdvals(qa.transpose(1, 2) @ qb).clamp(-1.0, 1.0)
    return torch.arccos(s).mean(-1)


PREDICTORS: dict[str, Callable[[Local, Local], torch.Tensor]] = {
    "cosine": cosine_predictor,
    "norm_product": norm_product_predictor,
    "jacobian_angle": jacobian_angle_predictor,
}
