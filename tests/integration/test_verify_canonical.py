"""Verify's fast canonical checks agree with the reference canonical form on arbitrary JSON values.

No database: these pin the helpers ``ledger verify`` relies on to decide "canonical or not" and to
hash stored inputs (orjson when it cannot differ, the exact rules otherwise).
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.store.hashing import canonical_text
from ledger.verify.canonical_form import MISSING, _plain_value, parse_canonical, top_level_value

FLOATS = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [1e-05, 5e-05, 2.5e-05, 1e-07, 0.0001, 1e16, 1e22, -0.0, 95000.0, 1.2345678901234568e17]
)
SCALARS = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | FLOATS | st.text(max_size=12)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_parse_canonical_accepts_canonical_text_and_refuses_other_spellings(value: Any) -> None:
    text = canonical_text(value)
    parsed, canonical, _ = parse_canonical(text)
    assert canonical and canonical_text(parsed) == text
    spaced = json.dumps(value, indent=1, ensure_ascii=False)
    if spaced != text:
        assert parse_canonical(spaced)[1] is False


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=6), VALUES, max_size=5), st.text(max_size=6))
def test_top_level_value_reads_one_member_of_a_canonical_object(members: dict[str, Any], key: str) -> None:
    text = canonical_text(members)
    parsed = json.loads(text)
    found = top_level_value(text, key)
    if key in parsed:
        assert found == parsed[key]
    else:
        assert found is MISSING


def test_payloads_with_a_null_inside_an_object_are_not_canonical() -> None:
    assert parse_canonical('{"a":null,"b":1}')[1] is False
    assert parse_canonical('{"a":[null],"b":1}')[1] is True
    assert parse_canonical('{"x":1e-5}')[1] is False
    assert parse_canonical('{"x":1e-05}')[1] is True
    assert parse_canonical('{"b":1,"a":2}')[1] is False


def test_strings_and_floats_that_only_look_like_orjson_spellings_are_canonical() -> None:
    # the fast path judges the parsed values, not substrings of the text: these are canonical
    assert parse_canonical('{"a":"null 0.00001 1e-5","b":10.00001,"c":1e+16}')[1] is True
    assert parse_canonical('{"x":0.00001}')[1] is False  # orjson's spelling of 1e-05
    assert parse_canonical('{"x":[1,{"y":1e-7}]}')[1] is False  # and of 1e-07, at any depth


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_parse_canonical_of_orjson_output_agrees_with_the_reference(value: Any) -> None:
    """orjson's sorted output (which may spell nulls and small floats unlike the canonical form) is
    judged canonical exactly when it is the canonical text of what it parses to."""
    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode("utf-8")
    except (TypeError, orjson.JSONEncodeError):  # ints beyond 64 bits: orjson writes no text to judge
        return
    assert parse_canonical(text)[1] is (canonical_text(json.loads(text)) == text)


def _plain_reference(value: Any) -> bool:
    """The rule :func:`_plain_value` implements, written plainly: no None, floats only in range."""
    if isinstance(value, dict):
        return all(_plain_reference(item) for item in value.values())
    if isinstance(value, list):
        return all(_plain_reference(item) for item in value)
    if isinstance(value, float):
        return value == 0.0 or 1e-4 <= abs(value) < 1e16
    return value is not None and type(value) in (str, int, bool)


@settings(max_examples=300, deadline=None)
@given(VALUES | st.lists(VALUES, max_size=3).map(tuple))
def test_plain_value_is_the_plain_rule(value: Any) -> None:
    assert _plain_value(value) is _plain_reference(value)


PRESENT = VALUES.filter(lambda value: value is not None)  # a None member is dropped, not a part


@settings(max_examples=300, deadline=None)
@given(PRESENT, st.lists(VALUES, max_size=3), PRESENT)
def test_parse_canonical_pieces_are_the_canonical_bytes_of_each_part(
    spec: Any, items: list[Any], verdict: Any
) -> None:
    payload = {"evidence_bundle": {"items": items}, "prompt_spec": spec, "verdict": verdict}
    _, canonical, pieces = parse_canonical(canonical_text(payload), split=True)
    assert canonical
    assert pieces["prompt_spec"] == canonical_text(spec).encode("utf-8")
    assert pieces["verdict"] == canonical_text(verdict).encode("utf-8")
    assert pieces["items"] == [canonical_text(item).encode("utf-8") for item in items]
