"""The auditor's compiled check constructors and step-id helpers equal what they replace."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from engine.auditor import checks
from engine.auditor.trace_builder import _step_id, _unique
from engine.schemas import CheckResult

CASES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("bundle.non_empty", "bundle holds 2 evidence item(s)", None),
    ("sanity.window_order", "", {}),
    ("contradiction.numeric:price", "sources disagree", {"values": [1, 2.5], "nested": {"a": None}}),
]


@pytest.mark.parametrize(
    ("name", "severity", "ok"),
    [("passed", "info", True), ("warning", "warn", True), ("failed", "error", False)],
)
@pytest.mark.parametrize(("check_id", "message", "details"), CASES)
def test_constructor_equals_classmethod(
    name: str, severity: str, ok: bool, check_id: str, message: str, details: dict[str, Any] | None
) -> None:
    made = getattr(checks, name)(check_id, message, details)
    reference = getattr(CheckResult, name)(check_id, message, details)
    assert type(made) is CheckResult
    assert made == reference
    assert made.model_fields_set == reference.model_fields_set
    assert (
        made.model_dump()
        == CheckResult(
            check_id=check_id, ok=ok, severity=severity, message=message, details=details or {}
        ).model_dump()
    )
    if details is not None:
        assert made.details is not details  # the caller's dict is copied


def test_wrong_values_still_reach_validation() -> None:
    for name in ("passed", "warning", "failed"):
        with pytest.raises(ValidationError):
            getattr(checks, name)("", "empty check id")
        with pytest.raises(ValidationError):
            getattr(checks, name)(7, "not a string")


def test_step_ids_and_unique() -> None:
    for number in (1, 9, 10, 99, 255, 256, 257, 9999, 10000, 123456):
        assert _step_id(number) == f"step_{number:04d}"
    values: list[Any] = ["b", "a", "b", 3, "a", 3, "c"]
    assert _unique(values) == list(dict.fromkeys(values))
    assert _unique(iter(values)) == ["b", "a", 3, "c"]
    assert _unique([]) == []
