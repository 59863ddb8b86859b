"""PostgreSQL restarted twice under a running consumer: it waits, retries and loses nothing.

``tests/integration/test_consumer_retries.py`` simulates an outage with a store that points at a
closed port. Here the real server goes away under a ``ledger consume`` subprocess: first a fast
shutdown (SIGINT: sessions are terminated), then an immediate one (SIGQUIT: crash recovery on the
next start), each for a few seconds, each restarted on the same port and data directory. The
consumer must stay up, log its retries, resume where Postgres says it stopped and finish with
every bundle committed exactly once.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from consumers.consumer import ConsumerConfig, LedgerConsumer
from devstack.postgres import EmbeddedPostgres
from devstack.server import free_loopback_port, pid_alive
from ledger.migration import upgrade
from ledger.store.drafts import audit_envelope
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import AppendResult, OffsetAdvance, SubmissionDraft
from ledger.store.source_log import SourceIdentity, SourceResolution
from tests.helpers.faults import (
    GROUP_TIMING,
    ConsumerProcess,
    assert_ledger_matches,
    consumer_env,
    publish_bundles,
    submission_count,
    wait_until,
)
from tests.helpers.services import PgServer, fresh_database

pytestmark = pytest.mark.integration

N = 600
OUTAGE_SECONDS = 4.0


@pytest.fixture
def restartable_postgres() -> Iterator[EmbeddedPostgres]:
    """Our own foreground server on a fixed port (the session's must never be stopped)."""
    data_dir = Path(tempfile.mkdtemp(prefix="ledger-fault-pg-"))
    server = EmbeddedPostgres(data_dir / "data", port=free_loopback_port(), durable=True)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def retry_lines(consumer: ConsumerProcess) -> list[str]:
    return [line["event"] for line in consumer.lines() if str(line.get("event", "")).endswith("retrying")]


def outage(
    server: EmbeddedPostgres, consumer: ConsumerProcess, how: signal.Signals, label: str
) -> tuple[int, int]:
    """Take the server down with ``how``, keep it down, check the consumer waits, restart it."""
    retries_before = len(retry_lines(consumer))
    port = server.port
    assert server.pid is not None
    if how == signal.SIGINT:
        server.stop()  # fast shutdown
    else:
        os.kill(server.pid, how)  # immediate shutdown: no checkpoint, crash recovery on restart
        wait_until(lambda: not pid_alive(server.pid or 0), 30, f"{label}: the postmaster to exit")
        server.stop()  # reaps it
    down_since = time.monotonic()
    wait_until(
        lambda: len(retry_lines(consumer)) > retries_before or consumer.proc.poll() is not None,
        60,
        f"{label}: the consumer to notice the outage",
    )
    time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - down_since)))
    assert consumer.proc.poll() is None, (
        f"{label}: the consumer exited (status {consumer.proc.returncode}) instead of waiting for "
        f"PostgreSQL:\n{consumer.log_path.read_text()[-4000:]}"
    )
    server.start()
    assert server.port == port
    return retries_before, len(retry_lines(consumer))


def test_postgres_restarts_mid_stream_make_the_consumer_wait_and_lose_nothing(
    kafka_bootstrap: str, topic_name: str, tmp_path: Path, restartable_postgres: EmbeddedPostgres
) -> None:
    server = restartable_postgres
    url = server.url
    upgrade(url)
    sent = publish_bundles(kafka_bootstrap, topic_name, 0, N)
    env = consumer_env(kafka_bootstrap, url, topic_name)
    consumer = ConsumerProcess(
        ["--until-idle", "3", "--max-records", "5", *GROUP_TIMING], env, tmp_path / "consumer.log"
    )
    try:
        wait_until(lambda: submission_count(url) >= 20, 120, "the first commits")
        first = outage(server, consumer, signal.SIGINT, "fast shutdown")
        resumed_from = submission_count(url)
        wait_until(lambda: submission_count(url) >= resumed_from + 10, 120, "commits after the restart")
        second = outage(server, consumer, signal.SIGQUIT, "immediate shutdown")
        status = consumer.wait(300)
    finally:
        consumer.stop()
    log = consumer.log_path.read_text()[-4000:]
    assert status == 0, log
    assert first[1] > first[0] and second[1] > second[0], f"no retries were logged: {first}, {second}"
    assert_ledger_matches(url, env["LEDGER_GROUP_ID"], topic_name, sent, context="after two restarts")


class FailoverStore:
    """A primary and a replica that misses the primary's last ``lost`` batches, then a failover.

    The first ``replicated`` appends reach both; the next ``lost`` reach only the primary (they
    are acknowledged to the consumer); every later call goes to the replica. This is what a crash
    of a server running ``synchronous_commit=off`` (the embedded demo and test servers), a
    failover to an asynchronous standby or a restore does to a consumer that keeps running: the
    database forgets commits the consumer already saw succeed.
    """

    def __init__(self, primary: LedgerStore, replica: LedgerStore, replicated: int, lost: int) -> None:
        self.primary, self.replica = primary, replica
        self.replicated, self.lost = replicated, lost
        self.calls = 0
        self.first_after_failover: list[OffsetAdvance] = []

    @property
    def failed_over(self) -> bool:
        return self.calls > self.replicated + self.lost

    def append_batch(
        self, submissions: Sequence[SubmissionDraft], offsets: Sequence[OffsetAdvance] = ()
    ) -> list[AppendResult]:
        self.calls += 1
        if self.calls <= self.replicated:
            self.replica.append_batch(submissions, offsets)
            return self.primary.append_batch(submissions, offsets)
        if self.calls <= self.replicated + self.lost:
            return self.primary.append_batch(submissions, offsets)
        if not self.first_after_failover:
            self.first_after_failover = list(offsets)
        return self.replica.append_batch(submissions, offsets)

    def load_offsets(self, group: str, topic: str) -> dict[int, int]:
        return (self.replica if self.failed_over else self.primary).load_offsets(group, topic)

    def resolve_source(
        self, group: str, topic: str, observed: SourceIdentity, *, host: str | None = None
    ) -> SourceResolution:
        if not self.failed_over:  # the incarnation is replicated like every commit
            self.replica.resolve_source(group, topic, observed, host=host)
            return self.primary.resolve_source(group, topic, observed, host=host)
        return self.replica.resolve_source(group, topic, observed, host=host)


async def test_commits_the_database_lost_under_a_running_consumer_are_consumed_again(
    kafka_bootstrap: str, database_url: str, pg_server: PgServer, topic_name: str
) -> None:
    """The offset update must start where the stored offset ends, not merely not move back.

    ``_advance_offsets`` (ledger/store/append.py) accepts ``from_offset`` >= the stored next_offset.
    After the database lost the last batches, the running consumer's next batch starts beyond the
    stored offset; it is accepted, and the lost records are skipped for good, silently.
    """
    sent = await asyncio.to_thread(publish_bundles, kafka_bootstrap, topic_name, 0, 120)
    group = f"{topic_name}-group"
    config = ConsumerConfig(
        bootstrap=kafka_bootstrap,
        topic=topic_name,
        dlq_topic=f"{topic_name}.dlq",
        group_id=group,
        host="fault-test",
        max_records=10,
        max_commit_records=0,  # one append per fetched batch: the failover counts appends
        until_idle=2.0,
        session_timeout_ms=2000,
        heartbeat_interval_ms=300,
        retry_initial=0.05,
        retry_max=0.2,
    )
    with fresh_database(pg_server.admin_url) as replica_url:
        upgrade(database_url)
        upgrade(replica_url)
        with LedgerStore(database_url) as primary, LedgerStore(replica_url) as replica:
            store = FailoverStore(primary, replica, replicated=3, lost=2)
            await LedgerConsumer(config, store, audit_envelope).run()
        assert store.failed_over, "the consumer finished before the failover; publish more"
        assert_ledger_matches(
            replica_url,
            group,
            topic_name,
            sent,
            context=f"after a failover that lost 2 batches (first batch after it: {store.first_after_failover})",
        )
