"""Drafts are validated before any transaction starts; payload builders give the views' shapes."""

from __future__ import annotations

import base64

import pytest

from ledger.errors import (
    IdempotencyConflictError,
    InvalidDraftError,
    LedgerUnavailableError,
    StaleOffsetError,
)
from ledger.store.payloads import rejection_payload, step_draft, trace_step_entry
from ledger.store.records import ConflictRecord, EntryDraft, OffsetAdvance, SubmissionDraft


def _draft(**changes: object) -> SubmissionDraft:
    step = step_draft(0, {"step_id": "step_0001", "type": "map", "evidence_ids": ["ev_1"], "action": "a"})
    fields: dict[str, object] = {
        "idempotency_key": "k",
        "market_id": "m",
        "bundle_id": "b",
        "input_hashes": {},
        "status": "audited",
        "entries": [EntryDraft("submission.received", {}), trace_step_entry(step)],
        "steps": [step],
        "engine_version": "1.0.0",
    }
    fields.update(changes)
    return SubmissionDraft(**fields)  # type: ignore[arg-type]


def test_a_well_formed_draft_is_accepted() -> None:
    draft = _draft()
    assert draft.steps[0].step_type == "map" and draft.steps[0].evidence_ids == ("ev_1",)


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        ({"idempotency_key": ""}, "idempotency_key"),
        ({"status": "pending"}, "status"),
        ({"engine_version": ""}, "engine_version"),
        ({"entries": []}, "entries"),
        ({"steps": []}, "steps"),
    ],
)
def test_malformed_drafts_are_refused_with_a_field_path(changes: dict[str, object], path: str) -> None:
    with pytest.raises(InvalidDraftError) as raised:
        _draft(**changes)
    assert raised.value.field_path == path and raised.value.code == "invalid_draft"


def test_step_entry_must_name_its_step_row() -> None:
    with pytest.raises(InvalidDraftError, match="step_index and step_hash"):
        _draft(entries=[EntryDraft("trace.step", {"step_index": 0, "step_hash": "0x" + "0" * 64})])


def test_unknown_kind_and_backwards_offsets_are_refused() -> None:
    with pytest.raises(InvalidDraftError):
        EntryDraft("bundle.sneaked", {})
    with pytest.raises(InvalidDraftError):
        OffsetAdvance("g", "t", 0, 5, 4)


def test_rejection_payload_inlines_small_raw_bytes_only() -> None:
    small = rejection_payload(
        reason_code="bad", message="m", raw=b"abc", dlq_topic="dlq", dlq_partition=1, dlq_offset=2
    )
    assert base64.b64decode(small["raw_base64"]) == b"abc" and small["raw_size"] == 3
    assert small["dlq"] == {"topic": "dlq", "partition": 1, "offset": 2}
    big = rejection_payload(reason_code="bad", message="m", raw=b"x" * 10, raw_inline_limit=5)
    assert "raw_base64" not in big and big["raw_sha256"].startswith("0x")


def test_error_vocabulary() -> None:
    assert LedgerUnavailableError("down").retryable
    stale = StaleOffsetError("stale", group="g", topic="t", partition=3, from_offset=7)
    assert not stale.retryable and stale.field_path == "offsets[g/t/3]"
    error = ConflictRecord(4, "k", "input_hashes_differ", "0xa", "0xb").to_error()
    assert isinstance(error, IdempotencyConflictError) and error.conflict_id == 4
