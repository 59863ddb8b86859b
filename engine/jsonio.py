"""Strict JSON decoding for untrusted input.

``json.loads`` accepts ``NaN``/``Infinity``, silently keeps the last of duplicate keys and has no
depth bound; each of those would let two parties disagree about what a payload means, so each is
an error here, reported with a code, a message and the JSON path where it was found.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["DEFAULT_MAX_DEPTH", "StrictJSONError", "loads_strict"]

DEFAULT_MAX_DEPTH = 64


class StrictJSONError(ValueError):
    """Why a document was refused: ``code`` (machine), ``message`` (human), ``path`` (where)."""

    def __init__(self, code: str, message: str, path: str = "$") -> None:
        super().__init__(f"{code}: {message} at {path}")
        self.code = code
        self.message = message
        self.path = path


def _reject_constant(name: str) -> Any:
    raise StrictJSONError("non_finite_number", f"{name} is not allowed in canonical JSON")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise StrictJSONError("duplicate_key", f"object has the key {key!r} more than once")
        result[key] = value
    return result


def _check_depth(value: Any, max_depth: int) -> None:
    """Reject nesting deeper than ``max_depth`` (measured on the decoded containers).

    Absurd depths never get this far: the C decoder raises RecursionError first.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise StrictJSONError("too_deep", f"nesting deeper than {max_depth} levels")
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))


def _locate_non_finite(value: Any, path: str) -> None:
    """Find the path of the first NaN/Infinity (used only to improve the error message)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise StrictJSONError("non_finite_number", "NaN or Infinity is not allowed", path)
    if isinstance(value, dict):
        for key, item in value.items():
            _locate_non_finite(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _locate_non_finite(item, f"{path}[{index}]")


def loads_strict(data: bytes | str, *, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """Decode UTF-8 JSON, refusing invalid UTF-8, NaN/Infinity, duplicate keys and deep nesting."""
    if isinstance(data, (bytes, bytearray)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StrictJSONError(
                "invalid_utf8", f"byte {exc.start} is not valid UTF-8 ({exc.reason})"
            ) from exc
    else:
        text = data
    if text.startswith("\ufeff"):
        raise StrictJSONError("invalid_json", "a byte order mark is not allowed")
    try:
        value = json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=_reject_constant)
    except StrictJSONError as exc:
        if exc.code == "non_finite_number":
            _locate_in_text(text)
        raise
    except json.JSONDecodeError as exc:
        raise StrictJSONError("invalid_json", f"{exc.msg} (line {exc.lineno}, column {exc.colno})") from exc
    except RecursionError as exc:
        raise StrictJSONError("too_deep", "nesting too deep to decode") from exc
    except ValueError as exc:  # integers beyond the interpreter's digit limit
        raise StrictJSONError("number_too_large", str(exc)) from exc
    if isinstance(value, (dict, list)) and text.count("[") + text.count("{") > max_depth:
        _check_depth(value, max_depth)
    return value


def _locate_in_text(text: str) -> None:
    """Re-decode permissively to name the path of the non-finite number, then raise."""
    try:
        permissive = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return
    _locate_non_finite(permissive, "$")
