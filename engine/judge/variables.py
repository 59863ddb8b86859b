"""Locating and validating the Auditor's ``evaluation_variables``.

The Judge reads exactly one step: the **last** step of type ``map`` whose ``output`` holds an
``evaluation_variables`` object; failing that, the last ``aggregate`` step holding one. Nothing else
in the trace decides the outcome.

Shape (keys whose value is None may be absent, because canonical JSON drops them):

* required: ``source_summary`` (list of evidence ids), ``conflict_detected`` (bool),
  ``insufficient_evidence`` (bool);
* optional: ``event_observed`` (bool), ``numeric_value`` / ``threshold`` (JSON numbers),
  ``comparator`` (one of ``> >= < <= ==``), ``timestamp`` (str), ``observed_outcome`` (str),
  ``fallback_used`` (bool), ``selection`` (any JSON value; ``selection.fallback_used`` also counts).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from engine.auditor.record import Record
from engine.comparison import compare, is_finite_number
from engine.schemas import ReasoningTrace

__all__ = [
    "COMPARATORS",
    "EvaluationSource",
    "EvaluationVariables",
    "compare",
    "locate_evaluation_variables",
    "parse_evaluation_variables",
]

COMPARATORS = (">", ">=", "<", "<=", "==")


class EvaluationSource(Record):
    """The step the variables came from: its id, position in the trace and raw variables."""

    FIELDS: ClassVar[tuple[str, ...]] = ("step_id", "step_index", "step_type", "raw")
    __slots__ = FIELDS

    def __init__(self, step_id: str, step_index: int, step_type: str, raw: Mapping[str, Any]) -> None:
        self.step_id: Final = step_id
        self.step_index: Final = step_index
        self.step_type: Final = step_type
        self.raw: Final = raw


class EvaluationVariables(Record):
    """Validated evaluation variables (see the module docstring)."""

    FIELDS: ClassVar[tuple[str, ...]] = (
        "source_summary",
        "conflict_detected",
        "insufficient_evidence",
        "event_observed",
        "numeric_value",
        "threshold",
        "comparator",
        "timestamp",
        "observed_outcome",
        "fallback_used",
    )
    __slots__ = FIELDS

    def __init__(
        self,
        source_summary: tuple[str, ...],
        conflict_detected: bool,
        insufficient_evidence: bool,
        event_observed: bool | None = None,
        numeric_value: int | float | None = None,
        threshold: int | float | None = None,
        comparator: str | None = None,
        timestamp: str | None = None,
        observed_outcome: str | None = None,
        fallback_used: bool = False,
    ) -> None:
        self.source_summary: Final = source_summary
        self.conflict_detected: Final = conflict_detected
        self.insufficient_evidence: Final = insufficient_evidence
        self.event_observed: Final = event_observed
        self.numeric_value: Final = numeric_value
        self.threshold: Final = threshold
        self.comparator: Final = comparator
        self.timestamp: Final = timestamp
        self.observed_outcome: Final = observed_outcome
        self.fallback_used: Final = fallback_used

    def comparison(self) -> bool | None:
        """``numeric_value <comparator> threshold`` when all three are present, else None."""
        if self.numeric_value is None or self.threshold is None or self.comparator is None:
            return None
        return compare(self.numeric_value, self.comparator, self.threshold)


def locate_evaluation_variables(trace: ReasoningTrace) -> EvaluationSource | None:
    """The last ``map`` step carrying ``evaluation_variables``, else the last such ``aggregate`` step."""
    for wanted in ("map", "aggregate"):
        for index in range(len(trace.steps) - 1, -1, -1):
            step = trace.steps[index]
            raw = step.output.get("evaluation_variables")
            if step.type == wanted and (type(raw) is dict or isinstance(raw, Mapping)):
                return EvaluationSource(step_id=step.step_id, step_index=index, step_type=step.type, raw=raw)
    return None


def _optional(raw: Mapping[str, Any], key: str, problems: list[str], kind: str) -> Any:
    value = raw.get(key)
    if value is None:
        return None
    exact = type(value)
    if (kind == "bool" and exact is bool) or (kind == "str" and exact is str):
        ok = True  # what the table below gives: its other tests cannot raise for an exact bool or str
    else:
        ok = {
            "bool": isinstance(value, bool),
            "number": is_finite_number(value),
            "str": isinstance(value, str),
        }[kind]
    if not ok:
        problems.append(f"evaluation_variables.{key} must be a {kind} or absent, got {value!r}")
        return None
    return value


def _required_bool(raw: Mapping[str, Any], key: str, problems: list[str]) -> bool:
    value = raw.get(key)
    if not isinstance(value, bool):
        problems.append(f"evaluation_variables.{key} must be a bool, got {value!r}")
        return False
    return value


def _source_summary(raw: Mapping[str, Any], problems: list[str]) -> tuple[str, ...]:
    value = raw.get("source_summary")
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        problems.append(f"evaluation_variables.source_summary must be a list of evidence ids, got {value!r}")
        return ()
    return tuple(value)


def _fallback_used(raw: Mapping[str, Any], problems: list[str]) -> bool:
    flag = _optional(raw, "fallback_used", problems, "bool")
    selection = raw.get("selection")
    nested = None
    if type(selection) is dict or isinstance(selection, Mapping):  # an exact dict skips the ABC check
        nested = selection.get("fallback_used")
    if nested is not None and not isinstance(nested, bool):
        problems.append(f"evaluation_variables.selection.fallback_used must be a bool, got {nested!r}")
        nested = None
    return flag is True or nested is True


def parse_evaluation_variables(raw: Mapping[str, Any]) -> tuple[EvaluationVariables | None, list[str]]:
    """Validate ``raw``; returns the variables, or None with the list of problems (in key order)."""
    problems: list[str] = []
    source_summary = _source_summary(raw, problems)
    conflict = _required_bool(raw, "conflict_detected", problems)
    insufficient = _required_bool(raw, "insufficient_evidence", problems)
    event_observed = _optional(raw, "event_observed", problems, "bool")
    numeric_value = _optional(raw, "numeric_value", problems, "number")
    threshold = _optional(raw, "threshold", problems, "number")
    timestamp = _optional(raw, "timestamp", problems, "str")
    observed_outcome = _optional(raw, "observed_outcome", problems, "str")
    comparator = raw.get("comparator")
    if comparator is not None and comparator not in COMPARATORS:
        problems.append(
            f"evaluation_variables.comparator must be one of {', '.join(COMPARATORS)}, got {comparator!r}"
        )
        comparator = None
    fallback = _fallback_used(raw, problems)
    if problems:
        return None, problems
    return (
        EvaluationVariables(
            source_summary=source_summary,
            conflict_detected=conflict,
            insufficient_evidence=insufficient,
            event_observed=event_observed,
            numeric_value=numeric_value,
            threshold=threshold,
            comparator=comparator,
            timestamp=timestamp,
            observed_outcome=observed_outcome,
            fallback_used=fallback,
        ),
        [],
    )
