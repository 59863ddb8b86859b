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

_Plan = tuple[dict[str, Any], int, frozenset[str], tuple[tuple[str, Any], ...]]
_PLANS: dict[type[BaseModel], _Plan] = {}
_set = object.__setattr__
_new = object.__new__
_REQUIRED: Any = object()


def _plan_of(cls: type[BaseModel]) -> _Plan:
    """Per model class: a template ``__dict__`` (fields in declared order, static defaults filled),
    its size, the required field names and the ``(name, default_factory)`` pairs."""
    found = _PLANS.get(cls)
    if found is None:
        template: dict[str, Any] = {}
        required: set[str] = set()
        factories: list[tuple[str, Any]] = []
        for name, field in cls.model_fields.items():
            if field.default_factory is not None:
                template[name] = _REQUIRED
                factories.append((name, field.default_factory))
            elif field.default is PydanticUndefined:
                template[name] = _REQUIRED
                required.add(name)
            else:
                template[name] = field.default
        found = _PLANS[cls] = (template, len(template), frozenset(required), tuple(factories))
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
    template, size, required, factories = _plan_of(cls)
    data = template.copy()
    data.update(values)  # declared order is kept: only an unknown name would be appended
    if not values.keys() >= required:
        missing = next(name for name in template if name in required and name not in values)
        raise TypeError(f"{cls.__name__} needs the field {missing!r}")
    if len(data) != size:
        unknown = sorted(set(values).difference(template))
        raise TypeError(f"{cls.__name__} has no field(s) {unknown}")
    for name, factory in factories:
        if name not in values:
            data[name] = factory()
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
