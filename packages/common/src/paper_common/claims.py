"""Claims with three-valued verdicts, decided on an interval and checked by two controls.

A :class:`Claim` is one headline statement of a paper and what we measured for it. Its ``verdict``
is one of :data:`VERDICTS`:

- ``supported``: the whole interval of the measurement (seeds or bootstrap) meets the target, the
  positive control shows the testbed can exhibit the effect, and the negative control (the same
  rule where the claim must not hold) comes out ``refuted``;
- ``refuted``: the whole interval misses the target while the positive control passed;
- ``inconclusive``: anything else, with the reason: the interval straddles the target, nothing was
  measured, a control failed or is missing.

The rule, :func:`combine`, in order:

1. no interval (or an undefined one): ``inconclusive``;
2. the positive control is missing or did not pass: ``inconclusive`` (the testbed could not show
   the effect, so neither a pass nor a miss says anything about the paper);
3. the interval across the target: ``inconclusive``; wholly outside: ``refuted``;
4. wholly inside: ``supported`` only if a negative control ran and came out ``refuted``. A
   negative control that comes out ``supported`` means the rule cannot fail: the claim is
   ``inconclusive`` and flagged as a **defect** (:attr:`Claim.defect`). A claim refuted by its own
   interval stays ``refuted`` and is no defect: its rule did fail, so it can; a supported negative
   control there only shows that on this data it was no case where the claim must fail (swapped
   arms when the effect runs the other way), and the reason says so.

A claim built the two-valued way (a point against a threshold, no controls: :meth:`Claim.threshold`,
:meth:`Claim.decided`, or ``Claim(statement, metric, value, target, point_check)``) keeps the point
outcome in :attr:`Claim.point_check` and is ``inconclusive`` ("no controls yet") until the package
gives it an interval and controls. ``report.json`` files written before verdicts existed load the
same way: their ``supported`` becomes ``point_check``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

if TYPE_CHECKING:
    from paper_common.stats import Bounds

__all__ = [
    "OPS",
    "VERDICTS",
    "Claim",
    "Control",
    "Verdict",
    "combine",
    "decide",
    "format_value",
    "interval_text",
]

Verdict = Literal["supported", "refuted", "inconclusive"]
VERDICTS: tuple[Verdict, ...] = ("supported", "refuted", "inconclusive")
Kind = Literal["paper", "check"]
Op = Literal[">", ">=", "<", "<=", "=="]
Ineq = Literal[">", ">=", "<", "<="]
OPS: dict[str, Callable[[float, float], bool]] = {
    ">": lambda v, t: v > t,
    ">=": lambda v, t: v >= t,
    "<": lambda v, t: v < t,
    "<=": lambda v, t: v <= t,
    "==": lambda v, t: math.isclose(v, t, rel_tol=1e-9, abs_tol=1e-12),
}


class _Interval(Protocol):
    low: float
    high: float


def format_value(value: Any) -> str:
    """Format a number for a table: 4 significant digits, integers as they are, ``-`` for None."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if value != 0 and (abs(value) >= 1e9 or abs(value) < 1e-3):
            return f"{value:.3e}"
        if abs(value) >= 1e4:
            return f"{value:.0f}"
        return f"{value:.4g}"
    return str(value)


def _number(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a float or None; got {type(value).__name__}")
    return float(value)


def interval_text(low: float | None, high: float | None) -> str:
    """``[low, high]`` for a table, ``-`` for no interval, ``undefined`` for NaN ends."""
    if low is None or high is None:
        return "-"
    if math.isnan(low) or math.isnan(high):
        return "undefined"
    return f"[{format_value(low)}, {format_value(high)}]"


def decide(low: float | None, high: float | None, op: Ineq, threshold: float) -> Verdict:
    """The interval rule: ``supported`` if every value in ``[low, high]`` satisfies
    ``value <op> threshold``, ``refuted`` if none does, ``inconclusive`` if the interval straddles
    the threshold or is missing/undefined (``None`` or NaN ends).

    >>> decide(0.6, 0.9, ">", 0.5), decide(0.1, 0.4, ">", 0.5), decide(0.4, 0.6, ">", 0.5)
    ('supported', 'refuted', 'inconclusive')
    """
    if op not in (">", ">=", "<", "<="):
        raise ValueError(f"op must be one of >, >=, <, <=; got {op!r}")
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, numbers.Real)
        or math.isnan(threshold)
    ):
        raise ValueError(f"threshold must be a number; got {threshold!r}")
    low, high = _number(low, "low"), _number(high, "high")
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return "inconclusive"
    if low > high:
        raise ValueError(f"an interval needs low <= high; got [{low}, {high}]")
    test = OPS[op]
    at_low, at_high = test(low, threshold), test(high, threshold)
    if at_low and at_high:
        return "supported"
    if not at_low and not at_high:
        return "refuted"
    return "inconclusive"


@dataclass(frozen=True)
class Control:
    """A control of a claim: ``positive`` (the testbed can show the effect: a condition that must
    hold) or ``negative`` (the claim's own rule where the claim must not hold: must be refuted).

    Attributes:
        role: ``"positive"`` or ``"negative"``.
        description: what was run, in one line (``"format facts learned"``, ``"shuffled labels"``).
        value: its measured value (``None`` if not measured).
        target: what the control is compared with (``">= 0.75"``).
        verdict: the rule's outcome on the control (:func:`decide`).
        low, high: the control's interval (``None`` for a point).
    A positive control passes when its verdict is ``supported``; a negative one when ``refuted``.
    """

    role: Literal["positive", "negative"]
    description: str
    value: float | None
    target: str
    verdict: Verdict
    low: float | None = None
    high: float | None = None

    def __post_init__(self) -> None:
        if self.role not in ("positive", "negative"):
            raise ValueError(f"Control.role must be 'positive' or 'negative'; got {self.role!r}")
        if not isinstance(self.description, str) or not self.description.strip():
            raise ValueError("Control.description must say what the control ran")
        if self.verdict not in VERDICTS:
            raise ValueError(f"Control.verdict must be one of {VERDICTS}; got {self.verdict!r}")
        for name in ("value", "low", "high"):
            object.__setattr__(self, name, _number(getattr(self, name), f"Control.{name}"))
        if self.missing and self.verdict != "inconclusive":
            raise ValueError(
                f"a {self.role} control without a measured value cannot be {self.verdict!r}: "
                "build it with Control.positive / Control.negative, or Control.absent"
            )

    @property
    def passed(self) -> bool:
        if self.missing:
            return False
        return self.verdict == ("supported" if self.role == "positive" else "refuted")

    @property
    def missing(self) -> bool:
        """A control that is named but could not be run yet (no value)."""
        return self.value is None and self.low is None

    @classmethod
    def positive(
        cls,
        description: str,
        value: float | None,
        op: Ineq,
        threshold: float,
        interval: _Interval | tuple[float, float] | None = None,
    ) -> Control:
        """A condition the testbed must meet for the claim to be testable: passes iff the whole
        interval (the point ``value`` when no interval is given) satisfies ``op threshold``."""
        low, high = _bounds(value, interval)
        return cls(
            "positive",
            description,
            _number(value, "value"),
            f"{op} {format_value(float(threshold))}",
            decide(low, high, op, threshold),
            low if interval is not None else None,
            high if interval is not None else None,
        )

    @classmethod
    def negative(
        cls,
        description: str,
        value: float | None,
        interval: _Interval | tuple[float, float] | None = None,
    ) -> Control:
        """The claim's measurement where the claim must not hold (shuffled labels, a null model,
        swapped arms). :meth:`Claim.decide` applies the claim's own rule to it; until then its
        verdict is ``inconclusive`` and its target empty."""
        low, high = _bounds(value, interval)
        return cls("negative", description, _number(value, "value"), "-", "inconclusive", low, high)

    @classmethod
    def absent(cls, role: Literal["positive", "negative"], what: str) -> Control:
        """A control the claim needs but the package cannot compute yet; ``what`` says what it
        would take. The claim stays ``inconclusive`` until it exists."""
        return cls(role, f"missing: {what}", None, "-", "inconclusive")

    def text(self) -> str:
        """One line for a table: ``description: value [low, high] target -> verdict``."""
        if self.missing:
            return self.description
        span = "" if self.low is None else f" {interval_text(self.low, self.high)}"
        target = "" if self.target == "-" else f" {self.target}"
        return f"{self.description}: {format_value(self.value)}{span}{target} → {self.verdict}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "description": self.description,
            "value": self.value,
            "target": self.target,
            "verdict": self.verdict,
            "low": self.low,
            "high": self.high,
            "passed": self.passed,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Control:
        return cls(
            data["role"],
            data["description"],
            data.get("value"),
            data.get("target", "-"),
            data["verdict"],
            data.get("low"),
            data.get("high"),
        )


def _bounds(
    value: float | None, interval: _Interval | tuple[float, float] | None
) -> tuple[float | None, float | None]:
    if interval is None:
        v = _number(value, "value")
        return v, v
    if isinstance(interval, tuple):
        if len(interval) != 2:
            raise ValueError(f"an interval is (low, high); got {interval!r}")
        low, high = interval
    else:
        low, high = interval.low, interval.high
    return _number(low, "interval low"), _number(high, "interval high")


def combine(
    interval_verdict: Verdict, positive: Control | None, negative: Control | None
) -> tuple[Verdict, str]:
    """The claim's verdict from its interval's verdict and its two controls, with the reason when it
    is not simply the interval's (see the module docstring for the rule)."""
    if interval_verdict not in VERDICTS:
        raise ValueError(f"interval_verdict must be one of {VERDICTS}; got {interval_verdict!r}")
    defect = negative is not None and negative.verdict == "supported"
    if defect and interval_verdict != "refuted":
        return "inconclusive", (
            "DEFECT: the negative control comes out supported, so this rule cannot fail"
        )
    if positive is None:
        return "inconclusive", "positive control missing"
    if positive.role != "positive" or (negative is not None and negative.role != "negative"):
        raise ValueError("positive= takes a positive Control and negative= a negative one")
    if not positive.passed:
        why = "missing" if positive.missing else f"{positive.text()}"
        return "inconclusive", f"positive control did not pass ({why})"
    if interval_verdict == "refuted":  # the rule did fail here, so it can: no defect
        return (
            "refuted",
            "the negative control comes out supported: on this data it is no case where the claim "
            "must fail (the effect runs the other way)"
            if defect
            else "",
        )
    if interval_verdict == "inconclusive":
        return "inconclusive", "the interval is undefined or straddles the target"
    if negative is None:
        return "inconclusive", "negative control missing"
    if not negative.passed:
        if negative.missing:
            why = "missing"
        elif negative.low is None or math.isnan(negative.low) or math.isnan(negative.high or 0.0):
            why = "its value is undefined"
        else:
            why = "its interval straddles the target"
        return "inconclusive", f"negative control not refuted ({why})"
    return "supported", ""


@dataclass(frozen=True)
class Claim:
    """One claim of the paper, what we measured for it, and its verdict.

    Attributes:
        statement: the paper's claim in one sentence, in our words.
        metric: what was measured, with its unit (``"top-1 accuracy gap (points)"``).
        value: the point estimate; ``None`` if it could not be measured.
        target: the threshold or direction that would support the claim (``">= 0.9"``).
        point_check: whether the point estimate meets the target (``None``: not measured). This is
            all a two-valued claim (before verdicts) had; it is shown, never decides.
        note: what a reader needs to interpret the number.
        verdict: ``supported``, ``refuted`` or ``inconclusive`` (see :func:`combine`).
        low, high: the interval the verdict was decided on.
        interval: how the interval was made (``"95% t-interval over 5 seeds"``).
        positive, negative: the controls (see :class:`Control`).
        kind: ``"paper"`` (a claim of the paper) or ``"check"`` (a property of our own code, such
            as an optimiser reaching a closed form: reported, but not a paper claim).
        reason: why the verdict is what it is when the interval alone did not decide it.
        op, target_value: the comparison the interval was decided on (``"<="``, ``1.1``), so a
            ``supported`` verdict can be re-checked; ``None`` for two-valued claims.
    """

    statement: str
    metric: str
    value: float | None
    target: str
    point_check: bool | None = None
    note: str = ""
    verdict: Verdict | None = None
    low: float | None = None
    high: float | None = None
    interval: str = ""
    positive: Control | None = None
    negative: Control | None = None
    kind: Kind = "paper"
    reason: str = ""
    op: str | None = None
    target_value: float | None = None

    def __post_init__(self) -> None:
        for name in ("statement", "metric", "target"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ValueError(
                    f"Claim.{name} must be a non-empty string; got {getattr(self, name)!r}"
                )
        for name in ("value", "low", "high"):
            object.__setattr__(self, name, _number(getattr(self, name), f"Claim.{name}"))
        if self.point_check is not None and not isinstance(self.point_check, bool):
            raise TypeError(
                f"Claim.point_check must be a bool or None; got {type(self.point_check).__name__}"
            )
        measured = self.value is not None and not math.isnan(self.value)
        if self.point_check and not measured:
            raise ValueError("Claim.point_check cannot be True when no value was measured")
        if self.kind not in ("paper", "check"):
            raise ValueError(f"Claim.kind must be 'paper' or 'check'; got {self.kind!r}")
        for name, role in (("positive", "positive"), ("negative", "negative")):
            c = getattr(self, name)
            if c is not None and (not isinstance(c, Control) or c.role != role):
                raise TypeError(f"Claim.{name} must be a {role} Control or None")
        if self.verdict is None:  # two-valued construction: the point check is all there is
            object.__setattr__(self, "verdict", "inconclusive")
            if not self.reason:
                object.__setattr__(
                    self, "reason", "two-valued check (a point, no interval or controls yet)"
                )
        if self.verdict not in VERDICTS:
            raise ValueError(f"Claim.verdict must be one of {VERDICTS}; got {self.verdict!r}")
        object.__setattr__(self, "target_value", _number(self.target_value, "Claim.target_value"))
        if self.verdict == "supported" and (
            self.positive is None
            or not self.positive.passed
            or self.negative is None
            or not self.negative.passed
            or self.op not in (">", ">=", "<", "<=")
            or self.target_value is None
            or decide(self.low, self.high, self.op, self.target_value) != "supported"  # type: ignore[arg-type]
        ):
            raise ValueError(
                "Claim.verdict 'supported' needs an interval wholly inside its target (op, "
                "target_value), a passed positive control and a refuted negative control: build "
                "it with Claim.decide"
            )

    @property
    def supported(self) -> bool:
        """``verdict == "supported"`` (what ``supported`` meant in reports before verdicts)."""
        return self.verdict == "supported"

    @property
    def defect(self) -> bool:
        """The negative control came out supported while the claim's own interval did not refute it:
        the claim's rule cannot fail. (Where the interval refutes the claim, the rule has failed, so
        a supported negative control is no defect of the rule; see :func:`combine`.)"""
        if self.negative is None or self.negative.verdict != "supported":
            return False
        if self.op not in (">", ">=", "<", "<=") or self.target_value is None:
            return True
        return decide(self.low, self.high, self.op, self.target_value) != "refuted"  # type: ignore[arg-type]

    @classmethod
    def decide(
        cls,
        statement: str,
        metric: str,
        value: float | None,
        interval: _Interval | tuple[float, float] | None,
        op: Ineq,
        threshold: float,
        *,
        positive: Control | None,
        negative: Control | None,
        method: str,
        note: str = "",
        kind: Kind = "paper",
    ) -> Claim:
        """The three-valued claim: ``interval`` (an object with ``low``/``high``, such as
        :class:`~paper_common.stats.ConfidenceInterval` or :class:`~paper_common.stats.Bounds`,
        or a ``(low, high)`` tuple; ``None`` when nothing was measured) decided against
        ``op threshold``, then :func:`combine` with the controls. The negative control is decided by
        the same rule. ``method`` says how the interval was made (``"95% bootstrap over items"``).
        """
        if not isinstance(method, str) or not method.strip():
            raise ValueError("Claim.decide needs method=: how the interval was made")
        low, high = (None, None) if interval is None else _bounds(value, interval)
        raw = decide(low, high, op, threshold)
        target = f"{op} {format_value(float(threshold))}"
        if negative is not None:
            if not isinstance(negative, Control) or negative.role != "negative":
                raise TypeError("negative= takes Control.negative(...) or Control.absent(...)")
            negative = replace(
                negative,
                target="-" if negative.missing else target,
                verdict="inconclusive"
                if negative.missing
                else decide(negative.low, negative.high, op, threshold),
            )
        verdict, reason = combine(raw, positive, negative)
        v = _number(value, "value")
        point = None if v is None or math.isnan(v) else OPS[op](v, float(threshold))
        return cls(
            statement,
            metric,
            v,
            target,
            point,
            note,
            verdict=verdict,
            low=low,
            high=high,
            interval=method,
            positive=positive,
            negative=negative,
            kind=kind,
            reason=reason,
            op=op,
            target_value=float(threshold),
        )

    @classmethod
    def threshold(
        cls,
        statement: str,
        metric: str,
        value: float | None,
        op: Op,
        threshold: float,
        note: str = "",
    ) -> Claim:
        """A two-valued claim: the point ``value <op> threshold`` (``None``/NaN fails), no interval,
        no controls, so its verdict is ``inconclusive``; use :meth:`decide`."""
        if op not in OPS:
            raise ValueError(f"op must be one of {', '.join(OPS)}; got {op!r}")
        measured = value is not None and not math.isnan(float(value))
        point = bool(measured and OPS[op](float(value), float(threshold)))
        return cls(statement, metric, value, f"{op} {format_value(float(threshold))}", point, note)

    @classmethod
    def decided(
        cls,
        statement: str,
        metric: str,
        bounds: Bounds,
        op: Ineq,
        threshold: float,
        note: str = "",
    ) -> Claim:
        """A two-valued claim on a quantity known only within ``bounds`` (censored times, a ratio of
        censored medians: see :mod:`paper_common.stats`): the point check passes only if every value
        in the range satisfies ``op threshold``. The value shown is the end nearest to failing (the
        worst case of a passing or undecided check, the best case of a failing one). No controls, so
        the verdict is ``inconclusive``; :meth:`decide` takes the same bounds as its interval.
        """
        verdict = bounds.decide(op, threshold)
        worst = bounds.low if op in (">", ">=") else bounds.high
        best = bounds.high if op in (">", ">=") else bounds.low
        value = None if not bounds.defined else (best if verdict is False else worst)
        sep = "; " if note else ""
        if not bounds.defined:
            note += f"{sep}undefined (0 / 0 or nothing measured), so not supported"
        elif verdict is None:
            note += (
                f"{sep}the value is {bounds}: censored values leave it undecided, so not supported"
            )
        elif not bounds.exact:
            note += f"{sep}the value is {bounds} (censored values make it a range; decided on all of it)"
        low, high = (None, None) if not bounds.defined else (bounds.low, bounds.high)
        return cls(
            statement,
            metric,
            value,
            f"{op} {format_value(float(threshold))}",
            verdict is True,
            note,
            low=low,
            high=high,
            interval="censoring bounds" if low is not None and low != high else "",
        )

    def interval_text(self) -> str:
        return interval_text(self.low, self.high)

    def missing_parts(self) -> list[str]:
        """What a three-valued claim still lacks: ``"rule"`` (no ``op``/``target_value``: a
        two-valued claim), ``"interval method"``, ``"positive control"``, ``"negative control"``.
        A control built with :meth:`Control.absent` counts as present (it names what is missing and
        keeps the claim ``inconclusive``); an interval that could not be measured counts as present
        when ``interval`` says why. Empty for a complete claim.

        >>> Claim.threshold("s", "m", 1.0, ">", 0.5).missing_parts()
        ['rule', 'interval method', 'positive control', 'negative control']
        """
        parts = []
        if self.op is None or self.target_value is None:
            parts.append("rule")
        if not self.interval.strip():
            parts.append("interval method")
        if self.positive is None:
            parts.append("positive control")
        if self.negative is None:
            parts.append("negative control")
        return parts

    def to_dict(self) -> dict[str, Any]:
        return {
            "statement": self.statement,
            "metric": self.metric,
            "value": self.value,
            "target": self.target,
            "verdict": self.verdict,
            "supported": self.supported,
            "point_check": self.point_check,
            "low": self.low,
            "high": self.high,
            "interval": self.interval,
            "positive": None if self.positive is None else self.positive.to_dict(),
            "negative": None if self.negative is None else self.negative.to_dict(),
            "kind": self.kind,
            "reason": self.reason,
            "defect": self.defect,
            "op": self.op,
            "target_value": self.target_value,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Claim:
        """Load a claim from :meth:`to_dict`, or from a report written before verdicts (it has
        ``supported`` and no ``verdict``: that bool becomes :attr:`point_check`)."""
        if "verdict" not in data:  # a two-valued report
            return cls(
                data["statement"],
                data["metric"],
                data.get("value"),
                data["target"],
                bool(data.get("supported", False)),
                data.get("note", ""),
                reason="two-valued report (written before verdicts): a point, no controls",
            )

        def control(key: str) -> Control | None:
            return None if data.get(key) is None else Control.from_dict(data[key])

        return cls(
            data["statement"],
            data["metric"],
            data.get("value"),
            data["target"],
            data.get("point_check"),
            data.get("note", ""),
            verdict=data["verdict"],
            low=data.get("low"),
            high=data.get("high"),
            interval=data.get("interval", ""),
            positive=control("positive"),
            negative=control("negative"),
            kind=data.get("kind", "paper"),
            reason=data.get("reason", ""),
            op=data.get("op"),
            target_value=data.get("target_value"),
        )
