"""Every value is checked against what the store can hold before it reaches the store.

Hostile records from the issue: U+0000 or a lone surrogate in ids and elsewhere, ids too long for
their btree index, integers too large for the engine, numbers a 64-bit float cannot hold, a
duplicate key deep in the document. Each is refused at decode with a specific reason code and its
JSON path, and the rejection row built for it (and for worse: a record whose ids are unreadable by
the decoder) can always be stored.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from consumers.processing import Audited, RecordContext, Rejection, build_rejection, process_record
from engine.envelope import EnvelopeError, Reason, decode_envelope
from engine.limits import (
    MAX_ID_BYTES,
    storable_id,
    storable_text,
)
from ledger.store.drafts import audit_envelope
from ledger.store.records import OperationalInfo, SubmissionDraft
from tests.helpers.hostile import HOSTILE, assert_storable, document, item, market

MAX_BYTES = 2_000_000


@pytest.mark.parametrize(
    ("raw", "reason", "path"), [case[1:] for case in HOSTILE], ids=[c[0] for c in HOSTILE]
)
def test_hostile_values_are_refused_at_decode_with_a_specific_reason_and_their_path(
    raw: bytes, reason: str, path: str
) -> None:
    with pytest.raises(EnvelopeError) as info:
        decode_envelope(raw, max_bytes=MAX_BYTES)
    assert (info.value.reason.value, info.value.path) == (reason, path), info.value


def context(value: bytes) -> RecordContext:
    return RecordContext(
        topic="evidence-bundles",
        partition=1,
        offset=3,
        key=b"k\x00",
        value=value,
        timestamp_ms=None,
        headers=(),
        group="g",
        host="h",
        received_at=datetime.now(UTC),
    )


def never_called(decoded: Any, operational: OperationalInfo) -> SubmissionDraft:
    raise AssertionError("a hostile record reached the auditor")


@pytest.mark.parametrize(("raw", "reason"), [(c[1], c[2]) for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_the_rejection_of_every_hostile_record_is_storable(raw: bytes, reason: str) -> None:
    outcome = process_record(context(raw), never_called, dlq_topic="dlq", max_bytes=MAX_BYTES)
    assert isinstance(outcome, Rejection) and outcome.error.reason.value == reason
    assert_storable(outcome)


@pytest.mark.parametrize(
    ("market_id", "stored"),
    [
        ("mk_\u0000_x", "mk_\\u0000_x"),
        ("\ud800", "\\ud800"),
        ("m" * 3000, None),
        ("mk_ok", "mk_ok"),
    ],
    ids=["nul", "surrogate", "long", "plain"],
)
def test_a_rejection_built_from_any_error_escapes_or_hashes_the_ids(
    market_id: str, stored: str | None
) -> None:
    """The path the consumer takes when the database refused a record: the ids come from raw JSON."""
    raw = document(market(market_id))
    error = EnvelopeError(Reason.LEDGER_REFUSED, "db said \x00 and \ud800 " + "x" * 10_000, "$." + "k" * 5000)
    rejection = build_rejection(
        error, context(raw), dlq_topic="dlq", inline_limit=65_536, dlq_value_limit=10**7
    )
    assert_storable(rejection)
    if stored is None:
        assert rejection.draft.market_id is not None and rejection.draft.market_id.startswith("sha256:0x")
    else:
        assert rejection.draft.market_id == stored
    payload = rejection.draft.entries[0].payload
    assert payload["message"].startswith("db said \\u0000 and \\ud800 ") and payload["message"].endswith(
        "..."
    )


def test_storable_id_is_deterministic_and_distinguishes_long_ids() -> None:
    assert storable_id("a" * 600) == storable_id("a" * 600) != storable_id("a" * 601)
    assert storable_id(None) is None
    assert storable_text("a\x00b", 10) == "a\\u0000b" and storable_text("abcdef", 5) == "ab..."


def test_the_limits_accept_the_largest_values_they_allow() -> None:
    at_limit = document(
        lambda doc: (
            market("m" * MAX_ID_BYTES)(doc),
            item(parsed_value={"bitcoin": {"usd": int("9" * 308), "tiny": 5e-324, "zero": 0.0}})(doc),
        )
    )
    decoded = decode_envelope(at_limit, max_bytes=MAX_BYTES)
    assert decoded.market_id == "m" * MAX_ID_BYTES


def test_a_huge_integer_inside_raw_content_is_judged_invalid_not_an_engine_crash() -> None:
    """The decoder does not parse ``raw_content``; the auditor does, and the judge's number check
    raised OverflowError (``audit_failed``) on an integer beyond a float's range."""

    def huge_raw_content(doc: dict[str, Any]) -> None:
        evidence = doc["evidence_bundle"]["items"][0]
        evidence.pop("parsed_value", None)
        evidence.pop("extracted_fields", None)
        evidence["raw_content"] = '{"bitcoin": {"usd": ' + "9" * 4000 + "}}"

    outcome = process_record(
        context(document(huge_raw_content)), audit_envelope, dlq_topic="dlq", max_bytes=MAX_BYTES
    )
    assert isinstance(outcome, Audited), outcome
    [verdict] = [entry.payload for entry in outcome.draft.entries if entry.kind == "verdict.issued"]
    assert verdict["verdict"].outcome == "INVALID"
