"""Fourier diagnostics for the Z_p tasks: the embedding's spectrum, key frequencies, restricted/excluded loss.

Every Z_p task is addition on a cyclic group in the right coordinates: ``a + b`` and ``a - b`` on
Z_p itself, ``a * b`` and ``a / b`` on Z_p^* (cyclic of order p - 1) through the discrete logarithm
(0 lies outside it and is left out). :func:`cyclic_structure` gives those coordinates, so one
analysis serves all four operations:

- the **embedding spectrum**: the energy of each frequency in the (centred) token embeddings,
  ordered by coordinate (Nanda et al. 2023: a grokked model puts it in a few key frequencies);
- the **fraction of variance explained** by the top-k frequencies (chance: k / number of frequencies);
- Nanda's **restricted loss** (the logits keep only their key-frequency components
  ``cos / sin(w_f (c_a +- c_b))`` and their mean, loss on every pair) and **excluded loss** (the
  key-frequency components removed, loss on the training pairs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import ArrayLike
from torch import nn

from .tasks import Split, Task, discrete_log, is_prime

__all__ = [
    "CyclicStructure",
    "FourierReport",
    "cyclic_structure",
    "embedding_spectrum",
    "fourier_analysis",
    "fraction_explained",
    "key_frequencies",
    "restricted_excluded_loss",
]


@dataclass(frozen=True)
class CyclicStructure:
    """Coordinates in which a task is ``c(answer) = c(a) + sign_b * c(b) mod period``.

    ``coords[x]`` is element x's coordinate, -1 for elements outside the group (0 under ``*``, ``/``).
    """

    period: int
    coords: np.ndarray
    sign_b: int

    @property
    def n_frequencies(self) -> int:
        """Non-constant frequencies 1 .. period // 2."""
        return self.period // 2

    def order(self) -> np.ndarray:
        """Element tokens sorted by coordinate (those outside the group dropped)."""
        inside = np.flatnonzero(self.coords >= 0)
        return inside[np.argsort(self.coords[inside])]


def cyclic_structure(task: Task) -> CyclicStructure:
    """The cyclic coordinates of a Z_p task; ``ValueError`` for S_n (see :func:`~.cosets.coset_probe`)."""
    if task.modulus is None:
        raise ValueError(
            f"{task.name} has no cyclic structure: Fourier analysis needs a Z_p task "
            "(use coset_probe for S_n)"
        )
    p = task.modulus
    sign_b = -1 if task.operation in ("-", "/") else 1
    if task.operation in ("+", "-"):
        return CyclicStructure(p, np.arange(p), sign_b)
    if not is_prime(p):
        raise ValueError(f"Fourier analysis of {task.operation} mod p needs p prime; got {p}")
    return CyclicStructure(p - 1, discrete_log(p), sign_b)


def embedding_spectrum(weights: ArrayLike, structure: CyclicStructure) -> np.ndarray:
    """Energy per frequency of element embeddings ``weights`` ``(n_elements, d)`` (or more rows).

    Rows are ordered by coordinate and centred; returns ``(period // 2 + 1,)`` energies whose sum is
    the total sum of squares (Parseval; frequency 0 is 0 after centring), with f and period - f folded.
    """
    w = np.asarray(weights, dtype=float)
    if w.ndim != 2 or w.shape[0] < len(structure.coords):
        raise ValueError(
            f"weights must be (n_elements >= {len(structure.coords)}, d); got shape {w.shape}"
        )
    rows = w[structure.order()]
    rows = rows - rows.mean(axis=0)
    n = structure.period
    energy = (np.abs(np.fft.rfft(rows, axis=0)) ** 2).sum(axis=1) / n
    energy[1 : (n + 1) // 2] *= 2  # f and n - f; the Nyquist frequency (even n) appears once
    return energy


def key_frequencies(spectrum: ArrayLike, k: int = 5) -> np.ndarray:
    """The ``k`` non-constant frequencies with the most energy, strongest first."""
    s = np.asarray(spectrum, dtype=float)
    if not 1 <= k < s.size:
        raise ValueError(f"k must be in [1, {s.size - 1}]; got {k}")
    return np.argsort(-s[1:], kind="stable")[:k] + 1


def fraction_explained(spectrum: ArrayLike, freqs: ArrayLike) -> float:
    """Share of the non-constant energy in ``freqs``."""
    s = np.asarray(spectrum, dtype=float)
    total = s[1:].sum()
    return float(s[np.asarray(freqs, dtype=int)].sum() / total) if total > 0 else float("nan")


def _grid(task: Task, structure: CyclicStructure) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the examples with both operands in the group, and their phases c(a) +- c(b)."""
    ca = structure.coords[task.inputs[:, 0]]
    cb = structure.coords[task.inputs[:, 1]]
    keep = np.flatnonzero((ca >= 0) & (cb >= 0))
    return keep, (ca[keep] + structure.sign_b * cb[keep]) % structure.period


def _key_components(
    logits: torch.Tensor, phase: np.ndarray, period: int, freqs: np.ndarray
) -> torch.Tensor:
    """Projection of each class's logits (over examples) onto cos/sin(2 pi f phase / period), summed over f."""
    angle = 2 * np.pi * np.outer(phase, freqs) / period  # (N, F)
    basis = np.concatenate([np.cos(angle), np.sin(angle)], axis=1)
    basis = torch.as_tensor(
        basis[:, (basis**2).sum(0) > 1e-9], dtype=logits.dtype
    )  # sin at Nyquist = 0
    coef = (
        basis.T @ logits / (basis**2).sum(0)[:, None]
    )  # the columns are orthogonal on a full grid
    return basis @ coef


@torch.no_grad()
def restricted_excluded_loss(
    model: nn.Module, data: Split, freqs: ArrayLike, structure: CyclicStructure | None = None
) -> dict[str, float]:
    """Nanda et al.'s progress measures for the key frequencies ``freqs``.

    On the complete grid of pairs inside the group: ``loss`` (all pairs), ``restricted_loss`` (logits
    reduced to their mean and key-frequency components, all pairs), ``excluded_loss`` and
    ``train_loss`` (key components removed / kept, training pairs), plus restricted accuracy.
    """
    task = data.task
    structure = structure or cyclic_structure(task)
    keep, phase = _grid(task, structure)
    freqs = np.asarray(freqs, dtype=int)
    if freqs.size == 0 or freqs.min() < 1 or freqs.max() > structure.n_frequencies:
        raise ValueError(f"freqs must lie in [1, {structure.n_frequencies}]; got {freqs.tolist()}")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    logits = model(torch.from_numpy(task.inputs[keep]).to(device)).double().cpu()
    model.train(was_training)
    labels = torch.from_numpy(task.labels[keep])
    key = _key_components(logits, phase, structure.period, freqs)
    restricted = logits.mean(0, keepdim=True) + key
    excluded = logits - key
    train_mask = torch.from_numpy(np.isin(keep, data.train_idx))
    return {
        "loss": float(F.cross_entropy(logits, labels)),
        "restricted_loss": float(F.cross_entropy(restricted, labels)),
        "restricted_acc": float((restricted.argmax(-1) == labels).double().mean()),
        "train_loss": float(F.cross_entropy(logits[train_mask], labels[train_mask])),
        "excluded_loss": float(F.cross_entropy(excluded[train_mask], labels[train_mask])),
    }


@dataclass(frozen=True)
class FourierReport:
    """The embedding spectrum, its key frequencies and their share, and Nanda's progress measures."""

    spectrum: np.ndarray
    key_freqs: tuple[int, ...]
    fve: float
    chance_fve: float
    losses: dict[str, float]

    def as_row(self) -> dict[str, float | str]:
        return {
            "key_freqs": " ".join(map(str, self.key_freqs)),
            "fve_key": self.fve,
            "fve_chance": self.chance_fve,
            **self.losses,
        }


def fourier_analysis(model: nn.Module, data: Split, k: int = 5) -> FourierReport:
    """Spectrum of ``model.embed`` over the task's elements, its top-``k`` frequencies and their losses."""
    structure = cyclic_structure(data.task)
    weights = model.embed.weight.detach().cpu().numpy()[: data.task.n_elements]
    spectrum = embedding_spectrum(weights, structure)
    freqs = key_frequencies(spectrum, k)
    return FourierReport(
        spectrum=spectrum,
        key_freqs=tuple(int(f) for f in freqs),
        fve=fraction_explained(spectrum, freqs),
        chance_fve=k / structure.n_frequencies,
        losses=restricted_excluded_loss(model, data, freqs, structure),
    )
