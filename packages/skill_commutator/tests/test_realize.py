"""Realizations on real (tiny) Llama and GPT-2 models: Jacobians, fields, null steering, hooks."""

import pytest

torch = pytest.importorskip("torch")

from skill_commutator.commutator import ordered_commutator  # noqa: E402
from skill_commutator.compose import (  # noqa: E402
    actadd_commutator,
    actadd_vectors,
    compose_pairs,
    deployment_strength,
    exact_brackets,
)
from skill_commutator.realize import (  # noqa: E402
    ActivationRealization,
    KVPrefixRealization,
    PrefixRealization,
    caa_basis,
    kv_prefix_basis,
    prefix_basis,
)


def _filler_init(model, tok, spec):
    fid = tok(" " + spec.filler, add_special_tokens=False)["input_ids"][0]
    return model.get_input_embeddings().weight[fid].detach().repeat(spec.p, 1)


def _activation(model, tok, spec, layer=1, n=3):
    skills = list(spec.skills[:3])
    bases = [caa_basis(model, tok, s, layer, 4) for s in skills]
    return ActivationRealization(
        model, tok, spec.with_filler(spec.contexts[:n]), skills, bases, layer
    )


def _prefix(model, tok, spec, n=3):
    skills = list(spec.skills[:3])
    init = _filler_init(model, tok, spec)
    bases = [prefix_basis(model, tok, s, list(spec.contexts), init, 4) for s in skills]
    return PrefixRealization(model, tok, list(spec.contexts[:n]), skills, bases, init)


def test_both_realizations_read_the_same_prompt_at_the_origin(any_lm, spec):
    model, tok = any_lm
    act, pre = _activation(model, tok, spec), _prefix(model, tok, spec)
    torch.testing.assert_close(
        act.readout(act.zeros()), pre.readout(pre.zeros()), rtol=0, atol=1e-12
    )


@pytest.mark.parametrize("kind", ["activation", "prefix"])
def test_jacobian_jvp_equals_jacrev_and_central_differences(any_lm, spec, kind):
    model, tok = any_lm
    real = (_activation if kind == "activation" else _prefix)(model, tok, spec, n=2)
    gen = torch.Generator().manual_seed(0)
    z = 0.3 * torch.randn(real.batch, real.n_coords, generator=gen, dtype=torch.float64)
    jac = real.jacobian(z, 1)
    torch.testing.assert_close(real.jacobian(z, 1, method="jacrev"), jac, rtol=1e-9, atol=1e-10)
    eps = 1e-5
    blk = real.block(1)
    for j in range(real.m):
        e = torch.zeros_like(z)
        e[:, blk.start + j] = eps
        fd = (real.readout(z + e) - real.readout(z - e)) / (2 * eps)
        assert float((fd - jac[..., j]).norm() / jac[..., j].norm()) < 1e-6


def test_field_is_the_metric_preconditioned_gradient(task_lm, spec):
    model, tok, _ = task_lm
    real = _activation(model, tok, spec)
    z = real.zeros()
    loc = real.local(z, 0)
    jac, grad = loc["J"], loc["grad"]
    g = jac.transpose(1, 2) @ jac
    delta = 1e-3 * torch.diagonal(g, dim1=1, dim2=2).sum(-1) / real.m
    expected = torch.linalg.solve(
        g + delta[:, None, None] * torch.eye(real.m, dtype=g.dtype),
        jac.transpose(1, 2) @ grad[..., None],
    )[..., 0]
    field = real.field(z, 0)
    torch.testing.assert_close(field[:, real.block(0)], expected)
    assert float(field[:, real.m :].abs().max()) == 0.0  # other skills' blocks stay still
    # moving along the field raises the skill's objective at the predicted rate
    t = 1e-4
    o_next = real.objective(real.readout(z + t * field), 0)
    torch.testing.assert_close((o_next - loc["O"]) / t, loc["rate"], rtol=1e-3, atol=1e-8)
    assert bool((loc["rate"] > 0).all())
    torch.testing.assert_close(loc["cost"], loc["rate"].rsqrt())
    origin = real.at_origin()  # every skill at once, (skills, contexts, ...)
    torch.testing.assert_close(origin["v"][0], loc["v"])
    rows = torch.arange(len(real.skills)).repeat_interleave(real.batch)
    fields = real.field(real.zeros(len(real.skills)), rows).view(len(real.skills), real.batch, -1)
    torch.testing.assert_close(actadd_vectors(real, origin), fields.mean(1))


def test_compose_pairs_equals_the_generic_ordered_commutator(task_lm, spec):
    model, tok, _ = task_lm
    real = _prefix(model, tok, spec, n=2)
    h0 = deployment_strength(real)
    h = 0.1 * h0
    res = compose_pairs(real, h0, [h], pairs=[(0, 2)])
    generic = ordered_commutator(
        real.flow(0, 1), real.flow(2, 1), real.zeros(), h, readout=real.readout
    )
    torch.testing.assert_close(res.c1[h][0], generic, rtol=1e-10, atol=1e-12)
    again = compose_pairs(real, h0, [h], pairs=[(0, 2)])
    assert torch.equal(again.c1[h][0], res.c1[h][0])  # same inputs, same numbers
    assert float(res.norms(h).min()) > 0
    # a skill with itself (the resolved claim's null): refused unless asked for, then C1 = 0, and
    # without the h0 gap rollouts the same end points
    with pytest.raises(ValueError, match="distinct"):
        compose_pairs(real, h0, [h], pairs=[(0, 0)])
    own = compose_pairs(real, h0, [h], pairs=[(0, 0), (0, 2)], allow_self=True, gaps=False)
    assert float(own.norms(h)[0].max()) == 0.0
    torch.testing.assert_close(own.c1[h][1], res.c1[h][0], rtol=1e-12, atol=1e-14)
    assert own.o_gap == []
    assert h0 not in own.r_single


@pytest.mark.parametrize("kind", ["activation", "prefix"])
def test_rollout_commutator_converges_to_the_exact_bracket(task_lm, spec, kind):
    """On the LM the finite-difference C1 approaches Dr.[X_A, X_B] (nested jvp) at first order, and
    Richardson at second order."""
    model, tok, _ = task_lm
    real = (_activation if kind == "activation" else _prefix)(model, tok, spec, n=2)
    h0 = deployment_strength(real)
    hs = [0.02 * h0, 0.01 * h0, 0.005 * h0]
    res = compose_pairs(real, h0, hs, pairs=[(0, 1)])
    _, exact = exact_brackets(real, [(0, 1)])
    err = [float((res.c1[h][0] - exact[0]).norm() / exact[0].norm()) for h in hs]
    assert 0.35 < err[2] / err[1] < 0.65
    assert 0.35 < err[1] / err[0] < 0.65
    rich = [float((res.richardson(h)[0] - exact[0]).norm() / exact[0].norm()) for h in hs[:2]]
    assert 0.15 < rich[1] / rich[0] < 0.4  # halving h quarters the error
    assert rich[1] < err[2] / 2


def test_constant_steering_commutes_to_rounding(task_lm, spec):
    """ActAdd through the realization and through paper_common's add_to_residual hooks."""
    from paper_common.lm import add_to_residual

    model, tok, _ = task_lm
    real = _activation(model, tok, spec)
    h = 0.5
    vec = actadd_vectors(real)
    c, moved = actadd_commutator(real, vec, 0, 1, h)
    assert float((c.norm(dim=-1) * h**2 / moved.norm(dim=-1)).max()) < 1e-12
    ua, ub = real.basis @ vec[0], real.basis @ vec[1]
    outs = []
    for first, second in ((ua, ub), (ub, ua)):
        with add_to_residual(model, 1, first, scale=h), add_to_residual(model, 1, second, scale=h):
            outs.append(real.readout(real.zeros()))
    rel = (outs[0] - outs[1]).norm(dim=-1) / (outs[0] - real.readout(real.zeros())).norm(dim=-1)
    assert float(rel.max()) < 1e-12


def test_hooks_are_removed_also_after_an_error(task_lm, spec):
    model, tok, _ = task_lm
    real = _activation(model, tok, spec)
    from paper_common.lm import decoder_layers

    def n_hooks():
        return sum(len(b._forward_hooks) + len(b._forward_pre_hooks) for b in decoder_layers(model))

    before = n_hooks()
    real.readout(real.zeros())
    assert n_hooks() == before
    real.mask = real.mask[:, :-3]  # a broken mask makes the forward fail inside the hooks
    with pytest.raises((RuntimeError, IndexError, ValueError)):  # whatever the model raises
        real.readout(real.zeros())
    assert n_hooks() == before


def test_kv_prefix_matches_peft_prefix_tuning(task_lm, spec):
    peft = pytest.importorskip("peft")
    model, tok, _ = task_lm
    p = 3
    cfg = peft.PrefixTuningConfig(
        task_type="CAUSAL_LM", num_virtual_tokens=p, prefix_projection=False
    )
    import copy

    pm = peft.get_peft_model(copy.deepcopy(model), cfg).double()
    weight = pm.prompt_encoder["default"].embedding.weight.detach()
    contexts = list(spec.contexts[:2])
    skills = list(spec.skills[:2])
    bases = [kv_prefix_basis(model, tok, s, contexts, weight, 2) for s in skills]
    real = KVPrefixRealization(model, tok, contexts, skills, bases, weight)
    ids = tok(contexts, padding=True, return_tensors="pt")
    out = pm(**ids, output_hidden_states=True)
    # peft's last hidden state has the final norm applied; compare the logits read off our readout
    logits = model.get_output_embeddings()(model.base_model.norm(real.readout(real.zeros())))
    rows = torch.arange(len(contexts))
    torch.testing.assert_close(
        logits, out.logits[rows, ids["attention_mask"].sum(1) - 1], rtol=1e-9, atol=1e-9
    )


def test_bad_input_raises(task_lm, spec):
    model, tok, _ = task_lm
    real = _activation(model, tok, spec)
    skills = list(spec.skills[:3])
    with pytest.raises(ValueError, match="layer"):
        ActivationRealization(
            model, tok, spec.contexts, skills, real.basis.split(4, dim=1), layer=2
        )
    with pytest.raises(ValueError, match="z must have shape"):
        real.readout(torch.zeros(real.batch, real.n_coords + 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="unknown skill"):
        real.field(real.zeros(), "fly")
    with pytest.raises(ValueError, match="one basis per skill"):
        ActivationRealization(model, tok, spec.contexts, skills, [real.basis[:, :4]], layer=1)
    with pytest.raises(ValueError, match="contexts"):
        ActivationRealization(model, tok, [], skills, real.basis.split(4, dim=1), layer=1)
    with pytest.raises(ValueError, match="method"):
        real.jacobian(real.zeros(), 0, method="fd")
    with pytest.raises(ValueError, match="h0 and every h"):
        compose_pairs(real, 0.0, [0.1])


def test_rollout_segments_steer_in_time(task_lm, spec):
    """Temporal order: one segment steered everywhere equals the readout's steering; the origin
    equals plain greedy decoding; the first segment's coordinates pick the first token."""
    from paper_common.lm import greedy_answer

    model, tok, _ = task_lm
    real = _activation(model, tok, spec)
    zero = real.zeros()
    plain = real.rollout([zero, zero])
    texts = greedy_answer(model, tok, real.contexts, max_new_tokens=2)
    decoded = [tok.decode(t, skip_special_tokens=True).strip() for t in plain["tokens"]]
    assert decoded == [t.strip() for t in texts]
    gen = torch.Generator().manual_seed(1)
    z = 2.0 * torch.randn(real.batch, real.n_coords, generator=gen, dtype=torch.float64)
    steered = real.rollout([z])
    first = real._unembed(real._norm(real.readout(z))).argmax(-1)
    assert torch.equal(steered["tokens"][:, 0], first)
    swapped = real.rollout([zero, z])
    assert torch.equal(swapped["tokens"][:, 0], plain["tokens"][:, 0])  # z acts only from segment 2
    with pytest.raises(ValueError, match="segment"):
        real.rollout([])
    # contexts of different lengths decode in groups and come back in their own order
    mixed = ActivationRealization(
        model,
        tok,
        ["note east :", *real.contexts[:2], "west rock :"],
        real.skills,
        bases_of(real),
        1,
    )
    texts = greedy_answer(model, tok, mixed.contexts, max_new_tokens=2)
    got = mixed.rollout([mixed.zeros(), mixed.zeros()])["tokens"]
    assert [tok.decode(t, skip_special_tokens=True).strip() for t in got] == [
        x.strip() for x in texts
    ]


def bases_of(real):
    return list(real.basis.split(real.m, dim=1))


@pytest.mark.parametrize("kind", ["activation", "prefix"])
def test_subset_keeps_the_bases_and_the_first_contexts(task_lm, spec, kind):
    model, tok, _ = task_lm
    real = (_activation if kind == "activation" else _prefix)(model, tok, spec)
    sub = real.subset(2)
    assert sub.batch == 2
    assert sub.basis is real.basis
    z = torch.full((real.batch, real.n_coords), 0.1, dtype=torch.float64)
    torch.testing.assert_close(sub.readout(z[:2]), real.readout(z)[:2], rtol=0, atol=1e-12)
