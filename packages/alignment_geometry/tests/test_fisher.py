"""Fisher-vector products, HVPs and eigenpairs against dense matrices on a tiny MLP."""

import numpy as np
import pytest
import torch

from alignment_geometry.fisher import (
    CategoricalFisher,
    FlatParams,
    HessianOperator,
    PromptBatch,
    empirical_fisher,
    hvp,
    kl_from_reference,
    top_eigenpairs,
)


def _fn(net, x):
    space = FlatParams(net)
    return space, (lambda th: space.call(th, x)), space.vector()


def _dense_fisher(fn, theta):
    jac = torch.autograd.functional.jacobian(fn, theta)  # (n, K, P)
    p = torch.softmax(fn(theta), -1)
    c = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]
    return torch.einsum("nkp,nkl,nlq->pq", jac, c, jac) / jac.shape[0]


def test_fisher_vector_products_equal_the_dense_fisher(mlp):
    space, fn, th = _fn(*mlp)
    fisher = CategoricalFisher(fn, th)
    dense = _dense_fisher(fn, th)
    vs = torch.randn(space.size, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for v in vs.T:
        assert torch.allclose(fisher.matvec(v), dense @ v, rtol=1e-10, atol=1e-12)
        assert fisher.quadratic(v) == pytest.approx(float(v @ dense @ v), rel=1e-10)
    assert torch.allclose(fisher.dense(), dense, atol=1e-12)


def test_hvp_equals_the_dense_hessian(mlp):
    space, fn, th = _fn(*mlp)

    def loss(t):
        return torch.nn.functional.cross_entropy(fn(t), torch.tensor([0, 1, 2, 3, 4, 0]))

    hess = torch.autograd.functional.hessian(loss, th)
    v = torch.randn(space.size, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    assert torch.allclose(hvp(loss, th, v), hess @ v, rtol=1e-10, atol=1e-12)
    op = HessianOperator(loss, th)
    assert torch.allclose(op.dense(), hess, atol=1e-12)
    assert op.spectral_norm(tol=1e-12) == pytest.approx(
        float(torch.linalg.eigvalsh(hess).abs().max()), rel=1e-8
    )


def test_eigsh_matches_the_dense_spectrum(mlp):
    space, fn, th = _fn(*mlp)
    fisher = CategoricalFisher(fn, th)
    dense = np.linalg.eigvalsh(fisher.dense().numpy())[::-1]
    vals, vecs = fisher.top_eigenpairs(5)
    assert np.allclose(vals, dense[:5], rtol=1e-8)
    f = fisher.dense().numpy()
    assert np.allclose(f @ vecs, vecs * vals, atol=1e-8)
    with pytest.raises(ValueError, match="k must be"):
        top_eigenpairs(fisher.operator(), space.size)


def test_hessian_of_the_kl_alignment_loss_is_the_fisher(mlp):
    _, fn, th = _fn(*mlp)
    u = kl_from_reference(fn, th)
    assert float(u(th)) == 0.0
    th_req = th.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(u(th_req), th_req)
    assert float(grad.abs().max()) < 1e-14
    hess = torch.autograd.functional.hessian(u, th)
    assert torch.allclose(hess, CategoricalFisher(fn, th).dense(), atol=1e-10)


def test_kl_keeps_its_digits_near_the_reference(mlp):
    space, fn, th = _fn(*mlp)
    fisher = CategoricalFisher(fn, th)
    v = torch.randn(space.size, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    eps = 1e-7  # u ~ 1e-14: a naive log-prob difference would be all rounding
    u = float(kl_from_reference(fn, th)(th + eps * v))
    assert u == pytest.approx(0.5 * eps**2 * fisher.quadratic(v), rel=1e-5)


def test_factor_decomposition_and_range_projection(mlp):
    space, fn, th = _fn(*mlp)
    fisher = CategoricalFisher(fn, th)
    dec = fisher.decompose()
    dense = fisher.dense()
    evals = torch.linalg.eigvalsh(dense).flip(0)
    assert dec.rank == int((evals > 1e-12 * evals[0]).sum())
    assert torch.allclose(dec.eigenvalues, evals[: dec.rank], rtol=1e-8)
    vecs = dec.eigenvectors(3)
    assert torch.allclose(vecs.T @ vecs, torch.eye(3, dtype=torch.float64), atol=1e-10)
    g = torch.randn(space.size, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    rest = g - dec.range_component(g)
    norm_f = float(torch.linalg.matrix_norm(dense, 2))
    assert float(torch.linalg.norm(dense @ rest)) < 1e-10 * norm_f * float(torch.linalg.norm(g))
    assert float(torch.linalg.norm(rest)) > 0.1 * float(
        torch.linalg.norm(g)
    )  # F is rank-deficient here


def test_empirical_fisher_from_per_example_gradients(mlp):
    net, x = mlp
    space, _, th = _fn(net, x)
    y = torch.tensor([0, 1, 2, 3, 4, 0])

    def nll(t, xi, yi):
        return torch.nn.functional.cross_entropy(space.call(t, xi[None]), yi[None])

    emp = empirical_fisher(nll, th, (x, y))
    grads = torch.stack(
        [
            torch.autograd.functional.jacobian(lambda t, i=i: nll(t, x[i], y[i]), th)
            for i in range(6)
        ]
    )
    assert torch.allclose(emp, grads.T @ grads / 6, atol=1e-12)
    assert torch.allclose(
        empirical_fisher(nll, th, (x, y), diagonal=True), torch.diagonal(emp), atol=1e-12
    )
    with pytest.raises(ValueError, match="at least one example"):
        empirical_fisher(nll, th, (x[:0], y[:0]))


def test_flat_params_subsets_and_bad_input(mlp, system):
    net, _ = mlp
    assert FlatParams(net).size == 3 * 4 + 4 + 4 * 5 + 5
    assert FlatParams(net, ["2.weight"]).size == 20
    block = FlatParams(system.model, "block:1")
    assert block.names
    assert all(".layers.1." in n for n in block.names)
    space = FlatParams(net)
    th = space.vector()
    space.assign(th * 1.0)
    assert torch.equal(space.vector(), th)
    with pytest.raises(ValueError, match="float32"):
        FlatParams(torch.nn.Linear(2, 2))  # float32 where the slope tests need float64
    with pytest.raises(ValueError, match="no parameters named"):
        FlatParams(net, ["nope.weight"])
    with pytest.raises(ValueError, match="matched no parameters"):
        FlatParams(net, "lora")
    with pytest.raises(ValueError, match="theta must have shape"):
        space.unflatten(th[:-1])
    with pytest.raises(ValueError, match="empty"):
        PromptBatch.from_prompts(system.tokenizer, [])
