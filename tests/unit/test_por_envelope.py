"""The PoR-pack envelope: published schema, strict decoding, routing, the por.verified draft, replay."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from consumers.por_envelope import decode_por_envelope, is_por_record, por_draft, render_por_json_schema
from consumers.processing import Audited, RecordContext, Rejection, process_record
from engine.envelope import EnvelopeError, Reason
from engine.por_pack.stored import StoredPackError, reverify
from ledger.por_files import read_pack_files

ROOT = Path(__file__).resolve().parents[2]
PACKS = ROOT / "tests" / "data" / "por_packs"
HEAD = {"schema_id": "cournot-ledger/por-envelope", "schema_version": 1}


def files_of(name: str) -> dict[str, str]:
    files = read_pack_files(PACKS / name)
    return {path: base64.b64encode(data).decode("ascii") for path, data in files.items()}


def encode(document: Any) -> bytes:
    return json.dumps(document).encode("utf-8")


def context(value: bytes) -> RecordContext:
    return RecordContext(
        "topic", 0, 1, b"mk", value, None, (), "group", "host", datetime(2026, 1, 1, tzinfo=UTC)
    )


def never_audit(*_: Any) -> Any:
    raise AssertionError("the evidence auditor must not see a PoR envelope")


def test_published_schema_is_the_generated_one() -> None:
    assert (ROOT / "schemas" / "por-envelope-v1.schema.json").read_text(
        encoding="utf-8"
    ) == render_por_json_schema()


@pytest.mark.parametrize(
    ("value", "reason", "path"),
    [
        (b"", Reason.EMPTY, "$"),
        (b"[1]", Reason.NOT_AN_OBJECT, "$"),
        (encode({**HEAD, "schema_version": 2, "pack": {}}), Reason.UNKNOWN_VERSION, "$.schema_version"),
        (encode({**HEAD, "pack": {}, "files": {}}), Reason.SCHEMA_VIOLATION, "$"),
        (
            encode({**HEAD, "files": {"manifest.json": "%%%"}}),
            Reason.SCHEMA_VIOLATION,
            '$.files["manifest.json"]',
        ),
        (encode({**HEAD, "pack": {"verdict": {}}}), Reason.SCHEMA_VIOLATION, "$.pack.prompt_spec"),
        (
            b'{"schema_id": "cournot-ledger/por-envelope", "schema_version": 1, "pack": {}, "pack": {}}',
            Reason.DUPLICATE_KEY,
            "$.pack",
        ),
    ],
)
def test_bad_envelopes_are_refused_with_reason_and_path(value: bytes, reason: Reason, path: str) -> None:
    with pytest.raises(EnvelopeError) as refused:
        decode_por_envelope(value)
    assert (refused.value.reason, refused.value.path) == (reason, path)


def test_bad_pack_record_becomes_a_rejection_with_dead_letter() -> None:
    outcome = process_record(
        context(encode({**HEAD, "pack": {}})), never_audit, dlq_topic="dlq", max_bytes=1 << 22
    )
    assert isinstance(outcome, Rejection)
    assert outcome.draft.status == "rejected" and outcome.dead_letter.value is not None


def test_evidence_envelope_mentioning_the_marker_still_takes_the_evidence_path() -> None:
    value = encode({"schema_id": "cournot-ledger/evidence-envelope", "note": "cournot-ledger/por-envelope"})
    assert is_por_record(value)
    assert decode_por_envelope(value) is None
    outcome = process_record(context(value), never_audit, dlq_topic="dlq", max_bytes=1 << 22)
    assert (
        isinstance(outcome, Rejection) and outcome.error.reason == Reason.UNKNOWN_VERSION
    )  # evidence decoder


def test_files_envelope_is_verified_into_one_por_verified_entry() -> None:
    value = encode({**HEAD, "event_id": "e-1", "files": files_of("mutated/roots_swapped")})
    outcome = process_record(context(value), never_audit, dlq_topic="dlq", max_bytes=1 << 22)
    assert isinstance(outcome, Audited)
    draft = outcome.draft
    assert (draft.status, draft.idempotency_key, [e.kind for e in draft.entries]) == (
        "por_verified",
        "event:e-1",
        ["por.verified"],
    )
    payload = draft.entries[0].payload
    assert payload["report"]["status"] == "failed" and len(payload["report"]["challenges"]) == 2
    assert draft.market_id == "mk_btc_above_100k_20260201_q2"


def test_replay_reverifies_identically_and_notices_a_changed_report() -> None:
    document = json.loads(
        (PACKS / "genuine" / "conflicting_sources_document.json").read_text(encoding="utf-8")
    )
    decoded = decode_por_envelope(encode({**HEAD, "pack": document}))
    assert decoded is not None and decoded.idempotency_key.startswith("por:0x")
    payload = json.loads(json.dumps(por_draft(decoded, None).entries[0].payload))
    assert reverify(payload["stored_pack"], payload["report"]).identical
    changed = {**payload["report"], "status": "failed"}
    assert not reverify(payload["stored_pack"], changed).identical
    with pytest.raises(StoredPackError):
        reverify({"form": "other"}, payload["report"])
