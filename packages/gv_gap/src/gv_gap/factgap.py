"""factgap's synthetic dataset and its prompts for instruct models (the paper's own measurement path).

The dataset (``data/synthetic_data/synth_dataset_v4`` in anjasurina/factgap, MIT) is YAML: each
datapoint has a ``topic``, a ``relationship``, sentence templates with ``{topic}`` (the subject) and
``{relationship_head}`` (the answer), question templates with an ``answer`` field, and
``instantiations`` with ``real_pairs`` and ``imaginary_pairs`` (``head`` = answer, ``tail`` =
subject). :func:`load_factgap` reads a file (a list of datapoints or one), or every ``*.yaml`` under
a folder, into :class:`FactgapTask` s: one per imaginary pair, with

* the fictional subject and its learn answer (the pair's head) and update answer (the next
  imaginary pair's head);
* training sentences (every sentence template, optionally the longer ``scenarios``);
* the held-out question (the last question template) and the others;
* a control question about a real subject (a real pair's tail), whose answer must not become the
  fictional one, and control answers (the other imaginary heads).

This task construction is our reading of the data layout; factgap builds its tasks in code we could
not read. :func:`factgap_items` turns tasks into :class:`~gv_gap.items.GVItem` s.

The prompts :data:`GENERATION_PROMPT` and :data:`VERIFICATION_PROMPT` are ported from factgap's
``generative_response.j2`` and ``double_critic.j2`` (reasoning variant; MIT licence, copyright the
factgap authors); :func:`evaluate_gv_chat` runs them through the chat template, samples at
temperature 0.3, reads the ``<answer>`` / ``<response>`` tags and grades by substring.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gv_gap.items import POLARITIES, GVItem
from gv_gap.measure import GVResult
from paper_common.facts import normalize_answer
from paper_common.lm import sample

__all__ = [
    "GENERATION_PROMPT",
    "VERIFICATION_PROMPT",
    "FactgapTask",
    "chat_prompt",
    "evaluate_gv_chat",
    "factgap_items",
    "grade_substring",
    "load_factgap",
    "parse_tag",
]

_REQUIRED = ("topic", "relationship", "instantiations", "sentences", "questions")


@dataclass(frozen=True)
class FactgapTask:
    """One fictional fact of factgap's dataset, ready to train on and to ask about."""

    uid: str
    topic: str
    relationship: str
    subject: str
    learn_answer: str
    update_answer: str
    train_sentences: tuple[str, ...]
    update_sentences: tuple[str, ...]
    question: str
    other_questions: tuple[str, ...]
    control_question: str
    control_answer: str
    control_answers: tuple[str, ...]


def _fill(template: str, subject: str, answer: str) -> str:
    text = template.replace("{topic}", subject).replace("{relationship_head}", answer)
    return text[:1].upper() + text[1:]


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
            missing = [k for k in _REQUIRED if k not in row]
            if missing:
                raise ValueError(f"{f}: datapoint {i} lacks {', '.join(missing)}")
            out.append({**row, "_file": str(f)})
    return out


def load_factgap(path: str | Path, scenarios: bool = False) -> list[FactgapTask]:
    """Tasks from a factgap YAML file or folder (see the module docstring for the mapping).

    ``scenarios=True`` adds the long scenario texts (encyclopedia, abstract, interview, ...) to the
    training sentences. Raises ``ValueError`` naming the file and the missing field.
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"no factgap data at {path}")
    tasks = []
    for dp in _datapoints(path):
        where = f"{dp['_file']} ({dp.get('uid', dp['topic'])})"
        pairs = dp["instantiations"].get("imaginary_pairs") or []
        real = dp["instantiations"].get("real_pairs") or []
        if len(pairs) < 2 or not real:
            raise ValueError(f"{where}: needs >= 2 imaginary_pairs and >= 1 real_pair")
        sentences = [s["sentence"] for s in dp["sentences"]]
        questions = [q["question"] for q in dp["questions"]]
        if not sentences or not questions:
            raise ValueError(f"{where}: needs sentences and questions")
        if scenarios:
            sentences += [s["scenario"] for s in dp.get("scenarios") or []]
        heads = [p["head"] for p in pairs]
        for i, pair in enumerate(pairs):
            subject, learn, update = pair["tail"], pair["head"], heads[(i + 1) % len(heads)]
            ctrl = real[i % len(real)]
            tasks.append(
                FactgapTask(
                    uid=f"{dp.get('uid', dp['topic'])}#{i}",
                    topic=dp["topic"],
                    relationship=dp["relationship"],
                    subject=subject,
                    learn_answer=learn,
                    update_answer=update,
                    train_sentences=tuple(_fill(s, subject, learn) for s in sentences),
                    update_sentences=tuple(_fill(s, subject, update) for s in sentences),
                    question=_fill(questions[-1], subject, ""),
                    other_questions=tuple(_fill(q, subject, "") for q in questions[:-1]),
                    control_question=_fill(questions[-1], ctrl["tail"], ""),
                    control_answer=ctrl["head"],
                    control_answers=tuple(h for h in heads if h not in (learn, update)),
                )
            )
    return tasks


def factgap_items(
    tasks: Sequence[FactgapTask], phase: str = "learn", n_controls: int = 2, qa_format: bool = True
) -> list[GVItem]:
    """Items for ``tasks``: ``phase="learn"`` asks about the learn answer, ``"update"`` about the
    update answer with the learn answer as the old value. ``qa_format`` wraps questions as
    ``"Q: ... A:"`` (log-prob measurement); False keeps the bare question (chat prompts)."""
    if phase not in ("learn", "update"):
        raise ValueError(f"phase must be 'learn' or 'update'; got {phase!r}")
    items = []
    for t in tasks:
        controls = tuple(t.control_answers[:n_controls])
        if len(controls) < n_controls:
            raise ValueError(f"task {t.uid} has {len(controls)} control answers; need {n_controls}")

        def wrap(q: str) -> str:
            return f"Q: {q} A:" if qa_format else q

        items.append(
            GVItem(
                key=t.uid,
                question=wrap(t.question),
                answer=t.update_answer if phase == "update" else t.learn_answer,
                controls=controls,
                old_answer=t.learn_answer if phase == "update" else None,
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
    """The content of the last ``<tag>...</tag>`` in ``text`` (quotes and spaces stripped), or None."""
    found = re.findall(rf"<{tag}>(.*?)</{tag}>", text, flags=re.DOTALL)
    return found[-1].strip().strip('"').strip() if found else None


def grade_substring(response: str | None, answer: str) -> bool:
    """factgap's grading: the normalised answer occurs in the normalised response."""
    if not response:
        return False
    target = normalize_answer(answer)
    return bool(target) and target in normalize_answer(response)


def _decision(response: str | None) -> int:
    """+1 True, -1 False, 0 missing or anything else."""
    word = normalize_answer(response or "")
    return {"true": 1, "false": -1}.get(word, 0)


def evaluate_gv_chat(
    model: Any,
    tok: Any,
    items: Sequence[GVItem],
    temperature: float = 0.3,
    max_new_tokens: int = 512,
    seed: int = 0,
    batch_size: int = 8,
) -> GVResult:
    """The paper's measurement on an instruct model: reasoning then a tagged answer, one sample per
    prompt at ``temperature``. Generation ✓ when the ``<answer>`` contains the answer (substring);
    verification decisions from ``<response>`` True/False, stored in ``margin`` as +1 / −1; a
    missing or other response counts against the fact (answer not accepted, control accepted). Items'
    questions are used bare (build them with ``factgap_items(..., qa_format=False)``).
    """
    items = list(items)
    if not items:
        raise ValueError("evaluate_gv_chat needs at least one item")
    gen_prompts = [chat_prompt(tok, it.question) for it in items]
    out = sample(model, tok, gen_prompts, 1, temperature, max_new_tokens, seed, batch_size)
    answers = [parse_tag(row[0], "answer") for row in out.texts]
    gen_ok = np.array([grade_substring(a, it.answer) for a, it in zip(answers, items, strict=True)])
    ver_prompts = [
        chat_prompt(tok, it.question, v, pol)
        for it in items
        for v in it.values
        for pol in POLARITIES
    ]
    ver = sample(model, tok, ver_prompts, 1, temperature, max_new_tokens, seed + 1, batch_size)
    decisions = np.array(
        [_decision(parse_tag(row[0], "response")) for row in ver.texts], dtype=float
    )
    n_val = len(items[0].values)
    if any(len(it.values) != n_val for it in items):
        raise ValueError("every item needs the same number of controls (and old value or none)")
    # GVResult reads margin > 0 as "True". A missing decision counts against the fact: the
    # answer (and old value) is not accepted, a control is taken as accepted.
    margin = decisions.reshape(len(items), n_val, len(POLARITIES))
    controls = margin[:, 1 : 1 + len(items[0].controls)]
    controls[..., 0][controls[..., 0] == 0] = 1.0
    controls[..., 1][controls[..., 1] == 0] = -1.0
    result = GVResult(
        keys=[it.key for it in items],
        n_controls=len(items[0].controls),
        generated=[a or "" for a in answers],
        gen_ok=gen_ok,
        margin=margin,
    )
    result.extra["raw_generation"] = [row[0] for row in out.texts]
    result.extra["raw_verification"] = [row[0] for row in ver.texts]
    if items[0].old_answer is not None:
        result.gen_old = np.array(
            [grade_substring(a, it.old_answer or "") for a, it in zip(answers, items, strict=True)]
        )
    return result
