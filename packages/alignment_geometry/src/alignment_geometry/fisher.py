"""Curvature of any ``nn.Module`` (an HF causal LM included) by ``torch.func``, in float64.

Everything works on a flat parameter vector ``theta`` over a chosen subset of the module's
parameters (:class:`FlatParams`: all of them, one decoder block, the LoRA factors or any names),
so a model becomes a plain function ``theta -> logits`` and the Fisher, the Hessian and their top
eigenpairs are linear operators on ``R^P``:

* :class:`CategoricalFisher` - the exact Fisher of the model's categorical outputs at ``theta0``,
  ``F = E_x J_x^T (diag p_x - p_x p_x^T) J_x``, applied as ``J^T (C (J v))`` by one ``jvp`` and one
  ``vjp`` (it is the Hessian of ``E_x KL(p_theta0(.|x) || p_theta(.|x))`` at ``theta0``);
* :func:`empirical_fisher` - ``E_x grad l_x grad l_x^T`` from per-example gradients (``vmap(grad)``);
* :func:`hvp` / :class:`HessianOperator` - Hessian-vector products by ``jvp`` of ``grad``;
* :func:`top_eigenpairs` - ``scipy.sparse.linalg.eigsh`` on any of them as a ``LinearOperator``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy.sparse.linalg import LinearOperator, eigsh
from torch import nn
from torch.func import functional_call, grad, jacrev, jvp, vjp, vmap

__all__ = [
    "CategoricalFisher",
    "FisherDecomposition",
    "FlatParams",
    "HessianOperator",
    "PromptBatch",
    "SequenceBatch",
    "empirical_fisher",
    "hvp",
    "kl_divergence",
    "kl_from_reference",
    "response_logits",
    "sequence_nll",
    "top_eigenpairs",
]

Selector = str | Sequence[str] | Callable[[str], bool]


def _select(model: nn.Module, select: Selector) -> list[str]:
    names = [n for n, _ in model.named_parameters()]
    if callable(select):
        chosen = [n for n in names if select(n)]
    elif isinstance(select, str):
        if select == "all":
            chosen = names
        elif select == "lora":
            chosen = [n for n in names if "lora_" in n]
        elif m := re.fullmatch(r"block:(\d+)", select):
            pat = re.compile(rf"(^|\.)(layers|h|blocks|layer)\.{m.group(1)}\.")
            chosen = [n for n in names if pat.search(n)]
        else:
            raise ValueError(
                f"select must be 'all', 'lora', 'block:<i>', a list of names or a predicate; got {select!r}"
            )
    else:
        wanted = list(select)
        missing = sorted(set(wanted) - set(names))
        if missing:
            raise ValueError(f"no parameters named {missing[:5]} in the model")
        chosen = [n for n in names if n in set(wanted)]
    if not chosen:
        raise ValueError(f"select={select!r} matched no parameters of the model")
    return chosen


class FlatParams:
    """A subset of a module's parameters as one flat vector, and the module as a function of it.

    Args:
        model: any ``nn.Module``; the parameters outside the subset and the buffers stay fixed.
        select: ``"all"``, ``"lora"`` (names containing ``lora_``), ``"block:<i>"`` (decoder block
            ``i`` of an HF model), a list of parameter names, or a predicate on names.
        dtype: every curvature computation here runs in this dtype; the module's own parameters
            must already have it (``model.double()``), so the function and the model agree.

    ``call(theta, *args, **kwargs)`` runs the module with ``theta`` substituted (``functional_call``),
    differentiable in ``theta`` by autograd and by ``torch.func``.
    """

    def __init__(
        self, model: nn.Module, select: Selector = "all", dtype: torch.dtype = torch.float64
    ) -> None:
        self.model = model
        self.names = _select(model, select)
        params = dict(model.named_parameters())
        wrong = [n for n in self.names if params[n].dtype != dtype]
        if wrong:
            raise ValueError(
                f"parameters {wrong[:3]} are {params[wrong[0]].dtype}, not {dtype}: convert the model "
                f"first (model.to({dtype})); slopes of u ~ t^4 need float64"
            )
        self.shapes = [params[n].shape for n in self.names]
        self.sizes = [int(params[n].numel()) for n in self.names]
        self.dtype = dtype

    @property
    def size(self) -> int:
        """The number of parameters P in the subset."""
        return int(sum(self.sizes))

    def vector(self) -> torch.Tensor:
        """The subset's current values, flattened (a detached copy)."""
        params = dict(self.model.named_parameters())
        return torch.cat([params[n].detach().reshape(-1) for n in self.names]).clone()

    def unflatten(self, theta: torch.Tensor) -> dict[str, torch.Tensor]:
        """``{name: view}`` of ``theta`` in the parameters' shapes."""
        if theta.shape != (self.size,):
            raise ValueError(f"theta must have shape ({self.size},); got {tuple(theta.shape)}")
        chunks = torch.split(theta, self.sizes)
        return {n: c.view(s) for n, c, s in zip(self.names, chunks, self.shapes, strict=True)}

    def call(self, theta: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        return functional_call(self.model, self.unflatten(theta), args, kwargs, strict=False)

    @torch.no_grad()
    def assign(self, theta: torch.Tensor) -> None:
        """Write ``theta`` into the module's parameters."""
        params = dict(self.model.named_parameters())
        for name, value in self.unflatten(theta).items():
            params[name].copy_(value)


@dataclass
class PromptBatch:
    """Right-padded prompts; a model's next-token logits are read after each prompt's last token."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor

    def __post_init__(self) -> None:
        if self.input_ids.ndim != 2 or self.input_ids.shape[0] == 0:
            raise ValueError(
                "PromptBatch needs at least one prompt (input_ids of shape (n, width))"
            )

    @classmethod
    def from_prompts(cls, tokenizer: Any, prompts: Sequence[str]) -> PromptBatch:
        prompts = list(prompts)
        if not prompts:
            raise ValueError("the prompt set is empty: give at least one prompt")
        enc = tokenizer(prompts, return_tensors="pt", padding=True)
        return cls(enc["input_ids"], enc["attention_mask"])

    @property
    def last(self) -> torch.Tensor:
        return self.attention_mask.sum(1) - 1

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def subset(self, index: torch.Tensor | Sequence[int]) -> PromptBatch:
        index = torch.as_tensor(index)
        return PromptBatch(self.input_ids[index], self.attention_mask[index])


@dataclass
class SequenceBatch:
    """Right-padded sequences with labels (``-100`` where no loss is taken, e.g. on the prompt)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor

    @classmethod
    def from_pairs(cls, tokenizer: Any, pairs: Sequence[tuple[str, str]]) -> SequenceBatch:
        """``(prompt, answer)`` pairs; the loss is on the answer tokens and a closing eos."""
        pairs = list(pairs)
        if not pairs:
            raise ValueError("the example set is empty: give at least one (prompt, answer) pair")
        from paper_common.lm import pad_id, right_padded

        eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
        prompts = tokenizer([p for p, _ in pairs])["input_ids"]
        answers = tokenizer([a for _, a in pairs], add_special_tokens=False)["input_ids"]
        seqs = [p + a + eos for p, a in zip(prompts, answers, strict=True)]
        ids, mask, _ = right_padded(seqs, pad_id(tokenizer), torch.device("cpu"))
        starts = torch.tensor([len(p) for p in prompts])
        answer = (torch.arange(ids.shape[1]) >= starts[:, None]) & mask.bool()
        return cls(ids, mask, ids.masked_fill(~answer, -100))

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def subset(self, index: torch.Tensor | Sequence[int]) -> SequenceBatch:
        index = torch.as_tensor(index)
        return SequenceBatch(self.input_ids[index], self.attention_mask[index], self.labels[index])


def _logits(out: Any) -> torch.Tensor:
    return out.logits if hasattr(out, "logits") else out


def response_logits(
    space: FlatParams, batch: PromptBatch
) -> Callable[[torch.Tensor], torch.Tensor]:
    """``theta -> (n, V)`` next-token logits after each prompt of ``batch`` (for an HF causal LM);
    ``fn(theta, index)`` gives the rows of a subset of the prompts (used to chunk Jacobians)."""

    def fn(theta: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        b = batch if index is None else batch.subset(index)
        out = space.call(theta, input_ids=b.input_ids, attention_mask=b.attention_mask)
        return _logits(out)[torch.arange(len(b)), b.last]

    return fn


def sequence_nll(space: FlatParams, batch: SequenceBatch) -> Callable[..., torch.Tensor]:
    """``theta -> mean`` next-token NLL over the labelled tokens of ``batch``; ``fn(theta, index)``
    takes the mean over a subset of the sequences (minibatches for SGD)."""

    def fn(theta: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        b = batch if index is None else batch.subset(index)
        out = _logits(space.call(theta, input_ids=b.input_ids, attention_mask=b.attention_mask))
        return torch.nn.functional.cross_entropy(
            out[:, :-1].reshape(-1, out.shape[-1]), b.labels[:, 1:].reshape(-1), ignore_index=-100
        )

    return fn


def kl_from_reference(
    logits_fn: Callable[[torch.Tensor], torch.Tensor],
    theta0: torch.Tensor,
    z0: torch.Tensor | None = None,
) -> Callable[[torch.Tensor], torch.Tensor]:
    """``u(theta) = mean_x KL(p_theta0(.|x) || p_theta(.|x))`` of a logits function.

    Computed from the logit change ``delta = z - z0`` (centred under ``p0``) as
    ``log1p(E_p0 expm1(delta)) - E_p0 delta``, so values near 1e-20 keep their digits (the naive
    difference of log-probabilities would not).
    ``u(theta0) = 0``, its gradient is 0 and its Hessian is the exact :class:`CategoricalFisher`.
    ``z0``: the logits at ``theta0`` if already computed.
    """
    if z0 is None:
        with torch.no_grad():
            z0 = logits_fn(theta0)

    def u(theta: torch.Tensor) -> torch.Tensor:
        return kl_divergence(z0, logits_fn(theta))

    return u


def kl_divergence(z0: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """``mean_rows KL(softmax(z0) || softmax(z))``, accurate when the two are close (see
    :func:`kl_from_reference`)."""
    p0 = torch.softmax(z0, -1)
    delta = z - z0
    # softmax is shift-invariant: centre delta under p0, so no first-order terms have to cancel
    delta = delta - (p0 * delta).sum(-1, keepdim=True)
    kl = torch.log1p((p0 * torch.expm1(delta)).sum(-1)) - (p0 * delta).sum(-1)
    return kl.mean()


def _as_numpy_op(matvec: Callable[[torch.Tensor], torch.Tensor], size: int, dtype: torch.dtype):
    def mv(v: np.ndarray) -> np.ndarray:
        t = torch.as_tensor(np.ascontiguousarray(v).reshape(-1), dtype=dtype)
        return matvec(t).detach().cpu().numpy().astype(np.float64)

    return LinearOperator((size, size), matvec=mv, rmatvec=mv, dtype=np.float64)


class CategoricalFisher:
    """The exact Fisher of categorical outputs at ``theta0``: ``F = (1/n) sum_x J_x^T C_x J_x``.

    Args:
        logits_fn: ``theta -> (n, K)`` logits, one categorical distribution per row (e.g.
            :func:`response_logits` on held-out harmful prompts).
        theta0: the point (the aligned model), float64 for precise work.

    ``matvec(v)`` costs one ``jvp`` and one ``vjp`` and never forms ``F``. :meth:`factor` gives
    ``A`` with ``F = A^T A`` (rows ``C_x^(1/2) J_x / sqrt(n)``; memory ``n K P``) for small models.
    """

    def __init__(self, logits_fn: Callable[[torch.Tensor], torch.Tensor], theta0: torch.Tensor):
        self.logits_fn = logits_fn
        self.theta0 = theta0.detach()
        with torch.no_grad():
            z0 = logits_fn(self.theta0)
        if z0.ndim != 2:
            raise ValueError(f"logits_fn must return (n, K) logits; got shape {tuple(z0.shape)}")
        self.z0 = z0
        self.p0 = torch.softmax(z0, -1)
        self.n, self.k = z0.shape
        self.size = int(self.theta0.numel())

    def _c(self, w: torch.Tensor) -> torch.Tensor:
        """``C_x w_x`` for every row: ``p * w - p (p . w)``."""
        return self.p0 * w - self.p0 * (self.p0 * w).sum(-1, keepdim=True)

    def jvp(self, v: torch.Tensor) -> torch.Tensor:
        """``J v``, shape (n, K)."""
        return jvp(self.logits_fn, (self.theta0,), (v.to(self.theta0.dtype),))[1]

    def matvec(self, v: torch.Tensor) -> torch.Tensor:
        _, back = vjp(self.logits_fn, self.theta0)
        (out,) = back(self._c(self.jvp(v)) / self.n)
        return out.detach()

    def quadratic(self, v: torch.Tensor) -> float:
        """``v^T F v = (1/n) sum_x (J_x v)^T C_x (J_x v)``, by one ``jvp``."""
        jv = self.jvp(v)
        return float((jv * self._c(jv)).sum() / self.n)

    def operator(self) -> LinearOperator:
        return _as_numpy_op(self.matvec, self.size, self.theta0.dtype)

    def factor(self, rows_per_chunk: int = 1) -> torch.Tensor:
        """``A`` of shape (n K, P) with ``F = A^T A``: rows ``C_x^(1/2) J_x / sqrt(n)``.

        If ``logits_fn`` accepts ``(theta, index)`` (as :func:`response_logits` does) the Jacobian
        is taken ``rows_per_chunk`` inputs at a time, so each backward pass runs through those
        inputs only; otherwise through the whole batch for every output."""
        if len(inspect.signature(self.logits_fn).parameters) >= 2:
            parts = [
                jacrev(lambda th, i=idx: self.logits_fn(th, i))(self.theta0).detach()
                for idx in torch.arange(self.n).split(rows_per_chunk)
            ]
            jac = torch.cat(parts)
        else:
            jac = jacrev(self.logits_fn, chunk_size=256)(self.theta0).detach()  # (n, K, P)
        c = torch.diag_embed(self.p0) - self.p0[:, :, None] * self.p0[:, None, :]
        evals, evecs = torch.linalg.eigh(c)
        # C 1 = 0 exactly: zero the rounding-level eigenvalues so sqrt() cannot turn 1e-17 into 3e-9
        evals = torch.where(evals > 1e-12 * evals.amax(-1, keepdim=True), evals, 0.0)
        sqrt_c = evecs @ torch.diag_embed(evals.sqrt()) @ evecs.transpose(1, 2)
        return (sqrt_c @ jac).reshape(self.n * self.k, self.size) / self.n**0.5

    def dense(self) -> torch.Tensor:
        """``F`` as a (P, P) matrix (small models only)."""
        a = self.factor()
        return a.T @ a

    def decompose(self, rel_tol: float = 1e-12) -> FisherDecomposition:
        """The whole nonzero spectrum of ``F`` through the (n K, n K) Gram matrix of :meth:`factor`."""
        return FisherDecomposition(self.factor(), rel_tol)

    def top_eigenpairs(self, k: int, tol: float = 1e-10) -> tuple[np.ndarray, np.ndarray]:
        return top_eigenpairs(self.operator(), k, which="LA", tol=tol)


class FisherDecomposition:
    """``F = A^T A`` through ``A A^T = U S U^T``: every nonzero eigenvalue ``S``, eigenvectors
    ``A^T U S^(-1/2)``, and the projection onto the range of ``F`` (the row space of the stacked
    ``C_x^(1/2) J_x``). Costs ``(n K)^2 P`` once; meant for models of up to ~1e5 parameters."""

    def __init__(self, factor: torch.Tensor, rel_tol: float = 1e-12) -> None:
        self.factor = factor
        evals, evecs = torch.linalg.eigh(factor @ factor.T)
        keep = evals > rel_tol * evals.max()
        order = torch.argsort(evals[keep], descending=True)
        self.eigenvalues = evals[keep][order]
        self._u = evecs[:, keep][:, order]

    @property
    def rank(self) -> int:
        return int(self.eigenvalues.numel())

    def eigenvectors(self, k: int) -> torch.Tensor:
        """The top-``k`` eigenvectors of ``F`` as orthonormal columns, shape (P, k)."""
        if not 1 <= k <= self.rank:
            raise ValueError(f"k must be in [1, {self.rank}] (the Fisher's rank); got {k}")
        return self.factor.T @ self._u[:, :k] / self.eigenvalues[:k].sqrt()

    def range_component(self, g: torch.Tensor, refine: int = 2) -> torch.Tensor:
        """``P_range(F) g``; ``g - result`` satisfies ``F (g - result) = 0`` to rounding (two rounds of
        iterative refinement)."""
        out = torch.zeros_like(g)
        rest = g
        for _ in range(1 + refine):
            part = self.factor.T @ (
                self._u @ ((self._u.T @ (self.factor @ rest)) / self.eigenvalues)
            )
            out, rest = out + part, rest - part
        return out


def empirical_fisher(
    per_example_loss: Callable[..., torch.Tensor],
    theta: torch.Tensor,
    examples: Sequence[torch.Tensor],
    diagonal: bool = False,
) -> torch.Tensor:
    """``(1/n) sum_i grad l_i grad l_i^T`` (or its diagonal) from per-example gradients.

    ``per_example_loss(theta, *example)`` is the loss of ONE example; ``examples`` are tensors whose
    first dimension runs over the n examples. Gradients come from ``vmap(grad(...))`` in one pass.
    """
    if not examples or len(examples[0]) == 0:
        raise ValueError("empirical_fisher needs at least one example")
    grads = vmap(grad(per_example_loss), in_dims=(None, *([0] * len(examples))))(theta, *examples)
    grads = grads.detach()
    if diagonal:
        return (grads**2).mean(0)
    return grads.T @ grads / grads.shape[0]


def hvp(
    loss_fn: Callable[[torch.Tensor], torch.Tensor], theta: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    """The Hessian-vector product ``(d^2 loss / d theta^2) v`` by forward-over-reverse ``jvp(grad)``."""
    return jvp(grad(loss_fn), (theta.detach(),), (v.to(theta.dtype),))[1].detach()


class HessianOperator:
    """The Hessian of a scalar ``loss_fn(theta)`` at ``theta`` as a linear operator (by :func:`hvp`)."""

    def __init__(self, loss_fn: Callable[[torch.Tensor], torch.Tensor], theta: torch.Tensor):
        self.loss_fn = loss_fn
        self.theta = theta.detach()
        self.size = int(theta.numel())

    def matvec(self, v: torch.Tensor) -> torch.Tensor:
        return hvp(self.loss_fn, self.theta, v)

    def operator(self) -> LinearOperator:
        return _as_numpy_op(self.matvec, self.size, self.theta.dtype)

    def dense(self) -> torch.Tensor:
        return torch.func.hessian(self.loss_fn)(self.theta).detach()

    def spectral_norm(self, tol: float = 1e-4) -> float:
        """``|H|_2``, the largest eigenvalue magnitude."""
        vals, _ = top_eigenpairs(self.operator(), 1, which="LM", tol=tol)
        return float(abs(vals[0]))


def top_eigenpairs(
    op: LinearOperator | np.ndarray | torch.Tensor,
    k: int,
    which: str = "LA",
    tol: float = 1e-10,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` top eigenvalues (descending) and eigenvectors (columns) of a symmetric operator, by
    ``eigsh`` (Lanczos) with a seeded start vector; ``which="LM"`` orders by magnitude."""
    if isinstance(op, torch.Tensor):
        op = op.detach().cpu().numpy()
    size = op.shape[0]
    if not isinstance(k, int) or not 1 <= k < size:
        raise ValueError(
            f"k must be an int in [1, {size - 1}] (the operator has size {size}); got {k!r}"
        )
    v0 = np.random.default_rng(seed).standard_normal(size)
    vals, vecs = eigsh(op, k=k, which=which, tol=tol, v0=v0)
    order = np.argsort(-np.abs(vals) if which == "LM" else -vals)
    return vals[order], vecs[:, order]
