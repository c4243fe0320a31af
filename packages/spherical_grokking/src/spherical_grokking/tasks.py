"""The algorithmic tasks, generated exactly in code: ``a op b`` over Z_p and composition in S_n.

Every example is the token sequence ``a b =`` with the answer as its label (the layout of Nanda et
al. 2023). Operands and answers are tokens ``0 .. n_elements - 1``; ``=`` is token ``n_elements``.
Z_p elements are the residues themselves; S_n elements are the permutations of ``range(n)`` in
lexicographic order (``itertools.permutations``), and ``a b`` means "apply b, then a":
``(a b)(i) = a[b[i]]``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

__all__ = [
    "MODULAR_OPS",
    "Split",
    "Task",
    "discrete_log",
    "is_prime",
    "make_task",
    "modular_inverse",
    "modular_task",
    "permutation_sign",
    "permutation_task",
    "permutations",
    "primitive_root",
    "split",
]

ModularOp = Literal["+", "-", "*", "/"]
MODULAR_OPS: dict[str, str] = {"+": "add", "-": "sub", "*": "mul", "/": "div"}
_NAMES = {v: k for k, v in MODULAR_OPS.items()}


def is_prime(n: int) -> bool:
    """True for a prime ``n`` (trial division; the tasks use p < 10^4)."""
    if n < 2:
        return False
    return all(n % d for d in range(2, math.isqrt(n) + 1))


def modular_inverse(b: int, p: int) -> int:
    """``b^{-1} mod p``; ``ValueError`` when it does not exist (gcd(b, p) != 1)."""
    try:
        return pow(int(b), -1, int(p))
    except ValueError:
        raise ValueError(f"{b} has no inverse modulo {p} (gcd != 1)") from None


def primitive_root(p: int) -> int:
    """The smallest generator g of the multiplicative group Z_p^* (p prime)."""
    if not is_prime(p):
        raise ValueError(f"p must be prime for a primitive root; got {p}")
    if p == 2:
        return 1
    factors = {q for q in range(2, p) if (p - 1) % q == 0 and is_prime(q)}
    for g in range(2, p):
        if all(pow(g, (p - 1) // q, p) != 1 for q in factors):
            return g
    raise AssertionError("unreachable: every prime has a primitive root")


def discrete_log(p: int) -> np.ndarray:
    """``log[x]`` with ``g^log[x] = x mod p`` for x = 1..p-1 (g the smallest primitive root); log[0] = -1."""
    g = primitive_root(p)
    log = np.full(p, -1, dtype=np.int64)
    powers = np.empty(p - 1, dtype=np.int64)
    powers[0] = 1
    for k in range(1, p - 1):  # p - 1 modular products: a scan, not a hot path
        powers[k] = powers[k - 1] * g % p
    log[powers] = np.arange(p - 1)
    return log


def permutations(n: int) -> np.ndarray:
    """All permutations of ``range(n)`` in lexicographic order: ``(n!, n)`` int64."""
    if n < 1:
        raise ValueError(f"n must be >= 1; got {n}")
    if n > 8:
        raise ValueError(f"S_{n} has {math.factorial(n)} elements; n <= 8 is supported")
    return np.array(list(itertools.permutations(range(n))), dtype=np.int64).reshape(-1, n)


def permutation_sign(perms: np.ndarray) -> np.ndarray:
    """+1 / -1 for even / odd permutations; ``perms`` is ``(m, n)``. Counts inversions, vectorised."""
    perms = np.asarray(perms)
    i, j = np.triu_indices(perms.shape[1], k=1)
    inversions = (perms[:, i] > perms[:, j]).sum(axis=1)
    return np.where(inversions % 2 == 0, 1, -1)


@dataclass(frozen=True)
class Task:
    """A binary operation on ``n_elements`` elements, every pair ``(a, b)`` where it is defined.

    Attributes:
        name: short name (``"add_mod_59"``, ``"perm_S5"``).
        operation: ``"+"``, ``"-"``, ``"*"``, ``"/"`` (Z_p) or ``"compose"`` (S_n).
        n_elements: operands and answers are tokens ``0 .. n_elements - 1``.
        inputs: ``(n_examples, 3)`` int64 token sequences ``a b =``.
        labels: ``(n_examples,)`` int64 answers.
        modulus: p for Z_p tasks, else None.
        degree: n for S_n tasks, else None.
        commutative: whether ``a op b == b op a`` for every pair.
    """

    name: str
    operation: str
    n_elements: int
    inputs: np.ndarray = field(repr=False)
    labels: np.ndarray = field(repr=False)
    modulus: int | None = None
    degree: int | None = None
    commutative: bool = True

    @property
    def vocab_size(self) -> int:
        """Elements plus the ``=`` token."""
        return self.n_elements + 1

    @property
    def n_classes(self) -> int:
        return self.n_elements

    @property
    def equals_token(self) -> int:
        return self.n_elements

    def __len__(self) -> int:
        return len(self.labels)

    def table(self) -> np.ndarray:
        """The operation table ``(n_elements, n_elements)``: ``table[a, b] = a op b``, -1 where undefined."""
        out = np.full((self.n_elements, self.n_elements), -1, dtype=np.int64)
        out[self.inputs[:, 0], self.inputs[:, 1]] = self.labels
        return out


def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return a.ravel(), b.ravel()


def _sequences(a: np.ndarray, b: np.ndarray, equals: int) -> np.ndarray:
    return np.stack([a, b, np.full_like(a, equals)], axis=1).astype(np.int64)


def modular_task(op: ModularOp, p: int) -> Task:
    """``a op b mod p`` for every pair (for ``/``: every pair with b != 0; needs p prime)."""
    if op not in MODULAR_OPS:
        raise ValueError(f"op must be one of {', '.join(MODULAR_OPS)}; got {op!r}")
    if isinstance(p, bool) or not isinstance(p, int | np.integer) or p < 2:
        raise ValueError(f"p must be an integer >= 2; got {p!r}")
    p = int(p)
    if op == "/" and not is_prime(p):
        raise ValueError(f"division mod p needs p prime (every b != 0 invertible); got p = {p}")
    a, b = _pairs(p)
    if op == "+":
        y = (a + b) % p
    elif op == "-":
        y = (a - b) % p
    elif op == "*":
        y = (a * b) % p
    else:
        keep = b != 0
        a, b = a[keep], b[keep]
        inverse = np.array([0] + [modular_inverse(x, p) for x in range(1, p)], dtype=np.int64)
        y = (a * inverse[b]) % p
    return Task(
        name=f"{MODULAR_OPS[op]}_mod_{p}",
        operation=op,
        n_elements=p,
        inputs=_sequences(a, b, p),
        labels=y.astype(np.int64),
        modulus=p,
        commutative=op in ("+", "*"),
    )


def permutation_task(n: int = 5) -> Task:
    """Composition in S_n: all ``n! x n!`` pairs, ``(a b)(i) = a[b[i]]`` (apply b, then a)."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 2:
        raise ValueError(f"n must be an integer >= 2; got {n!r}")
    perms = permutations(int(n))
    m = len(perms)
    a, b = _pairs(m)
    composed = np.take_along_axis(perms[a], perms[b], axis=1)  # composed[i, k] = a[b[k]]
    weights = int(n) ** np.arange(int(n) - 1, -1, -1)
    codes = perms @ weights  # lexicographic order = increasing base-n codes
    y = np.searchsorted(codes, composed @ weights)
    return Task(
        name=f"perm_S{n}",
        operation="compose",
        n_elements=m,
        inputs=_sequences(a, b, m),
        labels=y.astype(np.int64),
        degree=int(n),
        commutative=int(n) <= 2,
    )


def make_task(name: str, p: int = 113, n: int = 5) -> Task:
    """A task by name: ``add``, ``sub``, ``mul``, ``div`` (mod ``p``) or ``perm`` (S_``n``)."""
    if name == "perm":
        return permutation_task(n)
    if name in _NAMES:
        return modular_task(_NAMES[name], p)  # type: ignore[arg-type]
    raise ValueError(f"task must be one of {', '.join([*_NAMES, 'perm'])}; got {name!r}")


@dataclass(frozen=True)
class Split:
    """A train/test split of a task's examples; tensors ready for full-batch training."""

    task: Task
    train_idx: np.ndarray = field(repr=False)
    test_idx: np.ndarray = field(repr=False)

    @property
    def train_fraction(self) -> float:
        return len(self.train_idx) / len(self.task)

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(train_x, train_y, test_x, test_y)`` as int64 tensors."""
        t = self.task
        return (
            torch.from_numpy(t.inputs[self.train_idx]),
            torch.from_numpy(t.labels[self.train_idx]),
            torch.from_numpy(t.inputs[self.test_idx]),
            torch.from_numpy(t.labels[self.test_idx]),
        )


def split(task: Task, train_fraction: float, seed: int = 0) -> Split:
    """Shuffle the task's examples with ``seed`` and keep the first ``floor(fraction * N)`` for training."""
    if not isinstance(task, Task):
        raise TypeError(f"task must be a Task; got {type(task).__name__}")
    if not 0.0 < float(train_fraction) < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1); got {train_fraction}")
    n = len(task)
    n_train = math.floor(float(train_fraction) * n)
    if not 1 <= n_train < n:
        raise ValueError(
            f"train_fraction {train_fraction} leaves {n_train} of {n} examples for training"
        )
    order = np.random.default_rng(seed).permutation(n)
    return Split(task, np.sort(order[:n_train]), np.sort(order[n_train:]))
