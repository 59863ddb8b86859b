"""The producer helper validates exactly as the consumer does, wraps bare inputs and keys by market id."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from consumers.publisher import prepare_document, prepare_file, prepare_raw
from engine.envelope import EnvelopeError, Reason, decode_envelope, wrap_inputs

SAMPLE = json.loads((Path(__file__).resolve().parents[1] / "data" / "cournot_minimal.json").read_text())


def sample() -> dict[str, Any]:
    return copy.deepcopy(SAMPLE)


def test_bare_inputs_are_wrapped_into_a_v1_envelope() -> None:
    record = prepare_document(sample())
    assert record.key == b"mk_btc_100k_2026"
    decoded = decode_envelope(record.value)
    assert decoded.envelope.schema_version == 1
    assert record.idempotency_key == decoded.idempotency_key
    assert record.bundle_id == "bundle_0001"


def test_full_envelope_is_sent_as_given_with_overrides() -> None:
    document = wrap_inputs(sample()["prompt_spec"], sample()["evidence_bundle"], event_id="evt-1")
    record = prepare_document(document, verify_reasoning=True)
    decoded = decode_envelope(record.value)
    assert record.idempotency_key == "event:evt-1"
    assert decoded.envelope.options.verify_reasoning is True


def test_invalid_document_is_refused_before_sending() -> None:
    document = sample()
    document["evidence_bundle"]["market_id"] = "other"
    with pytest.raises(EnvelopeError) as info:
        prepare_document(document)
    assert info.value.reason is Reason.MARKET_MISMATCH


def test_unrelated_object_is_refused() -> None:
    with pytest.raises(EnvelopeError) as info:
        prepare_document({"prompt_spec": {}})
    assert info.value.reason is Reason.UNKNOWN_SCHEMA


def test_file_with_nan_is_refused_with_its_reason(tmp_path: Path) -> None:
    path = tmp_path / "nan.json"
    path.write_text('{"prompt_spec": NaN, "evidence_bundle": {}}')
    with pytest.raises(EnvelopeError) as info:
        prepare_file(path)
    assert info.value.reason is Reason.NON_FINITE_NUMBER


@pytest.mark.parametrize(
    ("number", "reason"),
    [
        (b"1e-400", Reason.NUMBER_UNDERFLOW),
        (b"1e400", Reason.NON_FINITE_NUMBER),
        (b"9" * 400, Reason.NUMBER_TOO_LARGE),
    ],
)
def test_file_with_a_number_a_double_cannot_hold_is_refused_as_the_consumer_would(
    tmp_path: Path, number: bytes, reason: Reason
) -> None:
    """Decoded loosely, 1e-400 became 0.0 and the re-encoded record was published as valid."""
    text = json.dumps(sample()).encode().replace(b'"volume": 42', b'"volume": ' + number)
    path = tmp_path / "number.json"
    path.write_bytes(text)
    with pytest.raises(EnvelopeError) as info:
        prepare_file(path)
    assert (info.value.reason, info.value.path) == (
        reason,
        "$.evidence_bundle.items[0].parsed_value.bitcoin.volume",
    )


def test_raw_mode_sends_bytes_unvalidated(tmp_path: Path) -> None:
    path = tmp_path / "poison.json"
    path.write_bytes(b"\xff not json")
    record = prepare_file(path, raw=True)
    assert record.value == b"\xff not json"
    assert record.key is None and record.idempotency_key is None


def test_raw_mode_keys_by_market_id_when_readable() -> None:
    raw = json.dumps(sample()).encode()
    assert prepare_raw(raw).key == b"mk_btc_100k_2026"


def test_size_limit_applies_before_sending() -> None:
    with pytest.raises(EnvelopeError) as info:
        prepare_document(sample(), max_bytes=100)
    assert info.value.reason is Reason.OVERSIZE


def test_lone_surrogates_get_the_consumers_reason_not_non_finite_number() -> None:
    """A ``\\ud800`` escape has no UTF-8 form: the envelope is written with ASCII escapes, so the
    decoder refuses it for what it is (it used to be reported as ``non_finite_number``)."""
    document = sample()
    document["evidence_bundle"]["bundle_id"] = "bundle_\ud800"
    with pytest.raises(EnvelopeError) as info:
        prepare_document(document)
    assert (info.value.reason, info.value.path) == (Reason.UNSTORABLE_TEXT, "$.evidence_bundle.bundle_id")
    document = sample()
    document["evidence_bundle"]["items"][0]["parsed_value"]["note"] = "\ud800"
    with pytest.raises(EnvelopeError) as info:
        prepare_document(document)
    assert (info.value.reason, info.value.path) == (
        Reason.UNSTORABLE_TEXT,
        "$.evidence_bundle.items[0].parsed_value.note",
    )
