"""The canonical fast path's small-float scan equals the pattern it stands for.

``engine.float_spelling.may_hold_small_float`` decides whether orjson's output may hold a float that
orjson formats unlike Python's ``repr`` (``0.00001`` vs ``1e-05``); when it says no, orjson's bytes
are the canonical bytes. It is written with substring searches; the rule is the regular
expression below, and any disagreement would either cost the exact path (harmless) or, worse,
let orjson's spelling of a small float through (a wrong hash).
"""

from __future__ import annotations

import re

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.canonical import canonical_bytes
from engine.float_spelling import may_hold_small_float

RULE = re.compile(rb"0\.0000|[0-9]e-")

ALPHABET = b'0123456789e-.E+ ab"{}:,'


def test_examples_on_both_sides_of_the_rule() -> None:
    assert may_hold_small_float(b"[1e-05]")
    assert may_hold_small_float(b"e-1e-7")
    assert may_hold_small_float(b"[0.00001]")
    assert not may_hold_small_float(b"")
    assert not may_hold_small_float(b"e-")
    assert not may_hold_small_float(b'"rule-based","time-series"')
    assert not may_hold_small_float(b"[1E-05, 1e+05, 0.0001]")
    assert may_hold_small_float(b'"rule-based",' * 50 + b"9e-")


@settings(max_examples=2000)
@given(st.binary(max_size=64) | st.lists(st.sampled_from(list(ALPHABET)), max_size=64).map(bytes))
def test_scan_equals_the_pattern(text: bytes) -> None:
    assert may_hold_small_float(text) == (RULE.search(text) is not None)


@settings(max_examples=300)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8), max_size=6))
def test_canonical_bytes_spell_floats_as_python_does(values: list[object]) -> None:
    """Whatever the scan decides, the canonical bytes spell each float as Python's repr."""
    data = canonical_bytes({"v": values})
    expected = [repr(v) if type(v) is float else orjson.dumps(v).decode() for v in values]
    assert data == ('{"v":[' + ",".join(expected) + "]}").encode()
