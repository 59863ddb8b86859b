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

    Prose such as ``rule-based`` holds ``e-`` often; a regular-expression search over the whole
    text cost several times more than these finds (``tests/unit/test_small_float_scan.py`` holds
    the two equal).
    """
    if b"0.0000" in text:
        return True
    at = text.find(b"e-", 1)  # a digit must come before it, so it cannot start at 0
    while at != -1:
        if 48 <= text[at - 1] <= 57:  # b"0" <= byte <= b"9"
            return True
        at = text.find(b"e-", at + 2)
    return False
