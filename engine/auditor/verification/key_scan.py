"""Key scans over step inputs and outputs: does a JSON-like value hold one of some keys, and where.

Used by the trace-policy rules (external facts, verdicts) and by the trace builder, which checks
each step as it builds it. Values are walked to a bounded depth; leaves (strings, numbers, bools,
None) are never entered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, TypeGuard

__all__ = ["holds_key", "is_mapping"]

_MAX_SCAN_DEPTH: Final = 16
_LEAF_TYPES: Final = frozenset({str, int, float, bool, type(None)})


def is_mapping(value: Any) -> TypeGuard[Mapping[Any, Any]]:
    """Whether ``value`` is a mapping (an exact dict answered without the ABC check)."""
    kind = type(value)
    return kind is dict or (kind not in _LEAF_TYPES and kind is not list and isinstance(value, Mapping))


def _is_container(value: Any) -> bool:
    kind = type(value)
    return kind is dict or kind is list or (kind not in _LEAF_TYPES and isinstance(value, (list, Mapping)))


def holds_key(value: Any, keys: frozenset[str], depth: int) -> bool:
    """Whether :func:`_find_key` would find a key: the same walk, without paths or ordering."""
    if depth > _MAX_SCAN_DEPTH:
        return False
    kind = type(value)
    if kind is dict:
        # One native pass over an exact dict's items (the answer is an "or" over its keys and its
        # non-leaf values, so visiting both in one pass gives the general path's answer), without
        # a ``values()`` method call or a set lookup per child.
        mapping: dict[Any, Any] = value
        for key, child in mapping.items():
            if key in keys or (not _leaf(child) and holds_key(child, keys, depth + 1)):
                return True
        return False
    if kind is list:
        listed: list[Any] = value
        for child in listed:  # noqa: SIM110
            if not _leaf(child) and holds_key(child, keys, depth + 1):
                return True
        return False
    if isinstance(value, list):
        children: Any = value
    elif is_mapping(value):
        if not keys.isdisjoint(value):
            return True
        children = value.values()
    else:
        return False
    for child in children:  # noqa: SIM110 (a plain loop is faster than any() on this hot path)
        if type(child) not in _LEAF_TYPES and holds_key(child, keys, depth + 1):
            return True
    return False


def _leaf(value: object) -> bool:
    """``type(value) in _LEAF_TYPES`` as identity tests (no hashing of the type)."""
    kind = type(value)
    return kind is str or kind is int or kind is bool or kind is float or value is None


def _find_key(value: Any, keys: frozenset[str], path: str, depth: int) -> str | None:
    """Path of the first key from ``keys`` inside ``value`` (keys visited in sorted order)."""
    if depth > _MAX_SCAN_DEPTH:
        return None
    if isinstance(value, list):
        for index, item in enumerate(value):
            if _is_container(item):
                found = _find_key(item, keys, f"{path}[{index}]", depth + 1)
                if found:
                    return found
        return None
    if not is_mapping(value):
        return None
    if not keys.isdisjoint(value):
        return f"{path}.{min(key for key in value if key in keys)}"
    nested = [key for key, child in value.items() if type(child) not in _LEAF_TYPES]
    for key in sorted(nested, key=str):
        found = _find_key(value[key], keys, f"{path}.{key}", depth + 1)
        if found:
            return found
    return None
