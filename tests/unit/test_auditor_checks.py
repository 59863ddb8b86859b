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
    for listed in ([], ["a"], ["a", "a"], ["b", "a", "b"], [1, True, 1.0, "1"], values):
        made = _unique(listed)
        assert made == list(dict.fromkeys(listed))
        assert made is not listed  # always a fresh list
    with pytest.raises(TypeError):
        _unique([["unhashable"], ["unhashable"]])  # as ``dict.fromkeys`` would


def test_shared_fields_set_never_changes() -> None:
    """Built checks share one ``model_fields_set`` naming every field; nothing pydantic does to a
    check (assignment, copies with updates, dumps) changes it for the others."""
    first = checks.passed("a.check", "one")
    second = checks.failed("b.check", "two", {"x": 1})
    third = CheckResult.warning("c.check", "three")
    every = set(CheckResult.model_fields)
    assert first.model_fields_set == second.model_fields_set == third.model_fields_set == every
    first.ok = False
    first.message = "changed"
    copied = second.model_copy(update={"message": "copied"})
    copied.model_fields_set.discard("message")
    assert second.model_fields_set == third.model_fields_set == first.model_fields_set == every
    assert first.model_dump(exclude_unset=True) == {
        "check_id": "a.check",
        "ok": False,
        "severity": "info",
        "message": "changed",
        "details": {},
    }
    assert second.model_dump(exclude_unset=True)["details"] == {"x": 1}
    assert first.details is not third.details  # each check holds its own details dict


@pytest.mark.parametrize(
    ("name", "severity", "ok"),
    [("passed", "info", True), ("warning", "warn", True), ("failed", "error", False)],
)
@pytest.mark.parametrize(("check_id", "message", "details"), CASES)
def test_taking_constructor_equals_copying_one(
    name: str, severity: str, ok: bool, check_id: str, message: str, details: dict[str, Any] | None
) -> None:
    handed = dict(details) if details is not None else {}
    made = getattr(checks, name + "_taking")(check_id, message, handed)
    reference = getattr(checks, name)(check_id, message, details)
    assert type(made) is CheckResult
    assert made == reference
    assert (made.ok, made.severity) == (ok, severity)
    assert made.model_fields_set == reference.model_fields_set
    assert made.model_dump() == reference.model_dump()
    assert made.details is handed  # held, not copied


def test_taking_constructor_still_validates() -> None:
    for name in ("passed_taking", "warning_taking", "failed_taking"):
        with pytest.raises(ValidationError):
            getattr(checks, name)("", "empty check id", {})
        with pytest.raises(ValidationError):
            getattr(checks, name)("x.check", "details not a dict", ["a"])
