"""Issue 5: SIGKILL mid-batch, SIGTERM, and restarts leave exactly one copy of every submission, no gap."""

from __future__ import annotations

import signal
import urllib.request
from pathlib import Path

import pytest

from devstack.server import free_loopback_port
from tests.helpers.consumer import (
    GROUP_TIMING,
    ConsumerProcess,
    assert_ledger_exact,
    consumer_env,
    make_inputs,
    publish,
    run_consumer,
    stored_offsets,
    submission_count,
    wait_until,
)
from tests.helpers.database import query

pytestmark = pytest.mark.integration

N = 1200  # large enough that the victim is still mid-stream when it is killed


def assert_every_record_once(database_url: str, topic: str, total: int) -> None:
    """Every (partition, offset) of the topic is one submission, and the stored offsets reach the end."""
    rows = query(database_url, "SELECT kafka_partition, kafka_offset FROM ledger.submissions")
    coordinates = {(int(partition), int(offset)) for partition, offset in rows}
    assert len(coordinates) == len(rows) == total
    offsets = stored_offsets(database_url, f"{topic}-group", topic)
    expected = {(partition, offset) for partition, end in offsets.items() for offset in range(end)}
    assert coordinates == expected, "a record was skipped or stored twice"


def test_sigkill_mid_batch_then_restart_leaves_one_copy_of_everything_and_no_gap(
    kafka_bootstrap: str, database_url: str, topic_name: str, tmp_path: Path
) -> None:
    documents = [make_inputs(index, markets=16) for index in range(N)]
    publish(kafka_bootstrap, topic_name, documents)
    env = consumer_env(kafka_bootstrap, database_url, topic_name)
    victim = ConsumerProcess(["--max-records", "20", *GROUP_TIMING], env, tmp_path / "victim.log")
    try:
        wait_until(lambda: submission_count(database_url) >= 60, 120, "the first batches to commit")
        victim.signal(signal.SIGKILL)
        assert victim.wait() == -signal.SIGKILL
    finally:
        victim.stop()
    committed_at_kill = submission_count(database_url)
    assert committed_at_kill < N, "the consumer finished before it could be killed; raise N"

    run_consumer(tmp_path, env, name="restarted", timeout=300)

    assert_ledger_exact(database_url, {doc["evidence_bundle"]["bundle_id"] for doc in documents})
    assert_every_record_once(database_url, topic_name, N)


def test_sigterm_finishes_the_batch_leaves_the_group_and_serves_metrics_meanwhile(
    kafka_bootstrap: str, database_url: str, topic_name: str, tmp_path: Path
) -> None:
    documents = [make_inputs(index, markets=16) for index in range(300)]
    publish(kafka_bootstrap, topic_name, documents)
    env = consumer_env(kafka_bootstrap, database_url, topic_name)
    port = free_loopback_port()
    consumer = ConsumerProcess(
        ["--max-records", "20", "--metrics-port", str(port), *GROUP_TIMING], env, tmp_path / "graceful.log"
    )
    try:
        wait_until(lambda: submission_count(database_url) >= 40, 120, "the first batches to commit")
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        consumer.signal(signal.SIGTERM)
        assert consumer.wait(60) == 0
    finally:
        consumer.stop()
    assert "ledger_records_audited_total" in metrics
    assert "ledger_batch_seconds_bucket" in metrics
    assert f'ledger_consumer_lag{{partition="0",topic="{topic_name}"}}' in metrics
    lines = consumer.lines()
    events = [line["event"] for line in lines]
    # stopped cleanly, then the run's summary line (the JSON form of the terminal summary)
    assert "stop requested" in events and events[-2:] == ["stopped", "consume summary"]
    assert lines[-1]["outcome"] in ("stopped", "finished"), lines[-1]
    # nothing half-written: what is stored is exactly the records up to the stored offsets
    stored_total = sum(stored_offsets(database_url, f"{topic_name}-group", topic_name).values())
    assert submission_count(database_url) == stored_total

    run_consumer(tmp_path, env, name="resumed")

    assert_ledger_exact(database_url, {doc["evidence_bundle"]["bundle_id"] for doc in documents})
    assert_every_record_once(database_url, topic_name, 300)
