"""factgap's synthetic dataset, its task builder, its prompts and its grading (the paper's own path).

The dataset (``data/synthetic_data/synth_dataset_v4`` in anjasurina/factgap, MIT) is YAML: each
datapoint has a ``topic``, a ``relationship``, sentence templates with ``{topic}`` (the subject) and
``{relationship_head}`` (the answer), question templates with an ``answer`` field, optional
``scenarios`` and ``instantiations`` with ``real_pairs`` and ``imaginary_pairs`` (``head`` = answer,
``tail`` = subject). :func:`load_factgap` builds tasks the way factgap's
``finalize_yaml_files_for_synthetic_data.py`` does (our code, its rule), **one task per datapoint**,
with one seeded ``random.Random`` drawn in factgap's order over the files (sorted by path):

1. the subject: one tail of the fictional pairs (the real ones with ``real_values=True``; the other
   pool when that one is empty);
2. the learn and the update answer: two distinct heads of the same pool;
3. the question: one of those that mention ``{topic}``, do not mention ``{relationship_head}``, and
   whose answer holds ``{relationship_head}``; a datapoint with none (or marked ``skip``) gives no
   task;
4. the control question: the same question about another tail of the ``control_topics`` pool
   (fictional by default, factgap's default; its README's command uses real ones);
5. the control answers: the heads of the ``control_answers`` pool other than learn and update (the
   first two are verified, factgap's ``num_control_answers``).

Training sentences are the sentence templates (``train_data="sentences"``, factgap's default), the
scenarios, or both, filled with the subject and the learn (or update) answer. Ours: the first
letter of a filled sentence or question is capitalised.

Grading (factgap's ``grading.py``): generation is right when the first ``<answer>`` tag (quotes
stripped, case ignored) equals the answer, or else when the answer occurs anywhere in the raw output
(the fallback; ``strict=True`` turns it off); on a control question it is right when the learned
answer is *not* given. Verification reads the first ``<response>`` tag as True/False; a reply of
"Unsure" is right on a control value and wrong on the true answer; anything else is not a valid
reply and is left out of the per-prompt accuracy (factgap's support). :func:`factgap_items` turns
tasks into :class:`~gv_gap.items.GVItem` s.

The prompts :data:`GENERATION_PROMPT` and :data:`VERIFICATION_PROMPT` are ported from factgap's
``generative_response.j2`` and ``double_critic.j2`` (reasoning variant; MIT licence, copyright the
factgap authors); :func:`evaluate_gv_chat` runs them through the chat template at temperature 0.3.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gv_gap.items import POLARITIES, GVItem
from gv_gap.measure import GVResult, _check_vocabulary
from paper_common.lm import sample

__all__ = [
    "GENERATION_PROMPT",
    "VERIFICATION_PROMPT",
    "FactgapTask",
    "chat_prompt",
    "evaluate_gv_chat",
    "factgap_items",
    "grade_generation",
    "grade_verification",
    "is_unsure",
    "load_factgap",
    "parse_tag",
]

log = logging.getLogger(__name__)

_REQUIRED = ("instantiations", "sentences", "questions")
_POOLS = ("imaginary", "real")
_TRAIN_DATA = ("sentences", "scenarios", "all")


@dataclass(frozen=True)
class FactgapTask:
    """One factgap task (one datapoint): a fictional fact to learn, then to update, and to ask about.

    ``answer_template`` is the chosen question's answer (``"{relationship_head}"`` in most data);
    :meth:`answer` fills it. ``control_question`` is empty when the pool has no other subject.
    """

    uid: str
    topic: str
    relationship: str
    subject: str
    learn_answer: str
    update_answer: str
    train_sentences: tuple[str, ...]
    update_sentences: tuple[str, ...]
    question: str
    answer_template: str
    control_question: str
    control_answers: tuple[str, ...]

    def answer(self, phase: str = "learn") -> str:
        """The expected answer in ``phase`` (``"learn"`` or ``"update"``)."""
        if phase not in ("learn", "update"):
            raise ValueError(f"phase must be 'learn' or 'update'; got {phase!r}")
        value = self.update_answer if phase == "update" else self.learn_answer
        return self.answer_template.replace("{relationship_head}", value).strip()


def _fill(template: str, subject: str, answer: str) -> str:
    text = template.replace("{topic}", subject).replace("{relationship_head}", answer)
    return text[:1].upper() + text[1:]


def _slug(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", value).strip("_").lower()


def _datapoints(path: Path) -> list[dict[str, Any]]:
    import yaml

    files = sorted(path.rglob("*.yaml")) + sorted(path.rglob("*.yml")) if path.is_dir() else [path]
    if not files:
        raise ValueError(f"no .yaml files under {path}")
    out = []
    for f in files:
        data = yaml.safe_load(f.read_text())
        rows = data if isinstance(data, list) else [data]
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise ValueError(f"{f}: datapoint {i} is not a mapping")
            if row.get("skip", False):
                continue
            missing = [k for k in _REQUIRED if k not in row]
            if missing:
                raise ValueError(f"{f}: datapoint {i} lacks {', '.join(missing)}")
            stem = f.stem if len(rows) == 1 else f"{f.stem}-{i}"
            out.append({**row, "_file": str(f), "_stem": stem})
    return out


def _pool(inst: dict[str, Any], real: bool, fallback: bool) -> list[dict[str, Any]]:
    pairs = inst.get("real_pairs" if real else "imaginary_pairs") or []
    if not pairs and fallback:
        pairs = inst.get("imaginary_pairs" if real else "real_pairs") or []
    return pairs


def _check_choice(name: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {tuple(allowed)}; got {value!r}")


def load_factgap(
    path: str | Path,
    seed: int = 0,
    *,
    real_values: bool = False,
    control_topics: str = "imaginary",
    control_answers: str = "imaginary",
    train_data: str = "sentences",
) -> list[FactgapTask]:
    """Tasks from a factgap YAML file or folder, one per datapoint (see the module docstring).

    ``seed`` seeds the one ``random.Random`` drawn over all datapoints in path order (factgap's
    ``--seed``). ``real_values``: subject and answers from the real pairs (factgap's
    ``--real_relationship_head``). ``control_topics`` / ``control_answers``: ``"imaginary"`` or
    ``"real"`` pools for the control question and the control answers. ``train_data``:
    ``"sentences"``, ``"scenarios"`` or ``"all"``. Datapoints without a question that passes the
    filter are skipped (logged). Raises ``ValueError`` naming the file and the missing field, or
    when no datapoint gives a task.
    """
    _check_choice("control_topics", control_topics, _POOLS)
    _check_choice("control_answers", control_answers, _POOLS)
    _check_choice("train_data", train_data, _TRAIN_DATA)
    path = Path(path)
    if not path.exists():
        raise ValueError(f"no factgap data at {path}")
    rng = random.Random(seed)
    tasks, skipped = [], []
    for dp in _datapoints(path):
        where = f"{dp['_file']} ({dp.get('uid', dp.get('topic', ''))})"
        inst = dp["instantiations"] or {}
        pairs = _pool(inst, real_values, fallback=True)
        tails = [p["tail"] for p in pairs if p.get("tail")]
        heads = list(dict.fromkeys(p["head"] for p in pairs if p.get("head")))
        if not tails or not heads:
            raise ValueError(f"{where}: needs instantiation pairs with a head and a tail")
        subject = rng.choice(tails)
        learn, update = rng.sample(heads, 2) if len(heads) >= 2 else (heads[0], heads[0])
        questions = [
            q
            for q in dp["questions"]
            if "{topic}" in q.get("question", "")
            and "{relationship_head}" not in q.get("question", "")
            and "{relationship_head}" in str(q.get("answer", ""))
        ]
        if not questions:
            skipped.append(where)
            continue
        target = rng.choice(questions)
        others = [
            p["tail"]
            for p in _pool(inst, control_topics == "real", fallback=False)
            if p.get("tail") and p["tail"] != subject
        ]
        control_q = _fill(target["question"], rng.choice(others), "") if others else ""
        sentences = [s.get("sentence", "") for s in dp["sentences"] or []]
        scenarios = [s.get("scenario", "") for s in dp.get("scenarios") or []]
        texts = {"sentences": sentences, "scenarios": scenarios, "all": sentences + scenarios}[
            train_data
        ]
        if not texts:
            raise ValueError(f"{where}: no training {train_data}")
        pool = [p["head"] for p in _pool(inst, control_answers == "real", False) if p.get("head")]
        uid = "_".join(
            c for c in (_slug(dp.get("topic_category", "")), _slug(subject), dp["_stem"]) if c
        )
        tasks.append(
            FactgapTask(
                uid=uid,
                topic=dp.get("topic", ""),
                relationship=dp.get("relationship", ""),
                subject=subject,
                learn_answer=learn,
                update_answer=update,
                train_sentences=tuple(_fill(s, subject, learn) for s in texts),
                update_sentences=tuple(_fill(s, subject, update) for s in texts),
                question=_fill(target["question"], subject, ""),
                answer_template=str(target["answer"]),
                control_question=control_q,
                control_answers=tuple(h for h in pool if h not in (learn, update)),
            )
        )
    if skipped:
        log.warning("skipped %d datapoint(s) without a usable question: %s", len(skipped), skipped)
    if not tasks:
        raise ValueError(
            f"{path}: no task: no datapoint has a question about {{topic}} whose answer is "
            "{relationship_head}"
        )
    return tasks


def factgap_items(
    tasks: Sequence[FactgapTask], phase: str = "learn", n_controls: int = 2, qa_format: bool = True
) -> list[GVItem]:
    """Items for ``tasks``: ``phase="learn"`` asks about the learn answer, ``"update"`` about the
    update answer with the learn answer as the old value; the first ``n_controls`` control answers
    are verified (factgap's ``num_control_answers``: 2). ``qa_format`` wraps questions as
    ``"Q: ... A:"`` (log-prob measurement); False keeps the bare question (chat prompts)."""
    if phase not in ("learn", "update"):
        raise ValueError(f"phase must be 'learn' or 'update'; got {phase!r}")
    items = []
    for t in tasks:
        controls = tuple(t.control_answers[:n_controls])
        if len(controls) < n_controls:
            raise ValueError(f"task {t.uid} has {len(controls)} control answers; need {n_controls}")

        def wrap(q: str) -> str:
            return f"Q: {q} A:" if qa_format and q else q

        items.append(
            GVItem(
                key=t.uid,
                question=wrap(t.question),
                answer=t.answer(phase),
                controls=controls,
                old_answer=t.answer("learn") if phase == "update" else None,
                control_question=wrap(t.control_question),
            )
        )
    return items


# ---------------------------------------------------------------- the paper's prompts (factgap, MIT)
GENERATION_PROMPT = """Carefully study the following problem and provide the correct answer.

Problem:
{problem}

Start by reasoning about the Problem before providing your final response.
Respond with your reasoning and answer to the Problem enclosed within <reasoning>...</reasoning> and <answer>...</answer> tags.
Do **not** include any text outside the <reasoning>...</reasoning> and <answer>...</answer> tags.

Example format:

<reasoning>
"..."  # Your reasoning about the Problem.
</reasoning>

<answer>
"..."  # Only your final answer without preamble or explanation.
</answer>"""

VERIFICATION_PROMPT = """Carefully study the following Problem and Answer pair:

Problem:
{problem}

Answer:
{answer}

Task:
{task}

Start by reasoning about the Problem before providing your final response.
Respond with your reasoning and response enclosed within <reasoning>...</reasoning> and <response>...</response> tags.
Do **not** include any text outside the <reasoning>...</reasoning> and <response>...</response> tags.

Example format:

<reasoning>
"..."  # Your reasoning about the Problem and Answer.
</reasoning>
<response>
"..."  # True or False.
</response>

Remember: {reminder}"""

_TASKS = {
    "correct": (
        "For the Problem above, is the Answer correct?\nIf the Answer is **correct**, respond with "
        '"True", if it is **incorrect**, respond with "False".',
        'If the Answer is **correct**, respond with "True"; if **incorrect**, respond with "False".',
    ),
    "incorrect": (
        "For the Problem above, is the Answer incorrect?\nIf the Answer is **incorrect**, respond "
        'with "True", if it is **correct**, respond with "False".',
        'If the Answer is **incorrect**, respond with "True"; if **correct**, respond with "False".',
    ),
}


def chat_prompt(
    tok: Any, problem: str, answer: str | None = None, polarity: str = "correct"
) -> str:
    """The generation prompt (``answer=None``) or the double-critic prompt for ``answer`` in the
    given polarity, rendered through the tokenizer's chat template as one user turn."""
    if answer is None:
        text = GENERATION_PROMPT.format(problem=problem)
    else:
        if polarity not in POLARITIES:
            raise ValueError(f"polarity must be one of {POLARITIES}; got {polarity!r}")
        task, reminder = _TASKS[polarity]
        text = VERIFICATION_PROMPT.format(
            problem=problem, answer=answer, task=task, reminder=reminder
        )
    if getattr(tok, "chat_template", None) is None:
        raise ValueError(
            "the tokenizer has no chat template; the factgap path is for instruct models"
        )
    return tok.apply_chat_template(
        [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
    )


def parse_tag(text: str, tag: str) -> str | None:
    """The content of the first ``<tag>...</tag>`` in ``text``, stripped, surrounding quotes removed
    (factgap's parser), or None."""
    found = re.search(rf"<{tag}>(.*?)</{tag}>", text, flags=re.DOTALL)
    if found is None:
        return None
    return _unquote(found.group(1).strip())


def _unquote(text: str) -> str:
    """``text`` without one pair of surrounding double or single quotes."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def is_unsure(output: str | None) -> bool:
    """factgap's "Unsure" reply: the text, lowercased, without parentheses, commas and full stops."""
    if not isinstance(output, str):
        return False
    return re.sub(r"[(),.]", "", output.strip().lower()) == "unsure"


def grade_generation(
    parsed: str | None, raw: str, answer: str, target: bool = True, strict: bool = False
) -> bool:
    """factgap's generation grading. ``target``: the question is about the fact (right when the
    answer is given) or a control question (right when it is not). The parsed answer is compared
    whole (case and surrounding quotes ignored); failing that, unless ``strict``, whether the answer
    occurs in the raw output decides. "Unsure" is right only on a control question."""
    if is_unsure(parsed):
        return not target
    want = answer.lower().strip()
    if isinstance(parsed, str) and len(parsed) > 1:
        got = _unquote(parsed.lower().strip())
        if (got == want) == target:
            return True
    if strict:
        return False
    return (want in raw.lower().strip()) == target


def grade_verification(response: str | None, target: bool, asks_correct: bool) -> bool | None:
    """factgap's double-critic grading of one reply: ``target`` (the value is the true answer, not
    a control), ``asks_correct`` (the "is it correct?" polarity, else "is it incorrect?"). True /
    False replies are right when they match; "Unsure" is right on a control value, wrong on the
    answer; anything else is None: not a valid reply, left out of the accuracy."""
    if is_unsure(response):
        return not target
    word = _unquote((response or "").strip().lower())
    if word not in ("true", "false"):
        return None
    return (word == "true") == (target == asks_correct)


def evaluate_gv_chat(
    model: Any,
    tok: Any,
    items: Sequence[GVItem],
    temperature: float = 0.3,
    max_new_tokens: int = 512,
    seed: int = 0,
    batch_size: int = 8,
    strict: bool = False,
) -> GVResult:
    """The paper's measurement on an instruct model: reasoning then a tagged answer, one sample per
    prompt at ``temperature``, graded as factgap grades (:func:`grade_generation`,
    :func:`grade_verification`; ``strict`` turns off the raw-output fallback).

    Per-prompt correctness goes to ``prompt_ok`` (NaN: not a valid reply, left out of
    ``ver_target_acc`` / ``ver_control_acc``); the six-way conjunction ``ver_ok`` reads the replies
    as decisions in ``margin`` (+1 True, −1 False), where "Unsure" accepts nothing and an invalid
    reply counts against the fact (the answer not accepted, a control accepted). The control
    question's generation is graded too (``leak``: the learned answer given there). Items'
    questions are used bare (build them with ``factgap_items(..., qa_format=False)``).
    """
    items = list(items)
    if not items:
        raise ValueError("evaluate_gv_chat needs at least one item")
    n_val = len(items[0].values)
    if any(len(it.values) != n_val for it in items):
        raise ValueError("every item needs the same number of controls (and old value or none)")
    n_ctrl = len(items[0].controls)
    gen_prompts = [chat_prompt(tok, it.question) for it in items]
    ver_prompts = [
        chat_prompt(tok, it.question, v, pol)
        for it in items
        for v in it.values
        for pol in POLARITIES
    ]
    ctrl_idx = [i for i, it in enumerate(items) if it.control_question]
    ctrl_prompts = [chat_prompt(tok, items[i].control_question) for i in ctrl_idx]

    def texts(it: GVItem) -> list[str]:
        out = [chat_prompt(tok, it.question)]
        out += [chat_prompt(tok, it.question, v, p) for v in it.values for p in POLARITIES]
        return out + ([chat_prompt(tok, it.control_question)] if it.control_question else [])

    _check_vocabulary(tok, items, texts)
    raw = [
        row[0]
        for row in sample(
            model, tok, gen_prompts, 1, temperature, max_new_tokens, seed, batch_size
        ).texts
    ]
    answers = [parse_tag(r, "answer") for r in raw]
    gen_ok = np.array(
        [
            grade_generation(a, r, it.answer, strict=strict)
            for a, r, it in zip(answers, raw, items, strict=True)
        ]
    )
    ver_raw = [
        row[0]
        for row in sample(
            model, tok, ver_prompts, 1, temperature, max_new_tokens, seed + 1, batch_size
        ).texts
    ]
    replies = [parse_tag(r, "response") for r in ver_raw]
    shape = (len(items), n_val, len(POLARITIES))
    is_target = np.ones(shape, dtype=bool)
    is_target[:, 1 : 1 + n_ctrl] = False
    asks = np.zeros(shape, dtype=bool)
    asks[..., 0] = True
    graded = [
        grade_verification(r, bool(t), bool(a))
        for r, t, a in zip(replies, is_target.ravel(), asks.ravel(), strict=True)
    ]
    prompt_ok = np.array([np.nan if g is None else float(g) for g in graded]).reshape(shape)
    word = np.array([_unquote((r or "").strip().lower()) for r in replies]).reshape(shape)
    # decisions for the conjunction: +1 True, -1 False; "Unsure" accepts nothing; an invalid
    # reply accepts a control and not the answer (or old value)
    reject = np.where(asks, -1.0, 1.0)
    margin = np.where(word == "true", 1.0, np.where(word == "false", -1.0, reject))
    invalid = np.isnan(prompt_ok)  # "Unsure" is graded, so NaN is neither True, False nor it
    margin = np.where(invalid & ~is_target, -reject, margin)
    result = GVResult(
        keys=[it.key for it in items],
        n_controls=n_ctrl,
        generated=[a or "" for a in answers],
        gen_ok=gen_ok,
        margin=margin,
        prompt_ok=prompt_ok[:, : 1 + n_ctrl],
    )
    result.extra["raw_generation"] = raw
    result.extra["raw_verification"] = ver_raw
    if items[0].old_answer is not None:
        result.gen_old = np.array(
            [
                grade_generation(a, r, it.old_answer or "", strict=strict)
                for a, r, it in zip(answers, raw, items, strict=True)
            ]
        )
    if ctrl_idx:
        craw = [
            row[0]
            for row in sample(
                model, tok, ctrl_prompts, 1, temperature, max_new_tokens, seed + 2, batch_size
            ).texts
        ]
        result.leak = np.array(
            [
                not grade_generation(
                    parse_tag(r, "answer"), r, items[i].answer, target=False, strict=strict
                )
                for r, i in zip(craw, ctrl_idx, strict=True)
            ]
        )
    return result
