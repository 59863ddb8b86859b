"""The auditor's bounds take exactly the declared types, compiled or pure (no float or bool ints)."""

from __future__ import annotations

import dataclasses

import pytest

from engine.auditor.config import AuditConfig
from engine.auditor.verification.trace_policy import TracePolicyVerifier

# every bound declared ``int`` (read from the dataclass, not from the module's own list)
INT_FIELDS = tuple(field.name for field in dataclasses.fields(AuditConfig) if field.type == "int")


@pytest.mark.parametrize("name", INT_FIELDS)
@pytest.mark.parametrize("value", [200.0, True, "200", None])
def test_an_int_bound_of_another_type_is_refused(name: str, value: object) -> None:
    with pytest.raises(TypeError, match=name):
        AuditConfig(**{name: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [True, "0.01", None])
def test_the_tolerance_must_be_a_number(value: object) -> None:
    with pytest.raises(TypeError, match="numeric_tolerance"):
        AuditConfig(numeric_tolerance=value)  # type: ignore[arg-type]


def test_the_int_bounds_are_the_seven_declared() -> None:
    assert len(INT_FIELDS) == 7 and "max_steps" in INT_FIELDS


def test_declared_types_are_accepted_and_kept() -> None:
    config = AuditConfig(numeric_tolerance=0, max_steps=50, timestamp_slack_seconds=0)
    assert (config.numeric_tolerance, config.max_steps, config.timestamp_slack_seconds) == (0, 50, 0)
    assert type(config.numeric_tolerance) is int  # committed as written (engine/build.py says why)


@pytest.mark.parametrize("value", [3.0, True, "3"])
def test_the_verifier_cap_is_an_int_or_none(value: object) -> None:
    with pytest.raises(TypeError, match="max_steps"):
        TracePolicyVerifier(max_steps=value)
    assert TracePolicyVerifier(max_steps=3).max_steps == 3
    assert TracePolicyVerifier().max_steps is None
