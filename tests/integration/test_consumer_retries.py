"""Postgres unavailable: the same batch is retried and nothing advances; a fenced zombie re-seeks."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from consumers.consumer import ConsumerConfig, LedgerConsumer
from consumers.metrics import ConsumerMetrics
from devstack.server import free_loopback_port
from ledger.errors import LedgerUnavailableError
from ledger.store.drafts import audit_envelope
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import AppendResult, OffsetAdvance, SubmissionDraft
from tests.helpers.consumer import (
    ForwardingStore,
    assert_ledger_exact,
    in_process_config,
    make_inputs,
    publish,
    stored_offsets,
)

pytestmark = pytest.mark.integration

N = 80


class FlakyStore(ForwardingStore):
    """The real store, except that the first ``outages`` appends go to a server that is down."""

    def __init__(self, store: LedgerStore, outages: int) -> None:
        super().__init__(store)
        self.down = LedgerStore(f"postgresql+psycopg://postgres@127.0.0.1:{free_loopback_port()}/none")
        self.outages = outages
        self.offsets_seen: list[list[OffsetAdvance]] = []

    def append_batch(
        self, submissions: Sequence[SubmissionDraft], offsets: Sequence[OffsetAdvance] = ()
    ) -> Any:
        self.offsets_seen.append(list(offsets))
        if self.outages > 0:
            self.outages -= 1
            return self.down.append_batch(submissions, offsets)
        return self.store.append_batch(submissions, offsets)


class ZombieStore(ForwardingStore):
    """Before this member's first commit, 'another member' commits the same batch and offsets."""

    def __init__(self, store: LedgerStore) -> None:
        super().__init__(store)
        self.raced = False

    def append_batch(
        self, submissions: Sequence[SubmissionDraft], offsets: Sequence[OffsetAdvance] = ()
    ) -> list[AppendResult]:
        if not self.raced and offsets:
            self.raced = True
            self.store.append_batch(submissions, offsets)  # the new owner got there first
        return self.store.append_batch(submissions, offsets)


def config(bootstrap: str, topic: str) -> ConsumerConfig:
    return in_process_config(bootstrap, topic, max_records=20)


def sample(metrics: ConsumerMetrics, name: str) -> float:
    return metrics.registry.get_sample_value(name) or 0.0


async def test_database_outage_retries_the_same_batch_and_loses_nothing(
    kafka_bootstrap: str, migrated_database_url: str, topic_name: str, tmp_path: Path
) -> None:
    documents = [make_inputs(index) for index in range(N)]
    await asyncio.to_thread(publish, kafka_bootstrap, topic_name, documents)
    metrics = ConsumerMetrics()
    with LedgerStore(migrated_database_url) as store:
        flaky = FlakyStore(store, outages=3)
        await LedgerConsumer(config(kafka_bootstrap, topic_name), flaky, audit_envelope, metrics).run()
        flaky.down.close()

    assert sample(metrics, "ledger_db_retries_total") == 3
    # the first four attempts carried the very same offsets: nothing advanced while Postgres was down
    assert flaky.offsets_seen[0] == flaky.offsets_seen[1] == flaky.offsets_seen[2] == flaky.offsets_seen[3]
    assert_ledger_exact(migrated_database_url, {doc["evidence_bundle"]["bundle_id"] for doc in documents})
    assert sum(stored_offsets(migrated_database_url, f"{topic_name}-group", topic_name).values()) == N


async def test_outage_with_nothing_reachable_fails_with_a_retryable_error() -> None:
    down = LedgerStore(f"postgresql+psycopg://postgres@127.0.0.1:{free_loopback_port()}/none")
    try:
        with pytest.raises(LedgerUnavailableError):
            down.load_offsets("g", "t")
    finally:
        down.close()


async def test_fenced_zombie_rolls_back_and_re_seeks_without_duplicates(
    kafka_bootstrap: str, migrated_database_url: str, topic_name: str
) -> None:
    documents = [make_inputs(index) for index in range(N)]
    await asyncio.to_thread(publish, kafka_bootstrap, topic_name, documents)
    metrics = ConsumerMetrics()
    with LedgerStore(migrated_database_url) as store:
        await LedgerConsumer(
            config(kafka_bootstrap, topic_name), ZombieStore(store), audit_envelope, metrics
        ).run()

    assert sample(metrics, "ledger_stale_batches_total") == 1
    assert_ledger_exact(migrated_database_url, {doc["evidence_bundle"]["bundle_id"] for doc in documents})
    assert sum(stored_offsets(migrated_database_url, f"{topic_name}-group", topic_name).values()) == N


async def test_shutdown_during_an_outage_abandons_the_batch_and_writes_nothing(
    kafka_bootstrap: str, migrated_database_url: str, topic_name: str
) -> None:
    await asyncio.to_thread(publish, kafka_bootstrap, topic_name, [make_inputs(index) for index in range(10)])
    metrics = ConsumerMetrics()
    with LedgerStore(migrated_database_url) as store:
        flaky = FlakyStore(store, outages=10**6)
        consumer = LedgerConsumer(config(kafka_bootstrap, topic_name), flaky, audit_envelope, metrics)
        running = asyncio.create_task(consumer.run())
        deadline = asyncio.get_running_loop().time() + 60
        while sample(metrics, "ledger_db_retries_total") < 2:
            assert asyncio.get_running_loop().time() < deadline, "the consumer never tried to commit"
            await asyncio.sleep(0.05)
        consumer.request_stop()
        await asyncio.wait_for(running, 30)
        flaky.down.close()

    assert stored_offsets(migrated_database_url, f"{topic_name}-group", topic_name) == {}
    assert_ledger_exact(migrated_database_url, set())
