"""Role timelines from a local file: who held which role when, for drift labels on real models.

A timeline row is ``(entity, relation, holder, start, end)``: ``holder`` held ``relation`` of
``entity`` from ``start`` until ``end`` (empty: still holds it), as in Wikidata's position-held and
employer statements. Dates are years (``2021``), ``YYYY-MM`` or ``YYYY-MM-DD``; they become
fractional years. :func:`timeline_items` turns timelines into :class:`~drift_probe.data.DriftItem`
objects for a model with a given cutoff, asked at a query time.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from drift_probe.data import DriftItem

__all__ = ["RoleSpell", "load_timelines", "timeline_items", "to_year"]

COLUMNS = ("entity", "relation", "holder", "start", "end")


def to_year(value: object) -> float | None:
    """``2021`` -> 2021.0; ``"2021-07-02"`` -> 2021.5; ``""``/``None`` -> ``None`` (open end)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    parts = text.split("-")
    try:
        if len(parts) == 1:
            return float(text)
        year, month = int(parts[0]), int(parts[1])
        day = int(parts[2]) if len(parts) > 2 else 1
        date = dt.date(year, month, day)
    except ValueError as exc:
        raise ValueError(
            f"cannot read {value!r} as a date (use YYYY, YYYY-MM or YYYY-MM-DD)"
        ) from exc
    start = dt.date(year, 1, 1)
    days = (dt.date(year + 1, 1, 1) - start).days
    return year + (date - start).days / days


@dataclass(frozen=True)
class RoleSpell:
    """``holder`` held ``relation`` of ``entity`` for ``start <= t < end`` (``end`` None: still)."""

    entity: str
    relation: str
    holder: str
    start: float
    end: float | None = None

    def holds_at(self, t: float) -> bool:
        return self.start <= t and (self.end is None or t < self.end)


def load_timelines(path: str | Path) -> list[RoleSpell]:
    """Read role spells from a ``.jsonl`` or ``.csv`` file with columns entity, relation, holder,
    start, end. A missing column, an empty field (other than ``end``) or an end before its start
    raises ``ValueError`` naming the row."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{path} does not exist")
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    elif path.suffix == ".csv":
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
    else:
        raise ValueError(f"{path}: timelines must be .jsonl or .csv")
    spells = []
    for n, row in enumerate(rows, start=1):
        missing = [c for c in COLUMNS[:4] if c not in row or row[c] in (None, "")]
        if missing:
            raise ValueError(f"{path} row {n}: missing {', '.join(missing)}")
        start, end = to_year(row["start"]), to_year(row.get("end"))
        if end is not None and end <= start:
            raise ValueError(f"{path} row {n}: end {row['end']} is not after start {row['start']}")
        spells.append(
            RoleSpell(str(row["entity"]), str(row["relation"]), str(row["holder"]), start, end)
        )
    if not spells:
        raise ValueError(f"{path} holds no timeline rows")
    return spells


def _holder_at(spells: Sequence[RoleSpell], t: float) -> str | None:
    # the latest spell that started by t and has not ended (overlaps: the newer holder wins)
    live = [s for s in spells if s.holds_at(t)]
    return max(live, key=lambda s: s.start).holder if live else None


def timeline_items(
    spells: Sequence[RoleSpell],
    cutoff: float | str,
    query_time: float | str,
    questions: Mapping[str, str],
    claims: Mapping[str, str] | None = None,
    aliases: Mapping[str, Sequence[str]] | None = None,
) -> list[DriftItem]:
    """A :class:`DriftItem` per (entity, relation) with a holder at both the cutoff and the query time.

    ``questions[relation]`` is the prompt with ``{entity}`` (e.g. ``"Q: Who is the CEO of {entity}?
    A:"``); ``claims[relation]`` a statement with ``{entity}`` and ``{v}``; ``aliases`` other names
    of a holder. Relations without a question are skipped.
    """
    t_c, t_q = to_year(cutoff), to_year(query_time)
    if t_c is None or t_q is None or t_q < t_c:
        raise ValueError(f"need cutoff <= query_time; got {cutoff!r}, {query_time!r}")
    aliases = aliases or {}
    by_key: dict[tuple[str, str], list[RoleSpell]] = defaultdict(list)
    for s in spells:
        by_key[(s.entity, s.relation)].append(s)
    items = []
    for (entity, relation), group in sorted(by_key.items()):
        if relation not in questions:
            continue
        v_c, v_q = _holder_at(group, t_c), _holder_at(group, t_q)
        if v_c is None or v_q is None:
            continue
        claim = (claims or {}).get(relation, "{entity}: {v}.")
        items.append(
            DriftItem(
                subject=entity,
                relation=relation,
                prompt=questions[relation].format(entity=entity),
                claim=claim.replace("{entity}", entity),
                value_cutoff=v_c,
                value_query=v_q,
                aliases_cutoff=tuple(aliases.get(v_c, ())),
                aliases_query=tuple(aliases.get(v_q, ())),
                cutoff=t_c,
                query_time=t_q,
                changed_before=any(
                    s.start <= t_c and s.start > min(x.start for x in group) for s in group
                ),
            )
        )
    return items
