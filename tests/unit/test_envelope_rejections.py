"""A refused record becomes a dead letter with why-headers and a deterministic rejection draft."""

from __future__ import annotations

import base64
import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from consumers.processing import Audited, RecordContext, Rejection, process_record, rejection_key
from engine.envelope import DecodedEnvelope, Reason, wrap_inputs
from ledger.store.records import EntryDraft, OperationalInfo, SubmissionDraft

SAMPLE = json.loads((Path(__file__).resolve().parents[1] / "data" / "cournot_minimal.json").read_text())


def context(value: bytes | None, *, offset: int = 7, host: str = "host-a") -> RecordContext:
    return RecordContext(
        topic="evidence-bundles",
        partition=2,
        offset=offset,
        key=b"mk_btc_100k_2026",
        value=value,
        timestamp_ms=1_700_000_000_000,
        headers=(("trace-id", b"t-1"),),
        group="ledger-consumers",
        host=host,
        received_at=datetime.now(UTC),
    )


def fake_auditor(decoded: DecodedEnvelope, operational: OperationalInfo) -> SubmissionDraft:
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


def failing_auditor(decoded: DecodedEnvelope, operational: OperationalInfo) -> SubmissionDraft:
    raise ZeroDivisionError("boom")


def process(value: bytes | None, auditor: Any = fake_auditor, **kwargs: Any) -> Any:
    return process_record(context(value, **kwargs), auditor, dlq_topic="evidence-bundles.dlq", max_bytes=4096)


def headers(rejection: Rejection) -> dict[str, str]:
    return {name: value.decode() for name, value in rejection.dead_letter.headers}


def test_valid_record_is_audited_with_its_coordinates_as_operational_facts() -> None:
    raw = json.dumps(wrap_inputs(SAMPLE["prompt_spec"], SAMPLE["evidence_bundle"])).encode()
    outcome = process(raw)
    assert isinstance(outcome, Audited)
    assert outcome.draft.operational is not None
    assert (outcome.draft.operational.partition, outcome.draft.operational.offset) == (2, 7)


def test_rejection_headers_say_why_and_where_from() -> None:
    outcome = process(b'{"x": NaN}')
    assert isinstance(outcome, Rejection)
    found = headers(outcome)
    assert found["trace-id"] == "t-1"  # the original headers are kept
    assert found["ledger.dlq.reason"] == "non_finite_number"
    assert found["ledger.dlq.path"] == "$.x"
    assert found["ledger.dlq.message"]
    assert (found["ledger.dlq.source.topic"], found["ledger.dlq.source.partition"]) == (
        "evidence-bundles",
        "2",
    )
    assert found["ledger.dlq.source.offset"] == "7"
    assert found["ledger.dlq.value.omitted"] == "false"
    assert outcome.dead_letter.value == b'{"x": NaN}'
    assert outcome.dead_letter.key == b"mk_btc_100k_2026"


def test_rejection_draft_keeps_the_raw_bytes_and_is_keyed_by_coordinates() -> None:
    outcome = process(b"\xff\xfe not utf-8")
    assert isinstance(outcome, Rejection)
    draft = outcome.draft
    assert draft.status == "rejected"
    assert draft.idempotency_key == rejection_key("evidence-bundles", 2, 7) == "rejected:evidence-bundles/2/7"
    [entry] = draft.entries
    assert entry.kind == "submission.rejected"
    assert entry.payload["reason_code"] == "invalid_utf8"
    assert base64.b64decode(entry.payload["raw_base64"]) == b"\xff\xfe not utf-8"
    assert entry.payload["dlq"]["topic"] == "evidence-bundles.dlq"


def test_rejection_payload_does_not_depend_on_the_consumer() -> None:
    first = process(b"[1]", host="host-a")
    second = process(b"[1]", host="host-b")
    assert isinstance(first, Rejection) and isinstance(second, Rejection)
    assert first.draft.entries == second.draft.entries
    assert first.draft.input_hashes == second.draft.input_hashes


def test_oversize_record_is_stored_by_hash_and_dead_lettered_without_its_value() -> None:
    raw = b"x" * 5000
    outcome = process_record(context(raw), fake_auditor, dlq_topic="dlq", max_bytes=4096, inline_limit=1024)
    assert isinstance(outcome, Rejection)
    payload = outcome.draft.entries[0].payload
    assert payload["reason_code"] == "oversize"
    assert payload["raw_size"] == 5000 and payload["raw_sha256"].startswith("0x")
    assert "raw_base64" not in payload
    assert outcome.dead_letter.value == b""
    assert headers(outcome)["ledger.dlq.value.omitted"] == "true"


def test_engine_failure_is_dead_lettered_not_retried_forever() -> None:
    raw = json.dumps(wrap_inputs(SAMPLE["prompt_spec"], SAMPLE["evidence_bundle"])).encode()
    outcome = process(raw, failing_auditor)
    assert isinstance(outcome, Rejection)
    assert outcome.error.reason is Reason.AUDIT_FAILED
    assert "ZeroDivisionError" in outcome.error.message
    assert outcome.draft.market_id == "mk_btc_100k_2026"  # read best-effort for SQL queries


def test_an_unexpected_decoder_error_is_dead_lettered_not_a_stopped_consumer(monkeypatch: Any) -> None:
    import consumers.processing as processing

    def broken_decoder(raw: bytes, **kwargs: Any) -> DecodedEnvelope:
        raise RecursionError("a decoder bug nobody has found yet")

    monkeypatch.setattr(processing, "decode_envelope", broken_decoder)
    outcome = process(b'{"schema_id": "cournot-ledger/evidence-envelope"}')
    assert isinstance(outcome, Rejection)
    assert outcome.error.reason == Reason.AUDIT_FAILED
    assert "RecursionError" in outcome.error.message


def test_a_timestamp_out_of_range_in_utc_is_a_field_rejection_not_a_decoder_error() -> None:
    """``0001-01-01T00:00:00+01:00`` is a valid ISO timestamp whose UTC instant is before year 1:
    refused as invalid input naming the field, like any other bad value, not dead-lettered as a
    decoder failure."""
    spec = json.loads(json.dumps(SAMPLE["prompt_spec"]))
    spec["market"]["resolution_deadline"] = "0001-01-01T00:00:00+01:00"
    outcome = process(json.dumps(wrap_inputs(spec, SAMPLE["evidence_bundle"])).encode())
    assert isinstance(outcome, Rejection)
    assert outcome.error.reason != Reason.AUDIT_FAILED
    assert outcome.error.path.endswith("resolution_deadline")
    assert "out of range once converted to UTC" in outcome.error.message


def test_tombstone_is_rejected() -> None:
    outcome = process(None)
    assert isinstance(outcome, Rejection)
    assert outcome.error.reason is Reason.EMPTY


def test_producer_headers_named_like_ours_are_renamed_so_they_cannot_spoof_the_reason() -> None:
    spoofed = dataclasses.replace(
        context(b"not json"),
        headers=(("ledger.dlq.reason", b"all-good"), ("ledger.dlq.source.offset", b"0"), ("trace-id", b"t")),
    )

    outcome = process_record(spoofed, fake_auditor, dlq_topic="dlq", max_bytes=1000)

    assert isinstance(outcome, Rejection)
    headers = outcome.dead_letter.headers
    reserved = [(name, value) for name, value in headers if name.startswith("ledger.dlq.")]
    assert dict(reserved)["ledger.dlq.reason"] == b"invalid_json"
    assert dict(reserved)["ledger.dlq.source.offset"] == b"7"
    assert [name for name, _ in reserved].count("ledger.dlq.reason") == 1
    assert ("producer.ledger.dlq.reason", b"all-good") in headers
    assert ("producer.ledger.dlq.source.offset", b"0") in headers
    assert ("trace-id", b"t") in headers


def test_a_rejection_in_a_later_source_incarnation_has_its_own_key() -> None:
    first = process_record(context(b"not json"), fake_auditor, dlq_topic="dlq", max_bytes=1000)
    second = process_record(
        dataclasses.replace(context(b"not json"), incarnation=2),
        fake_auditor,
        dlq_topic="dlq",
        max_bytes=1000,
    )

    assert isinstance(first, Rejection) and isinstance(second, Rejection)
    assert first.draft.idempotency_key == "rejected:evidence-bundles/2/7"  # unchanged for incarnation 1
    assert (
        second.draft.idempotency_key
        == rejection_key("evidence-bundles", 2, 7, 2)
        == "rejected:evidence-bundles/2/7@2"
    )
    assert "incarnation" not in first.draft.entries[0].payload["source"]
    assert second.draft.entries[0].payload["source"]["incarnation"] == 2
    assert dict(second.dead_letter.headers)["ledger.dlq.source.incarnation"] == b"2"
