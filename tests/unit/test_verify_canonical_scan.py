"""The byte-free canonical scanner of ``ledger verify`` never accepts what the reference refuses.

:mod:`ledger.verify.canonical_scan` may only say "canonical" (or "undecided"); every text it
accepts must be ``canonical_bytes(json.loads(text))`` and judged canonical by
:func:`ledger.verify.canonical_form.parse_canonical`, with the same pieces; hostile texts (escapes
of NUL or lone surrogates, huge or non-canonical numbers, deep nesting, duplicate keys,
whitespace, raw control characters) included. The views hold exactly the parsed members.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.canonical import canonical_bytes
from ledger.store.hashing import canonical_text
from ledger.verify.canonical_form import VIEWS, parse_canonical, view_canonical
from ledger.verify.canonical_scan import ELEMENTS, is_canonical, view_object

FLOATS = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [1e-05, 5e-05, 1e-07, 0.0001, 1e16, 1e22, -0.0, 0.0, 95000.0, 1.2345678901234568e17, 5e-324]
)
TEXTS = st.text(max_size=10) | st.sampled_from(["\x00", "\ud800", "a\u2028b", '"\\', "\x1f\x7f", "é✓𝄞"])
SCALARS = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | FLOATS | TEXTS
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXTS, inner, max_size=4),
    max_leaves=25,
)
# no None, ints within 18 characters, strings without \u escapes: the canonical texts the scanner takes
PLAIN_TEXTS = st.text(
    st.characters(
        blacklist_categories=["Cs"],
        blacklist_characters=[chr(c) for c in range(32) if chr(c) not in "\b\f\n\r\t"],
    ),
    max_size=10,
)
KEYS = st.text(
    st.characters(blacklist_categories=["Cs", "Cc"], blacklist_characters='"\\'), max_size=6
)  # no escape
PLAIN = st.recursive(
    st.booleans() | st.integers(-(10**17) + 1, 10**17 - 1) | FLOATS | PLAIN_TEXTS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=25,
)  # fmt: skip
HOSTILE = [
    '{"a":"\\u0000"}', '{"a":"\\ud800"}', '"\\ud83d\\ude00"', '{"a":1,"a":1}', '{"a":1,"a":2}', '{"b":1,"a":2}',
    '{"a":null}', "[null]", "null", '{"a": 1}', " {}", "{} ", "[1 ,2]", '{"a":1}\n', "1E5", "1e5", "1.50",
    "1.0e+16", "-0", "01", ".5", "1.", "+1", "1e", "1e+", "-", "1" * 19, "9" * 400, "1e400", "-1e400",
    "123456789012345678", "-12345678901234567", "1.0000000000000001", "0.1", "1e-05", "1e-5", "0.00001",
    "[" * 70 + "]" * 70, '{"a":' * 70 + "1" + "}" * 70, '"a\x00b"', '"a\nb"', '"\\/"', '"\\a"', '"\\', '"',
    '{"a":1,}', "[1,]", "[,1]", "{,}", '{"a"}', '{"a":}', "tru", "true ", "falsey", "NaN", "Infinity",
    '{"\\u0061":1}', '{"a\\"b":1}', '{"":1,"a":2}', '{"a":1,"":2}', '{"é":1,"z":2}', '{"z":1,"é":2}',
    "[1,2]x", '"\\"', "{}{}", "[]]", "", '{"\ud800":1}', '"a\udfffb"', '["\ud83d"]',
]  # fmt: skip


def _reference(text: str) -> bool:
    """The canonical form's own rule: the text is what canonical_bytes writes for its parse."""
    try:
        return canonical_bytes(json.loads(text)) == text.encode("utf-8")
    except (ValueError, RecursionError, UnicodeEncodeError):
        return False


def _verify_rule(text: str) -> bool:
    try:
        return parse_canonical(text)[1]
    except (ValueError, RecursionError):
        return False


def _assert_sound(text: str) -> None:
    if is_canonical(text):
        assert _reference(text) and _verify_rule(text), text


def test_hostile_texts_are_never_accepted_unless_canonical() -> None:
    for text in HOSTILE:
        _assert_sound(text)
    for text in [
        "1e400",
        "-0",
        '{"a":"\\u0000"}',
        '{"a":1,"a":1}',
        "[" * 70 + "]" * 70,
        '"a\x00b"',
        "1" * 19,
        '{"\ud800":1}',
        '"a\udfffb"',
    ]:
        assert not is_canonical(text), text


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_canonical_texts_accepted_only_when_the_reference_agrees(value: Any) -> None:
    try:
        text = canonical_text(value)
    except ValueError:  # a lone surrogate has no canonical form
        return
    _assert_sound(text)
    spaced = json.dumps(value, indent=1, ensure_ascii=False)
    _assert_sound(spaced)
    _assert_sound(json.dumps(value, ensure_ascii=True, separators=(",", ":")))


@settings(max_examples=300, deadline=None)
@given(PLAIN)
def test_plain_canonical_texts_are_accepted(value: Any) -> None:
    text = canonical_text(value)
    assert is_canonical(text) and _reference(text)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet='{}[]":,0123456789.eE+-aflnrstu\\ \n\x00é', max_size=30))
@example('{"a":[1,2.5,true],"b":"x\\"y"}')
def test_arbitrary_json_like_texts(text: str) -> None:
    _assert_sound(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*HOSTILE, "1", '"s"', "[]", "{}", "true"]), min_size=1, max_size=4), TEXTS)
def test_hostile_members_inside_objects(parts: list[str], key: str) -> None:
    members = ",".join(
        f"{json.dumps(key + str(n), ensure_ascii=False)}:{part}" for n, part in enumerate(parts)
    )
    _assert_sound("{" + members + "}")
    _assert_sound("[" + ",".join(parts) + "]")


def _reference_view(value: Any, keep: Any) -> Any:
    if keep is ELEMENTS:
        return [canonical_text(item) for item in value] if isinstance(value, list) else value
    if keep is None or not isinstance(value, dict):
        return value
    return {key: _reference_view(value[key], inner) for key, inner in keep.items() if key in value}


PAYLOADS = st.fixed_dictionaries(
    {},
    optional={
        "evidence_bundle": st.fixed_dictionaries({}, optional={"items": st.lists(PLAIN, max_size=3) | PLAIN, "x": PLAIN})
        | PLAIN,
        "prompt_spec": st.fixed_dictionaries(
            {},
            optional={
                "market": st.fixed_dictionaries({}, optional={"a": PLAIN, "market_id": PLAIN_TEXTS | PLAIN, "z": PLAIN})
                | PLAIN,
                "other": PLAIN,
            },
        )
        | PLAIN,
        "verdict": st.fixed_dictionaries({}, optional={"evidence_root": PLAIN_TEXTS, "confidence": FLOATS}) | PLAIN,
        "roots": PLAIN,
        "trace": st.fixed_dictionaries({}, optional={"step_hashes": PLAIN, "policy": PLAIN}) | PLAIN,
        "evidence_root": PLAIN,
        "prompt_spec_hash": PLAIN,
        "zz": PLAIN,
    },
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(PAYLOADS, st.sampled_from(sorted(VIEWS)))
def test_views_and_pieces_are_those_of_the_parsed_payload(payload: dict[str, Any], kind: str) -> None:
    text = canonical_text(payload)
    keep = VIEWS[kind]
    scanned = view_object(text, keep)
    assert scanned is not None
    view, spans = scanned
    assert view == _reference_view(json.loads(text), keep)
    assert {key: text[a:b] for key, (a, b) in spans.items()} == {
        key: canonical_text(item) for key, item in payload.items()
    }
    split = kind != "audit.completed"
    viewed = view_canonical(text, keep, split=split)
    _, canonical, pieces = parse_canonical(text, split=split)
    assert viewed is not None and canonical and viewed[1] == pieces


@settings(max_examples=200, deadline=None)
@given(PAYLOADS)
def test_the_market_view_gives_the_market_id_the_parsed_payload_gives(payload: dict[str, Any]) -> None:
    """What the root checks read of the market (``spec["market"].get("market_id")``, only when the
    market is an object) is the same from the view as from the whole parsed payload."""
    text = canonical_text(payload)
    viewed = view_canonical(text, VIEWS["submission.received"], split=True)
    assert viewed is not None
    parsed = json.loads(text)

    def market_id(value: Any) -> Any:
        spec = value.get("prompt_spec")
        if isinstance(spec, dict) and isinstance(spec.get("market"), dict):
            return ("object", spec["market"].get("market_id", "(default)"))
        return ("none", spec.get("market") if isinstance(spec, dict) else None)

    assert market_id(viewed[0]) == market_id(parsed)


def test_views_refuse_what_they_cannot_decide() -> None:
    keep = VIEWS["audit.completed"]
    for text in ['{"roots":null}', '{"b":1,"a":2}', "[1]", '{"roots":{"a":1 }}', '{"trace":{"x":"\\u0001"}}']:
        assert view_object(text, keep) is None and view_canonical(text, keep, split=False) is None


@pytest.mark.parametrize(
    ("text", "accepted"),
    [
        ('{"ab":1,"b":2}', True),
        ('{"b":1,"ab":2}', False),
        ('{"aa":1,"ab":2}', True),
        ('{"ab":1,"aa":2}', False),
        ('{"a":1,"ab":2}', True),
        ('{"ab":1,"a":2}', False),
        ('{"":1,"":2}', False),
        ('{"~":1,"é":2}', True),
    ],
)
def test_key_order_decided_at_the_first_character_or_after(text: str, accepted: bool) -> None:
    assert is_canonical(text) is accepted
    assert _reference(text) is accepted


@pytest.mark.parametrize(
    ("token", "accepted"), [("2.5", True), ("2.50", False), ("1e-05", True), ("1e-5", False)]
)
def test_float_tokens_decided_again_when_remembered(token: str, accepted: bool) -> None:
    assert [is_canonical(f"[{token}]") for _ in range(2)] == [accepted, accepted]
