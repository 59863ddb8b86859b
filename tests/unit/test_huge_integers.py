"""An integer beyond a float's range is refused as "not a number" wherever the engine or the
reasoning stage asks for a finite number: a problem or no arithmetic, never an OverflowError."""

from __future__ import annotations

import math

import pytest

from engine.comparison import is_finite_number
from engine.judge.policy import ConfidencePolicy
from ledger.reasoning.stage import derive_request

HUGE = 10**400


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, True),
        (0.5, True),
        (-(10**300), True),
        (HUGE, False),
        (-HUGE, False),
        (True, False),
        (math.inf, False),
        (math.nan, False),
        ("1", False),
        (None, False),
    ],
)
def test_is_finite_number(value: object, expected: bool) -> None:
    assert is_finite_number(value) is expected


def test_a_huge_confidence_bound_is_a_policy_problem_not_a_crash() -> None:
    policy, problems = ConfidencePolicy.from_extra({"confidence_policy": {"default_confidence": HUGE}})
    assert policy == ConfidencePolicy()
    assert problems == [f"confidence_policy.default_confidence must be a number, got {HUGE!r}"]


def test_huge_evaluation_variables_derive_no_arithmetic() -> None:
    request = derive_request(
        "Will X exceed Y?", {}, {"numeric_value": HUGE, "threshold": 1, "comparator": ">"}
    )
    assert request.expression is None and request.reason_code == "no_arithmetic"
    assert request.message is not None and "numeric_value" in request.message
    assert "not a finite number" in request.message and "evaluated no" not in request.message


def test_missing_evaluation_variables_are_named_as_missing() -> None:
    request = derive_request("Will X exceed Y?", {}, {"comparator": ">"})
    assert request.message == "the auditor evaluated no numeric_value and threshold for this submission"
    boolean = derive_request("Will X exceed Y?", {}, {"numeric_value": True, "threshold": 1})
    assert boolean.message is not None and boolean.message.startswith("the auditor's numeric_value ")
