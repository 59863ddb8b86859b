"""Fuzz of the envelope decoder: hostile bytes either decode to a valid envelope or raise EnvelopeError.

The contract (``engine/envelope.py``): :func:`decode_envelope` returns a
:class:`DecodedEnvelope` or raises :class:`EnvelopeError` with a :class:`Reason`, a non-empty
message and a JSON path starting at ``$``. Any other exception escapes ``process_record`` (which
only catches ``EnvelopeError`` around the decoder) and takes the consumer down on every
re-delivery: a poison pill. Inputs: arbitrary bytes, arbitrary JSON values, JSON objects that pass
the version check, mutated valid envelopes (deleted, added, retyped fields, random unicode, deep
nesting) and byte-level damage to valid envelopes.
"""

from __future__ import annotations

import copy
import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumers.processing import RecordContext, Rejection, build_rejection, process_record
from engine.envelope import (
    ENVELOPE_SCHEMA_ID,
    SUPPORTED_VERSIONS,
    DecodedEnvelope,
    EnvelopeError,
    Reason,
    decode_envelope,
    wrap_inputs,
)
from engine.limits import MAX_ID_BYTES, find_unstorable_text
from ledger.store.records import EntryDraft, OperationalInfo, SubmissionDraft
from tests.helpers.faults import SAMPLE
from tests.helpers.hostile import assert_storable

pytestmark = pytest.mark.integration

FUZZ = settings(
    max_examples=300,
    deadline=timedelta(seconds=5),  # generous on a loaded CI core; a hang still fails
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
MAX_BYTES = 64_000
JSON_LEVEL = {
    Reason.INVALID_UTF8,
    Reason.INVALID_JSON,
    Reason.NON_FINITE_NUMBER,
    Reason.DUPLICATE_KEY,
    Reason.TOO_DEEP,
    Reason.NUMBER_TOO_LARGE,
    Reason.NUMBER_UNDERFLOW,
    Reason.UNSTORABLE_TEXT,  # checked on the whole document right after the version
}
MAX_DEPTH = 64


def valid_envelope() -> dict[str, Any]:
    sample = copy.deepcopy(SAMPLE)
    return wrap_inputs(sample["prompt_spec"], sample["evidence_bundle"])


# Any code point, lone surrogates included (json.dumps escapes them as \udXXX).
ANY_TEXT = st.text(alphabet=st.characters(codec=None, categories=None), max_size=40)
NUMBERS = st.one_of(
    st.integers(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -0.0, 1e308, 5e-324, 2**53 + 1, 1.0, True, False]),
)
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBERS, ANY_TEXT),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(ANY_TEXT, children, max_size=4),
    ),
    max_leaves=25,
)


def encode(value: Any, *, ascii_only: bool = True) -> bytes:
    """JSON text (NaN/Infinity tokens allowed); lone surrogates become invalid UTF-8 when raw."""
    return json.dumps(value, ensure_ascii=ascii_only, allow_nan=True).encode("utf-8", "surrogatepass")


def check(raw: bytes, max_bytes: int = MAX_BYTES) -> DecodedEnvelope | EnvelopeError:
    """Decode; fail the test on anything but success or a well-formed EnvelopeError."""
    try:
        decoded = decode_envelope(raw, max_bytes=max_bytes, max_depth=MAX_DEPTH)
    except EnvelopeError as refused:
        assert isinstance(refused.reason, Reason), refused
        assert isinstance(refused.message, str) and refused.message.strip(), refused
        assert isinstance(refused.path, str) and refused.path.startswith("$"), refused
        return refused
    except Exception as exc:  # the point of the fuzz: nothing else may escape
        raise AssertionError(
            f"decode_envelope raised {type(exc).__name__}: {exc!r} for input {raw[:300]!r}"
        ) from exc
    assert_valid(decoded, raw, max_bytes)
    return decoded


def assert_valid(decoded: DecodedEnvelope, raw: bytes, max_bytes: int) -> None:
    """A decoded envelope satisfies every cross-field rule and decodes the same way again."""
    envelope = decoded.envelope
    bundle, spec = envelope.evidence_bundle, envelope.prompt_spec
    assert bundle.market_id == spec.market.market_id == decoded.market_id
    ids = [item.evidence_id for item in bundle.items]
    assert len(ids) == len(set(ids))
    requirements = {requirement.requirement_id for requirement in spec.data_requirements}
    assert {item.requirement_id for item in bundle.items} <= requirements
    assert decoded.inputs_hash.startswith("0x") and len(decoded.inputs_hash) == 66
    expected_key = (
        f"event:{envelope.event_id}" if envelope.event_id is not None else f"inputs:{decoded.inputs_hash}"
    )
    assert decoded.idempotency_key == expected_key
    decoded.idempotency_key.encode("utf-8")  # the ledger must be able to store the key
    # nothing the store cannot hold got through: no U+0000 or surrogate, ids within their bound
    assert find_unstorable_text(envelope.model_dump(mode="json")) is None
    for value in (decoded.market_id, bundle.bundle_id):
        assert len(value.encode("utf-8")) <= MAX_ID_BYTES
    again = decode_envelope(raw, max_bytes=max_bytes, max_depth=MAX_DEPTH)
    assert (again.idempotency_key, again.inputs_hash) == (decoded.idempotency_key, decoded.inputs_hash)
    # what a producer would re-send after reading it back is the same submission
    echoed = encode(envelope.model_dump(mode="json", exclude_none=True), ascii_only=False)
    assert decode_envelope(echoed, max_bytes=2 * len(echoed)).inputs_hash == decoded.inputs_hash


def test_the_valid_sample_decodes_so_the_mutation_fuzz_starts_from_a_valid_envelope() -> None:
    outcome = check(encode(valid_envelope()))
    assert isinstance(outcome, DecodedEnvelope)


@FUZZ
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_decode_or_raise_envelope_error(raw: bytes) -> None:
    assert isinstance(check(raw), EnvelopeError)  # random bytes are never a valid envelope


@FUZZ
@given(JSON_VALUES, st.booleans())
def test_arbitrary_json_values_decode_or_raise_envelope_error(value: Any, ascii_only: bool) -> None:
    assert isinstance(check(encode(value, ascii_only=ascii_only)), EnvelopeError)


@FUZZ
@given(
    st.dictionaries(ANY_TEXT, JSON_VALUES, max_size=6),
    st.one_of(st.just(1), JSON_VALUES),
)
def test_objects_that_pass_or_probe_the_version_check_raise_envelope_error(
    extra: dict[str, Any], version: Any
) -> None:
    """Right schema_id, any schema_version (including unhashable ones) and random other fields."""
    document = {**extra, "schema_id": ENVELOPE_SCHEMA_ID, "schema_version": version}
    outcome = check(encode(document))
    assert isinstance(outcome, EnvelopeError)
    if outcome.reason in JSON_LEVEL:
        return  # refused while parsing, before the version is looked at
    if isinstance(version, int | float) and not isinstance(version, bool) and version in SUPPORTED_VERSIONS:
        assert outcome.reason == Reason.SCHEMA_VIOLATION, outcome  # prompt_spec etc. are missing
    else:
        assert outcome.reason == Reason.UNKNOWN_VERSION, outcome


@pytest.mark.parametrize("version", [[1], {"v": 1}, [], {}, [[1]]], ids=repr)
def test_unhashable_schema_version_is_refused_as_unknown_version(version: Any) -> None:
    """Regression for the first thing the fuzz found: ``version not in frozenset`` raises TypeError."""
    document = valid_envelope()
    document["schema_version"] = version
    outcome = check(encode(document))
    assert isinstance(outcome, EnvelopeError) and outcome.reason == Reason.UNKNOWN_VERSION


# Text the schema and the store accept: any code point except lone surrogates and U+0000.
VALID_TEXT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=60
)
FINITE_JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**53), max_value=2**53),
        st.floats(allow_nan=False, allow_infinity=False),
        VALID_TEXT,
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(VALID_TEXT, children, max_size=4)
    ),
    max_leaves=20,
)
OFFSETS = st.integers(min_value=-14 * 60, max_value=14 * 60).map(
    lambda minutes: (
        "Z"
        if minutes == 0
        else f"{'+' if minutes > 0 else '-'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    )
)


@FUZZ
@given(
    question=VALID_TEXT,
    event_id=st.one_of(st.none(), VALID_TEXT),
    offset=OFFSETS,
    parsed_value=FINITE_JSON,
    verify_reasoning=st.booleans(),
    ascii_only=st.booleans(),
)
def test_valid_variations_are_accepted_and_round_trip(
    question: str,
    event_id: str | None,
    offset: str,
    parsed_value: Any,
    verify_reasoning: bool,
    ascii_only: bool,
) -> None:
    """Free text, producer ids, time zones and evidence values the schema allows are never refused."""
    inputs = copy.deepcopy(SAMPLE)
    inputs["prompt_spec"]["market"]["question"] = question
    item = inputs["evidence_bundle"]["items"][0]
    item["provenance"]["fetched_at"] = "2026-02-01T00:00:05" + offset
    item["parsed_value"] = parsed_value
    document = wrap_inputs(
        inputs["prompt_spec"],
        inputs["evidence_bundle"],
        event_id=event_id,
        verify_reasoning=verify_reasoning,
    )
    outcome = check(encode(document, ascii_only=ascii_only))
    assert isinstance(outcome, DecodedEnvelope), outcome
    assert outcome.envelope.options.verify_reasoning is verify_reasoning
    fetched = outcome.envelope.evidence_bundle.items[0].provenance.fetched_at
    assert fetched is not None and fetched.utcoffset() == timedelta(0)  # normalised to UTC


# --- mutations of a valid envelope ------------------------------------------------------


def locations(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (dict keys and list indexes), root excluded."""
    found: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        children: list[tuple[Any, Any]] = list(value.items())
    elif isinstance(value, list):
        children = list(enumerate(value))
    else:
        return found
    for key, child in children:
        found.append((*path, key))
        found.extend(locations(child, (*path, key)))
    return found


def parent_of(document: Any, path: tuple[Any, ...]) -> Any:
    node = document
    for part in path[:-1]:
        node = node[part]
    return node


def nest(value: Any, depth: int, use_objects: bool) -> Any:
    for _ in range(depth):
        value = {"n": value} if use_objects else [value]
    return value


MUTATIONS = ("delete", "add", "retype", "unicode", "nest", "number", "empty", "unstorable")
# Values the store cannot hold (and the largest it can): the decoder must refuse or accept them
# with a store-level reason, never let them reach PostgreSQL.
UNSTORABLE = st.one_of(
    st.sampled_from(["\x00", "mk_\x00_x", "\ud800", "a\udfff", "m" * 3000, "m" * 512, "m" * 513]),
    st.text(alphabet=st.sampled_from("ab\x00\ud800\udc00"), min_size=1, max_size=8),
    st.sampled_from([10**308 - 1, 10**308, -(10**400), 1e-300, 5e-324]),
)


def mutate(document: dict[str, Any], data: st.DataObject) -> str:
    """Apply one random structural mutation in place; return a description for the failure message."""
    paths = locations(document)
    path = data.draw(st.sampled_from(paths), label="path")
    parent, key = parent_of(document, path), path[-1]
    kind = data.draw(st.sampled_from(MUTATIONS), label="mutation")
    if kind == "delete":
        del parent[key]
    elif kind == "add":
        target = parent[key] if isinstance(parent[key], dict) else parent
        if isinstance(target, dict):
            target[data.draw(ANY_TEXT, label="new key")] = data.draw(JSON_VALUES, label="new value")
        else:
            target.append(data.draw(JSON_VALUES, label="appended"))
    elif kind == "retype":
        parent[key] = data.draw(JSON_VALUES, label="value")
    elif kind == "unicode":
        parent[key] = data.draw(ANY_TEXT, label="text")
    elif kind == "nest":
        depth = data.draw(st.integers(min_value=1, max_value=2 * MAX_DEPTH), label="depth")
        parent[key] = nest(parent[key], depth, data.draw(st.booleans(), label="objects"))
    elif kind == "number":
        parent[key] = data.draw(NUMBERS, label="number")
    elif kind == "unstorable":
        parent[key] = data.draw(UNSTORABLE, label="unstorable")
    else:
        parent[key] = data.draw(st.sampled_from(["", [], {}, None, " ", "\x00"]), label="empty")
    return f"{kind} at {path!r}"


@FUZZ
@given(st.data())
def test_mutated_valid_envelopes_decode_or_raise_envelope_error(data: st.DataObject) -> None:
    document = valid_envelope()
    steps = [mutate(document, data) for _ in range(data.draw(st.integers(1, 4), label="mutations"))]
    raw = encode(document, ascii_only=data.draw(st.booleans(), label="ascii"))
    try:
        check(raw)
    except AssertionError as exc:
        raise AssertionError(f"{exc} after {steps}") from exc


@FUZZ
@given(st.data())
def test_byte_level_damage_to_a_valid_envelope_decodes_or_raises_envelope_error(
    data: st.DataObject,
) -> None:
    raw = bytearray(encode(valid_envelope(), ascii_only=False))
    kind = data.draw(st.sampled_from(["truncate", "flip", "insert", "duplicate_key", "splice"]))
    at = data.draw(st.integers(min_value=0, max_value=len(raw) - 1), label="at")
    if kind == "truncate":
        del raw[at:]
    elif kind == "flip":
        raw[at] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    elif kind == "insert":
        raw[at:at] = data.draw(st.binary(min_size=1, max_size=16), label="inserted")
    elif kind == "duplicate_key":
        raw = bytearray(bytes(raw).replace(b'"market_id": ', b'"market_id": "x", "market_id": ', 1))
    else:
        raw[at:at] = encode(data.draw(JSON_VALUES, label="spliced"))
    check(bytes(raw))


# Number literals json.dumps never writes: the decoder must refuse exactly those a double cannot hold.
LITERALS = st.builds(
    lambda sign, digits, fraction, exponent: f"{sign}{digits}{fraction}{exponent}",
    st.sampled_from(["", "-"]),
    st.one_of(st.sampled_from(["0", "1", "9"]), st.integers(1, 5000).map(lambda n: "9" * n)),
    st.sampled_from(["", ".0", ".5", ".000001"]),
    st.one_of(st.just(""), st.integers(-1000, 1000).map(lambda e: f"e{e}")),
)


@FUZZ
@given(LITERALS)
def test_number_literals_are_kept_exactly_or_refused_with_a_number_reason(literal: str) -> None:
    raw = json.dumps(valid_envelope()).replace('"volume": 42', f'"volume": {literal}', 1).encode()
    outcome = check(raw)
    is_integer = "." not in literal and "e" not in literal
    value = float(literal)
    if isinstance(outcome, DecodedEnvelope):
        stored = outcome.envelope.evidence_bundle.items[0].parsed_value["bitcoin"]["volume"]
        assert stored == (int(literal) if is_integer else value)
        assert is_integer or (
            math.isfinite(value) and (value != 0 or not any(c in "123456789" for c in literal.split("e")[0]))
        )
        return
    assert outcome.path == "$.evidence_bundle.items[0].parsed_value.bitcoin.volume", outcome
    if is_integer:
        assert outcome.reason == Reason.NUMBER_TOO_LARGE and len(literal.lstrip("-")) > 308, outcome
    elif not math.isfinite(value):
        assert outcome.reason == Reason.NON_FINITE_NUMBER, outcome
    else:
        assert outcome.reason == Reason.NUMBER_UNDERFLOW and value == 0, outcome


# The nested value replaces parsed_value.bitcoin.volume, which sits inside 6 containers.
VOLUME_DEPTH = 6


@pytest.mark.parametrize(
    "depth", [MAX_DEPTH - VOLUME_DEPTH - 1, MAX_DEPTH - VOLUME_DEPTH, MAX_DEPTH - VOLUME_DEPTH + 1, 200_000]
)
@pytest.mark.parametrize("opener", ["[", '{"k":'])
def test_nesting_at_and_far_beyond_the_limit(depth: int, opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    deep = opener * depth + "0" + closer * depth
    raw = json.dumps(valid_envelope()).replace('"volume": 42', f'"volume": {deep}', 1).encode()
    outcome = check(raw, max_bytes=len(raw))
    if VOLUME_DEPTH + depth <= MAX_DEPTH:
        assert isinstance(outcome, DecodedEnvelope), outcome
    else:
        assert isinstance(outcome, EnvelopeError) and outcome.reason == Reason.TOO_DEEP, outcome


def record(raw: bytes) -> RecordContext:
    return RecordContext(
        topic="evidence-bundles",
        partition=0,
        offset=1,
        key=None,
        value=raw,
        timestamp_ms=None,
        headers=(),
        group="g",
        host="h",
        received_at=datetime.now(UTC),
    )


def stand_in_auditor(decoded: DecodedEnvelope, operational: OperationalInfo) -> SubmissionDraft:
    return SubmissionDraft(
        idempotency_key=decoded.idempotency_key,
        market_id=decoded.market_id,
        bundle_id=decoded.envelope.evidence_bundle.bundle_id,
        input_hashes={"inputs_hash": decoded.inputs_hash},
        status="audited",
        entries=[EntryDraft("submission.received", {"ok": True})],
        operational=operational,
        engine_version="test",
    )


@FUZZ
@given(st.data())
def test_the_rejection_of_any_hostile_record_is_storable(data: st.DataObject) -> None:
    """Ids, messages and paths of a rejection come from the record; the row must store anyway,
    also when it is built after the database refused the record (``ledger_refused``)."""
    document = valid_envelope()
    for place in (document["prompt_spec"]["market"], document["evidence_bundle"]):
        place["market_id"] = data.draw(st.one_of(UNSTORABLE, ANY_TEXT), label="market_id")
    document["evidence_bundle"]["bundle_id"] = data.draw(st.one_of(UNSTORABLE, ANY_TEXT), label="bundle_id")
    steps = [mutate(document, data) for _ in range(data.draw(st.integers(0, 2), label="mutations"))]
    raw = encode(document, ascii_only=data.draw(st.booleans(), label="ascii"))
    context = record(raw)
    outcome = process_record(context, stand_in_auditor, dlq_topic="dlq", max_bytes=MAX_BYTES)
    try:
        if isinstance(outcome, Rejection):
            assert_storable(outcome)
        refused = EnvelopeError(Reason.LEDGER_REFUSED, data.draw(ANY_TEXT, label="database error"))
        assert_storable(
            build_rejection(refused, context, dlq_topic="dlq", inline_limit=65_536, dlq_value_limit=MAX_BYTES)
        )
    except Exception as exc:
        raise AssertionError(f"{exc!r} after {steps}") from exc
