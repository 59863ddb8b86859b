"""Two small auditor fast paths answer exactly what the paths they shortcut answer.

* ``relative_spread`` of equal values is 0 without exact arithmetic (and still refuses what
  ``Fraction`` refuses);
* the event-check recipe found by the event's identity is the value-keyed cache's recipe.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.auditor.reasoning.contradiction_checks import relative_spread
from engine.auditor.reasoning.semantics import EventSpec, Quantity
from engine.auditor.verification.logic_sanity import _event_checks, _event_recipe, _recipe_of, _value_type


def _reference_spread(low: Any, high: Any) -> Fraction:
    low_exact, high_exact = Fraction(low), Fraction(high)
    scale = max(abs(low_exact), abs(high_exact))
    return Fraction(0) if scale == 0 else (high_exact - low_exact) / scale


numbers = st.integers(min_value=-(2**80), max_value=2**80) | st.floats(allow_nan=False, allow_infinity=False)


@given(numbers, numbers)
@settings(max_examples=400)
def test_relative_spread_equals_the_exact_formula(a: Any, b: Any) -> None:
    low, high = min(a, b), max(a, b)
    assert relative_spread(low, high) == _reference_spread(low, high)
    assert relative_spread(low, low) == _reference_spread(low, low) == 0


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_relative_spread_still_refuses_what_fraction_refuses(value: float) -> None:
    with pytest.raises((OverflowError, ValueError)):
        relative_spread(value, value)


def test_equal_int_and_float_values_spread_by_zero() -> None:
    assert relative_spread(3, 3.0) == 0 and relative_spread(0, 0) == 0 and relative_spread(-0.0, 0) == 0


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
