"""Replay validates stored inputs with the consumer's decoder: a ``submission.received`` payload the
consumer would have refused (here: a market-id mismatch written behind the triggers) is an error
with the consumer's reason code, not a replayed submission."""

from __future__ import annotations

import json

import pytest

from ledger.store.hashing import canonical_text
from tests.helpers.database import query, tamper
from tests.helpers.replay import build_ledger, ledger_json

pytestmark = pytest.mark.integration


def test_stored_inputs_the_consumer_would_refuse_are_a_replay_error_with_its_reason(
    migrated_database_url: str,
) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=3)
    target = stored[1]
    [(text,)] = query(
        url,
        "SELECT payload_canonical FROM ledger_store.entries "
        "WHERE submission_id = %(s)s AND kind = 'submission.received'",
        {"s": target.submission_id},
    )
    received = json.loads(text)
    received["evidence_bundle"]["market_id"] = "mk_elsewhere"
    tamper(
        url,
        "UPDATE ledger_store.entries SET payload_canonical = %(t)s "
        "WHERE submission_id = %(s)s AND kind = 'submission.received'",
        {"t": canonical_text(received), "s": target.submission_id},
    )

    code, report = ledger_json(url, "replay", "--all")

    assert code != 0
    [result] = report["results"]
    assert result["submission_id"] == target.submission_id and result["status"] == "error"
    assert "market_mismatch" in result["error"]
