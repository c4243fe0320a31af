"""Scoring tools on real (tiny, randomly initialised) Llama, Qwen2 and GPT-2 models."""

import copy
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from paper_common import lm  # noqa: E402
from paper_common.facts import FORMATS, World  # noqa: E402

ARCHS = ["llama", "qwen2", "gpt2"]


@pytest.fixture(scope="module")
def world():
    return World(seed=3, n_people=12, n_cities=6, n_companies=4, n_countries=2)


@pytest.fixture(scope="module")
def tok(world):
    return lm.build_tokenizer(world.vocabulary_texts())


@pytest.fixture(scope="module", params=ARCHS)
def model(request, tok):
    return lm.tiny_causal_lm(tok, request.param, n_layers=2, d_model=32, n_heads=4, seed=1)


@pytest.fixture(scope="module")
def prompts(world):
    # different lengths, so padding matters
    qs = [q.question for q in world.qa_pairs("all")[:5]]
    return [*qs, "Q:", world.verification_items("all")[0].prompt]


@pytest.mark.parametrize("kind", ["wordlevel", "bpe"])
def test_tokenizer_round_trip(world, kind):
    texts = world.vocabulary_texts()
    tok = lm.build_tokenizer(texts, kind=kind, vocab_size=600)
    for text in texts[:200:7]:
        ids = tok(text)["input_ids"]
        assert ids[0] == tok.bos_token_id
        assert tok.decode(ids, skip_special_tokens=True) == text
    assert tok.pad_token == "<pad>"
    assert tok.eos_token == "</s>"
    if kind == "wordlevel":
        name = world.entities["city"][0]
        assert len(tok(" " + name, add_special_tokens=False)["input_ids"]) == 1
        assert tok(" " + name, add_special_tokens=False) == tok(name, add_special_tokens=False)


def test_token_rank_equals_brute_force_argsort():
    g = torch.Generator().manual_seed(0)
    lp = torch.randn(20, 50, generator=g)
    ids = torch.randint(0, 50, (20,), generator=g)
    order = torch.argsort(lp, dim=1, descending=True)
    brute = torch.tensor([int((order[i] == ids[i]).nonzero()) + 1 for i in range(20)])
    assert torch.equal(lm.token_rank(lp, ids), brute)
    ranks_np = lm.token_rank(lp.numpy(), ids.numpy())
    assert ranks_np.tolist() == brute.tolist()
    assert lm.token_rank(lp, lp.argmax(1)).tolist() == [1] * 20


def test_a_nan_score_never_ranks_first():
    lp = torch.tensor([[0.0, -1.0, -2.0], [float("nan")] * 3, [float("nan"), -1.0, -2.0]])
    # a diverged (all-NaN) row used to give every token rank 1
    assert lm.token_rank(lp, torch.tensor([0, 0, 1])).tolist() == [1, 3, 2]


def test_answer_rank_of_a_diverged_model_is_last(model, tok, world):
    items = world.qa_pairs("train")[:3]
    cities = world.entities["city"][:4]
    broken = copy.deepcopy(model)
    with torch.no_grad():
        for p in broken.parameters():
            p.fill_(float("nan"))
    res = lm.answer_rank(
        broken, tok, [q.question for q in items], [q.answer for q in items], cities
    )
    n = [len({q.answer, *cities}) for q in items]
    assert res.sequence_rank.tolist() == n
    assert (res.first_token_rank > 1).all()


def test_sequence_logprob_is_the_sum_of_token_logprobs(model, tok, prompts):
    conts = [" Zzz", " True", " " + prompts[0].split()[2]] * 3
    conts = conts[: len(prompts)]
    got = lm.sequence_logprob(model, tok, prompts, conts)
    for i, (p, c) in enumerate(zip(prompts, conts, strict=True)):
        p_ids = tok(p)["input_ids"]
        c_ids = tok(c, add_special_tokens=False)["input_ids"]
        ids = torch.tensor([p_ids + c_ids])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)
        manual = sum(logp[len(p_ids) - 1 + k, t] for k, t in enumerate(c_ids))
        assert float(got[i]) == pytest.approx(float(manual), abs=1e-4)
    mean = lm.sequence_logprob(model, tok, prompts, conts, reduction="mean")
    per = lm.sequence_logprob(model, tok, prompts, conts, reduction="none")
    assert [float(t.mean()) for t in per] == pytest.approx(mean.tolist(), abs=1e-5)


def test_batched_equals_unbatched(model, tok, prompts):
    full = lm.next_token_logprobs(model, tok, prompts, batch_size=64)
    one = torch.cat([lm.next_token_logprobs(model, tok, [p]) for p in prompts])
    assert torch.allclose(full, one, atol=1e-4)
    conts = [" True"] * len(prompts)
    assert torch.allclose(
        lm.sequence_logprob(model, tok, prompts, conts, batch_size=3),
        lm.sequence_logprob(model, tok, prompts, conts, batch_size=1),
        atol=1e-4,
    )
    for position in ("last", "mean"):
        rs = lm.residual_stream(model, tok, prompts, position=position, batch_size=4)
        rs1 = lm.residual_stream(model, tok, prompts, position=position, batch_size=1)
        assert rs.shape == (len(prompts), 3, 32)
        assert torch.allclose(rs, rs1, atol=1e-4)
    assert lm.greedy_answer(model, tok, prompts, max_new_tokens=4) == [
        lm.greedy_answer(model, tok, [p], max_new_tokens=4)[0] for p in prompts
    ]


def test_logit_lens_last_layer_is_the_model_output(model, tok, prompts):
    lens = lm.logit_lens(model, tok, prompts)
    assert lens.shape == (len(prompts), 3, len(tok))
    assert torch.allclose(lens[:, -1], lm.next_token_logprobs(model, tok, prompts), atol=1e-4)
    assert not torch.allclose(lens[:, 0], lens[:, -1], atol=1e-3)


def test_residual_layer_zero_is_the_embedding(model, tok, prompts):
    rs = lm.residual_stream(model, tok, prompts[:1], layers=[0], position="mean")
    ids = torch.tensor([tok(prompts[0])["input_ids"]])
    with torch.no_grad():
        hidden = model(input_ids=ids, output_hidden_states=True).hidden_states[0]
    assert torch.allclose(rs[0, 0], hidden[0].mean(0), atol=1e-5)


def test_residual_tokens_are_every_unpadded_token(model, tok, prompts):
    layers = [0, 2]
    acts = lm.residual_tokens(model, tok, prompts, layers=layers, batch_size=3)
    rows = []
    for p in prompts:
        ids = torch.tensor([tok(p)["input_ids"]])
        with torch.no_grad():
            hidden = model(input_ids=ids, output_hidden_states=True).hidden_states
        # hidden_states[-1] has the final norm applied; layer 2 is the last block's raw output
        last = lm.residual_stream(model, tok, [p], layers=[2])[0, 0]
        assert torch.allclose(acts[len(rows) + ids.shape[1] - 2, 1], last, atol=1e-4)
        rows.extend(hidden[0][0, 1:])  # bos skipped
    assert acts.shape == (len(rows), 2, 32)
    assert torch.allclose(acts[:, 0], torch.stack(rows), atol=1e-5)
    with_bos = lm.residual_tokens(model, tok, prompts, layers=[1], skip_bos=False)
    assert len(with_bos) == len(rows) + len(prompts)
    assert len(lm.residual_tokens(model, tok, prompts, layers=[1], max_tokens=5)) == 5
    with pytest.raises(ValueError, match="max_tokens"):
        lm.residual_tokens(model, tok, prompts, max_tokens=0)


def test_steering_changes_logits_only_inside_the_context(model, tok, prompts):
    before = lm.next_token_logprobs(model, tok, prompts)
    vec = torch.randn(32, generator=torch.Generator().manual_seed(0))
    with lm.add_to_residual(model, 1, vec, scale=4.0):
        steered = lm.next_token_logprobs(model, tok, prompts)
    after = lm.next_token_logprobs(model, tok, prompts)
    assert (steered - before).abs().max() > 1e-2
    assert torch.equal(before, after)
    blocks = lm.decoder_layers(model)

    def hooks():  # transformers keeps hooks of its own on the blocks: count, do not expect zero
        return [(len(b._forward_hooks), len(b._forward_pre_hooks)) for b in blocks]

    before_hooks = hooks()
    seen = []

    def fail_inside():
        with lm.add_to_residual(model, 0, vec):
            seen.append(hooks())
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail_inside()
    assert seen[0] != before_hooks
    assert hooks() == before_hooks
    assert torch.equal(lm.next_token_logprobs(model, tok, prompts), before)


def test_steering_at_a_position_leaves_earlier_positions_alone(model, tok, prompts):
    ids = torch.tensor([tok(prompts[0])["input_ids"]])
    vec = torch.randn(
        32, generator=torch.Generator().manual_seed(1)
    )  # not constant: LayerNorm centres
    with torch.no_grad():
        base = model(input_ids=ids).logits[0]
        with lm.add_to_residual(model, 2, vec, positions=[3], scale=5.0):
            steered = model(input_ids=ids).logits[0]
    assert torch.allclose(base[:3], steered[:3], atol=1e-5)
    assert (base[3] - steered[3]).abs().max() > 1e-2


def test_capture_mlp_records_what_the_mlp_computes(model, tok, prompts):
    ids = torch.tensor([tok(prompts[0])["input_ids"]])
    with torch.no_grad(), lm.capture_mlp(model, [0, 1]) as rec:
        model(input_ids=ids)
    for b in (0, 1):
        assert rec[b].outputs.shape == (1, ids.shape[1], 32)
        with torch.no_grad():
            again = lm.mlp_module(model, b)(rec[b].inputs)
        assert torch.allclose(again, rec[b].outputs, atol=1e-5)
    assert not lm.mlp_module(model, 0)._forward_hooks  # transformers hooks blocks, not MLPs


def test_down_proj_records_and_weight_view_agree(model, tok, prompts):
    ids = torch.tensor([tok(prompts[0])["input_ids"]])
    module = lm.mlp_down_proj(model, 1)
    W = lm.down_proj_weight(module)
    with torch.no_grad(), lm.capture_mlp(model, [1], site="down_proj") as rec:
        model(input_ids=ids)
    keys, values = rec[1].inputs, rec[1].outputs
    assert W.shape == (32, keys.shape[-1])
    assert keys.shape[-1] > 32  # the MLP's hidden width, not d_model
    bias = module.bias if module.bias is not None else torch.zeros(32)
    assert torch.allclose(keys @ W.T + bias, values, atol=1e-5)
    # the view writes through: a change of W changes the module's output
    with torch.no_grad():
        saved = module.weight.detach().clone()
        W.add_(1.0)
        assert not torch.equal(module.weight, saved)
        module.weight.copy_(saved)
    assert not module._forward_hooks  # removed on exit
    with pytest.raises(ValueError, match="out of range"):
        lm.mlp_down_proj(model, 2)
    with pytest.raises(ValueError, match="site"), lm.capture_mlp(model, [0], site="attn"):
        pass


def test_sample_is_seeded_and_its_logprobs_are_the_models(model, tok, prompts):
    a = lm.sample(model, tok, prompts[:3], n=3, max_new_tokens=5, seed=7)
    b = lm.sample(model, tok, prompts[:3], n=3, max_new_tokens=5, seed=7)
    assert a.texts == b.texts
    assert len(a.texts) == 3
    assert all(len(row) == 3 for row in a.texts)
    p_ids = tok(prompts[1])["input_ids"]
    new = a.token_ids[1][0]
    ids = torch.tensor([p_ids + new.tolist()])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)
    manual = torch.stack([logp[len(p_ids) - 1 + k, t] for k, t in enumerate(new.tolist())])
    assert torch.allclose(a.logprobs[1][0], manual, atol=1e-4)


def test_save_load_round_trip_gives_identical_logits(model, tok, prompts, tmp_path):
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, tok2 = lm.load_lm(tmp_path)
    assert torch.equal(
        lm.next_token_logprobs(model, tok, prompts), lm.next_token_logprobs(loaded, tok2, prompts)
    )


def test_save_lm_is_atomic_and_keeps_the_first_copy(model, tok, prompts, tmp_path):
    path = lm.save_lm(model, tok, tmp_path / "m", {"steps": 3})
    assert json.loads((path / "info.json").read_text()) == {"steps": 3}
    loaded, tok2 = lm.load_lm(path)
    assert torch.equal(
        lm.next_token_logprobs(model, tok, prompts), lm.next_token_logprobs(loaded, tok2, prompts)
    )
    lm.save_lm(model, tok, path, {"steps": 99})  # a second writer: the first copy stays
    assert json.loads((path / "info.json").read_text()) == {"steps": 3}
    assert [p.name for p in tmp_path.iterdir()] == ["m"]  # no temp directory left behind


def test_answer_rank_ranks_the_answer_among_candidates(model, tok, world):
    items = world.qa_pairs("all")[:6]
    cities = world.entities["city"]
    res = lm.answer_rank(model, tok, [q.question for q in items], [q.answer for q in items], cities)
    lp = lm.next_token_logprobs(model, tok, [q.question for q in items])
    first = [tok(" " + q.answer, add_special_tokens=False)["input_ids"][0] for q in items]
    assert res.first_token_rank.tolist() == lm.token_rank(lp, torch.tensor(first)).tolist()
    for i, q in enumerate(items):
        others = [c for c in cities if c != q.answer]
        lps = lm.sequence_logprob(model, tok, [q.question] * len(others), [" " + c for c in others])
        assert res.sequence_rank[i] == 1 + int((lps > res.answer_logprob[i]).sum())


def test_bad_input_raises(model, tok, prompts):
    with pytest.raises(ValueError, match="must not be empty"):
        lm.next_token_logprobs(model, tok, [])
    with pytest.raises(TypeError, match="not one string"):
        lm.greedy_answer(model, tok, "Q: hi A:")
    with pytest.raises(ValueError, match="same length"):
        lm.sequence_logprob(model, tok, prompts, [" a"])
    with pytest.raises(ValueError, match="out of range"):
        lm.residual_stream(model, tok, prompts, layers=[3])
    with (
        pytest.raises(ValueError, match="out of range"),
        lm.add_to_residual(model, 7, torch.ones(32)),
    ):
        pass
    with pytest.raises(ValueError, match="shape"), lm.add_to_residual(model, 1, torch.ones(5)):
        pass
    with pytest.raises(ValueError, match="arch"):
        lm.tiny_causal_lm(tok, "mamba")
    with pytest.raises(ValueError, match="texts or pairs"):
        lm.train_causal_lm(model, tok)
    with pytest.raises(ValueError, match="temperature"):
        lm.sample(model, tok, prompts, temperature=0)
    with pytest.raises(ValueError, match="no saved model"):
        lm.load_lm(".")


def test_float64_exact_agrees_with_central_differences(model, tok, prompts):
    """After ``float64_exact`` a jvp equals a central difference to ~1e-9 (float32 norms or softmax
    inside would leave far more); the copy leaves the fixture's float32 model alone."""
    import copy

    m64 = lm.float64_exact(copy.deepcopy(model))
    assert all(p.dtype == torch.float64 for p in m64.parameters())
    ids = tok(prompts[:3], padding=True, return_tensors="pt")
    emb = m64.get_input_embeddings()(ids["input_ids"]).detach()
    v = torch.randn(emb.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)

    def f(e):
        return m64(inputs_embeds=e, attention_mask=ids["attention_mask"]).logits

    _, jv = torch.func.jvp(f, (emb,), (v,))
    eps = 1e-6  # truncation error ~4e-9 here; float32 rounding would leave ~1e-1 at this eps
    fd = (f(emb + eps * v) - f(emb - eps * v)) / (2 * eps)
    assert float((jv - fd).abs().max() / jv.abs().max()) < 1e-7
    assert next(model.parameters()).dtype == torch.float32


def test_train_callback_sees_every_epoch_of_one_continuous_run(tok, prompts):
    """A callback every k steps evaluates mid-run without restarting the optimizer: the run with
    callbacks is bit-identical to the run without, and the model is in eval mode inside it."""
    texts = [p + " yes" for p in prompts]
    models = [lm.tiny_causal_lm(tok, "llama", n_layers=1, d_model=32, n_heads=2) for _ in range(3)]
    seen: list[tuple[int, bool]] = []

    def train(m, **kwargs):
        return lm.train_causal_lm(m, tok, texts, steps=12, batch_size=4, progress=False, **kwargs)

    r1 = train(
        models[0], callback=lambda step: seen.append((step, models[0].training)), callback_every=5
    )
    r2 = train(models[1])
    assert seen == [(5, False), (10, False)]
    assert r1.losses == r2.losses
    for a, b in zip(models[0].parameters(), models[1].parameters(), strict=True):
        assert torch.equal(a, b)
    r3 = train(models[2], schedule="constant")
    assert r3.losses[:2] == r1.losses[:2]  # same warm-up step, then the schedules part
    assert r3.losses != r1.losses
    with pytest.raises(ValueError, match="schedule"):
        train(models[2], schedule="step")
    with pytest.raises(ValueError, match="callback_every"):
        train(models[2], callback=print)


def test_cache_key_changes_with_the_thread_count_and_the_config():
    from paper_common.device import pinned_threads

    with pinned_threads(1, torch=True):
        one = lm.cache_key({"size": 1})
        assert lm.training_environment()["torch_threads"] == 1
    with pinned_threads(2, torch=True):
        two = lm.cache_key({"size": 1})
    assert one != two  # a model trained with 2 threads is a different model
    with pinned_threads(1, torch=True):
        assert lm.cache_key({"size": 1}) == one
        assert lm.cache_key({"size": 2}) != one
    env = lm.training_environment()
    assert {"torch", "transformers", "numpy", "device", "cpu_capability"} <= set(env)


# Gemma's chat template as published (it starts with ``bos_token``, as Llama-3's and SmolLM2's
# rendered prompts do): a rendered prompt already holds BOS, and encoding it with special tokens
# added used to put a second one in front (issue 46, item 8).
GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}"
    "{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"
)


def test_a_rendered_chat_template_gets_one_bos(model, tok, prompts):
    chat_tok = copy.deepcopy(tok)
    chat_tok.chat_template = GEMMA_CHAT_TEMPLATE
    rendered = chat_tok.apply_chat_template(
        [{"role": "user", "content": prompts[0]}], tokenize=False, add_generation_prompt=True
    )
    assert rendered.startswith(chat_tok.bos_token)
    bos = chat_tok.bos_token_id
    one_bos = chat_tok(rendered, add_special_tokens=False)["input_ids"]
    assert one_bos[0] == bos
    assert one_bos.count(bos) == 1
    # what the model must see: the rendered text once, with its own single BOS
    ids = torch.tensor([one_bos])
    with torch.no_grad():
        expected = torch.log_softmax(model(input_ids=ids).logits[0, -1].float(), -1)
    got = lm.next_token_logprobs(model, chat_tok, [rendered, prompts[1]])[0]
    assert torch.allclose(got, expected, atol=1e-5)
    # a plain prompt still gets the tokenizer's BOS
    plain = lm.next_token_logprobs(model, chat_tok, [prompts[1]])[0]
    p_ids = torch.tensor([tok(prompts[1])["input_ids"]])
    assert p_ids[0, 0].item() == bos
    with torch.no_grad():
        plain_expected = torch.log_softmax(model(input_ids=p_ids).logits[0, -1].float(), -1)
    assert torch.allclose(plain, plain_expected, atol=1e-5)
    # sampling starts from the same single-BOS prompt: its first token's log-prob is the model's
    s = lm.sample(model, chat_tok, [rendered], n=1, max_new_tokens=1, seed=0)
    first = int(s.token_ids[0][0][0])
    assert torch.allclose(s.logprobs[0][0][0], expected[first], atol=1e-4)


# ------------------------------------------------------------------ issue 46: shared vocabulary
def test_fixed_tokenizer_covers_every_world_with_the_same_ids():
    tok = lm.fixed_tokenizer()
    assert tok.convert_tokens_to_ids("<pad>") == 0
    assert len(tok) == len(lm.fixed_tokenizer())
    seen = {}
    for seed in (11, 12):
        w = World(seed=seed, n_people=60, n_cities=30, exposure=1.5, documentation_lag=2)
        texts, pairs = w.corpus(style="biographies", formats=list(FORMATS))
        texts += w.vocabulary_texts() + [p + a for p, a in pairs]
        ids = tok(texts)["input_ids"]
        assert not any(tok.unk_token_id in row for row in ids)
        for name in w.entities["city"]:
            seen.setdefault(name, tok.convert_tokens_to_ids("▁" + name))
    # one token per city name, an id that does not depend on the World
    assert len(set(seen.values())) == len(seen)
    w = World(seed=11, n_people=60, n_cities=30)
    for name in w.entities["city"]:
        assert tok(" " + name, add_special_tokens=False)["input_ids"] == [seen[name]]


def test_training_draws_follow_weights_and_mixture():
    from paper_common.lm.train import _sampler

    p = _sampler(3, 2, None, (0.25, 0.75))
    assert torch.allclose(p, torch.tensor([1 / 12] * 3 + [3 / 8] * 2))
    p = _sampler(2, 2, [1, 3, 0, 1], None)
    assert torch.allclose(p, torch.tensor([0.2, 0.6, 0.0, 0.2]))
    p = _sampler(2, 2, [1, 3, 0, 1], (0.5, 0.5))
    assert torch.allclose(p, torch.tensor([0.125, 0.375, 0.0, 0.5]))
    assert _sampler(2, 2, None, None) is None
    with pytest.raises(ValueError, match="one entry per example"):
        _sampler(2, 2, [1, 1, 1], None)
    with pytest.raises(ValueError, match="there are none"):
        _sampler(2, 0, None, (0.5, 0.5))


def test_weighted_training_sees_only_the_weighted_examples():
    w = World(seed=13, n_people=6)
    tok = lm.fixed_tokenizer()
    texts = ["Q: A: True False", w.statements("train")[0].text]
    runs = []
    for kw in ({"texts": texts, "weights": [1.0, 0.0]}, {"texts": texts[:1]}, {"texts": texts}):
        model = lm.tiny_causal_lm(tok, "llama", 1, 32, 2, seed=0)
        res = lm.train_causal_lm(model, tok, steps=3, batch_size=4, lr=1e-2, **kw)
        runs.append(res.losses)
    assert runs[0] == runs[1]  # a zero-weight example is never drawn
    assert runs[0] != runs[2]


def test_fixed_tokenizer_covers_eight_options_and_every_allowed_year():
    tok = lm.fixed_tokenizer()
    w = World(seed=3, n_people=40, n_cities=24, start_year=2060, end_year=2079)
    items = w.multiple_choice("all", n_options=8)
    assert max(len(m.options) for m in items) == 8
    texts = [m.prompt + m.target for m in items] + w.vocabulary_texts()
    assert not any(tok.unk_token_id in ids for ids in tok(texts)["input_ids"])
