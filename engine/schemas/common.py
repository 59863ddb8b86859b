"""Shared pieces of the wire models: strict base config and UTC-normalised datetimes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict
from pydantic_core import PydanticUndefined

SCHEMA_VERSION = "v1"


class StrictModel(BaseModel):
    """Base of every Cournot wire model: unknown keys are rejected, as in Cournot."""

    model_config = ConfigDict(extra="forbid")


def _to_utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("timestamp has no time zone; send UTC with a 'Z' suffix or an explicit offset")
    return value.astimezone(UTC)


UtcDatetime = Annotated[datetime, AfterValidator(_to_utc)]
"""A datetime that must carry a time zone and is normalised to UTC (serialised with ``Z``)."""


M = TypeVar("M", bound=BaseModel)

_FIELDS: dict[type[BaseModel], tuple[tuple[str, Any, Any], ...]] = {}
_set = object.__setattr__
_new = object.__new__


def _fields_of(cls: type[BaseModel]) -> tuple[tuple[str, Any, Any], ...]:
    found = _FIELDS.get(cls)
    if found is None:
        found = tuple(
            (name, field.default, field.default_factory) for name, field in cls.model_fields.items()
        )
        _FIELDS[cls] = found
    return found


def trusted(cls: type[M], **values: Any) -> M:
    """Build ``cls`` from values the engine produced itself, without re-validating them.

    Validate once, at the boundary: inside the engine, checks, steps and results are built from
    already-validated inputs and fixed literals, and the trace-policy verifier re-checks every
    trace field by field. The instance equals ``cls(**values)`` for such values (same field
    values, same ``model_fields_set``; unit-tested per model), but costs a fraction of it. Callers
    pass fresh containers; missing fields take their declared defaults, as in validation. An
    unknown field name, or a missing required one, raises ``TypeError``.
    """
    data: dict[str, Any] = {}
    matched = 0
    for name, default, factory in _fields_of(cls):
        if name in values:
            data[name] = values[name]
            matched += 1
        elif factory is not None:
            data[name] = factory()
        elif default is PydanticUndefined:
            raise TypeError(f"{cls.__name__} needs the field {name!r}")
        else:
            data[name] = default
    if matched != len(values):
        unknown = sorted(set(values).difference(data))
        raise TypeError(f"{cls.__name__} has no field(s) {unknown}")
    instance = _new(cls)
    _set(instance, "__dict__", data)
    _set(instance, "__pydantic_fields_set__", set(values))
    _set(instance, "__pydantic_extra__", None)
    _set(instance, "__pydantic_private__", None)
    return instance


_STEP_FIELDS = frozenset({"step_id", "type", "inputs", "action", "output", "evidence_ids", "prior_step_ids"})


def trusted_step(
    cls: type[M],
    step_id: str,
    step_type: str,
    inputs: dict[str, Any],
    action: str,
    output: dict[str, Any],
    evidence_ids: list[str],
    prior_step_ids: list[str],
) -> M:
    """:func:`trusted` for a ``ReasoningStep`` built by the trace builder (no ``hash_commitment``)."""
    instance = _new(cls)
    _set(
        instance,
        "__dict__",
        {
            "schema_version": SCHEMA_VERSION,
            "step_id": step_id,
            "type": step_type,
            "inputs": inputs,
            "action": action,
            "output": output,
            "evidence_ids": evidence_ids,
            "prior_step_ids": prior_step_ids,
            "hash_commitment": None,
        },
    )
    _set(instance, "__pydantic_fields_set__", set(_STEP_FIELDS))
    _set(instance, "__pydantic_extra__", None)
    _set(instance, "__pydantic_private__", None)
    return instance


def trusted_check(
    cls: type[M], check_id: str, ok: bool, severity: str, message: str, details: dict[str, Any]
) -> M:
    """:func:`trusted` for the five fields of ``CheckResult`` (the most frequent engine model)."""
    instance = _new(cls)
    _set(
        instance,
        "__dict__",
        {"check_id": check_id, "ok": ok, "severity": severity, "message": message, "details": details},
    )
    _set(instance, "__pydantic_fields_set__", {"check_id", "ok", "severity", "message", "details"})
    _set(instance, "__pydantic_extra__", None)
    _set(instance, "__pydantic_private__", None)
    return instance
