"""The v1 envelope: what it accepts, the idempotency key, and a specific reason for every refusal
(version 2's reasoning options: ``test_envelope_v2.py``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from engine.envelope import (
    ENVELOPE_SCHEMA_ID,
    EnvelopeError,
    Reason,
    decode_envelope,
    render_json_schema,
    wrap_inputs,
)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = json.loads((ROOT / "tests" / "data" / "cournot_minimal.json").read_text())


def envelope(**overrides: Any) -> dict[str, Any]:
    sample = copy.deepcopy(SAMPLE)
    document = wrap_inputs(sample["prompt_spec"], sample["evidence_bundle"])
    document.update(overrides)
    return document


def encode(document: Any) -> bytes:
    return json.dumps(document).encode()


def refusal(raw: bytes, **kwargs: Any) -> EnvelopeError:
    with pytest.raises(EnvelopeError) as info:
        decode_envelope(raw, **kwargs)
    return info.value


def test_checked_in_schema_equals_the_generated_one() -> None:
    published = (ROOT / "schemas" / "envelope-v1.schema.json").read_text(encoding="utf-8")
    assert published == render_json_schema(), (
        "run: python -m engine.envelope > schemas/envelope-v1.schema.json"
    )


def test_schema_requires_the_version_fields_and_forbids_unknown_ones() -> None:
    schema = json.loads(render_json_schema())
    assert schema["$schema"].endswith("2020-12/schema")
    assert set(schema["required"]) == {"schema_id", "schema_version", "prompt_spec", "evidence_bundle"}
    assert schema["properties"]["schema_version"]["const"] == 1
    assert schema["additionalProperties"] is False


def test_valid_envelope_decodes() -> None:
    decoded = decode_envelope(encode(envelope()))
    assert decoded.market_id == "mk_btc_100k_2026"
    assert decoded.envelope.evidence_bundle.bundle_id == "bundle_0001"
    assert decoded.envelope.options.verify_reasoning is False


def test_idempotency_key_is_the_event_id_when_given() -> None:
    decoded = decode_envelope(encode(envelope(event_id="evt-42")))
    assert decoded.idempotency_key == "event:evt-42"


def test_idempotency_key_is_the_canonical_inputs_hash_otherwise() -> None:
    first = decode_envelope(encode(envelope()))
    assert first.idempotency_key == f"inputs:{first.inputs_hash}"
    # key order, whitespace and an equivalent time zone offset do not change the canonical inputs
    reordered = envelope()
    reordered["prompt_spec"]["market"]["resolution_deadline"] = "2026-02-02T01:00:00+01:00"
    text = json.dumps(reordered, indent=3, sort_keys=True).encode()
    assert decode_envelope(text).idempotency_key == first.idempotency_key
    # options are not inputs
    assert decode_envelope(encode(envelope(options={"verify_reasoning": True}))).idempotency_key == (
        first.idempotency_key
    )
    changed = envelope()
    changed["evidence_bundle"]["items"][0]["parsed_value"]["bitcoin"]["usd"] = 99999.5
    assert decode_envelope(encode(changed)).idempotency_key != first.idempotency_key


def test_oversize_refused_before_decoding() -> None:
    raw = encode(envelope())
    error = refusal(raw, max_bytes=len(raw) - 1)
    assert error.reason is Reason.OVERSIZE
    assert str(len(raw)) in error.message


def test_empty_value_refused() -> None:
    assert refusal(b"").reason is Reason.EMPTY


def test_invalid_utf8_refused() -> None:
    raw = encode(envelope()).replace(b"Compare price", b"Compare \xff\xfe price")
    assert refusal(raw).reason is Reason.INVALID_UTF8


def test_malformed_json_refused() -> None:
    assert refusal(b'{"schema_id": ').reason is Reason.INVALID_JSON


def test_nan_refused_with_its_path() -> None:
    raw = encode(envelope()).replace(b'101234.5, "volume"', b'NaN, "volume"')
    error = refusal(raw)
    assert error.reason is Reason.NON_FINITE_NUMBER
    assert error.path == "$.evidence_bundle.items[0].parsed_value.bitcoin.usd"


def test_infinity_refused() -> None:
    raw = encode(envelope()).replace(b'"price_usd": 101234.5', b'"price_usd": -Infinity')
    assert refusal(raw).reason is Reason.NON_FINITE_NUMBER


def test_duplicate_object_keys_refused() -> None:
    raw = encode(envelope()).replace(b'"plan_id": "plan_0001"', b'"plan_id": "plan_0001", "plan_id": "x"')
    assert refusal(raw).reason is Reason.DUPLICATE_KEY


def test_deep_nesting_refused() -> None:
    deep: Any = 1
    for _ in range(200):
        deep = [deep]
    document = envelope()
    document["evidence_bundle"]["items"][0]["parsed_value"] = deep
    assert refusal(encode(document)).reason is Reason.TOO_DEEP


def test_non_object_refused() -> None:
    assert refusal(b"[1, 2]").reason is Reason.NOT_AN_OBJECT


@pytest.mark.parametrize("version", [3, 0, "1", "2", None, True, 2.5])
def test_unknown_envelope_version_refused(version: Any) -> None:
    error = refusal(encode(envelope(schema_version=version)))
    assert error.reason is Reason.UNKNOWN_VERSION
    assert error.path == "$.schema_version"


def test_bare_inputs_without_envelope_refused() -> None:
    error = refusal(encode(copy.deepcopy(SAMPLE)))
    assert error.reason is Reason.UNKNOWN_SCHEMA
    assert ENVELOPE_SCHEMA_ID in error.message


def test_schema_violation_names_the_field() -> None:
    document = envelope()
    del document["prompt_spec"]["market"]["question"]
    error = refusal(encode(document))
    assert error.reason is Reason.SCHEMA_VIOLATION
    assert error.path == "$.prompt_spec.market.question"


def test_unknown_envelope_field_refused() -> None:
    error = refusal(encode(envelope(signature="x")))
    assert error.reason is Reason.SCHEMA_VIOLATION
    assert error.path == "$.signature"


def test_naive_timestamp_refused() -> None:
    document = envelope()
    document["evidence_bundle"]["items"][0]["provenance"]["fetched_at"] = "2026-02-01T00:00:05"
    error = refusal(encode(document))
    assert error.reason is Reason.NAIVE_TIMESTAMP
    assert error.path == "$.evidence_bundle.items[0].provenance.fetched_at"


def test_duplicate_evidence_ids_refused() -> None:
    document = envelope()
    items = document["evidence_bundle"]["items"]
    items.append(copy.deepcopy(items[0]))
    error = refusal(encode(document))
    assert error.reason is Reason.DUPLICATE_EVIDENCE_ID
    assert error.path == "$.evidence_bundle.items[1].evidence_id"


def test_market_mismatch_refused() -> None:
    document = envelope()
    document["evidence_bundle"]["market_id"] = "mk_other"
    error = refusal(encode(document))
    assert error.reason is Reason.MARKET_MISMATCH
    assert error.path == "$.evidence_bundle.market_id"


def test_evidence_for_unknown_requirement_refused() -> None:
    document = envelope()
    document["evidence_bundle"]["items"][0]["requirement_id"] = "req_volume"
    error = refusal(encode(document))
    assert error.reason is Reason.UNKNOWN_REQUIREMENT
    assert error.path == "$.evidence_bundle.items[0].requirement_id"


def test_lone_surrogate_is_unstorable_text_at_its_path() -> None:
    raw = encode(envelope()).replace(b"Compare price", b"Compare \\ud800 price")
    error = refusal(raw)
    assert error.reason is Reason.UNSTORABLE_TEXT
    assert error.path == "$.prompt_spec.market.resolution_rules.rules[0].description"
