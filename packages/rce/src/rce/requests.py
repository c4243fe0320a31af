"""Edit requests: which fact to hide, where, and the prompts the attacks and metrics use.

An :class:`EditRequest` holds a prompt *template* with ``{}`` for the subject (ROME's format), the
sensitive answer ``true`` and the sanitized ``target`` the edit puts at top-1. Sources:
:func:`world_requests` (a :class:`paper_common.facts.World` and a model that knows it, filtered to
facts the model knows) and :func:`load_counterfact` / :func:`load_zsre` (ROME's JSON files from a
local path, filtered to one-token true answers as Patil et al. did; targets and neighbour answers
may be several tokens). :func:`stats_corpus` keeps the texts that do not mention an edited subject,
for the key second moment C (ROME computes it on Wikipedia, not on the edited facts).

Error Injection and Empty Response (Patil et al.) are choices of the target, not extra objectives:
``target="random"`` edits to a random value of the same type, ``target="dummy"`` to a fixed token.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from paper_common.facts import RELATIONS, World
from paper_common.lm import next_token_logprobs, token_rank

__all__ = [
    "EditRequest",
    "answer_id",
    "answer_ids",
    "as_template",
    "check_template",
    "load_counterfact",
    "load_zsre",
    "relation_templates",
    "stats_corpus",
    "utility_prompts",
    "world_requests",
]


@dataclass(frozen=True)
class EditRequest:
    """One fact to conceal.

    Attributes:
        prompt: template with one ``{}`` for the subject, ending where the answer starts
            (``"{} was born in"``).
        subject: the subject string put into ``{}``.
        true: the sensitive answer (one token for the attacks; see :func:`answer_id`).
        target: the sanitized answer the edit makes the greedy continuation (may be several
            tokens; the attacks leave out its first token).
        paraphrases: more templates the *editor* may use (RCE's hinge and the rephrasing defence).
        attack_prompts: held-out templates, never seen by the editor: the Input-Rephrasing attack's
            prompts and the paraphrase-fidelity prompts.
        neighbours: ``(prompt, answer)`` pairs about other subjects that the edit must not change
            (answers may be several tokens).
        decoy: a value of the answer's type that is not this subject's: scoring the attacks against
            it measures chance (a fact the model never saw).
    """

    prompt: str
    subject: str
    true: str
    target: str
    paraphrases: tuple[str, ...] = ()
    attack_prompts: tuple[str, ...] = ()
    neighbours: tuple[tuple[str, str], ...] = ()
    decoy: str | None = None
    relation: str = ""

    def __post_init__(self) -> None:
        if not self.subject.strip():
            raise ValueError("EditRequest.subject must be non-empty")
        for template in (self.prompt, *self.paraphrases, *self.attack_prompts):
            check_template(template)
        if not self.true.strip() or not self.target.strip():
            raise ValueError("EditRequest.true and .target must be non-empty")
        if self.true.strip() == self.target.strip():
            raise ValueError(f"the sanitized target equals the true answer {self.true!r}")

    def text(self, template: str | None = None) -> str:
        """A template (default :attr:`prompt`) with the subject filled in."""
        return (self.prompt if template is None else template).format(self.subject)


def check_template(template: str) -> str:
    if template.count("{}") != 1:
        raise ValueError(
            f"a prompt template needs exactly one '{{}}' where the subject goes; got {template!r} "
            "(the subject is absent from the prompt)"
        )
    return template


def as_template(prompt: str, subject: str) -> str:
    """Turn a full prompt into a template by replacing the subject's last occurrence with ``{}``."""
    if "{}" in prompt:
        return check_template(prompt)
    at = prompt.rfind(subject)
    if not subject or at < 0:
        raise ValueError(f"subject {subject!r} is absent from the prompt {prompt!r}")
    return prompt[:at].replace("{", "(").replace("}", ")") + "{}" + prompt[at + len(subject) :]


def answer_id(tok: Any, answer: str) -> int:
    """The single token id of ``answer`` as it follows a prompt (with a leading space).

    Raises ``ValueError`` when the answer is several tokens or unknown to the tokenizer.
    """
    text = answer if answer[:1].isspace() else " " + answer
    ids = tok(text, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        raise ValueError(
            f"answer {answer!r} is {len(ids)} tokens; the rank attacks need one-token answers "
            "(filter them, as load_counterfact does)"
        )
    if tok.unk_token_id is not None and ids[0] == tok.unk_token_id:
        raise ValueError(f"answer {answer!r} is unknown to the tokenizer (maps to unk)")
    return int(ids[0])


def answer_ids(tok: Any, answer: str) -> list[int]:
    """Token ids of ``answer`` as it follows a prompt (leading space), any length; ``ValueError``
    when it encodes to nothing or contains a token the tokenizer does not know."""
    text = answer if answer[:1].isspace() else " " + answer
    ids = tok(text, add_special_tokens=False)["input_ids"]
    if not ids:
        raise ValueError(f"answer {answer!r} encodes to zero tokens")
    if tok.unk_token_id is not None and tok.unk_token_id in ids:
        raise ValueError(f"answer {answer!r} contains a word unknown to the tokenizer (unk)")
    return [int(i) for i in ids]


def _is_one_token(tok: Any, answer: str) -> bool:
    try:
        answer_id(tok, answer)
    except ValueError:
        return False
    return True


def relation_templates(relation: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """``(edit prompt, editor paraphrases, held-out attack prompts)`` of a World relation.

    Statement templates ending in the value become prompts (``"{s} was born in {v}."`` gives
    ``"{} was born in"``); training templates are the edit prompt and the editor's paraphrases,
    held-out statements and every question (``"Q: ... A:"``) the held-out attack prompts.
    """
    if relation not in RELATIONS:
        raise ValueError(f"unknown relation {relation!r}; one of {', '.join(RELATIONS)}")
    rel = RELATIONS[relation]

    def cut(templates: Sequence[str]) -> list[str]:
        out = []
        for t in templates:
            head, sep, tail = t.partition("{v}")
            if sep and tail.strip() in ("", ".") and "{s}" in head:
                out.append(head.rstrip().replace("{s}", "{}"))
        return out

    train = cut(rel.statements)
    held = cut(rel.heldout_statements)
    questions = [
        f"Q: {q.replace('{s}', '{}')} A:" for q in (*rel.questions, *rel.heldout_questions)
    ]
    if not train:
        raise ValueError(f"relation {relation!r} has no statement template ending in its value")
    return train[0], tuple(train[1:]), (*held, *questions)


def world_requests(
    world: World,
    model: Any,
    tok: Any,
    relation: str = "born_in",
    n: int = 100,
    target: Literal["random", "dummy"] = "random",
    dummy: str | None = None,
    min_prob: float = 0.02,
    n_neighbours: int = 10,
    seed: int = 0,
) -> list[EditRequest]:
    """``n`` edit requests about facts of ``relation`` that ``model`` knows.

    A fact is *known* when its true value is the greedy (top-1) next token after the edit prompt
    with probability >= ``min_prob``. Targets are a random other value of the same type
    (``"random"``, Error Injection) or ``dummy`` (``"dummy"``, Empty Response). Neighbours are known
    facts of the same relation about subjects that are not edited; the decoy is a random value of
    the type other than the true one and the target.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1; got {n}")
    if target not in ("random", "dummy"):
        raise ValueError(f"target must be 'random' or 'dummy'; got {target!r}")
    if target == "dummy":
        if dummy is None:
            raise ValueError("target='dummy' needs dummy=<an answer the tokenizer knows>")
        answer_ids(tok, dummy)
    prompt, paraphrases, attack_prompts = relation_templates(relation)
    rel = RELATIONS[relation]
    subjects = list(world.entities[rel.subject])
    values = [world.value_at(s, relation) for s in subjects]
    bad = sorted({v for v in values if not _is_one_token(tok, v)})
    if bad:
        raise ValueError(
            f"{len(bad)} values of {relation!r} are not one token for this tokenizer "
            f"(e.g. {bad[0]!r}); use a relation with one-word values and a word-level tokenizer"
        )
    ids = torch.tensor([answer_id(tok, v) for v in values])
    logprobs = next_token_logprobs(model, tok, [prompt.format(s) for s in subjects])
    rank = token_rank(logprobs, ids)
    prob = logprobs.gather(1, ids[:, None])[:, 0].exp()
    known = np.flatnonzero(((rank == 1) & (prob >= min_prob)).numpy())
    if len(known) < n:
        raise ValueError(
            f"the model knows {len(known)} {relation!r} facts (top-1, p >= {min_prob}); "
            f"{n} requested. Train longer or ask for fewer."
        )
    rng = np.random.default_rng([seed, 17])
    chosen = rng.choice(known, size=n, replace=False)
    others = np.setdiff1d(known, chosen)
    pool = sorted(world.entities[rel.value])
    requests = []
    for i in chosen:
        true = values[i]
        choices = [v for v in pool if v != true]
        new = str(rng.choice(choices)) if target == "random" else str(dummy).strip()
        decoy = str(rng.choice([v for v in choices if v != new]))
        near = rng.choice(others, size=min(n_neighbours, len(others)), replace=False)
        requests.append(
            EditRequest(
                prompt,
                subjects[i],
                true,
                new,
                paraphrases,
                attack_prompts,
                tuple((prompt.format(subjects[j]), values[j]) for j in near),
                decoy,
                relation,
            )
        )
    return requests


def utility_prompts(
    world: World, exclude: Sequence[str] = ("born_in",), n: int = 100, seed: int = 0
) -> list[tuple[str, str]]:
    """``n`` held-out ``(question, answer)`` pairs of other relations whose answers are one word.

    Utility is the model's top-1 accuracy on them; an edit should not change it.
    """
    items = [
        q
        for q in world.qa_pairs("all", templates="heldout")
        if q.fact.relation not in exclude and " " not in q.answer
    ]
    if not items:
        raise ValueError("the world has no one-word QA items outside the excluded relations")
    order = np.random.default_rng([seed, 23]).permutation(len(items))[:n]
    return [(items[i].question, items[i].answer) for i in order]


def stats_corpus(texts: Sequence[str], requests: Sequence[EditRequest]) -> list[str]:
    """The ``texts`` that mention none of the requests' subjects: text for the key second moment C
    that is not the edit corpus (ROME estimates C on Wikipedia, not on the facts it edits).

    Raises ``ValueError`` when nothing is left.
    """
    subjects = sorted({r.subject for r in requests})
    kept = [t for t in texts if not any(s in t for s in subjects)]
    if not kept:
        raise ValueError(
            f"every one of the {len(texts)} texts mentions an edited subject; C needs other text"
        )
    return kept


def _with_decoys(requests: list[EditRequest], seed: int) -> list[EditRequest]:
    """Give each request a decoy: another request's true answer (same relation when one exists),
    neither its own true answer nor its target; ``None`` when there is none."""
    rng = np.random.default_rng([seed, 29])
    out = []
    for r in requests:
        pool = sorted(
            {q.true for q in requests if q.true.strip() not in (r.true.strip(), r.target.strip())}
        )
        same = sorted(
            {
                q.true
                for q in requests
                if q.relation == r.relation
                and q.true.strip() not in (r.true.strip(), r.target.strip())
            }
        )
        choices = same or pool
        decoy = str(rng.choice(choices)) if choices else None
        out.append(replace(r, decoy=decoy))
    return out


def _read_json(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no such file: {p} (download it once and pass the local path)")
    data = json.loads(p.read_text())
    if not isinstance(data, list):
        raise ValueError(f"{p} should hold a JSON list of records")
    return data


def load_counterfact(
    path: str | os.PathLike[str], tok: Any, n: int | None = None, seed: int = 0
) -> list[EditRequest]:
    """CounterFact records (ROME's ``counterfact.json``) as requests with one-token true answers.

    ``requested_rewrite.prompt`` is the edit prompt, ``target_true`` the sensitive answer,
    ``target_new`` the sanitized one (any length); ``paraphrase_prompts`` become held-out attack
    prompts and ``neighborhood_prompts`` neighbours answered by ``target_true``. Records whose true
    answer is not one token are dropped. Each request's decoy (for chance) is another kept record's
    true answer, of the same relation where possible, drawn with ``seed``.
    """
    out = []
    for rec in _read_json(path):
        rw = rec["requested_rewrite"]
        subject, true = rw["subject"], rw["target_true"]["str"]
        if not _is_one_token(tok, true) or rw["target_new"]["str"].strip() == true.strip():
            continue
        attack = []
        for p in rec.get("paraphrase_prompts", []):
            try:
                attack.append(as_template(p, subject))
            except ValueError:
                continue
        out.append(
            EditRequest(
                as_template(rw["prompt"], subject),
                subject,
                true,
                rw["target_new"]["str"],
                (),
                tuple(attack),
                tuple((p, true) for p in rec.get("neighborhood_prompts", [])),
                None,
                rw.get("relation_id", ""),
            )
        )
        if n is not None and len(out) >= n:
            break
    return _with_decoys(out, seed)


def load_zsre(
    path: str | os.PathLike[str], tok: Any, n: int | None = None, seed: int = 0
) -> list[EditRequest]:
    """zsRE records (ROME's ``zsre_mem_eval.json``: ``src``, ``subject``, ``answers``, ``alt``,
    ``rephrase``, ``loc``, ``loc_ans``) as requests with one-token true answers (``alt`` and
    ``loc_ans`` may be several tokens); decoys as :func:`load_counterfact`'s."""
    out = []
    for rec in _read_json(path):
        subject, true = rec["subject"], rec["answers"][0]
        if not _is_one_token(tok, true) or subject not in rec["src"]:
            continue
        if rec["alt"].strip() == true.strip():  # nothing to hide
            continue
        attack = ()
        if rec.get("rephrase") and subject in rec["rephrase"]:
            attack = (as_template(rec["rephrase"], subject),)
        neighbours = ((rec["loc"], rec["loc_ans"]),) if rec.get("loc") else ()
        out.append(
            EditRequest(
                as_template(rec["src"], subject), subject, true, rec["alt"], (), attack, neighbours
            )
        )
        if n is not None and len(out) >= n:
            break
    return _with_decoys(out, seed)
