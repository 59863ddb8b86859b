"""A consumer SIGKILLed after its first ledger commit but before it ever committed to Kafka.

Kafka's committed offsets are only an advisory mirror of the offsets in Postgres. A broker that
has none for the group is therefore no sign of a lost log: the next consumer must resume from the
offsets in Postgres with no alarm, no new source incarnation and nothing consumed twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from ledger.migration import upgrade
from tests.helpers.database import query
from tests.helpers.faults import (
    ROOT,
    consumer_env,
    create_topic,
    publish_bundles,
    run_consumer,
    stored_offsets,
    submission_count,
    wait_until,
)

pytestmark = pytest.mark.integration

BUNDLES = 60

# A consumer that never mirrors its offsets into Kafka before it is stopped (interval: forever).
NEVER_COMMITS_TO_KAFKA = textwrap.dedent(
    """
    import asyncio, os, time
    from ledger.store.drafts import audit_envelope
    from consumers.consumer import ConsumerConfig, LedgerConsumer
    from ledger.store.ledger_store import LedgerStore

    def slow_audit(decoded, operational):
        # 50 ms per record: the whole topic takes seconds, so the test's 0.2 s poll sees the first
        # ledger commit and kills the process well before the end (unpaced, a fast engine could
        # commit all of it between two polls).
        time.sleep(0.05)
        return audit_envelope(decoded, operational)

    config = ConsumerConfig(
        bootstrap=os.environ["LEDGER_KAFKA_BOOTSTRAP"],
        topic=os.environ["LEDGER_TOPIC"],
        dlq_topic=os.environ["LEDGER_DLQ_TOPIC"],
        group_id=os.environ["LEDGER_GROUP_ID"],
        host="killed",
        max_records=2,
        batch_linger_ms=0,
        session_timeout_ms=2000,
        heartbeat_interval_ms=300,
        kafka_commit_interval=1e12,
    )
    with LedgerStore(os.environ["LEDGER_DATABASE_URL"]) as store:
        asyncio.run(LedgerConsumer(config, store, slow_audit).run())
    """
)


def broker_committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    """The group's committed offsets on the broker, per partition (None: never committed)."""

    async def read() -> dict[int, int | None]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:
            return {p: await consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
        finally:
            await consumer.stop()

    return asyncio.run(read())


def test_a_consumer_killed_before_its_first_kafka_commit_raises_no_false_alarm(
    kafka_bootstrap: str, database_url: str, topic_name: str, tmp_path: Path
) -> None:
    upgrade(database_url)
    create_topic(kafka_bootstrap, topic_name, 2)
    publish_bundles(kafka_bootstrap, topic_name, 0, BUNDLES)
    env = consumer_env(kafka_bootstrap, database_url, topic_name)
    group = env["LEDGER_GROUP_ID"]
    with (tmp_path / "killed.log").open("wb") as log:
        killed = subprocess.Popen(
            [sys.executable, "-c", NEVER_COMMITS_TO_KAFKA],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        wait_until(lambda: submission_count(database_url) > 0, 120, "the first ledger commit")
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait(30)
    partial = sum(stored_offsets(database_url, group, topic_name).values())
    assert 0 < partial < BUNDLES, "kill it between its first commit and the end of the topic"
    assert set(broker_committed(kafka_bootstrap, group, topic_name, 2).values()) == {None}

    survivor = run_consumer(tmp_path, env, name="survivor")

    events = [json.loads(line) for line in survivor.log_path.read_text().splitlines() if line.startswith("{")]
    alarms = [e["event"] for e in events if e["level"] == "error" and e["logger"].startswith("consumers")]
    assert not alarms, alarms
    assert submission_count(database_url) == BUNDLES
    assert sum(stored_offsets(database_url, group, topic_name).values()) == BUNDLES
    assert query(
        database_url,
        "SELECT incarnation, reason FROM ledger.source_incarnations WHERE topic = %s",
        (topic_name,),
    ) == [(1, "first")]
