"""JSONL reading and writing of the items (typed rows come back as their dataclasses)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from paper_common.facts.items import (
    ChangeQuestion,
    Fact,
    JudgeItem,
    MCItem,
    QAItem,
    Statement,
    VerifiableTask,
    VerificationItem,
)


# --------------------------------------------------------------------- JSONL
def _to_row(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    row = {f.name: getattr(item, f.name) for f in fields(item)}
    row = {k: (asdict(v) if isinstance(v, Fact) else v) for k, v in row.items()}
    row["type"] = type(item).__name__
    return row


def write_jsonl(items: Iterable[Any], path: str | os.PathLike[str]) -> Path:
    """Write dataclass items (QAItem, Fact, ...) or dicts, one JSON object per line, atomically."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with tmp.open("w") as f:
        for item in items:
            f.write(json.dumps(_to_row(item)) + "\n")
    os.replace(tmp, out)
    return out


_TYPES = {
    c.__name__: c
    for c in (
        Fact,
        Statement,
        QAItem,
        VerificationItem,
        MCItem,
        VerifiableTask,
        JudgeItem,
        ChangeQuestion,
    )
}


def _from_row(row: dict[str, Any]) -> Any:
    kind = row.get("type")
    if kind not in _TYPES:
        return row
    cls = _TYPES[kind]
    data = {k: v for k, v in row.items() if k != "type"}
    if "fact" in data:
        data["fact"] = Fact(**data["fact"])
    for name in ("aliases", "options", "valid_answers"):
        if name in data:
            data[name] = tuple(data[name])
    return cls(**data)


def read_jsonl(path: str | os.PathLike[str]) -> list[Any]:
    """Read :func:`write_jsonl` output back: typed items become their dataclasses, the rest dicts."""
    with Path(path).open() as f:
        return [_from_row(json.loads(line)) for line in f if line.strip()]
