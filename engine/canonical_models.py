"""Canonical bytes of a pydantic model in one dump and one orjson call (no Python callback per value).

The dump is read from the model's fields (:func:`ready_fields`, a compiled walk) wherever the
dump is just those fields, and taken from ``model_dump`` otherwise.

:func:`model_bytes` is :func:`engine.canonical.canonical_bytes` for a model whose dump holds only
values orjson writes in canonical form as they are: dicts with ``str`` keys and no ``None`` value,
lists, ``str``, ``int``, ``bool``, ``None`` inside lists, floats that orjson formats like ``repr``
(zero and magnitudes in ``[1e-3, 1e15)``) and datetimes already in UTC (``tzinfo`` is
``datetime.UTC``) from year 1000 on, which orjson writes with ``OPT_UTC_Z`` exactly as
:func:`engine.canonical.format_datetime_canonical` does. Validated wire models (the prompt spec,
evidence items, verdicts) are such models: their timestamps are normalised to UTC.

A dump that also holds a ``None`` in a dict or a small or huge float is written by
:func:`engine.float_spelling.repr_floats` (None dropped, such floats as their ``repr``). Anything
else (another time zone, a tuple, an enum, an int orjson refuses, a lone surrogate) returns ``None``
and the caller takes the reference path, so the bytes never differ; equality with the reference is
property-tested.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final, get_args

import orjson
from pydantic import BaseModel, RootModel

from engine.float_spelling import repr_floats

__all__ = [
    "declared_models_only",
    "direct_fields",
    "json_ready",
    "model_bytes",
    "models_in",
    "ready_dump",
    "ready_dump_bytes",
    "ready_fields",
    "spelled_fields",
]

_OPTIONS: Final = orjson.OPT_SORT_KEYS | orjson.OPT_UTC_Z


def json_ready(value: Any) -> bool:
    """Whether orjson (sorted keys, ``OPT_UTC_Z``) writes ``value`` in canonical form as it is.

    Ints are not bounded here: orjson refuses those beyond 64 bits, and :func:`model_bytes` then
    returns ``None``.
    """
    kind = type(value)
    if kind is dict:
        mapping: dict[Any, Any] = value  # typed: compiled, a native dict walk
        for key, item in mapping.items():
            if type(key) is not str:
                return False
            kind_of_item = type(item)
            if kind_of_item is str or kind_of_item is int or kind_of_item is bool:
                continue
            if item is None or not json_ready(item):
                return False
        return True
    if kind is list:
        items: list[Any] = value
        for item in items:
            kind_of_item = type(item)
            if kind_of_item is str or kind_of_item is int or kind_of_item is bool or item is None:
                continue
            if not json_ready(item):
                return False
        return True
    if kind is str or kind is int or kind is bool:
        return True
    if kind is float:
        number: float = value
        return number == 0.0 or 1e-3 <= abs(number) < 1e15  # NaN and the infinities fail both
    if kind is datetime:
        moment: datetime = value
        return moment.tzinfo is UTC and moment.year >= 1000
    return False


_Plan = tuple[tuple[str, frozenset[type] | None], ...]
_PLANS: Final[dict[type, _Plan]] = {}
_ABSENT: Final[Any] = object()


def _plan(kind: type) -> _Plan:
    """:func:`direct_fields` of a model class, cached (classes are keys: no isinstance per model)."""
    plan = _PLANS.get(kind)
    if plan is None:
        plan = _PLANS[kind] = direct_fields(kind)
    return plan


def _ready_fields(model: Any, plan: _Plan, spell: bool) -> dict[str, Any] | None:
    """The fields of a direct-field model (None dropped), each orjson-ready, else ``None``.

    A C-level copy of ``__dict__`` (no insert per field); it must hold exactly the plan's fields,
    so only None entries are deleted and model-typed entries rewritten. With ``spell`` a value that
    is not :func:`json_ready` is written by :func:`_spelled` instead of declining."""
    data: dict[str, Any] = model.__dict__
    if len(data) != len(plan):
        return None
    out = data.copy()
    for name, declared in plan:
        item = out.get(name, _ABSENT)
        if item is None:
            del out[name]
            continue
        kind = type(item)
        if kind is str or kind is int or kind is bool or json_ready(item):
            continue
        if item is _ABSENT:
            return None
        if declared is None:
            if not spell:
                return None
            ready = _spelled(item)
        else:
            ready = _ready_declared(item, declared, spell)
        if ready is None:
            return None
        out[name] = ready
    return out


def _spelled(item: Any) -> Any:
    """:func:`engine.float_spelling.repr_floats` of a value (not None), or ``None`` when it refuses."""
    try:
        return repr_floats(item)
    except ValueError:
        return None


def _ready_declared(item: Any, declared: frozenset[type], spell: bool) -> Any:
    """A value of a field typed with models: models of exactly a declared class become their
    ready fields; lists are walked; anything else must be :func:`json_ready` (or, with ``spell``,
    is written by :func:`_spelled`). ``None`` if unsure."""
    kind = type(item)
    if kind in declared:
        plan = _plan(kind)
        return _ready_fields(item, plan, spell) if plan else None
    if kind is list:
        items: list[Any] = item
        out: list[Any] = []
        for element in items:
            if element is None:
                out.append(None)
                continue
            ready = _ready_declared(element, declared, spell)
            if ready is None:
                return None
            out.append(ready)
        return out
    if json_ready(item):
        return item
    return _spelled(item) if spell else None


def ready_fields(model: BaseModel) -> dict[str, Any] | None:
    """:func:`ready_dump` read from the fields, without ``model_dump``, or ``None`` when unsure.

    Applies to a model whose dump is its fields (:func:`direct_fields`: no aliases, serializers,
    computed or excluded fields, no ``extra="allow"``), at every depth, while each field typed with
    models holds instances of exactly the declared classes (pydantic dumps another class by the
    declared schema). Every other value must be :func:`json_ready` as it is; such a value is what
    the python-mode dump returns for it, so the result equals the dump (property-tested).
    """
    plan = _plan(type(model))
    if not plan:
        return None
    try:
        return _ready_fields(model, plan, False)
    except RecursionError:
        return None


def spelled_fields(model: BaseModel) -> dict[str, Any] | None:
    """:func:`ready_fields`, except that a value :func:`json_ready` refuses (a ``None`` inside a dict,
    a float orjson may spell unlike ``repr``) is written by :func:`engine.float_spelling.repr_floats`
    instead of declining: ``repr_floats`` of the ``exclude_none`` dump, which is what
    :func:`model_bytes` writes when the dump is not ready, without the dump. For bytes only (the
    floats are ``orjson.Fragment`` values); ``None`` when unsure, as :func:`ready_fields`."""
    plan = _plan(type(model))
    if not plan:
        return None
    try:
        return _ready_fields(model, plan, True)
    except RecursionError:
        return None


def ready_dump(model: BaseModel) -> dict[str, Any] | None:
    """``model``'s ``exclude_none`` python dump when :func:`json_ready` holds for it, else ``None``.

    Read from the fields (:func:`ready_fields`) when it can be; else dumped and checked."""
    fields = ready_fields(model)
    if fields is not None:
        return fields
    try:
        dumped = model.model_dump(mode="python", by_alias=True, exclude_none=True)
        return dumped if json_ready(dumped) else None
    except Exception:  # any refusal (a failing serializer, deep nesting) is for the reference
        # path to decide and report, exactly as it did before this path existed.
        return None


def ready_dump_bytes(dumped: Any) -> bytes | None:
    """Canonical bytes of a value :func:`ready_dump` returned (or of any part of one), or ``None``
    when orjson refuses it (an int beyond 64 bits, a lone surrogate, deep nesting)."""
    try:
        return orjson.dumps(dumped, option=_OPTIONS)
    except Exception:  # any refusal is for the reference path to decide and report
        return None


def model_bytes(model: BaseModel) -> bytes | None:
    """Canonical bytes of ``model`` (its ``exclude_none`` python dump), or ``None`` when unsure.

    A dump holding floats orjson may spell unlike ``repr`` is written with those floats as their
    ``repr`` (:func:`engine.float_spelling.repr_floats`) instead of declining."""
    fields = spelled_fields(model)
    if fields is not None:
        return ready_dump_bytes(fields)
    try:
        dumped = model.model_dump(mode="python", by_alias=True, exclude_none=True)
        if json_ready(dumped):
            return orjson.dumps(dumped, option=_OPTIONS)
        return orjson.dumps(repr_floats(dumped), option=_OPTIONS)
    except Exception:  # any refusal (a failing serializer, a value repr_floats or orjson refuses)
        return None  # is for the reference path to decide and report


def declared_models_only(item: Any, declared: frozenset[type]) -> bool:
    """Whether every model inside ``item`` (at any depth of lists and dicts) is of a declared class."""
    kind = type(item)
    if kind is list or kind is tuple:
        return all(declared_models_only(x, declared) for x in item)
    if kind is dict:
        return all(declared_models_only(x, declared) for x in item.values())
    return kind in declared or not isinstance(item, BaseModel)


def models_in(annotation: Any) -> frozenset[type]:
    """The model classes named anywhere in a field annotation."""
    found: set[type] = set()
    stack = [annotation]
    while stack:
        current = stack.pop()
        if isinstance(current, type) and issubclass(current, BaseModel):
            found.add(current)
        stack.extend(get_args(current))
    return frozenset(found)


def direct_fields(cls: type[BaseModel]) -> tuple[tuple[str, frozenset[type] | None], ...]:
    """``(field, declared model classes or None)`` when a model's dump is just its fields; () if not.

    True for plain models: no aliases, excluded fields, computed fields, serializers (decorators or
    ``Annotated`` ones, ``exclude_if``: anything the core schema serialises through) or root models, and no ``extra="allow"`` (any other model's dump ignores ``__pydantic_extra__``). Their dump (python mode, ``exclude_none``) equals reading ``__dict__`` field by field,
    which :func:`engine.canonical._plain` then canonicalises exactly as it would the dump; a field typed with models
    is read directly only while it holds instances of exactly those classes.
    """
    decorators = cls.__pydantic_decorators__
    if (
        issubclass(cls, RootModel)
        or cls.model_config.get("extra") == "allow"
        or cls.model_computed_fields
        or decorators.field_serializers
        or decorators.model_serializers
        or _schema_serializes(cls.__pydantic_core_schema__)
    ):
        return ()
    out: list[tuple[str, frozenset[type] | None]] = []
    for name, field in cls.model_fields.items():
        if (
            field.alias is not None
            or field.serialization_alias is not None
            or field.exclude
            or getattr(field, "exclude_if", None) is not None
        ):
            return ()
        models = models_in(field.annotation)
        out.append((name, models or None))
    return tuple(out)


_SERIALIZING_KEYS: Final = frozenset({"serialization", "serialization_exclude_if", "serialization_exclude"})


def _schema_serializes(schema: Any) -> bool:
    """Whether a core schema (at any depth, nested models included) names a serializer or an
    exclusion: ``Annotated`` serializers and ``exclude_if`` live there, not in the decorators.
    Such a model's dump is not its fields, so it gets no direct plan (fail closed); so does a
    model whose schema is not built yet (not a dict)."""
    if type(schema) is not dict:
        return True
    stack: list[Any] = [schema]
    seen: set[int] = set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if type(current) is dict:
            mapping: dict[Any, Any] = current
            for key, item in mapping.items():
                if key in _SERIALIZING_KEYS:
                    return True
                stack.append(item)
        elif type(current) is list:
            stack.extend(current)
    return False
