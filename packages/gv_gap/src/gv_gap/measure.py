"""Generation and verification of the same facts, measured on any Hugging Face causal LM by log-probs.

:func:`evaluate_gv` asks every item three ways:

* **generation**: the greedy answer to the question, graded by normalised exact match (first
  sentence) against the answer or an alias; the true answer's first-token rank in the vocabulary
  (``rank <= 3`` is the matched control); 3-option multiple choice (the answer against the
  controls by ``sequence_logprob`` after the question);
* **verification**: each value (answer, controls, old value) asked in both polarities, read as
  log P(" True") − log P(" False") of the next token. A value is *accepted* in the "correct?"
  polarity when the margin is positive and in the "incorrect?" polarity when it is negative.
  A fact is **ver ✓** when its answer is accepted and every control rejected in both polarities;
* a **likelihood verifier**: LL(answer) > LL(each control) after the claim prefix, which says
  whether True/False verification knows more than the statement likelihood (for updates, the
  likelihood multi-verse: old and new value both more likely than every control).

Updating items (``old_answer`` set) also get the old value's acceptance, the **multi-verse** state
(old and new both accepted in both polarities, controls rejected) and whether generation still gives
the old value. Items with a control question get the **leak** rate (the answer generated for another
subject). :func:`song_gap` is Song et al.'s generation-verification gap from sampled answers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from gv_gap.items import POLARITIES, GVItem, verification_prompt
from paper_common.facts import normalize_answer
from paper_common.lm import (
    answer_rank,
    greedy_answer,
    next_token_logprobs,
    sample,
    sequence_logprob,
)

__all__ = [
    "GVResult",
    "SongGap",
    "evaluate_gv",
    "grade",
    "measure_song_gap",
    "song_gap",
    "true_false_ids",
    "two_by_two",
    "unknown_words",
    "verification_rates",
]


def _first_sentence(text: str) -> str:
    return re.split(r"[.\n]", text, maxsplit=1)[0]


def grade(prediction: str, answer: str, aliases: Sequence[str] = ()) -> bool:
    """Normalised exact match of the prediction's first sentence with the answer or an alias."""
    pred = normalize_answer(_first_sentence(prediction))
    return pred in {normalize_answer(a) for a in (answer, *aliases)}


def true_false_ids(tok: Any) -> tuple[int, int]:
    """Token ids of ``" True"`` and ``" False"`` (their first token, as a reply would start)."""
    ids = [tok(w, add_special_tokens=False)["input_ids"] for w in (" True", " False")]
    if not ids[0] or not ids[1] or ids[0][0] == ids[1][0]:
        raise ValueError("the tokenizer must give ' True' and ' False' distinct first tokens")
    return ids[0][0], ids[1][0]


def verification_rates(accept: np.ndarray, n_controls: int) -> dict[str, float]:
    """Pooled verification rates from ``accept`` ``(n_items, n_values, 2)`` (values: answer, then
    ``n_controls`` controls, then anything else; last axis: the two polarities).

    ``true_accept_<pol>``: share of answers accepted; ``false_reject_<pol>``: share of controls
    rejected; ``balanced_acc``: their mean over both polarities; ``ver_acc``: share of facts ver ✓.
    """
    accept = np.asarray(accept, dtype=bool)
    if accept.ndim != 3 or accept.shape[2] != len(POLARITIES) or accept.shape[1] < 1 + n_controls:
        raise ValueError(f"accept must be (n, >= 1 + {n_controls}, 2); got {accept.shape}")
    if n_controls < 1:
        raise ValueError("verification rates need at least one control")
    answer, controls = accept[:, 0], accept[:, 1 : 1 + n_controls]
    out: dict[str, float] = {}
    for p, pol in enumerate(POLARITIES):
        out[f"true_accept_{pol}"] = float(answer[:, p].mean())
        out[f"false_reject_{pol}"] = float((~controls[:, :, p]).mean())
    out["balanced_acc"] = float(
        np.mean([(out[f"true_accept_{p}"] + out[f"false_reject_{p}"]) / 2 for p in POLARITIES])
    )
    out["ver_acc"] = float(_ver_ok(accept, n_controls).mean())
    return out


def _ver_ok(accept: np.ndarray, n_controls: int) -> np.ndarray:
    return accept[:, 0].all(axis=1) & ~accept[:, 1 : 1 + n_controls].any(axis=(1, 2))


def two_by_two(gen_ok: np.ndarray, ver_ok: np.ndarray) -> dict[str, int]:
    """Counts of facts by (generation ✓/✗, verification ✓/✗)."""
    g, v = np.asarray(gen_ok, dtype=bool), np.asarray(ver_ok, dtype=bool)
    if g.shape != v.shape:
        raise ValueError(
            f"gen_ok and ver_ok must have one entry per fact; got {g.shape}, {v.shape}"
        )
    return {
        "gen+ver+": int((g & v).sum()),
        "gen+ver-": int((g & ~v).sum()),
        "gen-ver+": int((~g & v).sum()),
        "gen-ver-": int((~g & ~v).sum()),
    }


@dataclass
class GVResult:
    """Per-fact measurements (arrays aligned with ``keys``) and pooled rates (:meth:`summary`)."""

    keys: list[str]
    n_controls: int
    generated: list[str]
    gen_ok: np.ndarray
    margin: np.ndarray  # (n, n_values, 2): log P(True) - log P(False)
    first_token_rank: np.ndarray | None = None
    mc_ok: np.ndarray | None = None
    ll_ok: np.ndarray | None = None
    gen_old: np.ndarray | None = None
    leak: np.ndarray | None = None
    #: (n, 1 + n_controls, 2) per-prompt correctness (1 right, 0 wrong, NaN no valid reply); None:
    #: read from ``margin`` (the answer accepted, a control rejected; every prompt valid)
    prompt_ok: np.ndarray | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def accept(self) -> np.ndarray:
        """``(n, n_values, 2)``: accepted in the "correct?" polarity iff the margin is > 0, in the
        "incorrect?" polarity iff it is < 0."""
        m = self.margin
        return np.stack([m[..., 0] > 0, m[..., 1] < 0], axis=-1)

    @property
    def ver_ok(self) -> np.ndarray:
        return _ver_ok(self.accept, self.n_controls)

    @property
    def has_old(self) -> bool:
        return self.margin.shape[1] > 1 + self.n_controls

    @property
    def multiverse(self) -> np.ndarray:
        """Old and new value both accepted in both polarities and every control rejected."""
        if not self.has_old:
            raise ValueError("the multi-verse state needs items with an old value (updating)")
        acc = self.accept
        return self.ver_ok & acc[:, -1].all(axis=1)

    @property
    def per_prompt(self) -> np.ndarray:
        """``(n, 1 + n_controls, 2)``: each verification prompt graded on its own, as factgap grades
        it: right when the answer is accepted (index 0) or a control rejected; NaN where the reply
        was not valid (chat path)."""
        if self.prompt_ok is not None:
            return np.asarray(self.prompt_ok, dtype=float)
        acc = self.accept[:, : 1 + self.n_controls]
        ok = acc.copy()
        ok[:, 1:] = ~acc[:, 1:]
        return ok.astype(float)

    def item_accuracy(self) -> tuple[np.ndarray, np.ndarray]:
        """Per fact, the accuracy on its target prompts (the answer, both polarities) and on its
        control prompts (each control, both polarities), over valid replies; 0 for a fact with no
        valid reply (factgap's ``correct_mean`` / ``control_mean``). Shapes ``(n,)``."""
        ok = self.per_prompt
        n = len(self.keys)
        target, control = ok[:, 0].reshape(n, -1), ok[:, 1:].reshape(n, -1)

        def mean(x: np.ndarray) -> np.ndarray:
            valid = ~np.isnan(x)
            count = valid.sum(axis=1)
            return np.where(count > 0, np.nansum(x, axis=1) / np.maximum(count, 1), 0.0)

        return mean(target), mean(control)

    def item_balanced(self) -> np.ndarray:
        """Per fact, the balanced per-prompt verification accuracy: the mean of its target and its
        control accuracy (:meth:`item_accuracy`); 0.5 for a coin, 1 when every prompt is right."""
        target, control = self.item_accuracy()
        return (target + control) / 2

    def rank_ok(self, k: int = 3) -> np.ndarray:
        if self.first_token_rank is None:
            raise ValueError("this result has no answer ranks")
        return self.first_token_rank <= k

    def summary(self) -> dict[str, float]:
        """Pooled rates: gen_acc, gen_rank3, mc_acc, ll_acc; verification per prompt as factgap
        reports it (``ver_target_acc``, ``ver_control_acc``, their mean ``balanced_acc``: the
        headline; ``ver_valid``: share of valid replies) and the per-fact six-way conjunction
        ``ver_acc`` (secondary); true-accept and false-reject per polarity, the 2 × 2 shares, and
        old_accept / new_accept / multiverse / gen_old (updating) and leak where measured."""
        out: dict[str, float] = {"n": float(len(self.keys)), "gen_acc": float(self.gen_ok.mean())}
        if self.first_token_rank is not None:
            out["gen_rank3"] = float(self.rank_ok(3).mean())
        if self.mc_ok is not None:
            out["mc_acc"] = float(self.mc_ok.mean())
        if self.ll_ok is not None:
            out["ll_acc"] = float(self.ll_ok.mean())
        out.update(verification_rates(self.accept, self.n_controls))
        # the headline, as factgap reports it: per-prompt accuracy on target and control prompts,
        # per fact over valid replies then averaged over facts; balanced = their mean
        target, control = self.item_accuracy()
        out["ver_target_acc"] = float(target.mean())
        out["ver_control_acc"] = float(control.mean())
        out["balanced_acc"] = (out["ver_target_acc"] + out["ver_control_acc"]) / 2
        out["ver_valid"] = float((~np.isnan(self.per_prompt)).mean())
        n = max(len(self.keys), 1)
        out.update({k: v / n for k, v in two_by_two(self.gen_ok, self.ver_ok).items()})
        if self.has_old:
            acc = self.accept
            out["new_accept"] = float(acc[:, 0].all(axis=1).mean())
            out["old_accept"] = float(acc[:, -1].all(axis=1).mean())
            out["multiverse"] = float(self.multiverse.mean())
        if self.gen_old is not None:
            out["gen_old"] = float(self.gen_old.mean())
        if "ll_multiverse" in self.extra:
            out["ll_multiverse"] = float(np.mean(self.extra["ll_multiverse"]))
        if self.leak is not None:
            out["leak"] = float(np.mean(self.leak))
        return out


def _check_items(items: Sequence[GVItem]) -> list[GVItem]:
    items = list(items)
    if not items:
        raise ValueError("evaluate_gv needs at least one item")
    for it in items:
        if not isinstance(it, GVItem):
            raise TypeError(f"items must be GVItem; got {type(it).__name__}")
    sizes = {len(it.controls) for it in items}
    if len(sizes) != 1:
        raise ValueError(f"every item needs the same number of controls; got {sorted(sizes)}")
    olds = {it.old_answer is None for it in items}
    if len(olds) != 1:
        raise ValueError("either every item has an old value (updating) or none has")
    return items


def unknown_words(tok: Any, text: str) -> list[str]:
    """The pieces of ``text`` that ``tok`` maps to its unknown token (empty when it has none).

    A fast tokenizer names the exact spans; a slow one the whitespace-separated words whose
    encoding contains the unknown token."""
    unk = getattr(tok, "unk_token_id", None)
    if unk is None:
        return []
    if getattr(tok, "is_fast", False):
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        return [
            text[a:b].strip() or text[a:b]
            for i, (a, b) in zip(enc["input_ids"], enc["offset_mapping"], strict=True)
            if i == unk
        ]
    return [w for w in text.split() if unk in tok(f" {w}", add_special_tokens=False)["input_ids"]]


def _check_vocabulary(tok: Any, items: Sequence[GVItem], texts: Any) -> None:
    """Raise when a prompt ``texts(item)`` yields holds words ``tok`` cannot encode: the model would
    read ``<unk>`` in their place and be scored on a different question."""
    for it in items:
        for text in texts(it):
            bad = unknown_words(tok, text)
            if bad:
                raise ValueError(
                    f"item {it.key!r}: the tokenizer maps {sorted(set(bad))} in {text!r} to its "
                    f"unknown token {tok.unk_token!r}; the model cannot read them. Build the "
                    "tokenizer from every text it will see (gv_gap.items.vocabulary_texts) or use "
                    "a subword tokenizer"
                )


def _prompt_texts(likelihood: bool, choices: bool) -> Any:
    """Every text :func:`evaluate_gv` feeds the model for one item (values after a space)."""

    def texts(it: GVItem) -> list[str]:
        out = [verification_prompt(it, v, p) for v in it.values for p in POLARITIES]
        out.append(it.question)  # the verification prompts hold every value and the question
        if likelihood:
            out.append(it.likelihood_prefix)
        if it.control_question:
            out.append(it.control_question)
        return out

    return texts


def _true_false_margin(model: Any, tok: Any, prompts: list[str], batch_size: int) -> torch.Tensor:
    """log P(" True") − log P(" False") of the next token after each prompt."""
    t_id, f_id = true_false_ids(tok)
    lp = next_token_logprobs(model, tok, prompts, batch_size)
    return lp[:, t_id] - lp[:, f_id]


def _margins(model: Any, tok: Any, items: list[GVItem], batch_size: int) -> np.ndarray:
    prompts = [
        verification_prompt(it, v, pol) for it in items for v in it.values for pol in POLARITIES
    ]
    margin = _true_false_margin(model, tok, prompts, batch_size).numpy()
    return margin.reshape(len(items), len(items[0].values), len(POLARITIES))


def evaluate_gv(
    model: Any,
    tok: Any,
    items: Sequence[GVItem],
    batch_size: int = 64,
    max_new_tokens: int = 8,
    choices: bool = True,
    likelihood: bool = True,
) -> GVResult:
    """Generation, verification (both polarities) and the likelihood verifier on ``items``.

    ``choices=False`` skips ranks and multiple choice, ``likelihood=False`` the likelihood verifier
    (both cost a forward pass per value). The model is scored as is (eval mode, no gradients).
    Raises ``ValueError`` naming the item and the words when a prompt holds words the tokenizer
    maps to its unknown token.
    """
    items = _check_items(items)
    _check_vocabulary(tok, items, _prompt_texts(likelihood, choices))
    generated = greedy_answer(model, tok, [it.question for it in items], max_new_tokens, batch_size)
    gen_ok = np.array(
        [grade(g, it.answer, it.aliases) for g, it in zip(generated, items, strict=True)]
    )
    result = GVResult(
        keys=[it.key for it in items],
        n_controls=len(items[0].controls),
        generated=generated,
        gen_ok=gen_ok,
        margin=_margins(model, tok, items, batch_size),
    )
    if items[0].old_answer is not None:
        result.gen_old = np.array(
            [grade(g, it.old_answer or "") for g, it in zip(generated, items, strict=True)]
        )
    if choices:
        ranks = answer_rank(
            model,
            tok,
            [it.question for it in items],
            [it.answer for it in items],
            candidates=[list(it.controls) for it in items],
            batch_size=batch_size,
        )
        result.first_token_rank = ranks.first_token_rank
        result.mc_ok = ranks.sequence_rank == 1
    if likelihood:
        n_val = len(items[0].values)
        ll = sequence_logprob(
            model,
            tok,
            [it.likelihood_prefix for it in items for _ in range(n_val)],
            [f" {v}" for it in items for v in it.values],
            batch_size,
        )
        ll = ll.numpy().reshape(len(items), n_val)
        best_control = ll[:, 1 : 1 + result.n_controls].max(axis=1)
        result.ll_ok = ll[:, 0] > best_control
        if result.has_old:  # both values more likely than every control: a likelihood multi-verse
            result.extra["ll_multiverse"] = result.ll_ok & (ll[:, -1] > best_control)
    with_control = [i for i, it in enumerate(items) if it.control_question]
    if with_control:
        answers = greedy_answer(
            model,
            tok,
            [items[i].control_question for i in with_control],
            max_new_tokens,
            batch_size,
        )
        result.leak = np.array(
            [grade(a, items[i].answer) for a, i in zip(answers, with_control, strict=True)]
        )
    return result


@dataclass(frozen=True)
class SongGap:
    """Song et al.'s gap: accuracy of the verification-reweighted generations minus plain accuracy,
    and the gap relative to the room left (``gap / (1 − accuracy)``, NaN at accuracy 1)."""

    accuracy: float
    reweighted_accuracy: float
    gap: float
    relative_gap: float

    def as_row(self) -> dict[str, float]:
        return {
            "accuracy": self.accuracy,
            "reweighted_accuracy": self.reweighted_accuracy,
            "gap": self.gap,
            "relative_gap": self.relative_gap,
        }


def song_gap(correct: np.ndarray, weights: np.ndarray) -> SongGap:
    """The gap from ``correct`` ``(n_prompts, n_samples)`` and non-negative verifier ``weights`` of
    the same shape: per prompt, plain accuracy is the mean of ``correct`` and the reweighted accuracy
    ``sum(w c) / sum(w)`` (plain when every weight is 0); both averaged over prompts."""
    c = np.asarray(correct, dtype=float)
    w = np.asarray(weights, dtype=float)
    if c.ndim != 2 or c.shape != w.shape or c.size == 0:
        raise ValueError(
            f"correct and weights must be one (n_prompts, n_samples) shape; got {c.shape}, {w.shape}"
        )
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("weights must be finite and >= 0")
    plain = c.mean(axis=1)
    total = w.sum(axis=1)
    safe = np.where(total > 0, total, 1.0)
    reweighted = np.where(total > 0, (w * c).sum(axis=1) / safe, plain)
    acc, racc = float(plain.mean()), float(reweighted.mean())
    gap = racc - acc
    return SongGap(acc, racc, gap, gap / (1 - acc) if acc < 1 else float("nan"))


def measure_song_gap(
    model: Any,
    tok: Any,
    items: Sequence[GVItem],
    n: int = 8,
    temperature: float = 1.0,
    max_new_tokens: int = 8,
    seed: int = 0,
    batch_size: int = 64,
) -> SongGap:
    """Sample ``n`` answers per question, weight each by the model's own P(True) that it is correct
    (the "correct?" prompt, normalised over True/False), and return :func:`song_gap`."""
    items = _check_items(items)
    _check_vocabulary(tok, items, lambda it: [it.question])
    out = sample(
        model, tok, [it.question for it in items], n, temperature, max_new_tokens, seed, batch_size
    )
    answers = [[_first_sentence(t).strip() or "?" for t in row] for row in out.texts]
    correct = np.array(
        [
            [grade(a, it.answer, it.aliases) for a in row]
            for row, it in zip(answers, items, strict=True)
        ]
    )
    prompts = [
        verification_prompt(it, a, "correct")
        for it, row in zip(items, answers, strict=True)
        for a in row
    ]
    margin = _true_false_margin(model, tok, prompts, batch_size)
    p_true = torch.sigmoid(margin).numpy().reshape(len(items), n)
    return song_gap(correct, p_true)
