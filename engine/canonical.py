"""Canonical JSON and hashing, byte-identical to Cournot's rules.

Rules (see docs/determinism.md and the Cournot reference, section 2):

* keys sorted by Unicode code point, separators ``,`` and ``:``, raw UTF-8 (``ensure_ascii=False``);
* ``None`` values are dropped from dicts at every depth but kept inside lists;
* floats use Python ``repr`` (shortest round trip, ``95000.0`` keeps its ``.0``), ints stay ints;
* NaN and +/-Infinity are rejected with the JSON path of the offending value;
* datetimes become UTC ``%Y-%m-%dT%H:%M:%SZ`` (``.%fZ`` with microseconds);
* pydantic models dump with ``mode="json", exclude_none=True`` and are then canonicalised again;
* bytes become lowercase hex without ``0x``; tuples become lists.

Deliberate divergence from Cournot: where Cournot falls back to ``str(value)`` for any other
type (so a ``set`` hashes differently per ``PYTHONHASHSEED``), this module raises
:class:`CanonicalizationError`. Every value Cournot hashes deterministically hashes identically here.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Final, cast

import orjson
from pydantic import BaseModel

from engine.canonical_models import declared_models_only, direct_fields, model_bytes
from engine.float_spelling import may_hold_small_float, repr_floats

_HEX_DIGITS = re.compile(r"[0-9a-fA-F]*")

__all__ = [
    "CanonicalizationError",
    "canonical_bytes",
    "canonical_bytes_of_plain",
    "canonicalize_value",
    "dumps_canonical",
    "format_datetime_canonical",
    "from_hex",
    "hash_canonical",
    "hash_concat",
    "plain_data",
    "sha256",
    "to_hex",
]


class CanonicalizationError(ValueError):
    """A value cannot be put into canonical form; ``path`` says where (``$.items[2].value``)."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(f"{message} at {path}")
        self.reason = message
        self.path = path


def format_datetime_canonical(value: datetime) -> str:
    """Format a datetime as UTC with a ``Z`` suffix; naive values are taken to be UTC."""
    if type(value) is datetime:  # isoformat writes _format_fields' text for four-digit years
        text, utc = value.isoformat(), value
        if value.tzinfo is not None:  # a zero offset needs no conversion
            if text.endswith("+00:00"):
                text = text[:-6]
            else:
                utc = value.astimezone(UTC).replace(tzinfo=None)
                text = utc.isoformat()
        if utc.year >= 1000:
            return text + "Z"
    return _format_fields(value)


def _format_fields(value: datetime) -> str:
    """The reference for :func:`format_datetime_canonical` (field by field; any datetime subclass)."""
    zone = value.tzinfo
    utc = value if zone is UTC else value.replace(tzinfo=UTC) if zone is None else value.astimezone(UTC)
    if utc.year < 1000:  # strftime's %Y is not zero-padded below 1000 on every platform: keep its text
        if utc.microsecond:
            return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    # The same text as strftime for four-digit years, without its format parsing.
    text = f"{utc.year}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}"
    return f"{text}.{utc.microsecond:06d}Z" if utc.microsecond else f"{text}Z"


def _child(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    text = str(key)
    if text.isidentifier():
        return f"{path}.{text}"
    return f"{path}[{json.dumps(text, ensure_ascii=False)}]"


def canonicalize_value(value: Any, path: str = "$") -> Any:
    """Return a plain JSON-ready value following the canonical rules, or raise with the path:
    a one-pass walk without path bookkeeping handles the common exact types; anything else (enums,
    bytes, int keys, subclasses, NaN) and every error goes through the reference walk, which the
    fast one is property-tested against and which names the JSON path of the offending value."""
    try:
        return _plain(value)
    except (_NeedsSlowPath, RecursionError):
        return _canonicalize_reference(value, path)


_INFINITIES = (math.inf, -math.inf)  # not Final: a compiled Final float tuple reads as unset
_PASS_THROUGH: Final = frozenset({str, int, bool})  # plain_data's leaves copied as they are
_PASS_THROUGH_IN_LISTS: Final = frozenset({str, int, bool, type(None)})


def _plain(value: Any) -> Any:
    """Fast :func:`canonicalize_value` for exact built-in types and models; raises ``_NeedsSlowPath``.

    Strings, ints and bools are copied in the loops without a call per leaf (the common case);
    their types are compared by identity (no set lookup) and dicts are walked natively.
    """
    kind = type(value)
    if kind is dict:
        return _plain_dict(cast(dict[Any, Any], value))
    if kind is list:
        return _plain_items(cast(list[Any], value).copy())
    if kind is tuple:
        return _plain_items(list(cast(tuple[Any, ...], value)))
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if value != value or value in _INFINITIES:
            raise _NeedsSlowPath
        return value
    if kind is datetime:
        return format_datetime_canonical(value)
    names = _DIRECT_FIELDS.get(kind)  # keys are model classes: no isinstance (an ABC check) per model
    if names is None:
        if not isinstance(value, BaseModel):
            raise _NeedsSlowPath
        names = _DIRECT_FIELDS[kind] = direct_fields(kind)
    if not names:  # (a model allowing extra fields has no direct plan: its extras are dumped)
        return _plain(value.model_dump(mode="python", by_alias=True, exclude_none=True))
    data: dict[str, Any] = value.__dict__
    if len(data) != len(names):  # not just the fields: read them one by one
        return _plain_fields(value, data, names)
    model_out = data.copy()  # a C-level copy (no insert per field); only None and non-scalars change
    for name, declared in names:
        item = model_out.get(name, _ABSENT)
        if item is None:
            del model_out[name]
            continue
        kind_of_item = type(item)
        if kind_of_item is str or kind_of_item is int or kind_of_item is bool:
            continue
        if item is _ABSENT:
            raise _NeedsSlowPath
        if declared is not None and not declared_models_only(item, declared):
            # pydantic dumps a model held in a typed field by the declared class (a subclass's
            # extra fields are dropped): let it.
            return _plain(value.model_dump(mode="python", by_alias=True, exclude_none=True))
        model_out[name] = _plain(item)
    return model_out


def _plain_fields(value: Any, data: dict[str, Any], names: _Plan) -> Any:
    """:func:`_plain` of a direct-field model read field by field (its ``__dict__`` holds more)."""
    model_out: dict[str, Any] = {}
    for name, declared in names:
        item = data.get(name, _ABSENT)
        if item is None:
            continue
        if item is _ABSENT:
            raise _NeedsSlowPath
        if declared is not None and not declared_models_only(item, declared):
            return _plain(value.model_dump(mode="python", by_alias=True, exclude_none=True))
        kind_of_item = type(item)
        model_out[name] = (
            item if kind_of_item is str or kind_of_item is int or kind_of_item is bool else _plain(item)
        )
    return model_out


def _plain_dict(value: dict[Any, Any]) -> dict[str, Any]:
    """:func:`_plain` of a dict: None values dropped, keys must be exact ``str``.

    A C-level copy, then only the entries that are not str, int or bool are rewritten."""
    out = value.copy()
    for key, item in value.items():
        if item is None:
            del out[key]
            continue
        if type(key) is not str:
            raise _NeedsSlowPath
        kind_of_item = type(item)
        if not (kind_of_item is str or kind_of_item is int or kind_of_item is bool):
            out[key] = _plain(item)
    return out


def _plain_items(items: list[Any]) -> list[Any]:
    """:func:`_plain` of a list's items, in place in ``items`` (a fresh copy): None is kept."""
    for index in range(len(items)):
        item = items[index]
        kind_of_item = type(item)
        if not (kind_of_item is str or kind_of_item is int or kind_of_item is bool or item is None):
            items[index] = _plain(item)
    return items


_ABSENT: Final[Any] = object()
_Plan = tuple[tuple[str, frozenset[type] | None], ...]
_DIRECT_FIELDS: Final[dict[type, _Plan]] = {}


def plain_data(value: Any) -> Any:
    """``canonicalize_value`` for pure JSON data (dicts with str keys, lists, str, int, bool, finite
    floats, None); raises ``ValueError`` for anything else (models, datetimes, tuples, NaN...)."""
    kind = type(value)
    if kind is dict:
        out: dict[str, Any] = {}
        for key, item in cast(dict[Any, Any], value).items():  # typed: a native dict walk
            if item is None:
                continue
            if type(key) is not str:
                raise ValueError("not plain JSON data")
            out[key] = item if type(item) in _PASS_THROUGH else plain_data(item)
        return out
    if kind is list:
        return [item if type(item) in _PASS_THROUGH_IN_LISTS else plain_data(item) for item in value]
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float and value == value and value not in _INFINITIES:
        return value
    raise ValueError("not plain JSON data")


def _canonicalize_reference(value: Any, path: str = "$") -> Any:
    """The reference walk: exact rules, with the JSON path in every error."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CanonicalizationError(f"non-finite float {value!r} is not allowed", path)
        return value
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in cast(dict[Any, Any], value).items():  # typed: a native dict walk
            if item is None:
                continue
            if not isinstance(key, (str, int)) or isinstance(key, bool):
                raise CanonicalizationError(f"dict key {key!r} must be str or int", path)
            out[key] = _canonicalize_reference(item, _child(path, key))
        return out
    if isinstance(value, (list, tuple)):
        return [_canonicalize_reference(item, _child(path, index)) for index, item in enumerate(value)]
    if isinstance(value, BaseModel):
        dumped = _dump_model(value, path)
        return _canonicalize_reference(dumped, path)
    if isinstance(value, datetime):
        return format_datetime_canonical(value)
    if isinstance(value, Enum):
        return _canonicalize_reference(value.value, path)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    raise CanonicalizationError(
        f"type {type(value).__name__} has no canonical form (sets and arbitrary objects are "
        "rejected because their text depends on hash seed or identity)",
        path,
    )


def _dump_model(model: BaseModel, path: str) -> Any:
    """Dump a model as Cournot does (``exclude_none``); python mode keeps floats so NaN fails here.
    For the wire models' field types (str, int, float, bool, UTC datetimes, lists, dicts, JSON
    values) python-mode output canonicalises to the bytes of Cournot's JSON-mode dump: UTC
    datetimes become ``...Z`` (:func:`format_datetime_canonical`) exactly as pydantic renders them."""
    return model.model_dump(mode="python", by_alias=True, exclude_none=True)


_encode_string = json.encoder.encode_basestring  # C escaper used by json.dumps(ensure_ascii=False)


class _NeedsSlowPath(Exception):
    """Raised by the fast emitter for anything it does not handle; the reference path decides."""


def _emit(value: Any, out: list[str]) -> None:
    """Append the canonical text of ``value`` to ``out`` in one pass (no path bookkeeping)."""
    kind = type(value)
    if kind is str:
        out.append(_encode_string(value))
    elif kind is dict:
        keys = [key for key, item in cast(dict[Any, Any], value).items() if item is not None]
        if not all(type(key) is str for key in keys):
            raise _NeedsSlowPath
        keys.sort()
        out.append("{")
        first = True
        for key in keys:
            if not first:
                out.append(",")
            first = False
            out.append(_encode_string(key))
            out.append(":")
            _emit(value[key], out)
        out.append("}")
    elif kind is list or kind is tuple:
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            if item is None:
                out.append("null")
            else:
                _emit(item, out)
        out.append("]")
    elif kind is int:
        out.append(int.__repr__(value))
    elif kind is float:
        if value != value or value in _INFINITIES:
            raise _NeedsSlowPath
        out.append(float.__repr__(value))
    elif kind is bool:
        out.append("true" if value else "false")
    elif value is None:
        out.append("null")
    elif isinstance(value, BaseModel):
        _emit(value.model_dump(mode="python", by_alias=True, exclude_none=True), out)
    elif kind is datetime:
        out.append(_encode_string(format_datetime_canonical(value)))
    else:
        raise _NeedsSlowPath


def dumps_canonical(value: Any) -> str:
    """Serialise ``value`` as canonical JSON text.

    A one-pass emitter handles the common types; anything unusual (int keys, enums, bytes,
    subclasses, NaN) goes through :func:`canonicalize_value` and ``json.dumps``, which is the
    reference the emitter is tested against and which names the JSON path of any error.
    """
    out: list[str] = []
    try:
        _emit(value, out)
    except (_NeedsSlowPath, RecursionError, ValueError):
        return _dumps_reference(value)
    return "".join(out)


def _dumps_reference(value: Any) -> str:
    plain = _canonicalize_reference(value)
    try:
        return json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except TypeError as exc:  # mixed int and str keys cannot be sorted
        raise CanonicalizationError(f"cannot sort keys: {exc}", "$") from exc
    except ValueError as exc:  # e.g. an int too large for str() under the interpreter's digit limit
        raise CanonicalizationError(str(exc), "$") from exc


# orjson's bytes are taken only when they hold no float it may spell unlike repr (float_spelling)
_ORJSON_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME


def _orjson_default(value: Any) -> Any:
    if type(value) is datetime:  # the most frequent call (orjson passes datetimes through)
        return format_datetime_canonical(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="python", by_alias=True, exclude_none=True)
    if isinstance(value, datetime):
        return format_datetime_canonical(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    raise TypeError(type(value).__name__)


def _orjson_or_none(value: Any) -> bytes | None:
    try:
        return orjson.dumps(value, default=_orjson_default, option=_ORJSON_OPTIONS)
    except (TypeError, orjson.JSONEncodeError):
        return None


def _prune_none(value: Any) -> tuple[Any, bool]:
    """Drop None from dicts at every depth (models dumped first); ``exact`` is False when the value
    needs the exact path (non-finite floats, types this walk does not know)."""
    kind = type(value)
    if kind is dict:
        out: dict[Any, Any] = {}
        for key, item in cast(dict[Any, Any], value).items():  # typed: a native dict walk
            if item is None:
                continue
            pruned, exact = _prune_none(item)
            if not exact:
                return value, False
            out[key] = pruned
        return out, True
    if kind is list or kind is tuple:
        items: list[Any] = []
        for item in value:
            pruned, exact = _prune_none(item)
            if not exact:
                return value, False
            items.append(pruned)
        return items, True
    if kind is float:
        return value, math.isfinite(value)
    if value is None or kind is str or kind is int or kind is bool:
        return value, True
    if isinstance(value, BaseModel):
        return _prune_none(value.model_dump(mode="python", by_alias=True, exclude_none=True))
    if kind is datetime:
        return format_datetime_canonical(value), True
    return value, False


def canonical_bytes(value: Any) -> bytes:
    """Canonical JSON encoded as UTF-8; lone surrogates raise :class:`CanonicalizationError`.

    A model first tries :func:`model_bytes`. Then orjson with sorted keys, accepted only when it
    cannot differ from the reference (None pruned from dicts, no NaN, no small float that orjson
    formats differently); otherwise, or when orjson refuses the value (big ints, non-str keys,
    sets, surrogates), :func:`dumps_canonical` decides. Equality with the reference is property-tested.
    """
    if isinstance(value, BaseModel) and (ready := model_bytes(value)) is not None:
        return ready
    fast = _orjson_or_none(value)
    if fast is not None and b"null" in fast:
        # Retry once with None removed from dicts (a cheap walk); nulls left over are list
        # elements, which the canonical form keeps, unless a NaN hid among them.
        pruned, exact = _prune_none(value)
        fast = _orjson_or_none(pruned) if exact else None
    if fast is not None and not may_hold_small_float(fast):
        return fast
    text = dumps_canonical(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalizationError("string holds a lone surrogate, not valid UTF-8", "$") from exc


def canonical_bytes_of_plain(plain: Any) -> bytes:
    """Canonical bytes of a value :func:`canonicalize_value` already returned (no second walk).

    Such a value holds no None inside dicts, no NaN, no models; orjson with sorted keys gives the
    canonical bytes unless a small float could be formatted differently or orjson refuses the
    value (big ints), in which case the reference serialiser decides. Property-tested against
    :func:`canonical_bytes`.
    """
    try:
        fast = orjson.dumps(plain, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        fast = None
    if fast is not None and not may_hold_small_float(fast):
        return fast
    try:  # the floats orjson may spell unlike repr, written as their repr
        return orjson.dumps(repr_floats(plain), option=orjson.OPT_SORT_KEYS | orjson.OPT_UTC_Z)
    except (ValueError, TypeError, RecursionError, orjson.JSONEncodeError):
        return canonical_bytes(plain)


def sha256(data: bytes) -> bytes:
    """Raw SHA-256 digest."""
    return hashlib.sha256(data).digest()


def hash_canonical(value: Any) -> bytes:
    """SHA-256 of the canonical UTF-8 bytes of ``value`` (32 raw bytes)."""
    return hashlib.sha256(canonical_bytes(value)).digest()


def hash_concat(left: bytes, right: bytes) -> bytes:
    """``sha256(left || right)`` as Cournot's Merkle parent."""
    return hashlib.sha256(left + right).digest()


def sha256_hex(data: bytes) -> str:
    """``0x`` + lowercase hex SHA-256 of ``data``: the one hex-digest helper."""
    return "0x" + hashlib.sha256(data).hexdigest()


def to_hex(digest: bytes) -> str:
    """``0x`` + lowercase hex."""
    return "0x" + bytes(digest).hex()


def from_hex(text: str) -> bytes:
    """Parse ``0x``-prefixed hex (upper or lower case digits); ``0X`` and odd lengths are errors."""
    if not isinstance(text, str) or not text.startswith("0x"):
        raise ValueError(f"hex string must start with '0x': {text!r}")
    digits = text[2:]
    if len(digits) % 2:
        raise ValueError(f"hex string has an odd number of digits: {text!r}")
    if not _HEX_DIGITS.fullmatch(digits):
        raise ValueError(f"not a hex string: {text!r}")
    return bytes.fromhex(digits)
