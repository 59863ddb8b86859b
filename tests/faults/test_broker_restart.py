"""The source log is replaced under the consumer: a broker restart, a topic deleted and recreated.

The embedded tansu broker keeps everything in memory: a restart loses topics, records and group
offsets (docs/architecture.md, Configuration), and the re-created topic starts again at
offset 0. On real Kafka a topic deleted and recreated does the same. The consumer must notice the
new log (new cluster id or topic id), record a new source incarnation in the ledger, and consume
the new log from its start: every bundle published after the change is committed exactly once,
even those whose offsets lie below the offsets stored for the old log; nothing before it is lost
or duplicated; and ``ledger health`` is unhealthy while the stored offsets do not match the log.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from consumers.publisher import SentRecord
from devstack.broker import EmbeddedBroker
from devstack.server import free_loopback_port
from tests.helpers.database import chain_problems, query
from tests.helpers.faults import (
    GROUP_TIMING,
    ROOT,
    ConsumerProcess,
    consumer_env,
    create_topic,
    publish_bundles,
    run_consumer,
    stored_offsets,
    submission_count,
    wait_until,
)

pytestmark = pytest.mark.integration

BEFORE = 40
AFTER = 24  # fewer than before: most new offsets lie below the stored ones
DOWN_SECONDS = 3.0
CATCH_UP = 120.0  # seconds for the post-change bundles to be committed (rejoin takes a few)


@pytest.fixture
def restartable_broker() -> Iterator[EmbeddedBroker]:
    """Our own broker on a fixed port (the session's broker is shared and must stay up)."""
    broker = EmbeddedBroker(port=free_loopback_port())
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


def committed_keys(database_url: str) -> dict[str, tuple[int, int]]:
    rows = query(
        database_url,
        "SELECT idempotency_key, kafka_partition, kafka_offset FROM ledger.submissions WHERE status = 'audited'",
    )
    stored = {key: (partition, offset) for key, partition, offset in rows}
    assert len(stored) == len(rows), "a bundle was stored twice"
    return stored


def incarnations(database_url: str, topic: str) -> list[tuple[int, str, str, str, dict[str, int]]]:
    return query(
        database_url,
        "SELECT incarnation, reason, cluster_id, topic_id, previous_offsets FROM ledger.source_incarnations "
        "WHERE topic = %s ORDER BY incarnation",
        (topic,),
    )


def wait_for_all(database_url: str, consumer: ConsumerProcess, records: list[SentRecord]) -> None:
    keys = {r.record.idempotency_key for r in records}
    deadline = time.monotonic() + CATCH_UP
    while not keys <= set(committed_keys(database_url)):
        assert consumer.proc.poll() is None, f"consumer exited:\n{consumer.log_path.read_text()[-4000:]}"
        assert time.monotonic() < deadline, (
            f"{len(keys - set(committed_keys(database_url)))} of {len(keys)} bundles published after the "
            f"change were never committed:\n{consumer.log_path.read_text()[-4000:]}"
        )
        time.sleep(0.2)


def assert_exactly_once(database_url: str, before: list[SentRecord], after: list[SentRecord]) -> None:
    stored = committed_keys(database_url)
    assert {r.record.idempotency_key for r in before} <= set(stored), "bundles from before were lost"
    for record in after:
        assert stored[record.record.idempotency_key] == (record.partition, record.offset)
    assert not chain_problems(database_url)
    [(count, high)] = query(database_url, "SELECT count(*), coalesce(max(global_seq), 0) FROM ledger.entries")
    assert count == high, "global_seq has a gap"


def own_errors(consumer: ConsumerProcess) -> list[str]:
    """Error lines the consumer logged itself (aiokafka logs the broker outage at error level)."""
    lines = [json.loads(line) for line in consumer.log_path.read_text().splitlines() if line.startswith("{")]
    return [
        line["event"] for line in lines if line["level"] == "error" and line["logger"].startswith("consumers")
    ]


def health(env: dict[str, str]) -> tuple[int, dict[str, object]]:
    """``ledger health --format json``: exit status and report."""
    done = subprocess.run(
        [sys.executable, "-m", "cli", "health", "--format", "json"],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, json.loads(done.stdout)


def test_a_broker_restart_is_a_new_incarnation_consumed_from_its_start(
    restartable_broker: EmbeddedBroker, database_url: str, topic_name: str, tmp_path: Path
) -> None:
    broker = restartable_broker
    bootstrap = broker.bootstrap
    before = publish_bundles(bootstrap, topic_name, 0, BEFORE)
    env = consumer_env(bootstrap, database_url, topic_name)
    group = env["LEDGER_GROUP_ID"]
    consumer = ConsumerProcess(["--max-records", "10", *GROUP_TIMING], env, tmp_path / "consumer.log")
    try:
        wait_until(lambda: submission_count(database_url) >= BEFORE, 120, "the first bundles")
        wait_until(
            lambda: sum(stored_offsets(database_url, group, topic_name).values()) == BEFORE, 60, "offsets"
        )
        offsets_at_restart = stored_offsets(database_url, group, topic_name)

        broker.stop()
        time.sleep(DOWN_SECONDS)
        assert consumer.proc.poll() is None, (
            f"consumer died with the broker:\n{consumer.log_path.read_text()[-4000:]}"
        )
        broker.start()
        assert broker.bootstrap == bootstrap

        after = publish_bundles(bootstrap, topic_name, BEFORE, AFTER)
        below = [r for r in after if r.offset < offsets_at_restart.get(r.partition, 0)]
        assert below, "no post-restart record fell below the old offsets; publish fewer after the restart"
        wait_for_all(database_url, consumer, after)
        consumer.signal(signal.SIGTERM)
        status = consumer.wait(60)
    finally:
        consumer.stop()
    assert status == 0, consumer.log_path.read_text()[-4000:]
    assert_exactly_once(database_url, before, after)

    [first, second] = incarnations(database_url, topic_name)
    assert first[:2] == (1, "first") and second[:2] == (2, "cluster_changed")
    assert second[2] == broker.cluster_id and first[2] != second[2]
    assert second[4] == {str(partition): offset for partition, offset in offsets_at_restart.items()}
    assert query(
        database_url,
        "SELECT DISTINCT incarnation FROM ledger.consumer_offsets WHERE consumer_group = %s AND topic = %s",
        (group, topic_name),
    ) == [(2,)]
    assert not own_errors(consumer), "the consumer reported an error"

    code, report = health(env)
    assert code == 0 and report["total_lag"] == 0, report


def test_a_restart_without_a_running_consumer_makes_health_unhealthy_until_consumed(
    restartable_broker: EmbeddedBroker, database_url: str, topic_name: str, tmp_path: Path
) -> None:
    broker = restartable_broker
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic_name, 2)
    before = publish_bundles(bootstrap, topic_name, 0, 20)
    env = consumer_env(bootstrap, database_url, topic_name)
    run_consumer(tmp_path, env, name="first")
    assert health(env)[0] == 0

    broker.stop()
    broker.start()
    create_topic(bootstrap, topic_name, 2)
    after = publish_bundles(bootstrap, topic_name, 20, 6)  # below the stored offsets everywhere
    code, report = health(env)
    assert code == 1 and not report["ok"], report
    assert "another log" in str(report["source"]), report

    run_consumer(tmp_path, env, name="second")
    assert_exactly_once(database_url, before, after)
    code, report = health(env)
    assert code == 0 and report["total_lag"] == 0, report
    assert [row[:2] for row in incarnations(database_url, topic_name)] == [
        (1, "first"),
        (2, "cluster_changed"),
    ]


def test_a_topic_deleted_and_recreated_is_a_new_incarnation(
    restartable_broker: EmbeddedBroker, database_url: str, topic_name: str, tmp_path: Path
) -> None:
    bootstrap = restartable_broker.bootstrap
    create_topic(bootstrap, topic_name, 2)
    before = publish_bundles(bootstrap, topic_name, 0, BEFORE)
    env = consumer_env(bootstrap, database_url, topic_name)
    consumer = ConsumerProcess(["--max-records", "10", *GROUP_TIMING], env, tmp_path / "consumer.log")
    try:
        wait_until(lambda: submission_count(database_url) >= BEFORE, 120, "the first bundles")
        [(_, _, cluster_id, old_topic_id, _)] = incarnations(database_url, topic_name)

        async def recreate() -> None:
            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
            await admin.start()
            try:
                await admin.delete_topics([topic_name])
            finally:
                await admin.close()

        asyncio.run(recreate())
        create_topic(bootstrap, topic_name, 2)
        after = publish_bundles(bootstrap, topic_name, BEFORE, AFTER)
        wait_for_all(database_url, consumer, after)
        consumer.signal(signal.SIGTERM)
        status = consumer.wait(60)
    finally:
        consumer.stop()
    assert status == 0, consumer.log_path.read_text()[-4000:]
    assert_exactly_once(database_url, before, after)
    [_, second] = incarnations(database_url, topic_name)
    assert second[:3] == (2, "topic_recreated", cluster_id) and second[3] != old_topic_id
