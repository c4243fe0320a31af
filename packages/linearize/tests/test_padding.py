"""Padding and tokenizer conventions (issue 44): a left-padding tokenizer and a BPE tokenizer.

An exact-softmax student (a cache as long as the text) must reproduce the teacher whatever side
the tokenizer pads on, and ``task_scores`` must grade the tokens of the graded words, whatever
the tokenizer splits them into."""

from __future__ import annotations

import copy

import pytest
import torch

from linearize.convert import TransferConfig, capture, layer_errors, linearize, transfer
from linearize.evaluate import graded_token_positions, task_scores
from linearize.student import LinearizeConfig, LinearizedAttention
from linearize.tasks import TaskSet, make_task, vocabulary
from paper_common.lm import build_tokenizer

# texts of different lengths, so a batch has real padding
TEXTS = make_task("mqar", 8, 8, seed=3).texts + make_task("mqar", 8, 16, seed=4).texts


def _left(tok):  # type: ignore[no-untyped-def]
    left = copy.deepcopy(tok)
    left.padding_side = "left"
    return left


def _exact(n: int) -> LinearizeConfig:
    return LinearizeConfig(update="delta", budget=n, sinks=1, window=2, conv=True)


@pytest.mark.parametrize("side", ["left", "right"])
def test_an_exact_student_scores_zero_error_with_either_padding(teacher, side: str) -> None:
    """Before the fix transfer and layer_errors did not pass the padding mask: with left padding
    the exact student attended to the pad keys and scored a relative error near 1."""
    model, tok = teacher
    tok = _left(tok) if side == "left" else tok
    data = capture(model, tok, TEXTS, batch_size=16)
    n = data.batches[0][0]["q"].shape[2]
    assert not bool(data.masks[0].all())  # the batch is padded
    if side == "left":
        assert not bool(data.masks[0][:, 0].all())  # ... on the left
    student = linearize(model, _exact(n))
    errs = layer_errors(student, data)
    assert errs.max() < 1e-8
    # the transfer loss of the exact student is zero too (its parameters do not matter)
    losses = transfer(student, data, TransferConfig(steps=1, lr=1e-12, progress=False))
    assert losses[0] < 1e-8


@pytest.mark.parametrize(
    "cfg",
    [
        LinearizeConfig(update="gated_delta", budget=6, sinks=2, window=2, conv=True),
        LinearizeConfig(update="linear", feature_map="hedgehog", budget=6, sinks=2, window=2,
                        routing="self_recall"),
        LinearizeConfig(update="diag_gated", feature_map="liger", normalize=False,
                        gate_source="key", budget=4, window=4, state_covers="all", combine="half"),
        LinearizeConfig(update="delta", conv=True),
    ],
)  # fmt: skip
def test_left_padding_does_not_change_a_students_outputs(cfg: LinearizeConfig) -> None:
    """A row left-padded by p tokens gives, at its real tokens, the outputs of the same row
    unpadded: pad tokens take no sink, window or routed slot and write nothing to the state."""
    g = torch.Generator().manual_seed(0)
    b, h, n, d, p = 2, 2, 12, 8, 3
    q, k, v = (torch.randn(b, h, n, d, generator=g, dtype=torch.float64) for _ in range(3))
    m = LinearizedAttention(cfg, d, h).double()
    with torch.no_grad():
        for prm in m.parameters():
            prm.add_(0.1 * torch.randn(prm.shape, generator=g, dtype=prm.dtype))
    ref = m(q, k, v)
    pads = [torch.randn(b, h, p, d, generator=g, dtype=torch.float64) for _ in range(3)]
    padded = [torch.cat([x0, x], 2) for x0, x in zip(pads, (q, k, v), strict=True)]
    mask = torch.ones(b, n + p, dtype=torch.bool)
    mask[:, :p] = False
    out = m(*padded, key_mask=mask)
    torch.testing.assert_close(out[:, :, p:], ref, atol=1e-10, rtol=0)


def _bpe():  # type: ignore[no-untyped-def]
    return build_tokenizer(vocabulary() * 3, kind="bpe", vocab_size=300)


def test_task_scores_grades_the_graded_words_under_bpe(teacher) -> None:
    """A BPE tokenizer splits the task words into several tokens: the word-level assumption
    ``word i = token i + 1`` graded other tokens. A model that predicts every token right (an
    oracle reading the answer from the next position) must score 1; one right everywhere except
    on the graded words' tokens must score 0."""
    tok = _bpe()
    ts = make_task("mqar", 6, 12, seed=1)
    ids = [tok(t)["input_ids"] for t in ts.texts]
    assert max(len(i) for i in ids) > max(len(w) for w in ts.words) + 1  # words do split
    oracle = _Oracle(tok)
    assert task_scores(oracle, tok, ts).accuracy == 1.0
    assert task_scores(oracle, _left(tok), ts).accuracy == 1.0
    spoiled = _Oracle(tok, spoil=ts)
    assert task_scores(spoiled, tok, ts).accuracy == 0.0
    assert task_scores(spoiled, _left(tok), ts).accuracy == 0.0
    # the perplexity of a sure oracle is 1 (per graded word)
    assert task_scores(oracle, tok, ts).perplexity == pytest.approx(1.0)


def test_task_scores_under_left_padding_matches_right_padding(teacher) -> None:
    model, tok = teacher
    ts = TaskSet("mqar", [*make_task("mqar", 4, 8, seed=2).words, *make_task("mqar", 4, 16).words],
                 [*make_task("mqar", 4, 8, seed=2).graded, *make_task("mqar", 4, 16).graded])  # fmt: skip
    right = task_scores(model, tok, ts)
    left = task_scores(model, _left(tok), ts)
    assert left.perplexity == pytest.approx(right.perplexity, rel=1e-4)
    # the logits at the positions that predict the graded tokens agree to round-off (comparing
    # argmax accuracies instead would hinge on near-ties a different BLAS could flip)
    from linearize.convert import lm_logits

    graded = {}
    for side, t in (("right", tok), ("left", _left(tok))):
        enc = t(ts.texts, return_tensors="pt", padding=True, return_offsets_mapping=True)
        with torch.no_grad():
            logits = lm_logits(model, enc["input_ids"], enc["attention_mask"], use_cache=False)
        graded[side] = [
            logits[i, torch.as_tensor(pos) - 1]
            for i in range(len(ts.texts))
            for pos in graded_token_positions(ts.texts[i], ts.words[i], ts.graded[i],
                                              enc["offset_mapping"][i], enc["attention_mask"][i])
        ]  # fmt: skip
    for a, b in zip(graded["left"], graded["right"], strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


class _Oracle(torch.nn.Module):
    """A stand-in causal LM whose logits put all mass on the actual next token of its input
    (teacher-forced: it reads the answer), except at the graded words of ``spoil``'s items, where
    it puts the mass on token 0. Stands in for a ``PreTrainedModel`` (``task_scores`` only calls
    it and reads ``.logits``)."""

    def __init__(self, tok, spoil: TaskSet | None = None):  # type: ignore[no-untyped-def]
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1))
        self.vocab = len(tok)
        self.tok, self.spoil = tok, spoil

    def forward(self, input_ids, attention_mask, **_):  # type: ignore[no-untyped-def]
        b, n = input_ids.shape
        nxt = torch.cat([input_ids[:, 1:], input_ids[:, :1]], 1)
        logits = torch.full((b, n, self.vocab), -1e4)
        logits.scatter_(2, nxt[..., None], 0.0)
        if self.spoil is not None:  # the positions that predict a graded word's tokens
            texts = self.tok.batch_decode(input_ids, skip_special_tokens=True)
            for i, text in enumerate(texts):
                words = text.split()
                item = next(j for j, w in enumerate(self.spoil.words) if w == words)
                enc = self.tok([text], return_offsets_mapping=True)
                pos = graded_token_positions(
                    text, self.spoil.words[item], self.spoil.graded[item],
                    enc["offset_mapping"][0], enc["attention_mask"][0],
                )  # fmt: skip
                shift = 0 if bool(attention_mask[i, 0]) else n - int(attention_mask[i].sum())
                for word_pos in pos:
                    for t in word_pos:
                        logits[i, shift + t - 1] = -1e4
                        logits[i, shift + t - 1, 0] = 0.0
        return type("Out", (), {"logits": logits + 0 * self.anchor})()


def test_mask_positions_count_real_tokens() -> None:
    from linearize.convert import mask_positions

    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 0, 0]])
    assert mask_positions(mask).tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 2, 2]]


def test_left_padding_does_not_move_a_hedgehog_students_logits() -> None:
    """HF numbers positions 0..n-1 whatever the mask, so a left-padded row's real tokens got RoPE
    positions shifted by the padding: a non-exact (Hedgehog) student's logits moved by ~1e-4.
    ``lm_logits`` passes mask-derived positions; left-padded and unpadded rows then agree to
    round-off."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from linearize.convert import lm_logits

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)  # fmt: skip
    student = linearize(LlamaForCausalLM(cfg).eval(), LinearizeConfig(feature_map="hedgehog"))
    student = student.double()
    ids = torch.randint(3, 50, (1, 10), generator=torch.Generator().manual_seed(1))
    padded = torch.cat([torch.zeros(1, 5, dtype=torch.long), ids], 1)
    mask = torch.cat([torch.zeros(1, 5), torch.ones(1, 10)], 1).long()
    with torch.no_grad():
        ref = lm_logits(student, ids, torch.ones_like(ids))
        out = lm_logits(student, padded, mask)[:, 5:]
    # a RoPE shift of 5 positions moves them by ~1e-4; round-off in float64 is ~1e-15
    torch.testing.assert_close(out, ref, atol=1e-9, rtol=0)


def test_capture_is_the_same_with_either_padding_side(teacher) -> None:
    """The teacher's captured attention inputs and outputs at the real tokens do not depend on the
    padding side (before the fix, left padding shifted their RoPE positions)."""
    model, tok = teacher
    right = capture(model, tok, TEXTS, batch_size=16)
    left = capture(model, _left(tok), TEXTS, batch_size=16)
    for rl, ll in zip(right.batches[0], left.batches[0], strict=True):
        for key in ("q", "k", "out"):
            for i in range(len(TEXTS)):
                a = rl[key][i][:, right.masks[0][i]]
                b = ll[key][i][:, left.masks[0][i]]
                torch.testing.assert_close(b, a, atol=1e-4, rtol=1e-4)
