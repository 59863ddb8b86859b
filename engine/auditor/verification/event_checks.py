"""The sanity checks of the market's threshold and comparator, from a per-event cached recipe.

``derive_event_spec`` hands the bundles of one market the same (cached, immutable) event, so both
checks' severities, ids, messages and details are worked out once per event and each audit builds
fresh checks (and fresh ``details`` dicts) from them.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Final

from engine.auditor.checks import failed as check_failed
from engine.auditor.checks import passed as check_passed
from engine.auditor.checks import warning as check_warning
from engine.auditor.reasoning.semantics import EventSpec
from engine.schemas import CheckResult

__all__ = ["event_checks"]

_Recipe = tuple[tuple[str, str, str, dict[str, Any]], tuple[str, str, str, dict[str, Any]]]


def event_checks(event: EventSpec) -> list[CheckResult]:
    """The threshold and comparator checks, built fresh from the event's cached recipe (each check
    constructor copies the recipe's ``details``, so the cached dicts are never handed out)."""
    return [
        _make(severity, check_id, message, details)
        for severity, check_id, message, details in _recipe_of(event)
    ]


_RECIPES_BY_EVENT: dict[int, tuple[EventSpec, _Recipe]] = {}
_RECIPES_BY_EVENT_LIMIT: Final = 1024


def _recipe_of(event: EventSpec) -> _Recipe:
    """:func:`_event_recipe` of ``event``, found by identity first.

    ``derive_event_spec`` hands the bundles of one market the same (cached, immutable) event
    object, and hashing it for the value-keyed cache costs more than the rest of the lookup. An
    entry holds its event, so the ``id`` cannot be reused while the entry lives; any other object
    takes the value-keyed path.
    """
    found = _RECIPES_BY_EVENT.get(id(event))
    if found is not None and found[0] is event:
        return found[1]
    recipe = _event_recipe(event, _value_type(event))
    if len(_RECIPES_BY_EVENT) >= _RECIPES_BY_EVENT_LIMIT:
        _RECIPES_BY_EVENT.clear()
    _RECIPES_BY_EVENT[id(event)] = (event, recipe)
    return recipe


def _value_type(event: EventSpec) -> str:
    return type(event.threshold.value).__name__ if event.threshold is not None else ""


def _make(severity: str, check_id: str, message: str, details: dict[str, Any]) -> CheckResult:
    """The check of that severity name (direct calls: a compiled build makes them native)."""
    if severity == "passed":
        return check_passed(check_id, message, details)
    if severity == "warning":
        return check_warning(check_id, message, details)
    if severity == "failed":
        return check_failed(check_id, message, details)
    raise KeyError(severity)


@lru_cache(maxsize=1024)
def _event_recipe(event: EventSpec, value_type: str) -> _Recipe:
    """``(severity, check_id, message, details)`` of both checks (events are immutable values;
    the check constructors copy ``details``, so the cached dicts are never handed out). ``value_type`` keeps a
    threshold of ``1`` and one of ``1.0`` (equal, so one cache key otherwise) apart."""
    del value_type
    threshold: tuple[str, str, str, dict[str, Any]]
    comparator: tuple[str, str, str, dict[str, Any]]
    problems = dict(event.problems)
    threshold_problem = problems.get("threshold_unparseable") or problems.get("threshold_missing")
    if threshold_problem:
        threshold = ("failed", "sanity.threshold", threshold_problem, {"text": event.threshold_text})
    elif event.threshold is not None:
        quantity = event.threshold
        details = {"text": quantity.text, "unit": quantity.unit, "value": quantity.value}
        threshold = (
            "passed",
            "sanity.threshold",
            f"threshold {quantity.text!r} is {quantity.value!r}",
            details,
        )
    elif event.kind == "text_equals":
        threshold = (
            "passed",
            "sanity.threshold",
            "threshold is compared as exact text",
            {"text": event.threshold_text},
        )
    elif event.kind == "threshold":
        threshold = ("failed", "sanity.threshold", "no threshold given", {"text": event.threshold_text})
    else:
        threshold = (
            "passed",
            "sanity.threshold",
            f"{event.kind} event: no threshold needed",
            {"event_kind": event.kind},
        )
    comparator_problem = problems.get("comparator_unparseable") or problems.get("comparator_missing")
    details = {
        "comparator": event.comparator,
        "phrase": event.comparator_phrase,
        "source": event.comparator_source,
    }
    if comparator_problem:
        comparator = ("failed", "sanity.comparator", comparator_problem, details)
    elif event.comparator is None:
        comparator = (
            "passed",
            "sanity.comparator",
            f"{event.kind} event: no comparison needed",
            {"event_kind": event.kind},
        )
    elif event.warnings:
        comparator = ("warning", "sanity.comparator", "; ".join(event.warnings), details)
    else:
        message = f"'{event.comparator_phrase}' in the {event.comparator_source} means {event.comparator}"
        comparator = ("passed", "sanity.comparator", message, details)
    return threshold, comparator
