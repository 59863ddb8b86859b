"""When the consumer cannot tell which log of the topic it reads, it stops: error, exit 1, metric."""

from __future__ import annotations

import asyncio
import json

import pytest

from consumers.consumer import ConsumerConfig, LedgerConsumer
from consumers.lag import broker_source_identity
from consumers.metrics import ConsumerMetrics
from ledger.errors import SourceLogUndecidedError
from ledger.migration import upgrade
from ledger.store.drafts import audit_envelope
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import OffsetAdvance
from ledger.store.source_log import SourceIdentity
from tests.helpers.consumer import consumer_env, ledger_cli, publish_raw

pytestmark = pytest.mark.integration


def run_in_process(
    bootstrap: str, database_url: str, topic: str
) -> tuple[BaseException | None, ConsumerMetrics]:
    metrics = ConsumerMetrics()
    config = ConsumerConfig(
        bootstrap=bootstrap,
        topic=topic,
        dlq_topic=f"{topic}.dlq",
        group_id=f"{topic}-group",
        host="test",
        until_idle=3,
        session_timeout_ms=2000,
        heartbeat_interval_ms=300,
    )
    with LedgerStore(database_url) as store:
        try:
            asyncio.run(LedgerConsumer(config, store, audit_envelope, metrics).run())
        except SourceLogUndecidedError as exc:
            return exc, metrics
    return None, metrics


def undecided_total(metrics: ConsumerMetrics, topic: str, reason: str) -> float | None:
    labels = {"topic": topic, "reason": reason}
    return metrics.registry.get_sample_value("ledger_source_log_undecided_total", labels)


@pytest.fixture
def topic_identity(kafka_bootstrap: str, database_url: str, topic_name: str) -> SourceIdentity:
    """A topic with a few records, a migrated ledger, and the topic's identity on the broker."""
    upgrade(database_url)
    publish_raw(kafka_bootstrap, topic_name, [b"not json"] * 3)
    return asyncio.run(broker_source_identity(kafka_bootstrap, topic_name))


def test_an_earlier_incarnation_seen_again_stops_the_consumer(
    kafka_bootstrap: str, database_url: str, topic_name: str, topic_identity: SourceIdentity
) -> None:
    group = f"{topic_name}-group"
    with LedgerStore(database_url) as store:
        store.resolve_source(group, topic_name, topic_identity)
        store.resolve_source(group, topic_name, SourceIdentity("another-cluster", topic_identity.topic_id))

    error, metrics = run_in_process(kafka_bootstrap, database_url, topic_name)

    assert isinstance(error, SourceLogUndecidedError) and error.reason == "past_incarnation"
    assert undecided_total(metrics, topic_name, "past_incarnation") == 1
    done = ledger_cli(
        "consume", "--until-idle", "3", env=consumer_env(kafka_bootstrap, database_url, topic_name)
    )
    assert done.returncode == 1, done.stderr[-3000:]
    assert "source_log_undecided" in done.stderr
    with LedgerStore(database_url) as store:
        assert store.max_seq() == 0  # nothing consumed


def test_a_log_end_below_the_stored_offset_under_the_same_identity_stops_the_consumer(
    kafka_bootstrap: str, database_url: str, topic_name: str, topic_identity: SourceIdentity
) -> None:
    group = f"{topic_name}-group"
    env = consumer_env(kafka_bootstrap, database_url, topic_name)
    with LedgerStore(database_url) as store:
        store.resolve_source(group, topic_name, topic_identity)
        for partition in range(4):  # as if the log had held 50 records per partition, then was truncated
            store.append_batch([], [OffsetAdvance(group, topic_name, partition, 0, 50, 1)])
    health = ledger_cli("health", "--format", "json", env=env)
    assert health.returncode == 1, health.stdout
    assert "below the stored offsets" in json.loads(health.stdout)["source"]["error"]

    error, metrics = run_in_process(kafka_bootstrap, database_url, topic_name)

    assert isinstance(error, SourceLogUndecidedError) and error.reason == "log_regressed"
    assert undecided_total(metrics, topic_name, "log_regressed") == 1
    regressed = [
        metrics.registry.get_sample_value(
            "ledger_partition_log_regressions_total", {"topic": topic_name, "partition": str(partition)}
        )
        for partition in range(4)
    ]
    assert sum(count or 0 for count in regressed) >= 1
    done = ledger_cli("consume", "--until-idle", "3", env=env)
    assert done.returncode == 1 and "log_regressed" in done.stderr, done.stderr[-3000:]
