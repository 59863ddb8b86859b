"""Could orjson's output hold a float it spells unlike Python's ``repr``?

orjson formats small floats differently from ``repr`` (``0.00001`` vs ``1e-05``, ``1e-7`` vs
``1e-07``). The canonical fast path (:mod:`engine.canonical`) takes orjson's bytes only when they
hold no token that could be such a float: a digit before ``e-``, or ``0.0000``. Strings that merely
look alike only cost the slower, exact path. Compiled with the engine (:mod:`engine.build`).
"""

from __future__ import annotations

__all__ = ["may_hold_small_float"]


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
