"""Construction of wire models from values the engine produced itself, without re-validation.

Kept apart from the models (no model is defined here) so that ``make compile`` can compile it:
the checks and steps built through it are the engine's most frequent models.
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from engine.schemas.common import SCHEMA_VERSION

__all__ = [
    "FAILED_TEMPLATE",
    "PASSED_TEMPLATE",
    "WARNING_TEMPLATE",
    "instance_from_state",
    "model_layout",
    "trusted",
    "trusted_check",
    "trusted_check_from",
    "trusted_check_taking",
    "trusted_step",
]

M = TypeVar("M", bound=BaseModel)

_Plan = tuple[dict[str, Any], int, frozenset[str], tuple[tuple[str, Any], ...]]
_PLANS: dict[type[BaseModel], _Plan] = {}
_new: Final = object.__new__
_REQUIRED: Any = object()


def instance_from_state(
    cls: type[BaseModel], data: dict[str, Any], fields_set: set[str], private: dict[str, Any] | None = None
) -> Any:
    """A ``cls`` instance holding exactly ``data`` as its ``__dict__``, ``fields_set`` as its
    ``model_fields_set``, no extra values and ``private``: the one place the engine stores a
    model's state without validation (its callers check that the values fit; see :func:`trusted`)."""
    instance = _new(cls)
    # ``object.__setattr__`` spelled out, not aliased: a compiled build turns each call into one
    # direct C call of the generic attribute store (mypyc specialises this exact spelling), with
    # no argument tuple or method-wrapper call per store. The stores are pydantic's own
    # (``model_construct`` makes them through ``object.__setattr__`` too).
    object.__setattr__(instance, "__dict__", data)
    object.__setattr__(instance, "__pydantic_fields_set__", fields_set)
    object.__setattr__(instance, "__pydantic_extra__", None)
    object.__setattr__(instance, "__pydantic_private__", private)
    return instance


def model_layout(cls: type[BaseModel]) -> tuple[str, ...]:
    """What a fast path that builds ``cls`` without validation restates by hand: each field's name,
    annotation, constraints and default, the validators and serializers, and the model's config.
    A caller compares it with the layout it was written for and validates when they differ, so a
    constraint added to the model later is never skipped."""
    decorators = cls.__pydantic_decorators__
    validators = {name: list(found.info.fields) for name, found in decorators.field_validators.items()}
    return (
        *(
            f"{name}: {field.annotation!r} {field.metadata!r} {field.default!r}"
            for name, field in cls.model_fields.items()
        ),
        f"field validators {validators!r}",
        f"model validators {sorted(decorators.model_validators)!r}",
        f"serializers {sorted(decorators.field_serializers)!r} {sorted(decorators.model_serializers)!r}",
        f"config {dict(sorted(cls.model_config.items()))!r}",
    )


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
    instance: M = instance_from_state(cls, data, set(values))
    return instance


_STEP_FIELDS: Final = frozenset(
    {"step_id", "type", "inputs", "action", "output", "evidence_ids", "prior_step_ids"}
)

_STEP_TEMPLATE: Final[dict[str, Any]] = {
    "schema_version": SCHEMA_VERSION,
    **dict.fromkeys(("step_id", "type", "inputs", "action", "output", "evidence_ids", "prior_step_ids")),
    "hash_commitment": None,
}
"""A built step's ``__dict__`` in field order, constants filled: copying it (a clone of its keys
table) and replacing seven values costs less than inserting nine keys into a new dict."""


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
    data = _STEP_TEMPLATE.copy()  # a clone of the keys table; each store below replaces a value
    data["step_id"] = step_id
    data["type"] = step_type
    data["inputs"] = inputs
    data["action"] = action
    data["output"] = output
    data["evidence_ids"] = evidence_ids
    data["prior_step_ids"] = prior_step_ids
    step: M = instance_from_state(cls, data, set(_STEP_FIELDS))
    return step


_CHECK_FIELDS: Final = frozenset({"check_id", "ok", "severity", "message", "details"})

_CHECK_FIELDS_SET: Final[set[str]] = set(_CHECK_FIELDS)
"""The ``model_fields_set`` every trusted check shares: it names every field, so no pydantic
operation changes it (assigning a field adds a name already present; copies copy the set). A
fresh five-name set per check cost an allocation, a table resize and a free."""


def _check_template(ok: bool, severity: str) -> dict[str, Any]:
    return {"check_id": None, "ok": ok, "severity": severity, "message": None, "details": None}


PASSED_TEMPLATE: Final = _check_template(True, "info")
WARNING_TEMPLATE: Final = _check_template(True, "warn")
FAILED_TEMPLATE: Final = _check_template(False, "error")
"""A check's ``__dict__`` in field order with the constant ``ok`` and ``severity`` of
``CheckResult.passed`` / ``warning`` / ``failed`` filled: copying it (a clone of its keys table)
and storing the three varying values costs less than a five-key dict display. Never mutated."""


def trusted_check(cls: type[M], check_id: Any, ok: Any, severity: Any, message: Any, details: Any) -> M:
    """A ``CheckResult`` (the most frequent engine model) built like :func:`trusted` when every value
    already has its declared type (``details`` is copied; None gives ``{}``), else validated.

    The parameters are ``Any`` on purpose: compiled, a typed parameter would refuse a wrong value
    with ``TypeError`` before the fallback to validation could report it."""
    if not (
        type(check_id) is str
        and check_id
        and type(message) is str
        and (details is None or type(details) is dict)
    ):
        return cls(check_id=check_id, ok=ok, severity=severity, message=message, details=details or {})
    data = {
        "check_id": check_id,
        "ok": ok,
        "severity": severity,
        "message": message,
        "details": dict(details) if details else {},
    }
    check: M = instance_from_state(cls, data, _CHECK_FIELDS_SET)
    return check


def trusted_check_from(
    template: dict[str, Any], cls: type[M], check_id: Any, message: Any, details: Any
) -> M:
    """:func:`trusted_check` with ``ok`` and ``severity`` from ``template`` (one of
    :data:`PASSED_TEMPLATE`, :data:`WARNING_TEMPLATE`, :data:`FAILED_TEMPLATE`): the same check,
    built by copying the template."""
    if not (
        type(check_id) is str
        and check_id
        and type(message) is str
        and (details is None or type(details) is dict)
    ):
        return trusted_check(cls, check_id, template["ok"], template["severity"], message, details)
    data = template.copy()
    data["check_id"] = check_id
    data["message"] = message
    data["details"] = dict(details) if details else {}
    check: M = instance_from_state(cls, data, _CHECK_FIELDS_SET)
    return check


def trusted_check_taking(
    template: dict[str, Any], cls: type[M], check_id: Any, message: Any, details: Any
) -> M:
    """:func:`trusted_check_from` that keeps ``details`` itself instead of a copy: for a dict the
    caller made for this check and hands over (nobody else holds it)."""
    if not (type(check_id) is str and check_id and type(message) is str and type(details) is dict):
        return trusted_check(cls, check_id, template["ok"], template["severity"], message, details)
    data = template.copy()
    data["check_id"] = check_id
    data["message"] = message
    data["details"] = details
    check: M = instance_from_state(cls, data, _CHECK_FIELDS_SET)
    return check
