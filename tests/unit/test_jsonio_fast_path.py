"""``loads_strict``'s orjson fast path decodes exactly as the hooked ``json`` decoder it skips."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.jsonio import StrictJSONError, _decoded_fast, _Hooks, _loads_hooked, loads_strict

_TEXT = st.text(alphabet=st.sampled_from(list('abe+:"\\\u00e9\u20ac\U0001f600 \x01{}[],')), max_size=8)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    _TEXT,
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=20,
)


def _hooked(text: str, *, exact_numbers: bool = False) -> tuple[str, Any]:
    """What the decoder without the fast path answers: ``("ok", value)`` or ``("error", code, path)``."""
    try:
        return "ok", _loads_hooked(text, _Hooks(None), exact_numbers, 64)
    except StrictJSONError as exc:
        return "error", (exc.code, exc.path)


def _strict(text: str, *, exact_numbers: bool = False) -> tuple[str, Any]:
    try:
        return "ok", loads_strict(text, exact_numbers=exact_numbers)
    except StrictJSONError as exc:
        return "error", (exc.code, exc.path)


def _same(left: tuple[str, Any], right: tuple[str, Any]) -> bool:
    # repr tells 0 from 0.0 and -0.0 from 0.0, which == does not
    return left[0] == right[0] and repr(left[1]) == repr(right[1])


@given(_VALUES, st.booleans())
@settings(max_examples=1500)
def test_fast_path_equals_the_hooked_decoder(value: Any, exact_numbers: bool) -> None:
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=1)):
        assert _same(_strict(text, exact_numbers=exact_numbers), _hooked(text, exact_numbers=exact_numbers))


@given(st.dictionaries(_TEXT, _VALUES, min_size=1, max_size=4), st.data())
@settings(max_examples=500)
def test_a_duplicate_key_anywhere_is_refused_as_before(members: dict[str, Any], data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(sorted(members)))
    body = ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in members.items())
    text = "[{" + body + f",{json.dumps(key)}:{json.dumps(data.draw(_VALUES))}" + "}]"
    assert _decoded_fast(text) is None
    assert _strict(text)[0] == "error"
    assert _same(_strict(text), _hooked(text))


@pytest.mark.parametrize(
    "text",
    [
        '{"a:b":1,"a:b":2}',
        '{"\\u003a":1,"\\u003A":2}',
        '{"x":"\\u003a","x":1}',
        '{"a":"::","a":1}',
        "18446744073709551616",
        "-9223372036854775809",
        "[123456789012345678901234567890]",
        "1e400",
        '{"v":1e-400}',
        '"\\ud800"',
        '"\\udc00\\ud800"',
        "[NaN]",
        '{"a":Infinity}',
        "[1,]",
        "01",
        '"a\tb"',
        "[" * 70 + "]" * 70,
        "[" * 1100 + "]" * 1100,
        "2.2250738585072011e-308",
        "4.9e-324",
        "-0",
        "-0.0",
        '{"a":{"b":[{"c":":"}]},"d":":"}',
        "[1E-400]",
        "[0." + "0" * 330 + "1]",
        "[0." + "0" * 330 + "]",
        '{"v":0.000001,"w":1e-5,"x":1.5E-7}',
        '{"v":1E+400}',
        "[123456789012345678901]",
        '{"a":"+","b":18446744073709551616}',
        '["e+",-9223372036854775809]',
        '{"t":"+00:00","a":{"b":1},"a":2}',
        "[" * 64 + "]" * 64,
        "[" * 65 + '"+:{["' + "]" * 65,
        '[{"a":"[{[{"}]',
    ],
)
@pytest.mark.parametrize("exact_numbers", [False, True])
def test_edge_documents_decode_or_fail_as_before(text: str, exact_numbers: bool) -> None:
    assert _same(_strict(text, exact_numbers=exact_numbers), _hooked(text, exact_numbers=exact_numbers))


@given(_VALUES, st.integers(min_value=1, max_value=6))
@settings(max_examples=800)
def test_the_depth_bound_is_enforced_as_by_the_hooked_decoder(value: Any, max_depth: int) -> None:
    text = json.dumps(value, ensure_ascii=False)
    try:
        reference: tuple[str, Any] = "ok", _loads_hooked(text, _Hooks(None), False, max_depth)
    except StrictJSONError as exc:
        reference = "error", (exc.code, exc.path)
    try:
        strict: tuple[str, Any] = "ok", loads_strict(text, max_depth=max_depth)
    except StrictJSONError as exc:
        strict = "error", (exc.code, exc.path)
    assert _same(strict, reference)


def test_exact_numbers_leave_the_fast_path_only_where_a_literal_may_underflow() -> None:
    from engine.jsonio import _may_underflow

    plain = '{"price":101234.5,"n":[0,0.0,-0.0,1e5,2E+3],"s":"e+ time-series E-"}'
    assert not _may_underflow(plain, b'{"n":[0.0]}')
    for text in ("[1e-400]", "[1E-5]", "[2.5e-7]", "[0." + "0" * 300 + "1]", '["2e-", 0.0]'):
        assert _may_underflow(text, b"[0.0]")
        assert not _may_underflow(text, b"[1.5]")  # no float is zero: nothing underflowed
        assert not _may_underflow(text, b'[10.0,100.05,"0.0 x"]')  # 0.0 inside other tokens
        assert _may_underflow(text, b"0.0") and _may_underflow(text, b'{"a":-0.0}')


def test_fast_path_is_taken_for_plain_documents_and_left_for_escaped_colons() -> None:
    assert _decoded_fast('{"a":"x:y","b":[1,2.5,{"c":null}]}') == (
        {"a": "x:y", "b": [1, 2.5, {"c": None}]},
        b'{"a":"x:y","b":[1,2.5,{"c":null}]}',
        3,
    )
    assert _decoded_fast('{"a":"\\u003a"}') is None
    assert _decoded_fast("[18446744073709551616]") is None
    assert _decoded_fast("[" * 300 + "]" * 300) is None
    # the opening brackets are counted apart from the colons and pluses kept with them
    assert _decoded_fast('["+",{"x:":[]},"a+b"]') == (["+", {"x:": []}, "a+b"], b'["+",{"x:":[]},"a+b"]', 3)
    assert _decoded_fast('{"big":"+","n":[18446744073709551616]}') is None


def _strict_any(data: bytes | str, *, exact_numbers: bool = False, max_depth: int = 64) -> tuple[str, Any]:
    try:
        return "ok", loads_strict(data, exact_numbers=exact_numbers, max_depth=max_depth)
    except StrictJSONError as exc:
        return "error", (exc.code, exc.path, exc.message)


@given(_VALUES, st.booleans(), st.integers(min_value=1, max_value=70))
@settings(max_examples=1000)
def test_bytes_decode_as_their_text_does(value: Any, exact_numbers: bool, max_depth: int) -> None:
    """Bytes go to orjson undecoded: the same value or the same error as the decoded text."""
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=1)):
        data = text.encode("utf-8")
        expected = _strict_any(text, exact_numbers=exact_numbers, max_depth=max_depth)
        assert _same(_strict_any(data, exact_numbers=exact_numbers, max_depth=max_depth), expected)


@pytest.mark.parametrize(
    "data",
    [
        b'{"a":"\xed\xa0\x80"}',  # a UTF-8-encoded surrogate
        b'["\xc0\xaf"]',  # an overlong encoding
        b'["\xf4\x90\x80\x80"]',  # beyond U+10FFFF
        b'{"a":"\xe2\x82"}',  # truncated
        b"\xff",
        b'\xef\xbb\xbf{"a":1}',  # a byte order mark
        b'\xef\xbb\xbf{"a":"\xff"}',  # a byte order mark, then invalid UTF-8: that error comes first
        b'{"a":"\\u003a","a":1}',
        b'{"a":1,"a":2}',
        b"[18446744073709551616]",
        b"[1e-400]",
        b"[1e400]",
        b'{"\xc3\xa9:":"\xe2\x82\xac","x":[1.5,-0.0]}',
        b"[" * 70 + b"]" * 70,
    ],
)
@pytest.mark.parametrize("exact_numbers", [False, True])
def test_edge_bytes_decode_or_fail_as_before(data: bytes, exact_numbers: bool) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        with pytest.raises(StrictJSONError) as refused:
            loads_strict(data, exact_numbers=exact_numbers)
        assert refused.value.code == "invalid_utf8"
        assert refused.value.message.startswith(f"byte {exc.start} ")
        return
    assert _same(
        _strict_any(data, exact_numbers=exact_numbers), _strict_any(text, exact_numbers=exact_numbers)
    )
    if not text.startswith("\ufeff"):  # (the hooked decoder alone is not what refuses a byte order mark)
        assert _same(
            _strict(data.decode("utf-8"), exact_numbers=exact_numbers),
            _hooked(text, exact_numbers=exact_numbers),
        )
