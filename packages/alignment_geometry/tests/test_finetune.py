"""Fine-tuning on flat parameters: GD equals the toy's closed recursion; mitigations; controls."""

import numpy as np
import pytest
import torch

from alignment_geometry.finetune import finetune
from alignment_geometry.mitigations import EWC, FisherPenalty, SubspaceProjection
from alignment_geometry.toy import Toy2D


def _toy_torch(toy: Toy2D):
    h = torch.tensor(toy.hessian)
    b = torch.tensor(toy.b)

    def loss(th, index=None):
        return 0.5 * th @ h @ th - b @ th

    def monitor(th):
        return {"u": float(toy.lam * th[1] ** 2 / 2)}

    return loss, monitor


def test_gd_matches_the_closed_recursion():
    toy = Toy2D()
    loss, monitor = _toy_torch(toy)
    traj = finetune(loss, torch.zeros(2, dtype=torch.float64), steps=50, lr=0.01, monitor=monitor)
    ref = toy.gradient_descent(0.01, 50)
    assert np.allclose(traj.alignment_loss, toy.alignment_loss(ref), rtol=1e-12, atol=1e-300)
    assert np.allclose(traj.delta.numpy(), ref[-1], rtol=1e-12)
    assert np.allclose(traj.time, 0.01 * np.arange(51))
    assert traj.final["u"] == traj.alignment_loss[-1]


def test_projection_and_penalties_protect_the_sensitive_direction():
    toy = Toy2D()
    loss, monitor = _toy_torch(toy)
    theta0 = torch.zeros(2, dtype=torch.float64)
    basis = torch.tensor(
        [[0.0], [1.0]], dtype=torch.float64
    )  # M = span(e2), the Fisher's top eigenvector
    plain = finetune(loss, theta0, steps=200, lr=0.05, monitor=monitor)
    proj = finetune(
        loss, theta0, steps=200, lr=0.05, monitor=monitor, mitigation=SubspaceProjection(basis)
    )
    assert proj.final["u"] == 0.0
    assert plain.final["u"] > 1e-3
    fdiag = torch.tensor([0.0, toy.lam], dtype=torch.float64)
    ewc = finetune(
        loss, theta0, steps=200, lr=0.05, monitor=monitor, mitigation=EWC(fdiag, strength=0.2)
    )
    pen = finetune(
        loss,
        theta0,
        steps=200,
        lr=0.05,
        monitor=monitor,
        mitigation=FisherPenalty(basis, torch.tensor([toy.lam], dtype=torch.float64), strength=0.1),
    )
    for run in (ewc, pen):
        assert 0 < run.final["u"] < 0.5 * plain.final["u"]
    with pytest.raises(ValueError, match="orthonormal"):
        SubspaceProjection(2 * basis)
    with pytest.raises(ValueError, match="strength"):
        EWC(fdiag, strength=0.0)


def test_sgd_and_adam_controls_are_seeded():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(40, 3, generator=gen, dtype=torch.float64)
    y = x @ torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)

    def loss(th, index=None):
        xi, yi = (x, y) if index is None else (x[index], y[index])
        return ((xi @ th - yi) ** 2).mean()

    theta0 = torch.zeros(3, dtype=torch.float64)
    a = finetune(
        loss, theta0, steps=30, lr=0.05, optimizer="sgd", n_examples=40, batch_size=4, seed=3
    )
    b = finetune(
        loss, theta0, steps=30, lr=0.05, optimizer="sgd", n_examples=40, batch_size=4, seed=3
    )
    c = finetune(
        loss, theta0, steps=30, lr=0.05, optimizer="sgd", n_examples=40, batch_size=4, seed=4
    )
    assert np.array_equal(a.task_loss, b.task_loss)
    assert not np.array_equal(a.task_loss, c.task_loss)
    assert a.task_loss[-1] < 0.2 * a.task_loss[0]
    adam = finetune(loss, theta0, steps=100, lr=0.05, optimizer="adam")
    assert adam.task_loss[-1] < 0.05 * adam.task_loss[0]
    assert adam.logs == {}
    with pytest.raises(KeyError, match="alignment loss"):
        _ = adam.alignment_loss


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lr": 0.0}, "must be > 0"),
        ({"lr": -1.0}, "must be > 0"),
        ({"steps": 0}, "positive int"),
        ({"optimizer": "rmsprop"}, "optimizer must be"),
        ({"optimizer": "sgd"}, "n_examples"),
    ],
)
def test_bad_input(kwargs, match):
    loss, _ = _toy_torch(Toy2D())
    args = {"steps": 5, "lr": 0.1, **kwargs}
    with pytest.raises(ValueError, match=match):
        finetune(loss, torch.zeros(2, dtype=torch.float64), **args)
