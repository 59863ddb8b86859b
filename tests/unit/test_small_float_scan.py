"""The canonical fast path's small-float scan equals the pattern it stands for.

``engine.float_spelling.may_hold_small_float`` decides whether orjson's output may hold a float that
orjson formats unlike Python's ``repr`` (``0.00001`` vs ``1e-05``); when it says no, orjson's bytes
are the canonical bytes. It is written with substring searches; the rule is the regular
expression below, and any disagreement would either cost the exact path (harmless) or, worse,
let orjson's spelling of a small float through (a wrong hash).
"""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.canonical import canonical_bytes
from engine.float_spelling import may_hold_small_float, repr_floats

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


_ANY_FLOAT = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True) | st.sampled_from(
    [0.0, -0.0, 1e-3, 0.00099, 1e15, 999999999999999.9, 1e-05, 1e16, 5e-324, -1.5e-07, 1e300]
)
_PLAIN = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | _ANY_FLOAT
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=16,
)


@given(_PLAIN)
@settings(max_examples=1500, deadline=None)
def test_floats_written_as_their_repr_give_the_reference_bytes(value: Any) -> None:
    """orjson on repr_floats' copy: the reference bytes, whatever the floats' magnitudes."""
    from engine.canonical import _dumps_reference, canonical_bytes_of_plain, canonicalize_value

    try:
        reference = _dumps_reference(value).encode("utf-8")
    except (ValueError, UnicodeEncodeError):  # a lone surrogate: refused by the reference
        return
    try:
        spelled = orjson.dumps(repr_floats(value), option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # e.g. an int beyond 64 bits: the callers fall back
        spelled = reference
    assert spelled == reference
    assert canonical_bytes_of_plain(canonicalize_value(value)) == reference


@pytest.mark.parametrize("value", [float("nan"), [float("inf")], {1: 2}, (1,), {"a": {1.5}}, b"x"])
def test_repr_floats_refuses_what_is_not_plain_json(value: Any) -> None:
    with pytest.raises(ValueError):
        repr_floats(value)
