"""Database refusals are classified, never retried forever; duplicate keys in one batch conflict.

* A value the database refuses (an index row too large, U+0000) is a data error, not
  "unavailable": the store says ``data_refused`` and the consumer dead-letters the record as
  ``ledger_refused`` instead of retrying the batch forever.
* If even the rejection cannot be stored the consumer stops with ``record_not_storable``.
* Two records with one event id and different content in the same batch: one submission and one
  ``idempotency_conflicts`` row (the second used to be dropped before the append and logged as
  "existing").
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from consumers.consumer import ConsumerConfig, LedgerConsumer
from consumers.metrics import ConsumerMetrics
from engine.envelope import DecodedEnvelope, wrap_inputs
from ledger.errors import InvalidDraftError, LedgerDataError, LedgerError, UnstorableRecordError
from ledger.store.drafts import audit_envelope
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import AppendResult, OffsetAdvance, OperationalInfo, SubmissionDraft
from tests.helpers.consumer import (
    ForwardingStore,
    in_process_config,
    make_inputs,
    publish_raw,
    read_topic,
    stored_offsets,
)
from tests.helpers.database import query
from tests.helpers.ledger_factories import audited

pytestmark = pytest.mark.integration


def config(bootstrap: str, topic: str) -> ConsumerConfig:
    return in_process_config(bootstrap, topic, max_records=50)


def envelope_bytes(index: int, *, event_id: str | None = None) -> bytes:
    inputs = make_inputs(index)
    return json.dumps(
        wrap_inputs(inputs["prompt_spec"], inputs["evidence_bundle"], event_id=event_id)
    ).encode()


def sample(metrics: ConsumerMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def incompressible(length: int) -> str:
    """Text PostgreSQL cannot compress below the btree row limit (``"m" * 3000`` compresses)."""
    digests = (hashlib.sha256(str(i).encode()).hexdigest() for i in range(length // 64 + 1))
    return "".join(digests)[:length]


@pytest.mark.parametrize(
    ("market_id", "code"),
    [
        (incompressible(3000), "data_refused"),
        (incompressible(500_000), "data_refused"),
        ("mk_\x00_x", "invalid_draft"),
    ],
    ids=["3000", "500k", "nul"],
)
def test_a_value_the_database_refuses_is_a_data_error_not_unavailability(
    ledger_store: LedgerStore, market_id: str, code: str
) -> None:
    """The btree error (SQLSTATE 54000) used to be classed "database unavailable" and retried forever.

    A U+0000 in a header value is refused by the draft itself now, before any transaction."""
    with pytest.raises((LedgerDataError, InvalidDraftError)) as info:
        ledger_store.append(audited("k-1", market_id=market_id))
    assert info.value.code == code and not info.value.retryable
    assert ledger_store.append(audited("k-2")).status == "created"  # the store is fine afterwards


def long_market_for(bundle_id: str, auditor: Any = audit_envelope) -> Any:
    """The real auditor, except that one bundle's draft gets a market id too long for its index
    (the decoder refuses such ids now, so this stands for any value the database refuses)."""

    def audit(decoded: DecodedEnvelope, operational: OperationalInfo) -> SubmissionDraft:
        draft: SubmissionDraft = auditor(decoded, operational)
        if decoded.envelope.evidence_bundle.bundle_id == bundle_id:
            return replace(draft, market_id=incompressible(3000))
        return draft

    return audit


async def test_a_record_the_database_refuses_is_dead_lettered_and_the_partition_moves_on(
    kafka_bootstrap: str, migrated_database_url: str, topic_name: str
) -> None:
    await asyncio.to_thread(publish_raw, kafka_bootstrap, topic_name, [envelope_bytes(i) for i in range(3)])
    metrics = ConsumerMetrics()
    with LedgerStore(migrated_database_url) as store:
        consumer = LedgerConsumer(
            config(kafka_bootstrap, topic_name), store, long_market_for("bundle_000001"), metrics
        )
        await asyncio.wait_for(consumer.run(), 120)  # the old code retried this batch forever

    assert sample(metrics, "ledger_db_retries_total") == 0
    audited_rows = query(
        migrated_database_url, "SELECT bundle_id FROM ledger.submissions WHERE status = 'audited'"
    )
    assert sorted(row[0] for row in audited_rows) == ["bundle_000000", "bundle_000002"]
    [(offset, reason, message, market)] = query(
        migrated_database_url, "SELECT kafka_offset, reason_code, message, market_id FROM ledger.rejections"
    )
    assert (offset, reason, market) == (1, "ledger_refused", "mk_test_001")
    assert message.startswith("data_refused:") and "index row" in message
    letters = await asyncio.to_thread(read_topic, kafka_bootstrap, f"{topic_name}.dlq", 1)
    assert [dict(letter.headers)["ledger.dlq.reason"] for letter in letters] == [b"ledger_refused"]
    assert stored_offsets(migrated_database_url, f"{topic_name}-group", topic_name) == {0: 3}


class RefusingStore(ForwardingStore):
    """The real store, except that every append covering ``offset`` is refused as bad data."""

    def __init__(self, store: LedgerStore, offset: int) -> None:
        super().__init__(store)
        self.offset = offset
        self.refusals = 0

    def append_batch(
        self, submissions: Sequence[SubmissionDraft], offsets: Sequence[OffsetAdvance] = ()
    ) -> list[AppendResult]:
        if any(advance.from_offset <= self.offset < advance.next_offset for advance in offsets):
            self.refusals += 1
            raise LedgerDataError("the database refused the data: (simulated)")
        return self.store.append_batch(submissions, offsets)


async def test_when_even_the_rejection_is_refused_the_consumer_stops_with_a_clear_error(
    kafka_bootstrap: str, migrated_database_url: str, topic_name: str
) -> None:
    await asyncio.to_thread(publish_raw, kafka_bootstrap, topic_name, [envelope_bytes(i) for i in range(3)])
    with LedgerStore(migrated_database_url) as store:
        refusing = RefusingStore(store, offset=1)
        consumer = LedgerConsumer(
            config(kafka_bootstrap, topic_name), refusing, audit_envelope, ConsumerMetrics()
        )
        with pytest.raises(UnstorableRecordError) as info:
            await asyncio.wait_for(consumer.run(), 120)

    assert isinstance(info.value, LedgerError) and info.value.code == "record_not_storable"  # exit 1
    assert f"{topic_name}[0] offset 1" in info.value.message
    assert refusing.refusals == 3  # the batch, the record alone, its rejection: no retry loop
    assert stored_offsets(migrated_database_url, f"{topic_name}-group", topic_name) == {0: 1}


async def test_same_event_id_with_different_content_in_one_batch_records_a_conflict(
    kafka_bootstrap: str, migrated_database_url: str, topic_name: str
) -> None:
    values = [envelope_bytes(0, event_id="ev-1"), envelope_bytes(1, event_id="ev-1"), envelope_bytes(2)]
    await asyncio.to_thread(publish_raw, kafka_bootstrap, topic_name, values)
    metrics = ConsumerMetrics()
    calls: list[list[OffsetAdvance]] = []

    class Recording(ForwardingStore):
        def append_batch(
            self, submissions: Sequence[SubmissionDraft], offsets: Sequence[OffsetAdvance] = ()
        ) -> list[AppendResult]:
            calls.append(list(offsets))
            return self.store.append_batch(submissions, offsets)

    with LedgerStore(migrated_database_url) as store:
        await LedgerConsumer(
            config(kafka_bootstrap, topic_name), Recording(store), audit_envelope, metrics
        ).run()

    # both records went through one append (the case the old code got wrong)
    assert any(a.from_offset == 0 and a.next_offset >= 2 for offsets in calls for a in offsets), calls
    [(bundle, offset)] = query(
        migrated_database_url,
        "SELECT bundle_id, kafka_offset FROM ledger.submissions WHERE idempotency_key = 'event:ev-1'",
    )
    assert (bundle, offset) == ("bundle_000000", 0)
    [(reason, conflict_offset)] = query(
        migrated_database_url, "SELECT reason, kafka_offset FROM ledger_store.idempotency_conflicts"
    )
    assert (reason, conflict_offset) == ("input_hashes_differ", 1)
    assert sample(metrics, "ledger_idempotency_conflicts_total", topic=topic_name) == 1
    assert sample(metrics, "ledger_records_duplicate_total", topic=topic_name) == 0
