"""The event-check recipe found by the event's identity is the value-keyed cache's recipe."""

from __future__ import annotations

import dataclasses

import pytest

from engine.auditor.reasoning.semantics import EventSpec, Quantity
from engine.auditor.verification.event_checks import _event_recipe, _recipe_of, _value_type
from engine.auditor.verification.event_checks import event_checks as _event_checks

EVENTS = [
    EventSpec(kind="boolean", needed_kind="boolean"),
    EventSpec(
        kind="threshold",
        needed_kind="numeric",
        comparator=">=",
        comparator_phrase="at least",
        comparator_source="predicate",
        threshold=Quantity(value=100000, unit="usd", text="$100k"),
        threshold_text="$100k",
    ),
    EventSpec(
        kind="threshold",
        needed_kind="numeric",
        comparator=">=",
        comparator_phrase="at least",
        comparator_source="predicate",
        threshold=Quantity(value=100000.0, unit="usd", text="$100k"),
        threshold_text="$100k",
    ),
    EventSpec(kind="threshold", needed_kind="numeric", problems=(("threshold_missing", "no threshold"),)),
]


@pytest.mark.parametrize("event", EVENTS)
def test_the_recipe_found_by_identity_is_the_value_keyed_recipe(event: EventSpec) -> None:
    expected = _event_recipe(event, _value_type(event))
    assert _recipe_of(event) == expected
    assert _recipe_of(event) == expected  # the second lookup is the identity hit
    twin = dataclasses.replace(event)  # an equal event, another object
    assert twin is not event and _recipe_of(twin) == expected


def test_an_int_and_a_float_threshold_keep_their_own_recipes_by_identity() -> None:
    as_int, as_float = EVENTS[1], EVENTS[2]
    assert as_int == as_float  # equal values: only value_type keeps them apart in the value cache
    int_checks = [check.details for check in _event_checks(as_int)]
    float_checks = [check.details for check in _event_checks(as_float)]
    assert [type(d.get("value")) for d in int_checks] == [int, type(None)]
    assert [type(d.get("value")) for d in float_checks] == [float, type(None)]
