"""Could orjson's output hold a float it spells unlike Python's ``repr``?

orjson formats small floats differently from ``repr`` (``0.00001`` vs ``1e-05``, ``1e-7`` vs
``1e-07``). The canonical fast path (:mod:`engine.canonical`) takes orjson's bytes only when they
hold no token that could be such a float: a digit before ``e-``, or ``0.0000``. Strings that merely
look alike only cost the slower, exact path. Compiled with the engine (:mod:`engine.build`).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any, Final, cast

import orjson

__all__ = ["may_hold_small_float", "repr_floats"]

_INFINITIES = (math.inf, -math.inf)  # not Final: a compiled Final float tuple reads as unset
_FRAGMENT: Final[Any] = getattr(orjson, "Fragment", None)  # pre-serialised JSON, written as it is


def may_hold_small_float(text: bytes) -> bool:
    """Whether ``text`` matches ``0\\.0000|[0-9]e-``, found with substring searches.

    Prose such as ``rule-based`` holds ``e-`` often, and hex digests hold ``e`` everywhere: a
    regular-expression search, or a search for ``e-``, costs about a nanosecond per byte. A search
    for the single byte ``-`` runs at memory speed (``memchr``) and ``-`` is rare in canonical
    JSON, so the ``[0-9]e-`` half looks only at the bytes before each ``-``
    (``tests/unit/test_small_float_scan.py`` holds the scan equal to the pattern).
    """
    if b"0.0000" in text:
        return True
    find = text.find
    at = find(b"-", 2)  # "[0-9]e" must come before it, so it cannot be before index 2
    while at != -1:
        if text[at - 1] == 101 and 48 <= text[at - 2] <= 57:  # b"e", then b"0" <= byte <= b"9"
            return True
        at = find(b"-", at + 1)
    return False


def repr_floats(value: Any) -> Any:
    """A copy of JSON data for orjson in which each float it may spell unlike ``repr`` is an
    ``orjson.Fragment`` holding that ``repr`` (what the canonical form writes), None dropped from
    dicts (kept elsewhere); ``ValueError`` for anything else (NaN, infinities, non-``str`` keys,
    tuples, models, datetimes not in UTC from year 1000 on). Property-tested against the reference.
    """
    kind = type(value)
    if kind is dict:
        out: dict[str, Any] = {}
        for key, item in cast(dict[Any, Any], value).items():  # typed: a native dict walk
            if item is None:
                continue
            if type(key) is not str:
                raise ValueError("not plain JSON data")
            kind_of_item = type(item)
            out[key] = (
                item
                if kind_of_item is str or kind_of_item is int or kind_of_item is bool
                else repr_floats(item)
            )
        return out
    if kind is list:
        items = cast(list[Any], value).copy()
        for index in range(len(items)):
            item = items[index]
            kind_of_item = type(item)
            if not (kind_of_item is str or kind_of_item is int or kind_of_item is bool or item is None):
                items[index] = repr_floats(item)
        return items
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        number: float = value
        if number == 0.0 or 1e-3 <= abs(number) < 1e15:
            return number
        if number != number or number in _INFINITIES:
            raise ValueError("not a finite float")
        if _FRAGMENT is None:  # an orjson without Fragment: the exact path decides
            raise ValueError("orjson cannot write a float as its repr")
        return _FRAGMENT(float.__repr__(number).encode("ascii"))
    if kind is datetime:
        moment: datetime = value
        if moment.tzinfo is UTC and moment.year >= 1000:
            return moment  # orjson writes it with OPT_UTC_Z as the canonical form does
    raise ValueError("not plain JSON data")
