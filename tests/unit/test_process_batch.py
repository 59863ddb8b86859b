"""``process_batch`` (decode every record, then audit the decoded ones) gives exactly the outcomes of
``process_record`` applied record by record, in record order, for any mixture of records."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import consumers.processing as processing
from consumers.processing import Audited, Rejection, context_from_record, process_batch, process_record
from engine.envelope import DecodedEnvelope, wrap_inputs
from ledger.store.drafts import audit_envelope
from ledger.store.records import OperationalInfo, SubmissionDraft

SAMPLE = json.loads((Path(__file__).resolve().parents[1] / "data" / "cournot_minimal.json").read_text())
NOW = datetime(2026, 11, 25, 9, 30, tzinfo=UTC)
MAX_BYTES = 65_536
KINDS = ("valid", "fails_audit", "not_json", "invalid", "oversize", "por_marker", "empty")


def value_of(kind: str, index: int) -> bytes | None:
    """A record value of the given kind (distinct bundle ids, so every valid one is its own submission)."""
    if kind == "empty":
        return None
    if kind == "not_json":
        return b"{not json"
    if kind == "oversize":
        return b"x" * (MAX_BYTES + 1)
    if kind == "por_marker":
        return b'{"schema_id": "cournot-ledger/por-envelope", "broken": '
    bundle = copy.deepcopy(SAMPLE["evidence_bundle"])
    bundle["bundle_id"] = f"{bundle['bundle_id']}-{kind}-{index}"
    document = wrap_inputs(SAMPLE["prompt_spec"], bundle)
    if kind == "invalid":
        document["evidence_bundle"]["items"] = "not a list"
    return json.dumps(document).encode()


def auditor(decoded: DecodedEnvelope, operational: OperationalInfo) -> SubmissionDraft:
    """The real audit, except for bundles marked to fail (an engine error becomes a rejection)."""
    if "-fails_audit-" in decoded.envelope.evidence_bundle.bundle_id:
        raise ZeroDivisionError("boom")
    return audit_envelope(decoded, operational)


def record(kind: str, index: int) -> SimpleNamespace:
    return SimpleNamespace(
        topic="evidence-bundles",
        partition=index % 3,
        offset=100 + index,
        key=b"k" if index % 2 else None,
        value=value_of(kind, index),
        timestamp=1_700_000_000_000 + index,
        headers=[("trace-id", f"t-{index}".encode())],
    )


def summary(outcome: Any) -> tuple[Any, ...]:
    """Everything an outcome holds (an ``EnvelopeError`` compares by identity, so by its fields here)."""
    if isinstance(outcome, Audited):
        return ("audited", outcome.context, outcome.draft)
    assert isinstance(outcome, Rejection)
    error = outcome.error
    return (
        "rejected",
        outcome.context,
        error.reason,
        error.message,
        error.path,
        outcome.dead_letter,
        outcome.draft,
    )


class _Clock:
    @staticmethod
    def now(tz: Any = None) -> datetime:
        return NOW


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.sampled_from(KINDS), max_size=8), incarnation=st.sampled_from([1, 2]))
def test_batch_outcomes_equal_record_by_record(
    monkeypatch: pytest.MonkeyPatch, kinds: list[str], incarnation: int
) -> None:
    monkeypatch.setattr(processing, "datetime", _Clock)
    records = [record(kind, index) for index, kind in enumerate(kinds)]
    options: dict[str, Any] = {"dlq_topic": "dlq", "max_bytes": MAX_BYTES, "inline_limit": 1024}
    batch = process_batch(records, auditor, group="g", host="h", incarnation=incarnation, **options)
    one_by_one = [
        process_record(
            context_from_record(r, group="g", host="h", received_at=NOW, incarnation=incarnation),
            auditor,
            **options,
        )
        for r in records
    ]
    assert [summary(o) for o in batch] == [summary(o) for o in one_by_one]
    assert [type(o).__name__ for o in batch] == [
        "Audited" if kind == "valid" else "Rejection" for kind in kinds
    ]


def test_every_record_is_decoded_before_the_first_audit(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    decode = processing.decode_envelope

    def spying_decode(value: bytes | None, **kwargs: Any) -> DecodedEnvelope:
        events.append("decode")
        return decode(value, **kwargs)

    def spying_auditor(decoded: DecodedEnvelope, operational: OperationalInfo) -> SubmissionDraft:
        events.append("audit")
        return audit_envelope(decoded, operational)

    monkeypatch.setattr(processing, "decode_envelope", spying_decode)
    records = [record("valid", index) for index in range(3)]
    outcomes = process_batch(
        records, spying_auditor, group="g", host="h", dlq_topic="dlq", max_bytes=MAX_BYTES, inline_limit=1024
    )
    assert events == ["decode"] * 3 + ["audit"] * 3
    assert [o.context.offset for o in outcomes] == [100, 101, 102]
