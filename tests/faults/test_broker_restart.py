"""The broker goes away and comes back on the same port under a running consumer.

The embedded tansu broker keeps everything in memory: a restart loses topics, records and group
offsets (docs/reference/test-infrastructure.md §1(h)), and the re-created topic starts again at
offset 0. What holds: the consumer process survives the outage and reconnects; the bundles
committed before it stay exactly once (the ledger and its offsets live in Postgres, not in the
broker); every bundle published after it at or past the stored offset of its partition is
committed exactly once; and the renumbered partitions are reported loudly, because offsets in
Postgres only move forward (they fence zombie consumers), so the new records below the stored
offsets are NOT consumed automatically. That is a known limitation of a broker that loses its log
(real Kafka does not renumber a topic); rewinding is an operator decision (docs/event-store.md §6).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from consumers.embedded_broker import EmbeddedBroker
from consumers.publisher import SentRecord
from ledger.embedded_postgres import free_loopback_port
from tests.faults.support import (
    GROUP_TIMING,
    ConsumerProcess,
    chain_problems,
    consumer_env,
    publish_bundles,
    query,
    stored_offsets,
    submission_count,
    wait_until,
)

pytestmark = pytest.mark.integration

BEFORE = 40
AFTER = 80  # more per market than before, so the new partition ends pass the old ones
DOWN_SECONDS = 3.0
CATCH_UP = 90.0  # seconds for the post-restart bundles to be committed (rejoin takes a few)


def partition_ends(sent: list[SentRecord]) -> dict[int, int]:
    ends: dict[int, int] = {}
    for record in sent:
        ends[record.partition] = max(ends.get(record.partition, 0), record.offset + 1)
    return ends


@pytest.fixture
def restartable_broker() -> Iterator[EmbeddedBroker]:
    """Our own broker on a fixed port (the session's broker is shared and must stay up)."""
    broker = EmbeddedBroker(port=free_loopback_port())
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


def test_consumer_survives_a_broker_restart_reports_renumbered_partitions_and_commits_past_the_stored_offsets(
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
        offsets_at_restart = stored_offsets(database_url, group, topic_name)

        broker.stop()
        time.sleep(DOWN_SECONDS)
        assert consumer.proc.poll() is None, (
            f"consumer died with the broker:\n{consumer.log_path.read_text()[-4000:]}"
        )
        broker.start()
        assert broker.bootstrap == bootstrap

        after = publish_bundles(bootstrap, topic_name, BEFORE, AFTER)
        new_ends = partition_ends(after)
        deadline = time.monotonic() + CATCH_UP
        # until the stored offsets say there is nothing left to read
        while time.monotonic() < deadline:
            assert consumer.proc.poll() is None, f"consumer exited:\n{consumer.log_path.read_text()[-4000:]}"
            stored_now = stored_offsets(database_url, group, topic_name)
            if all(stored_now.get(partition, 0) >= end for partition, end in new_ends.items()):
                break
            time.sleep(0.2)
        alive = consumer.proc.poll() is None
        consumer.signal(signal.SIGTERM)
        status = consumer.wait(60)
    finally:
        consumer.stop()
    assert alive and status == 0, consumer.log_path.read_text()[-4000:]

    rows = query(
        database_url,
        "SELECT idempotency_key, kafka_partition, kafka_offset FROM ledger.submissions WHERE status = 'audited'",
    )
    stored = {key: (partition, offset) for key, partition, offset in rows}
    assert len(stored) == len(rows), "a bundle was stored twice"
    assert {r.record.idempotency_key for r in before} <= set(stored), (
        "bundles from before the restart were lost"
    )
    reachable = [r for r in after if r.offset >= offsets_at_restart.get(r.partition, 0)]
    below = [r for r in after if r.offset < offsets_at_restart.get(r.partition, 0)]
    assert reachable, "no post-restart record passed the old offsets; publish more after the restart"
    missing = sorted((r.partition, r.offset) for r in reachable if r.record.idempotency_key not in stored)
    assert not missing, (
        f"{len(missing)} post-restart bundles at or past the stored offsets {offsets_at_restart} were "
        f"never committed: {missing[:12]}"
    )
    for record in reachable:
        assert stored[record.record.idempotency_key] == (record.partition, record.offset)
    log_text = consumer.log_path.read_text()
    if below:
        assert "the topic was recreated or the broker lost its log" in log_text, (
            f"{len(below)} post-restart records fell below the stored offsets and the consumer did not "
            "report the renumbered partitions"
        )
    assert not chain_problems(database_url)
    [(count, high)] = query(database_url, "SELECT count(*), coalesce(max(global_seq), 0) FROM ledger.entries")
    assert count == high, "global_seq has a gap"
