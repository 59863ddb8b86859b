"""Strict JSON decoding: every way an untrusted document is refused names the problem and the place."""

from __future__ import annotations

import pytest

from engine.jsonio import StrictJSONError, loads_strict


def test_valid_document_keeps_int_and_float_types() -> None:
    value = loads_strict(b'{"a": 95000, "b": 95000.0, "c": [1, 2.5]}')
    assert value == {"a": 95000, "b": 95000.0, "c": [1, 2.5]}
    assert isinstance(value["a"], int) and isinstance(value["b"], float)


@pytest.mark.parametrize(
    ("text", "path"), [('{"a": NaN}', "$.a"), ('{"x": [1, Infinity]}', "$.x[1]"), ("-Infinity", "$")]
)
def test_non_finite_numbers_rejected_with_path(text: str, path: str) -> None:
    with pytest.raises(StrictJSONError) as info:
        loads_strict(text)
    assert info.value.code == "non_finite_number"
    assert info.value.path == path


def test_duplicate_keys_rejected() -> None:
    with pytest.raises(StrictJSONError) as info:
        loads_strict('{"a": 1, "a": 2}')
    assert info.value.code == "duplicate_key"
    assert "'a'" in info.value.message


def test_invalid_utf8_rejected_with_offset() -> None:
    with pytest.raises(StrictJSONError) as info:
        loads_strict(b'{"a": "\xff"}')
    assert info.value.code == "invalid_utf8"
    assert "byte 7" in info.value.message


def test_deep_nesting_rejected_before_decoding() -> None:
    with pytest.raises(StrictJSONError) as info:
        loads_strict("[" * 100_000 + "]" * 100_000)
    assert info.value.code == "too_deep"
    assert loads_strict("[" * 10 + "]" * 10, max_depth=10) == [[[[[[[[[[]]]]]]]]]]


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    assert loads_strict('{"s": "' + "[" * 500 + '"}', max_depth=2) == {"s": "[" * 500}


def test_malformed_json_reports_line_and_column() -> None:
    with pytest.raises(StrictJSONError) as info:
        loads_strict('{"a": 1,\n "b": }')
    assert info.value.code == "invalid_json"
    assert "line 2" in info.value.message


def test_byte_order_mark_rejected() -> None:
    with pytest.raises(StrictJSONError):
        loads_strict("\ufeff{}".encode())


def test_integer_beyond_digit_limit_rejected_with_code() -> None:
    with pytest.raises(StrictJSONError) as info:
        loads_strict("1" * 5000)
    assert info.value.code == "number_too_large"
