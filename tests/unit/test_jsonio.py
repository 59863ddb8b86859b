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


def test_duplicate_key_deep_in_the_document_is_reported_at_its_path() -> None:
    with pytest.raises(StrictJSONError) as info:
        loads_strict('{"a": {"b": [{"c": 1}, {"d": 1, "d": 2}]}}')
    assert (info.value.code, info.value.path) == ("duplicate_key", "$.a.b[1].d")


def test_first_problem_in_document_order_is_reported() -> None:
    with pytest.raises(StrictJSONError) as info:
        loads_strict('{"a": [1, {"x": 1, "x": 2}], "b": NaN}')
    assert info.value.path == "$.a[1].x"


@pytest.mark.parametrize(
    ("text", "code", "path"),
    [
        ('{"n": ' + "9" * 4000 + "}", "number_too_large", "$.n"),
        ('{"n": [-' + "9" * 309 + "]}", "number_too_large", "$.n[0]"),
        ('{"f": 1e400}', "non_finite_number", "$.f"),
        ('{"f": -1.5E+999}', "non_finite_number", "$.f"),
        ('{"f": 1e-400}', "number_underflow", "$.f"),
        ('{"f": -0.000e-5, "g": 1e-400}', "number_underflow", "$.g"),
        ('{"odd key": NaN}', "non_finite_number", '$["odd key"]'),
    ],
)
def test_numbers_a_double_or_the_store_cannot_hold_are_refused_at_their_path(
    text: str, code: str, path: str
) -> None:
    with pytest.raises(StrictJSONError) as info:
        loads_strict(text, max_integer_digits=308, exact_numbers=True)
    assert (info.value.code, info.value.path) == (code, path)


def test_exact_numbers_keep_zero_subnormals_and_the_largest_allowed_integer() -> None:
    value = loads_strict(
        "[0e-999, 5e-324, 1.7976931348623157e308, " + "9" * 308 + "]",
        max_integer_digits=308,
        exact_numbers=True,
    )
    assert value == [0.0, 5e-324, 1.7976931348623157e308, int("9" * 308)]


def test_without_exact_numbers_floats_decode_as_before() -> None:
    """The engine parses evidence text with the defaults; its results must not change."""
    assert loads_strict("[1e400, 1e-400]") == [float("inf"), 0.0]


def test_non_finite_number_beside_a_huge_integer_is_a_strict_error_not_a_value_error() -> None:
    """The old locator re-decoded permissively and let the digit-limit ValueError escape."""
    with pytest.raises(StrictJSONError) as info:
        loads_strict('{"a": NaN, "b": ' + "1" * 5000 + "}")
    assert (info.value.code, info.value.path) == ("non_finite_number", "$.a")


def test_huge_integer_deep_in_the_document_is_reported_at_its_path() -> None:
    """Integers are decoded by the C decoder; one beyond its digit limit is re-decoded with the hook."""
    with pytest.raises(StrictJSONError) as info:
        loads_strict('{"a": [1, {"b": ' + "1" * 5000 + "}]}")
    assert (info.value.code, info.value.path) == ("number_too_large", "$.a[1].b")
    assert loads_strict('{"a": [1, -0, ' + "9" * 4000 + "]}") == {"a": [1, 0, int("9" * 4000)]}
