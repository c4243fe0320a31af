"""Automated hallucination labelers behind one interface, in the manner of lm-polygraph's
``GenerationMetric``: ``score(questions, references, answers) -> (n,)`` and
``label(questions, references, answers, threshold) -> hallucinated (n,) bool``.

A score is the *support* the labeler finds for the answer, in ``[0, 1]`` (1: fully matches /
entailed / judged fine); an answer is labelled hallucinated when its score is below the threshold.
``references[i]`` is one string or a sequence of acceptable strings (reference plus aliases); lexical
and embedding scores take the maximum over them.

- lexical: :class:`ExactMatch`, :class:`TokenF1` (SQuAD normalisation), :class:`RougeL`
  (``rouge-score``), :class:`SentenceBLEU` and :class:`ChrF` (``sacrebleu``);
- :class:`EmbeddingCosine` over an :class:`LMEmbedder` (mean-pooled residual stream of any HF causal
  LM) or a :class:`SentenceTransformerEmbedder` (a local sentence-transformers model), and
  :class:`BERTScore` (greedy token matching, any HF encoder);
- :class:`NLILabeler`: does question + reference entail the answer (any HF sequence classifier);
- :class:`JudgeLabeler`: an LLM judge under a faithfulness or a correctness prompt (:data:`PROMPTS`),
  its verdict read from P(Yes) vs P(No) or parsed from a greedy answer.
"""

from __future__ import annotations

import collections
import inspect
import os
import re
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch

from paper_common.facts import normalize_answer
from paper_common.lm import (
    greedy_answer,
    load_tokenizer,
    next_token_logprobs,
    quiet_hf_progress,
    residual_stream,
)

__all__ = [
    "COMPACT_PROMPTS",
    "PROMPTS",
    "PROMPT_CRITERION",
    "BERTScore",
    "ChrF",
    "EmbeddingCosine",
    "ExactMatch",
    "JudgeLabeler",
    "LMEmbedder",
    "Labeler",
    "NLILabeler",
    "RougeL",
    "SentenceBLEU",
    "SentenceTransformerEmbedder",
    "TokenF1",
    "judge_prompt",
    "nli_premise",
    "parse_judge_reply",
    "token_f1",
]

References = Sequence[str | Sequence[str]]


def _refs(reference: str | Sequence[str]) -> list[str]:
    refs = [reference] if isinstance(reference, str) else list(reference)
    refs = [r for r in refs if isinstance(r, str) and r.strip()]
    return refs


def check_inputs(
    questions: Sequence[str], references: References, answers: Sequence[str]
) -> tuple[list[str], list[list[str]], list[str]]:
    """Validate the three parallel inputs; raises ``ValueError`` naming what is wrong."""
    for name, seq in (("questions", questions), ("references", references), ("answers", answers)):
        if isinstance(seq, str):
            raise TypeError(f"{name} must be a sequence of strings, not one string")
    qs, rs, ans = list(questions), list(references), list(answers)
    if not len(qs) == len(rs) == len(ans):
        raise ValueError(
            "questions, references and answers must have the same length; "
            f"got {len(qs)}, {len(rs)} and {len(ans)}"
        )
    refs = []
    for i, r in enumerate(rs):
        cleaned = _refs(r)
        if not cleaned:
            raise ValueError(f"reference {i} is empty; every item needs a non-empty reference")
        refs.append(cleaned)
    return [str(q) for q in qs], refs, [str(a) for a in ans]


def _check_threshold(threshold: float) -> float:
    if not 0.0 <= float(threshold) <= 1.0:
        raise ValueError(f"threshold must be in [0, 1]; got {threshold}")
    return float(threshold)


def _threshold_above(scores: np.ndarray, cut: float) -> float:
    """A threshold ``t`` for ``score < t`` that flags exactly the scores ``<= cut``: the midpoint
    (in float64) between ``cut`` and the next larger distinct score, so a score recomputed with
    float32 rounding noise (another batch, another thread count) stays on its side. A hair above
    ``cut`` (the old ``cut + 1e-9``) is below float32's resolution near 1 (about 6e-8).
    ``cut = -inf`` (flag nothing) gives the smallest score; nothing above ``cut`` gives the midpoint
    to 1 (``1.0`` itself when ``cut`` is 1: a score of 1 cannot be flagged by a threshold in [0, 1])."""
    distinct = np.unique(np.asarray(scores, dtype=np.float64))
    if cut == -np.inf:
        return float(distinct[0])
    above = distinct[distinct > cut]
    upper = float(above[0]) if above.size else 1.0
    mid = (cut + upper) / 2
    return float(np.clip(mid if mid > cut else upper, 0.0, 1.0))  # adjacent doubles: upper


class Labeler:
    """Base class: subclasses implement :meth:`_score` on validated inputs.

    Attributes: ``name`` (shown in tables), ``threshold`` (default for :meth:`label`), ``family``
    (lexical / embedding / nli / judge).
    """

    name: str = "labeler"
    family: str = "other"

    def __init__(self, threshold: float = 0.5, name: str | None = None) -> None:
        self.threshold = _check_threshold(threshold)
        if name is not None:
            self.name = name

    def _score(self, questions: list[str], refs: list[list[str]], answers: list[str]) -> np.ndarray:
        raise NotImplementedError

    def score(
        self, questions: Sequence[str], references: References, answers: Sequence[str]
    ) -> np.ndarray:
        """Support score of each answer, ``(n,)`` float in ``[0, 1]``."""
        qs, refs, ans = check_inputs(questions, references, answers)
        if not qs:
            return np.zeros(0)
        return np.clip(np.asarray(self._score(qs, refs, ans), dtype=float), 0.0, 1.0)

    def label(
        self,
        questions: Sequence[str],
        references: References,
        answers: Sequence[str],
        threshold: float | None = None,
    ) -> np.ndarray:
        """Hallucinated (``score < threshold``), ``(n,)`` bool."""
        t = self.threshold if threshold is None else _check_threshold(threshold)
        return self.score(questions, references, answers) < t

    def calibrate(
        self,
        questions: Sequence[str],
        references: References,
        answers: Sequence[str],
        hallucinated: Sequence[bool],
    ) -> float:
        """Set :attr:`threshold` to the one maximising Youden's J (TPR - FPR) on labelled answers."""
        from sklearn.metrics import roc_curve

        y = np.asarray(hallucinated, dtype=bool)
        scores = self.score(questions, references, answers)
        if y.shape != scores.shape:
            raise ValueError(f"hallucinated must have one label per answer; got {y.shape}")
        if y.all() or not y.any():
            raise ValueError("calibration needs both hallucinated and non-hallucinated answers")
        fpr, tpr, thr = roc_curve(y, -scores)  # low support = hallucinated
        best = int(np.argmax(tpr - fpr))  # ties: the first, the fewest flagged
        self.threshold = _threshold_above(scores, -float(thr[best]))
        return self.threshold

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, threshold={self.threshold:.3g})"


# --------------------------------------------------------------------- lexical
def token_f1(prediction: str, reference: str) -> float:
    """SQuAD token F1 after :func:`normalize_answer` (0 when either side is empty, unless both are)."""
    p, r = normalize_answer(prediction).split(), normalize_answer(reference).split()
    if not p or not r:
        return float(p == r)
    common = collections.Counter(p) & collections.Counter(r)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(r)
    return 2 * precision * recall / (precision + recall)


class ExactMatch(Labeler):
    """1 when the normalised answer equals the normalised reference or an alias (SQuAD EM)."""

    name, family = "EM", "lexical"

    def _score(self, questions: list[str], refs: list[list[str]], answers: list[str]) -> np.ndarray:
        return np.array(
            [
                float(normalize_answer(a) in {normalize_answer(r) for r in rs})
                for a, rs in zip(answers, refs, strict=True)
            ]
        )


class TokenF1(Labeler):
    """SQuAD token F1, max over references."""

    name, family = "F1", "lexical"

    def _score(self, questions: list[str], refs: list[list[str]], answers: list[str]) -> np.ndarray:
        return np.array(
            [max(token_f1(a, r) for r in rs) for a, rs in zip(answers, refs, strict=True)]
        )


class RougeL(Labeler):
    """ROUGE-L F-measure (``rouge_score``, no stemming), max over references."""

    family = "lexical"

    def __init__(self, threshold: float = 0.5, name: str | None = None) -> None:
        super().__init__(threshold, name or f"ROUGE-L@{threshold:g}")
        from rouge_score import rouge_scorer

        self._scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)

    def _score(self, questions: list[str], refs: list[list[str]], answers: list[str]) -> np.ndarray:
        return np.array(
            [
                max(self._scorer.score(r, a)["rougeL"].fmeasure for r in rs)
                for a, rs in zip(answers, refs, strict=True)
            ]
        )


class SentenceBLEU(Labeler):
    """Sentence BLEU (``sacrebleu``, exponential smoothing, effective order) / 100, all references."""

    name, family = "BLEU", "lexical"

    def _score(self, questions: list[str], refs: list[list[str]], answers: list[str]) -> np.ndarray:
        from sacrebleu.metrics import BLEU

        bleu = BLEU(effective_order=True)
        return np.array(
            [bleu.sentence_score(a, rs).score / 100 for a, rs in zip(answers, refs, strict=True)]
        )


class ChrF(Labeler):
    """Sentence chrF (``sacrebleu``) / 100, best reference."""

    name, family = "chrF", "lexical"

    def _score(self, questions: list[str], refs: list[list[str]], answers: list[str]) -> np.ndarray:
        from sacrebleu.metrics import CHRF

        chrf = CHRF()
        return np.array(
            [
                max(chrf.sentence_score(a, [r]).score for r in rs) / 100
                for a, rs in zip(answers, refs, strict=True)
            ]
        )


# --------------------------------------------------------------------- embeddings
class LMEmbedder:
    """Mean-pooled residual stream at ``layer`` (default the last) of any HF causal LM."""

    def __init__(self, model: Any, tokenizer: Any, layer: int = -1, batch_size: int = 64) -> None:
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        n_layers = model.config.num_hidden_layers
        self.layer = layer % (n_layers + 1)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        h = residual_stream(
            self.model, self.tokenizer, list(texts), [self.layer], "mean", self.batch_size
        )
        return h[:, 0].numpy()


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a local path (needs the ``st`` extra)."""

    def __init__(self, path: str | os.PathLike[str], device: str | None = None) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - the extra is installed in the workspace
            raise ImportError("pip install 'halluc-labels[st]' for sentence-transformers") from exc
        if not os.path.isdir(path):
            raise ValueError(f"{path} is not a directory holding a sentence-transformers model")
        self.model = SentenceTransformer(str(path), device=device or "cpu")

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.model.encode(list(texts), convert_to_numpy=True))


class EmbeddingCosine(Labeler):
    """Cosine similarity of answer and reference embeddings (max over references), clipped at 0.

    The embedding space sets the scale, so the threshold is usually set by :meth:`calibrate`.
    """

    family = "embedding"

    def __init__(
        self,
        embedder: LMEmbedder | SentenceTransformerEmbedder | Any,
        threshold: float = 0.5,
        name: str = "embed-cos",
    ) -> None:
        super().__init__(threshold, name)
        if not hasattr(embedder, "encode"):
            raise TypeError("embedder needs an encode(texts) -> (n, d) array method")
        self.embedder = embedder

    def _score(self, questions: list[str], refs: list[list[str]], answers: list[str]) -> np.ndarray:
        flat = [r for rs in refs for r in rs]
        owner = np.repeat(np.arange(len(refs)), [len(rs) for rs in refs])
        e_ans = self.embedder.encode(answers)
        e_ref = self.embedder.encode(flat)
        e_ans = e_ans / np.maximum(np.linalg.norm(e_ans, axis=1, keepdims=True), 1e-12)
        e_ref = e_ref / np.maximum(np.linalg.norm(e_ref, axis=1, keepdims=True), 1e-12)
        cos = np.einsum("nd,nd->n", e_ans[owner], e_ref)
        best = np.full(len(answers), -np.inf)
        np.maximum.at(best, owner, cos)
        return best


class BERTScore(Labeler):
    """BERTScore F1 (Zhang et al. 2020) with the ``bert-score`` package's defaults (no idf weights, no
    baseline rescaling): contextual token embeddings at ``layer`` (default the last) of any HF
    model, special tokens left out, each token matched greedily to its most similar token on the
    other side by cosine; F1 of the mean precision and recall, max over references."""

    family = "embedding"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        layer: int = -1,
        threshold: float = 0.5,
        batch_size: int = 64,
        name: str = "BERTScore",
    ) -> None:
        super().__init__(threshold, name)
        self.model, self.tokenizer, self.layer, self.batch_size = (
            model,
            tokenizer,
            layer,
            batch_size,
        )

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike[str], **kwargs: Any) -> BERTScore:
        """An encoder (``AutoModel``) and its tokenizer from a local directory."""
        import transformers

        if not os.path.isfile(os.path.join(path, "config.json")):
            raise ValueError(f"{path} holds no saved model (config.json missing)")
        with quiet_hf_progress():
            model = transformers.AutoModel.from_pretrained(path).eval()
        return cls(model, load_tokenizer(path), **kwargs)

    def embed(self, texts: Sequence[str]) -> list[torch.Tensor]:
        """Unit-norm token embeddings of each text, special tokens removed: ``(len_i, d)`` each."""
        device = next(self.model.parameters()).device
        out: list[torch.Tensor] = []
        with torch.inference_mode():
            for i in range(0, len(texts), self.batch_size):
                enc = self.tokenizer(
                    list(texts[i : i + self.batch_size]),
                    padding=True,
                    truncation=True,
                    return_tensors="pt",
                    return_special_tokens_mask=True,
                )
                special = enc.pop("special_tokens_mask").bool()
                enc = enc.to(device)
                hidden = self.model(**enc, output_hidden_states=True).hidden_states[self.layer]
                hidden = torch.nn.functional.normalize(hidden.float(), dim=-1).cpu()
                keep = enc["attention_mask"].cpu().bool() & ~special
                out += [h[k] for h, k in zip(hidden, keep, strict=True)]
        return out

    def _score(self, questions: list[str], refs: list[list[str]], answers: list[str]) -> np.ndarray:
        flat = [r for rs in refs for r in rs]
        e_ans, e_ref = self.embed(answers), self.embed(flat)
        scores, k = np.zeros(len(answers)), 0
        for i, rs in enumerate(refs):
            best = 0.0
            for ref in e_ref[k : k + len(rs)]:
                if len(ref) and len(e_ans[i]):
                    sim = e_ans[i] @ ref.T
                    p, r = float(sim.max(1).values.mean()), float(sim.max(0).values.mean())
                    best = max(best, 2 * p * r / (p + r) if p + r > 0 else 0.0)
            scores[i], k = best, k + len(rs)
        return scores


# --------------------------------------------------------------------- NLI
def _reference_text(reference: Sequence[str]) -> str:
    extra = " (also: " + ", ".join(reference[1:]) + ")" if len(reference) > 1 else ""
    return reference[0] + extra


def nli_premise(question: str, reference: Sequence[str] | str, with_question: bool = False) -> str:
    """The NLI premise: the reference alone (aliases in brackets), as Valjakka et al.'s
    reference-entailment baseline; ``with_question`` prepends the question."""
    refs = _refs(reference)
    if not refs:
        raise ValueError("the reference is empty")
    ref = _reference_text(refs)
    return f"{question} {ref}." if with_question else f"{ref}."


class NLILabeler(Labeler):
    """Reference entailment: P(entailment) of premise "question reference" and hypothesis "answer".

    Any ``AutoModelForSequenceClassification`` works; the entailment class is found in
    ``config.id2label`` (a label containing "entail") unless ``entail_index`` is given. The
    premise is the reference alone (the paper's baseline) unless ``with_question=True``.
    """

    family = "nli"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        entail_index: int | None = None,
        threshold: float = 0.5,
        with_question: bool = False,
        batch_size: int = 64,
        name: str = "NLI",
    ) -> None:
        super().__init__(threshold, name)
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.with_question = with_question
        if entail_index is None:
            labels = {int(k): str(v).lower() for k, v in model.config.id2label.items()}
            hits = [i for i, v in labels.items() if "entail" in v and "not" not in v]
            if len(hits) != 1:
                raise ValueError(
                    f"cannot tell the entailment class from id2label {labels}; pass entail_index"
                )
            entail_index = hits[0]
        if not 0 <= entail_index < model.config.num_labels:
            raise ValueError(f"entail_index must be in [0, {model.config.num_labels})")
        self.entail_index = int(entail_index)
        self._forward_args = set(inspect.signature(model.forward).parameters)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike[str], **kwargs: Any) -> NLILabeler:
        """Load an HF NLI classifier and its tokenizer from a local directory."""
        import transformers

        if not os.path.isfile(os.path.join(path, "config.json")):
            raise ValueError(f"{path} holds no saved model (config.json missing)")
        with quiet_hf_progress():
            model = transformers.AutoModelForSequenceClassification.from_pretrained(path).eval()
        return cls(model, load_tokenizer(path), **kwargs)

    def probabilities(
        self, questions: Sequence[str], references: References, answers: Sequence[str]
    ) -> np.ndarray:
        """Class probabilities, ``(n, num_labels)``."""
        qs, refs, ans = check_inputs(questions, references, answers)
        premises = [nli_premise(q, r, self.with_question) for q, r in zip(qs, refs, strict=True)]
        device = next(self.model.parameters()).device
        out = []
        with torch.inference_mode():
            for i in range(0, len(ans), self.batch_size):
                enc = self.tokenizer(
                    premises[i : i + self.batch_size],
                    ans[i : i + self.batch_size],
                    padding=True,
                    truncation=True,
                    return_tensors="pt",
                ).to(device)
                if "token_type_ids" not in self._forward_args:
                    enc.pop("token_type_ids", None)
                logits = self.model(**enc).logits.float()
                out.append(torch.softmax(logits, -1).cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, self.model.config.num_labels))

    def _score(self, questions: list[str], refs: list[list[str]], answers: list[str]) -> np.ndarray:
        return self.probabilities(questions, refs, answers)[:, self.entail_index]


# --------------------------------------------------------------------- LLM judges
_JSON_RULES = (
    "OUTPUT: reply with JSON only, exactly two fields: "
    '{"label": 0 or 1, "confidence": a number from 0 to 1}. '
    "Label 1 means the answer contains a hallucination, 0 that it does not. No markdown, no "
    "reasoning field, no other text."
)
_ROLE = "You audit answers to open-domain questions for hallucinations."
_TREE_HEAD = (
    "STEPS. S1: is the answer the reference or a clear rewording of it? If yes, go to S2, "
    "otherwise to S3. S2: does it add a claim that {add}? If yes the label is 1, otherwise 0."
)
PROMPTS: dict[str, str] = {
    "p1": " ".join(
        [
            _ROLE,
            "Compare the answer with the reference answer.",
            "DEFINITION: a hallucination is any claim that the reference answer does not support "
            "or that it contradicts.",
            "Take the reference answer as the ground truth and use no outside knowledge.",
            _JSON_RULES,
        ]
    ),
    "p2": " ".join(
        [
            _ROLE,
            "DEFINITION: a hallucination is a claim that the reference answer explicitly "
            "contradicts, that contradicts itself, or that is false in a specific checkable detail "
            "(a name, date, number, place, entity or other concrete fact).",
            "RULES. 1: not being in the reference is not being contradicted by it; true details "
            "the reference lacks are no hallucination. 2: a vague, incomplete or non-committal "
            "answer is incorrect but no hallucination unless it contradicts the reference or "
            "states a specific false detail. 3: judge factual errors, not missing overlap.",
            _TREE_HEAD.format(
                add="the reference explicitly contradicts or that is false in a specific detail"
            ),
            "S3: does the core answer clash with the reference (another entity, value or fact)? "
            "If yes the label is 1. S4: is it a refusal or a statement of uncertainty? If yes "
            "the label is 0. S5: does it state a specific checkable detail that is false? If yes "
            "1, otherwise 0.",
            _JSON_RULES,
        ]
    ),
    "p3": " ".join(
        [
            _ROLE,
            "DEFINITION: a hallucination is a claim that the reference answer explicitly "
            "contradicts, that contradicts itself, or that is false in a specific checkable detail "
            "(a name, date, number, place, entity or other concrete fact).",
            "RULES. 1: not being in the reference is not being contradicted by it; true details "
            "the reference lacks are no hallucination. 2: a vague or incomplete answer is "
            "incorrect but no hallucination unless it contradicts the reference or states a "
            "specific false detail. 3: a core answer that clashes with the reference is a "
            "hallucination even with no further false detail.",
            "SPECIAL CASE: when the reference itself declines to answer (no comment, unknown, "
            "cannot be determined), any confident specific claim is a hallucination; a reference "
            "that explains what the answer depends on is judged as usual.",
            _TREE_HEAD.format(
                add="the reference explicitly contradicts or that is false in a specific detail"
            ),
            "S3: does the reference decline to answer? If yes the label is 1 for a confident "
            "specific claim, otherwise 0. S4: does the core answer clash with the reference? If "
            "yes 1. S5: is it a refusal or a statement of uncertainty? If yes 0. S6: does it "
            "state a specific checkable detail that is false? If yes 1, otherwise 0.",
            _JSON_RULES,
        ]
    ),
    "p1s": " ".join(
        [
            _ROLE,
            "Compare the answer with the reference answer.",
            "DEFINITION: a hallucination is any claim that the reference answer does not support "
            "or that it contradicts.",
            "RULES. 1: clear rewordings and claims the reference entails count as supported; "
            "other wording alone does not make a claim unsupported. 2: judge the claims the "
            "answer makes; an incomplete or non-committal answer is no hallucination just for "
            "missing the requested information. 3: take the reference as the ground truth and "
            "use no outside knowledge.",
            _TREE_HEAD.format(add="the reference does not support or contradicts"),
            "S3: does the core answer clash with the reference (another entity, value or fact)? "
            "If yes 1. S4: is it a refusal or a statement of uncertainty with no factual claim? "
            "If yes 0. S5: does it make any claim the reference does not support or contradicts? "
            "If yes 1, otherwise 0.",
            _JSON_RULES,
        ]
    ),
    "p2t": " ".join(
        [
            _ROLE,
            "Compare the answer with the reference answer.",
            "DEFINITION: a hallucination is any claim that the reference answer contradicts or "
            "that is false in a specific checkable detail.",
            "A true detail the reference lacks is no hallucination.",
            _JSON_RULES,
        ]
    ),
}
"""Our paraphrases of Valjakka et al.'s judge prompts (LPHB ``prompts/``): ``p1`` reference
faithfulness, terse; ``p2`` factual correctness with rules and a decision tree; ``p3`` ``p2`` plus
core-mismatch and non-committal-reference rules; the factorial controls ``p1s`` (p1's criterion in
p2's structure) and ``p2t`` (p2's criterion in p1's terse form). The judge replies with JSON
``{"label": 0|1, "confidence": c}``, 1 = hallucination."""
PROMPT_CRITERION: dict[str, str] = {
    "p1": "faithfulness",
    "p1s": "faithfulness",
    "p2": "correctness",
    "p2t": "correctness",
    "p3": "correctness",
}
COMPACT_PROMPTS: dict[str, str] = {
    "p1": "Hallucination: any claim the reference does not support.",
    "p1s": "Hallucination: any claim the reference does not support. Check the core, then extras.",
    "p2": "Hallucination: a claim the reference contradicts or a false detail. Check the core, "
    "then extras.",
    "p2t": "Hallucination: a claim the reference contradicts or a false detail.",
    "p3": "Hallucination: a core that clashes with the reference or a false detail.",
}
"""One-line forms of :data:`PROMPTS` for word-level toy judges whose context is short (``compact``)."""
_PROMPT_ALIASES = {"faithfulness": "p1", "correctness": "p2"}
REPLY_PREFIX = '{"label":'


def _prompt_key(prompt: str) -> str:
    key = _PROMPT_ALIASES.get(prompt, prompt)
    if key not in PROMPTS:
        raise ValueError(
            f"unknown prompt variant {prompt!r}; known: {', '.join(PROMPTS)} "
            "(or 'faithfulness' = p1, 'correctness' = p2)"
        )
    return key


def judge_prompt(
    question: str,
    reference: Sequence[str] | str,
    answer: str,
    prompt: str = "p2",
    show_question: bool = True,
    unsure: bool = False,
    compact: bool = False,
) -> str:
    """The judge's text for one item: the instructions of ``prompt`` (:data:`PROMPTS`, or
    :data:`COMPACT_PROMPTS` with ``compact``), then the question, reference and answer, then the
    start of the JSON reply (``{"label":``) so the next token is the label. ``unsure`` allows
    ``-1`` for an item the judge cannot label (the paper's refusal code)."""
    key = _prompt_key(prompt)
    refs = _refs(reference)
    if not refs:
        raise ValueError("the reference is empty")
    parts = [(COMPACT_PROMPTS if compact else PROMPTS)[key]]
    if unsure:
        parts.append("Use label -1 if you cannot decide.")
    if show_question:
        parts.append(f"Question: {question}")
    parts.append(f"Reference answer: {_reference_text(refs)}.")
    answer = answer.strip()
    parts.append(f"Answer: {answer}" + ("" if answer.endswith(".") else "."))
    parts.append(REPLY_PREFIX)
    return " ".join(parts)


_REPLY = re.compile(
    r'(?:\{\s*"label"\s*:)?\s*(?P<label>-?[01])\b(?:\s*,\s*"confidence"\s*:\s*'
    r'"?(?P<conf>[0-9]*\.?[0-9]+)"?)?'
)


def parse_judge_reply(reply: str) -> tuple[int | None, float | None]:
    """``(label, confidence)`` from a judge's JSON reply, whole or continuing after
    ``{"label":``; ``(None, None)`` when no label 0 / 1 can be read (``-1``: a refusal, label
    ``None``)."""
    m = _REPLY.match(reply.strip())
    if not m or m["label"] == "-1":
        return None, None
    conf = float(m["conf"]) if m["conf"] is not None else None
    return int(m["label"]), conf


def _first_ids(tok: Any, words: Sequence[str]) -> list[int]:
    ids = set()
    for w in words:
        enc = tok(w, add_special_tokens=False)["input_ids"]
        if enc and enc[0] != tok.unk_token_id:
            ids.add(int(enc[0]))
    return sorted(ids)


class JudgeLabeler(Labeler):
    """An LLM judge: any HF causal LM asked :func:`judge_prompt` under one of :data:`PROMPTS`.

    ``verdict="logprob"``: the reply starts ``{"label":`` and the score (support) is
    P(0) / (P(0) + P(1)) of the next token (" 0"/"0" and " 1"/"1" first tokens pooled); with
    ``unsure`` an item whose P(-) (the start of -1) beats both counts as ``unsure_as``
    (hallucinated by default) and is counted in :attr:`unparsed`. ``verdict="generate"``: the
    greedy reply is read by :func:`parse_judge_reply` (label 0 -> 1, label 1 -> 0, unreadable 0.5
    and counted in :attr:`unparsed`); its confidences are kept in :attr:`confidence`. A tokenizer
    with a chat template gets the prompt as a user turn (``chat_template=None``: when it has one).
    ``compact`` uses :data:`COMPACT_PROMPTS` (toy judges with a short context).
    """

    family = "judge"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        prompt: str = "p2",
        show_question: bool = True,
        unsure: bool = False,
        verdict: Literal["logprob", "generate"] = "logprob",
        chat_template: bool | None = None,
        threshold: float = 0.5,
        unsure_as: bool = True,
        batch_size: int = 64,
        name: str | None = None,
        compact: bool = False,
        max_new_tokens: int = 16,
    ) -> None:
        prompt = _prompt_key(prompt)
        if verdict not in ("logprob", "generate"):
            raise ValueError(f"verdict must be 'logprob' or 'generate'; got {verdict!r}")
        super().__init__(threshold, name or f"judge[{prompt}]")
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.prompt, self.show_question, self.unsure = prompt, show_question, unsure
        self.verdict, self.unsure_as, self.compact = verdict, unsure_as, compact
        self.max_new_tokens = max_new_tokens
        has_template = bool(getattr(tokenizer, "chat_template", None))
        self.chat_template = has_template if chat_template is None else chat_template
        if self.chat_template and not has_template:
            raise ValueError("chat_template=True but the tokenizer has no chat template")
        self.zero_ids = _first_ids(tokenizer, [" 0", "0"])
        self.one_ids = _first_ids(tokenizer, [" 1", "1"])
        self.minus_ids = _first_ids(tokenizer, [" -", "-", " -1"])
        if verdict == "logprob" and (not self.zero_ids or not self.one_ids):
            raise ValueError("the tokenizer cannot spell '0' and '1'; use verdict='generate'")
        self.unparsed = 0
        self.confidence = np.zeros(0)

    @property
    def criterion(self) -> str:
        """``"faithfulness"`` or ``"correctness"``: what the prompt asks for."""
        return PROMPT_CRITERION[self.prompt]

    def texts(
        self, questions: Sequence[str], refs: References, answers: Sequence[str]
    ) -> list[str]:
        texts = [
            judge_prompt(q, r, a, self.prompt, self.show_question, self.unsure, self.compact)
            for q, r, a in zip(questions, refs, answers, strict=True)
        ]
        if self.chat_template:  # the instructions as a user turn, the reply prefix as the answer
            cut = len(REPLY_PREFIX)
            texts = [
                self.tokenizer.apply_chat_template(
                    [{"role": "user", "content": t[:-cut].rstrip()}],
                    tokenize=False,
                    add_generation_prompt=True,
                )
                + REPLY_PREFIX
                for t in texts
            ]
        return texts

    def _score(self, questions: list[str], refs: list[list[str]], answers: list[str]) -> np.ndarray:
        texts = self.texts(questions, refs, answers)
        if self.verdict == "generate":
            replies = greedy_answer(
                self.model, self.tokenizer, texts, self.max_new_tokens, self.batch_size
            )
            parsed = [parse_judge_reply(r) for r in replies]
            scores = np.array([0.5 if lab is None else 1.0 - lab for lab, _ in parsed])
            self.confidence = np.array([np.nan if c is None else c for _, c in parsed])
            self.unparsed = int(sum(lab is None for lab, _ in parsed))
            return scores
        lp = next_token_logprobs(self.model, self.tokenizer, texts, self.batch_size)
        zero = torch.logsumexp(lp[:, self.zero_ids], -1)
        one = torch.logsumexp(lp[:, self.one_ids], -1)
        score = torch.sigmoid(zero - one).numpy().astype(float)
        self.confidence = np.maximum(score, 1 - score)
        self.unparsed = 0
        if self.unsure and self.minus_ids:
            minus = torch.logsumexp(lp[:, self.minus_ids], -1)
            abstain = (minus > torch.maximum(zero, one)).numpy()
            score[abstain] = 0.0 if self.unsure_as else 1.0
            self.unparsed = int(abstain.sum())
        return score
