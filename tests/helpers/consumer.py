"""Helpers for the consumer integration tests (this module holds no tests of its own).

Bundles made from ``tests/data/cournot_minimal.json``, publishing, reading the dead-letter topic,
``ledger consume`` as a subprocess, ledger queries, and bounded waits (poll with a deadline;
never a timing threshold in an assertion).
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import psycopg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from consumers.batch import LedgerPort
from consumers.consumer import ConsumerConfig
from consumers.publisher import publish_documents
from devstack.extra import EmbeddedServiceError
from devstack.server import NotYet, poll
from ledger.migration import upgrade
from ledger.store.records import AppendResult, OffsetAdvance, SubmissionDraft
from ledger.store.source_log import SourceIdentity, SourceResolution
from tests.helpers.database import chain_problems, query

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = json.loads((ROOT / "tests" / "data" / "cournot_minimal.json").read_text())
GROUP_TIMING = ["--session-timeout-ms", "2000", "--heartbeat-interval-ms", "300"]


class ForwardingStore:
    """The consumer's ledger port over ``store``, forwarding every call; a test store overrides
    only what it fakes (refused appends, outages, a racing member, ...)."""

    def __init__(self, store: LedgerPort) -> None:
        self.store = store

    def append_batch(
        self, submissions: Sequence[SubmissionDraft], offsets: Sequence[OffsetAdvance] = ()
    ) -> list[AppendResult]:
        """The real append."""
        return self.store.append_batch(submissions, offsets)

    def load_offsets(self, group: str, topic: str) -> dict[int, int]:
        """The real stored offsets."""
        return self.store.load_offsets(group, topic)

    def resolve_source(
        self, group: str, topic: str, observed: SourceIdentity, *, host: str | None = None
    ) -> SourceResolution:
        """The real source-log resolution."""
        return self.store.resolve_source(group, topic, observed, host=host)


def make_inputs(index: int, *, markets: int = 8) -> dict[str, Any]:
    """A distinct valid ``{"prompt_spec", "evidence_bundle"}`` pair (one of ``markets`` markets)."""
    document = copy.deepcopy(SAMPLE)
    market_id = f"mk_test_{index % markets:03d}"
    document["prompt_spec"]["market"]["market_id"] = market_id
    bundle = document["evidence_bundle"]
    bundle["market_id"] = market_id
    bundle["bundle_id"] = f"bundle_{index:06d}"
    price = 90_000 + (index * 137) % 20_000 + 0.5
    bundle["items"][0]["parsed_value"]["bitcoin"]["usd"] = price
    bundle["items"][0]["extracted_fields"]["price_usd"] = price
    return document


def publish(bootstrap: str, topic: str, documents: Iterable[dict[str, Any]]) -> None:
    """Validate and send (through the same helper ``ledger publish`` uses)."""
    publish_documents(bootstrap, list(documents), topic=topic)


def publish_raw(bootstrap: str, topic: str, values: Sequence[bytes], *, key: bytes = b"mk_poison") -> None:
    """Send bytes unvalidated, in order, to one partition (same key)."""

    async def send() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=8 * 1_048_576)
        await producer.start()
        try:
            for value in values:
                await producer.send_and_wait(topic, value=value, key=key)
        finally:
            await producer.stop()

    asyncio.run(send())


def read_topic(bootstrap: str, topic: str, expected: int, timeout: float = 30.0) -> list[Any]:
    """At least ``expected`` records of ``topic`` from the beginning (no group), or what came in time."""
    return read_until(bootstrap, topic, lambda records: len(records) >= expected, timeout)


def read_until(
    bootstrap: str, topic: str, done: Callable[[list[Any]], bool], timeout: float = 60.0
) -> list[Any]:
    """Records of ``topic`` from the beginning (no group) until ``done(records)`` or the deadline."""

    async def read() -> list[Any]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
        await consumer.start()
        try:
            deadline = time.monotonic() + timeout
            partitions: set[int] = set()
            while not partitions and time.monotonic() < deadline:
                await consumer.topics()
                partitions = consumer.partitions_for_topic(topic) or set()
                if not partitions:
                    await asyncio.sleep(0.2)
            consumer.assign([TopicPartition(topic, partition) for partition in partitions])
            await consumer.seek_to_beginning()
            records: list[Any] = []
            while not done(records) and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=500)
                records.extend(record for part in batch.values() for record in part)
            return records
        finally:
            await consumer.stop()

    return asyncio.run(read())


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    """Poll ``predicate`` (every ``interval`` seconds, with :func:`devstack.server.poll`) until it
    returns something truthy; fail with ``what`` at the deadline."""

    def truthy() -> Any:
        value = predicate()
        if not value:
            raise NotYet(f"last value {value!r}")
        return value

    try:
        return poll(
            truthy, timeout=timeout, what=f"waiting for {what}", first_delay=interval, max_delay=interval
        )
    except EmbeddedServiceError as exc:
        raise AssertionError(f"timed out: {exc}") from None


def submission_count(url: str, status: str = "audited") -> int:
    """Submissions with ``status`` (0 when the schema does not exist yet)."""
    try:
        return int(query(url, "SELECT count(*) FROM ledger.submissions WHERE status = %s", (status,))[0][0])
    except psycopg.errors.UndefinedTable:
        return 0


def stored_offsets(url: str, group: str, topic: str) -> dict[int, int]:
    """``{partition: next_offset}`` in Postgres."""
    rows = query(
        url,
        "SELECT kafka_partition, next_offset FROM ledger.consumer_offsets WHERE consumer_group = %s AND topic = %s",
        (group, topic),
    )
    return {int(partition): int(offset) for partition, offset in rows}


def assert_ledger_exact(url: str, bundle_ids: set[str]) -> None:
    """Exactly one audited submission per bundle, each with its steps and four entry kinds; chains intact, no gaps."""
    rows = query(
        url, "SELECT bundle_id, step_count, entry_count FROM ledger.submissions WHERE status = 'audited'"
    )
    found = [row[0] for row in rows]
    assert len(found) == len(set(found)), "a bundle was stored twice"
    assert set(found) == bundle_ids
    for _, step_count, entry_count in rows:
        assert step_count > 0
        assert entry_count == step_count + 3  # received, steps, audit.completed, verdict.issued
    problems = chain_problems(url)  # also: global_seq has no gap
    assert not problems, f"hash chains broken: {problems[:5]}"
    assert query(url, "SELECT count(*) FROM ledger.idempotency_conflicts")[0][0] == 0


class ConsumerProcess:
    """``python -m cli consume`` in a subprocess; JSON log lines collected from stderr."""

    def __init__(self, args: Sequence[str], env: dict[str, str], log_path: Path) -> None:
        """Start it; stderr goes to ``log_path``."""
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cli", "consume", *args],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )

    def lines(self) -> list[dict[str, Any]]:
        """Every JSON log line so far."""
        parsed = []
        for text in self.log_path.read_text(errors="replace").splitlines():
            try:
                parsed.append(json.loads(text))
            except ValueError:
                continue
        return parsed

    def events(self, event: str) -> list[dict[str, Any]]:
        """Log lines with this ``event``."""
        return [line for line in self.lines() if line.get("event") == event]

    def signal(self, signum: int) -> None:
        """Send a signal."""
        self.proc.send_signal(signum)

    def wait(self, timeout: float = 60.0) -> int:
        """Exit status (kills it if it has not exited in time)."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            self.proc.kill()
            self.proc.wait()
            tail = self.log_path.read_text()[-3000:]
            raise AssertionError(f"consumer did not exit within {timeout}s:\n{tail}") from exc
        finally:
            self._log.close()

    def stop(self) -> None:
        """SIGKILL if still running (test cleanup)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self._log.close()


def consumer_env(bootstrap: str, database_url: str, topic: str, **extra: str) -> dict[str, str]:
    """Environment for ``ledger consume`` against the test services; migrates the database to head
    first, as ``ledger migrate`` would (``ledger consume`` never migrates)."""
    upgrade(database_url)
    return {
        "LEDGER_KAFKA_BOOTSTRAP": bootstrap,
        "LEDGER_DATABASE_URL": database_url,
        "LEDGER_TOPIC": topic,
        "LEDGER_DLQ_TOPIC": f"{topic}.dlq",
        "LEDGER_GROUP_ID": f"{topic}-group",
        **extra,
    }


def run_consumer(
    tmp_path: Path, env: dict[str, str], *args: str, name: str = "consumer", timeout: float = 120.0
) -> ConsumerProcess:
    """Run ``ledger consume --until-idle`` to completion and check it exited cleanly."""
    process = ConsumerProcess(["--until-idle", "3", *GROUP_TIMING, *args], env, tmp_path / f"{name}.log")
    status = process.wait(timeout)
    assert status == 0, process.log_path.read_text()[-3000:]
    return process


def in_process_config(bootstrap: str, topic: str, max_records: int = 50) -> ConsumerConfig:
    """An in-process consumer's settings for ``topic``: short timeouts and fast retries."""
    return ConsumerConfig(
        bootstrap=bootstrap,
        topic=topic,
        dlq_topic=f"{topic}.dlq",
        group_id=f"{topic}-group",
        host=socket.gethostname(),
        max_records=max_records,
        until_idle=2.0,
        session_timeout_ms=2000,
        heartbeat_interval_ms=300,
        retry_initial=0.05,
        retry_max=0.2,
    )


def ledger_cli(*args: str, env: dict[str, str], timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """``ledger ARGS`` (``python -m cli``) in a fresh process with ``env`` added, within ``timeout`` seconds."""
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
