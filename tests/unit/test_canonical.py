"""Canonical JSON and hashing: every vector of the Cournot reference, and the rules behind them."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from engine.canonical import (
    CanonicalizationError,
    dumps_canonical,
    format_datetime_canonical,
    from_hex,
    hash_canonical,
    hash_concat,
    to_hex,
)


class CournotAShapeStep(BaseModel):
    """Cournot's (a)-shape ReasoningStep, reproduced only to check the published vector."""

    model_config = ConfigDict(extra="forbid")
    step_id: str = Field(min_length=1)
    step_type: Literal["conclusion", "inference"]
    description: str
    evidence_refs: list[dict[str, Any]] = Field(default_factory=list)
    rule_id: str | None = None
    input_summary: str | None = None
    output_summary: str | None = None
    conclusion: str | None = None
    confidence_delta: float | None = None
    depends_on: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


def test_reference_vector_sorted_keys() -> None:
    assert dumps_canonical({"b": 2, "a": 1}) == '{"a":1,"b":2}'
    assert to_hex(hash_canonical({"b": 2, "a": 1})) == (
        "0x43258cff783fe7036d8a43033f830adfc60ec037382473548ac742b888292777"
    )


def test_reference_vector_mixed_document() -> None:
    doc = {"market_id": "mk_1", "price": 95000.0, "ok": True, "note": "é", "skip": None, "list": [3, 1, 2]}
    assert dumps_canonical(doc) == '{"list":[3,1,2],"market_id":"mk_1","note":"é","ok":true,"price":95000.0}'
    assert to_hex(hash_canonical(doc)) == "0x18adecd8faea81210a7aeb84281f137c9ec22f95ae84265a2e5d0b3c9440d55d"


def test_reference_vector_cournot_step_model() -> None:
    step = CournotAShapeStep(step_id="step_001", step_type="conclusion", description="d")
    assert dumps_canonical(step) == (
        '{"depends_on":[],"description":"d","evidence_refs":[],"metadata":{},'
        '"step_id":"step_001","step_type":"conclusion"}'
    )
    assert (
        to_hex(hash_canonical(step)) == "0x50cb6bffbf0bf8cd01f61d9ebf4c36940a1190672ceac340c3d57bdfa951436b"
    )


def test_reference_vectors_empty_containers() -> None:
    assert to_hex(hash_canonical({})) == "0x44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    assert to_hex(hash_canonical([])) == "0x4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"


def test_none_dropped_from_dicts_at_every_depth_but_kept_in_lists() -> None:
    doc = {"a": None, "b": {"c": None, "d": [None, {"e": None}]}}
    assert dumps_canonical(doc) == '{"b":{"d":[null,{}]}}'


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (95000.0, "95000.0"),
        (95000, "95000"),
        (1e16, "1e+16"),
        (1e-05, "1e-05"),
        (1e-07, "1e-07"),
        (123456789012345678.0, "1.2345678901234568e+17"),
        (-0.0, "-0.0"),
        (0.1 + 0.2, "0.30000000000000004"),
        (2**70, "1180591620717411303424"),
        (True, "true"),
    ],
)
def test_numbers_keep_python_repr_and_json_type(value: object, text: str) -> None:
    assert dumps_canonical(value) == text


def test_escaping_matches_cournot() -> None:
    assert dumps_canonical('a"b\\c\n\r\t\b\f') == '"a\\"b\\\\c\\n\\r\\t\\b\\f"'
    assert dumps_canonical("\x01\x1f") == '"\\u0001\\u001f"'
    assert dumps_canonical("\u2028\u2029\x7f") == '"\u2028\u2029\x7f"'
    assert dumps_canonical({"é": 1, "z": 2, "\U0001f600": 3}) == '{"z":2,"é":1,"\U0001f600":3}'


def test_keys_sorted_by_code_point_not_utf16() -> None:
    # U+FF61 sorts before U+1F600 by code point, after it by UTF-16 code unit.
    assert dumps_canonical({"\U0001f600": 1, "\uff61": 2}) == '{"\uff61":2,"\U0001f600":1}'


def test_datetimes_become_utc_z() -> None:
    naive = datetime(2026, 2, 1, 0, 0, 0)
    plus_one = datetime(2026, 2, 1, 1, 0, 0, tzinfo=timezone(timedelta(hours=1)))
    micro = datetime(2026, 2, 1, 0, 0, 0, 123000, tzinfo=UTC)
    assert dumps_canonical({"t": naive}) == '{"t":"2026-02-01T00:00:00Z"}'
    assert dumps_canonical({"t": plus_one}) == '{"t":"2026-02-01T00:00:00Z"}'
    assert format_datetime_canonical(micro) == "2026-02-01T00:00:00.123000Z"


def test_bytes_tuples_and_int_keys() -> None:
    assert dumps_canonical({"b": b"\x00\xff", "t": (1, 2)}) == '{"b":"00ff","t":[1,2]}'
    assert dumps_canonical({2: "x", 10: "y"}) == '{"2":"x","10":"y"}'


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_rejected_with_path(value: float) -> None:
    with pytest.raises(CanonicalizationError) as info:
        dumps_canonical({"items": [{"ok": 1}, {"price": value}]})
    assert info.value.path == "$.items[1].price"


def test_non_finite_inside_model_rejected_with_path() -> None:
    step = CournotAShapeStep(
        step_id="s", step_type="inference", description="d", metadata={"x": [1.0, float("nan")]}
    )
    with pytest.raises(CanonicalizationError) as info:
        hash_canonical(step)
    assert info.value.path == "$.metadata.x[1]"


def test_sets_are_refused_rather_than_hashed_in_seed_order() -> None:
    with pytest.raises(CanonicalizationError, match="set"):
        dumps_canonical({"ids": {"a", "b"}})


def test_mixed_int_and_str_keys_refused() -> None:
    with pytest.raises(CanonicalizationError):
        dumps_canonical({1: "a", "b": 2})


def test_lone_surrogate_refused() -> None:
    with pytest.raises(CanonicalizationError, match="surrogate"):
        hash_canonical({"s": "\ud800"})


def test_hex_helpers() -> None:
    assert to_hex(b"\xab\xcd") == "0xabcd"
    assert from_hex("0xABcd") == b"\xab\xcd"
    assert from_hex("0x") == b""
    for bad in ["0XABCD", "abcd", "0xabc", "0xzz", "0x ab ", "0xab\n"]:
        with pytest.raises(ValueError):
            from_hex(bad)
    assert hash_concat(b"a", b"b") == hashlib.sha256(b"ab").digest()


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=8), st.randoms())
@settings(max_examples=200)
def test_output_independent_of_insertion_order(doc: dict[str, Any], rnd: Any) -> None:
    keys = list(doc)
    rnd.shuffle(keys)
    shuffled = {key: doc[key] for key in keys}
    assert dumps_canonical(shuffled) == dumps_canonical(doc)


@given(json_values)
@settings(max_examples=300)
def test_stable_under_parse_and_serialise_round_trip(value: Any) -> None:
    first = dumps_canonical(value)
    assert dumps_canonical(json.loads(first)) == first


@given(json_values)
@settings(max_examples=500)
def test_fast_emitter_matches_reference_serialiser(value: Any) -> None:
    from engine.canonical import _dumps_reference

    assert dumps_canonical(value) == _dumps_reference(value)


def test_huge_integers_refused_cleanly() -> None:
    with pytest.raises(CanonicalizationError, match="4300"):
        dumps_canonical({"n": 10**5000})


any_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=20)
wide_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True)
    | any_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=4),
    max_leaves=25,
)


@given(wide_values)
@settings(max_examples=1500)
def test_fast_bytes_path_matches_reference_bytes(value: Any) -> None:
    from engine.canonical import _dumps_reference, canonical_bytes

    assert canonical_bytes(value) == _dumps_reference(value).encode("utf-8")


@given(st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True))
@settings(max_examples=3000)
def test_fast_bytes_path_matches_python_float_repr(value: float) -> None:
    from engine.canonical import canonical_bytes

    assert canonical_bytes([value]) == f"[{value!r}]".encode()


@pytest.mark.parametrize(
    "value", [1e-05, 1e-07, 1.5e-09, 1e-10, 1e16, 1e21, 5e-324, -0.0, 95000.0, 2**64, -(2**63) - 1]
)
def test_fast_bytes_path_on_known_orjson_differences(value: object) -> None:
    from engine.canonical import canonical_bytes

    assert canonical_bytes({"v": value}) == f'{{"v":{value!r}}}'.encode()


class _Inner(BaseModel):
    label: str
    when: datetime | None = None
    payload: dict[str, Any] = Field(default_factory=dict)


@given(wide_values, st.booleans())
@settings(max_examples=800)
def test_fast_canonicalize_value_matches_reference_walk(value: Any, wrap: bool) -> None:
    from engine.canonical import _canonicalize_reference, canonicalize_value

    doc = (
        {"m": _Inner(label="x", when=datetime(2026, 1, 2, tzinfo=UTC), payload={"v": value})}
        if wrap
        else value
    )
    fast = canonicalize_value(doc)
    assert fast == _canonicalize_reference(doc)
    assert json.dumps(fast) == json.dumps(_canonicalize_reference(doc))  # same key order too


@pytest.mark.parametrize("value", [{1: "a"}, {"t": (1, None)}, {"b": b"\x01"}, [float("nan")], {"x": {3}}])
def test_canonicalize_value_unusual_types_take_reference_path(value: Any) -> None:
    from engine.canonical import _canonicalize_reference, canonicalize_value

    try:
        expected: Any = _canonicalize_reference(value)
    except CanonicalizationError as exc:
        with pytest.raises(CanonicalizationError) as caught:
            canonicalize_value(value)
        assert caught.value.path == exc.path
    else:
        assert canonicalize_value(value) == expected


@settings(max_examples=400, deadline=None)
@given(
    st.datetimes(
        min_value=datetime(1, 1, 1, 14),
        max_value=datetime(9999, 12, 31, 10),
        timezones=st.sampled_from(
            [None, UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=9))]
        ),
    )
)
def test_datetime_text_equals_strftime(value: datetime) -> None:
    """The f-string formatting equals the strftime text it replaced, for every year and offset."""
    utc = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    pattern = "%Y-%m-%dT%H:%M:%S.%fZ" if utc.microsecond else "%Y-%m-%dT%H:%M:%SZ"
    assert format_datetime_canonical(value) == utc.strftime(pattern)
