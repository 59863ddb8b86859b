"""``ledger demo``: the whole product on a bare machine, in one command and well under a minute.

Starts a throwaway embedded PostgreSQL (data in ``<state_dir>/demo/postgres``, database
``ledger_demo`` dropped and recreated each run) and a fresh embedded broker (memory storage, so
every run starts with empty topics), migrates, publishes the corpus of ``devstack/demo_corpus`` (valid
bundles plus raw poison records), consumes it with the real consumer, prints what landed in the
ledger's SQL views, signs a transparency-log checkpoint with a fresh key, runs ``ledger replay
--all`` and ``ledger verify`` (separate processes, as a user would) and stops everything. Both
servers run in the foreground and die with this process even on SIGKILL. Exit status 0 only when
every check passed: each bundle got its expected verdict, each poison record its expected
rejection reason, the checkpoint covers every entry, replay reproduced everything (no drift
either) and verify passed with the checkpoint signature checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from psycopg import sql
from psycopg.rows import dict_row
from sqlalchemy import Engine

from consumers.consumer import ConsumerConfig, LedgerConsumer
from consumers.consumer_config import consumer_kwargs
from consumers.logs import configure_logging
from consumers.publisher import EnvelopePublisher, PreparedRecord, SentRecord, prepare_file
from devstack.broker import EmbeddedBroker
from devstack.postgres import EmbeddedPostgres
from devstack.stack import Steps, default_corpus_dir
from ledger.connect import create_ledger_engine, libpq_url, sqlalchemy_url
from ledger.migration import WRITER_ROLE, upgrade
from ledger.settings import LedgerSettings
from ledger.store.drafts import audit_envelope
from ledger.store.ledger_store import LedgerStore
from ledger.translog.checkpoints import StoredCheckpoint, create_checkpoint
from ledger.translog.keys import generate_key_files, load_private_key

__all__ = [
    "DEMO_DATABASE",
    "Checks",
    "DemoError",
    "DemoRecord",
    "DemoResult",
    "load_corpus",
    "market_of",
    "run_demo",
]

DEMO_DATABASE = "ledger_demo"
TOPIC = "evidence-bundles"
DLQ_TOPIC = "evidence-bundles.dlq"
GROUP = "ledger-demo"
PARTITIONS = 4
CONSUME_TIMEOUT = 60.0
TOOL_TIMEOUT = 120.0
VIEWS = ("submissions", "trace_steps", "audit_results", "verdicts", "rejections")


class DemoError(RuntimeError):
    """The demo could not run (as opposed to a check that failed)."""


@dataclass(frozen=True)
class DemoRecord:
    """One corpus file and what the engine must make of it."""

    name: str  # relative to the corpus directory, as in the manifest
    path: Path
    story: str
    raw: bool
    expect: dict[str, Any]


@dataclass
class Checks:
    """Everything the demo verified, as (passed, description) pairs."""

    results: list[tuple[bool, str]] = field(default_factory=list)

    def add(self, passed: bool, description: str) -> bool:
        """Record one check and return whether it passed."""
        self.results.append((passed, description))
        return passed

    @property
    def failed(self) -> list[str]:
        """Descriptions of the failed checks."""
        return [text for passed, text in self.results if not passed]


def load_corpus(directory: Path) -> list[DemoRecord]:
    """The records listed in ``directory/manifest.json``, in publishing order."""
    manifest_path = directory / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DemoError(f"cannot read the demo corpus manifest {manifest_path}: {exc}") from exc
    records = []
    for item in manifest["records"]:
        path = directory / item["file"]
        if not path.is_file():
            raise DemoError(f"{manifest_path} lists {item['file']}, which is missing")
        story, raw = item.get("story", ""), bool(item.get("raw"))
        records.append(DemoRecord(item["file"], path, story, raw, dict(item["expect"])))
    return records


# --- services ------------------------------------------------------------------------------


@contextlib.contextmanager
def demo_lock(demo_dir: Path) -> Iterator[None]:
    """Only one demo per state directory at a time (they share the data directory)."""
    demo_dir.mkdir(parents=True, exist_ok=True)
    with (demo_dir / "demo.lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise DemoError(f"another `ledger demo` is running on {demo_dir}") from exc
        yield


def fresh_database(server_url: str, name: str = DEMO_DATABASE) -> str:
    """Drop ``name`` if it exists, create it empty and return its SQLAlchemy URL."""
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    base = sqlalchemy_url(server_url).rsplit("/", 1)[0]
    return f"{base}/{name}"


# --- publish and consume -------------------------------------------------------------------


def prepare(records: Sequence[DemoRecord], max_bytes: int) -> list[PreparedRecord]:
    """Validate every bundle exactly as the consumer will; poison files go as raw bytes."""
    return [prepare_file(record.path, raw=record.raw, max_bytes=max_bytes) for record in records]


async def publish(bootstrap: str, prepared: Sequence[PreparedRecord]) -> list[SentRecord]:
    """Create the topics (fresh broker) and send every record, waiting for acknowledgements."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1), NewTopic(DLQ_TOPIC, PARTITIONS, 1)])
    finally:
        await admin.close()
    async with EnvelopePublisher(bootstrap, topic=TOPIC, client_id="ledger-demo") as publisher:
        return await publisher.publish_many(prepared)


async def consume(bootstrap: str, store: LedgerStore, total: int, step: Steps) -> int:
    """Run the real consumer until all ``total`` records are committed; return how many were."""
    timing = consumer_kwargs(embedded=True)
    config = ConsumerConfig(
        bootstrap=bootstrap,
        topic=TOPIC,
        dlq_topic=DLQ_TOPIC,
        group_id=GROUP,
        host=socket.gethostname(),
        client_id="ledger-demo-consumer",
        session_timeout_ms=timing["session_timeout_ms"],
        heartbeat_interval_ms=timing["heartbeat_interval_ms"],
    )
    consumer = LedgerConsumer(config, store, audit_envelope)
    task = asyncio.create_task(consumer.run())
    deadline = time.monotonic() + CONSUME_TIMEOUT
    committed = 0
    while not task.done() and time.monotonic() < deadline:
        committed = sum(consumer.stored.values())
        step.detail = f"{committed}/{total} records committed"
        if committed >= total:
            break
        await asyncio.sleep(0.05)
    consumer.request_stop()
    await asyncio.wait_for(task, timeout=30)
    return sum(consumer.stored.values())


# --- what landed in the ledger ---------------------------------------------------------------

VERDICTS_SQL = """
SELECT v.market_id, v.outcome, v.confidence, v.resolution_rule_id,
       a.conflict_detected, a.insufficient_evidence, s.step_count, v.por_root
  FROM ledger.verdicts v
  JOIN ledger.audit_results a ON a.submission_id = v.submission_id
  JOIN ledger.submissions s ON s.submission_id = v.submission_id
 ORDER BY v.global_seq"""
REJECTIONS_SQL = """
SELECT kafka_partition, kafka_offset, reason_code, message, field_path, market_id, dlq_topic
  FROM ledger.rejections ORDER BY global_seq"""
FINDINGS_SQL = """
SELECT a.market_id, a.conflict_detected, c ->> 'check_id' AS check_id, c ->> 'message' AS message
  FROM ledger.audit_results a CROSS JOIN LATERAL jsonb_array_elements(a.checks) AS c
 WHERE (a.conflict_detected OR a.insufficient_evidence)
   AND c ->> 'severity' = 'error' AND c ->> 'ok' = 'false'
 ORDER BY a.global_seq, c ->> 'check_id'"""
TOTALS_SQL = """
SELECT (SELECT count(*) FROM ledger.submissions) AS submissions,
       (SELECT count(*) FROM ledger.entries) AS entries,
       (SELECT count(*) FROM ledger.trace_steps) AS steps,
       (SELECT max(global_seq) FROM ledger.entries) AS head_seq,
       (SELECT entry_hash FROM ledger.entries ORDER BY global_seq DESC LIMIT 1) AS head_hash"""


def query_ledger(database_url: str) -> dict[str, Any]:
    """Rows of the documented views that the summary shows."""
    with psycopg.connect(libpq_url(database_url), row_factory=dict_row) as conn:
        return {
            "verdicts": conn.execute(VERDICTS_SQL).fetchall(),
            "rejections": conn.execute(REJECTIONS_SQL).fetchall(),
            "findings": conn.execute(FINDINGS_SQL).fetchall(),
            "totals": conn.execute(TOTALS_SQL).fetchone(),
        }


def market_of(record: DemoRecord) -> str | None:
    """The market id in a bundle file (None for poison that does not parse)."""
    try:
        document = json.loads(record.path.read_bytes())
        return str(document["prompt_spec"]["market"]["market_id"])
    except (ValueError, KeyError, TypeError):
        return None


def check_ledger(
    records: Sequence[DemoRecord], sent: Sequence[SentRecord], found: dict[str, Any], checks: Checks
) -> None:
    """Every bundle has its expected verdict; every poison record its expected rejection."""
    verdicts = {row["market_id"]: row for row in found["verdicts"]}
    rejections = {(row["kafka_partition"], row["kafka_offset"]): row for row in found["rejections"]}
    for record, where in zip(records, sent, strict=True):
        if record.raw:
            row = rejections.get((where.partition, where.offset))
            want = record.expect["reason_code"]
            got = row["reason_code"] if row else "no rejection"
            checks.add(got == want, f"{record.name}: rejected as {want} (got {got})")
            continue
        market = market_of(record)
        verdict = verdicts.get(market)
        if verdict is None:
            checks.add(False, f"{record.name}: no verdict for market {market}")
            continue
        got_flags = (verdict["outcome"], verdict["conflict_detected"], verdict["insufficient_evidence"])
        want_flags = (record.expect["outcome"], record.expect["conflict"], record.expect["insufficient"])
        checks.add(got_flags == want_flags, f"{record.name}: verdict {want_flags} (got {got_flags})")


# --- checkpoint, replay and verify ---------------------------------------------------------


def sign_checkpoint(engine: Engine, demo_dir: Path) -> tuple[Path, StoredCheckpoint]:
    """A fresh Ed25519 key in ``demo_dir``, and a signed checkpoint over every entry so far."""
    key_path = demo_dir / "checkpoint.key"
    public_path, _ = generate_key_files(key_path, overwrite=True)
    return public_path, create_checkpoint(engine, load_private_key(key_path))


def run_tool(argv: Sequence[str], database_url: str, state_dir: Path) -> subprocess.CompletedProcess[str]:
    """``ledger ARGV`` in a child process pointed at the demo database (and nothing else)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env |= {"LEDGER_DATABASE_URL": database_url, "LEDGER_STATE_DIR": str(state_dir)}
    command = [sys.executable, "-m", "cli", *argv]
    try:
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=TOOL_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout if isinstance(exc.stdout, str) else ""
        return subprocess.CompletedProcess(command, 124, out, f"timed out after {TOOL_TIMEOUT}s")


# --- the run -------------------------------------------------------------------------------


def _quiet_logs() -> None:
    """Library logs only for real problems, in one plain line each (progress goes to stderr)."""
    configure_logging("warning", log_format="text")  # the demo is read by a person, piped or not
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # reconnect chatter at shutdown
    logging.getLogger("consumers.dlq").setLevel(logging.ERROR)  # each poison record; the report lists them


@dataclass(frozen=True)
class DemoResult:
    """What one demo run published, found in the ledger, and checked."""

    records: list[DemoRecord]
    sent: list[SentRecord]
    found: dict[str, Any]
    checkpoint: StoredCheckpoint
    tools: dict[str, subprocess.CompletedProcess[str] | None]  # None: command not in this build
    checks: Checks
    psql_url: str
    seconds: float

    @property
    def passed(self) -> bool:
        """True when every check passed."""
        return not self.checks.failed


def run_demo(
    settings: LedgerSettings,
    *,
    offered: Collection[str],
    progress: Steps,
    corpus_dir: Path | None = None,
) -> DemoResult:
    """Run the demo end to end (each step reported to ``progress``) and return what it found and checked."""
    _quiet_logs()
    demo_dir = Path(settings.state_dir).absolute() / "demo"
    records = load_corpus(corpus_dir or default_corpus_dir())
    checks = Checks()
    started = time.monotonic()
    with demo_lock(demo_dir), contextlib.ExitStack() as services:
        with progress.step("starting embedded PostgreSQL") as step:
            server = EmbeddedPostgres(demo_dir / "postgres", durable=False, state_dir=demo_dir)
            services.callback(server.stop)
            server.start()
            step.detail = f"port {server.port}, data in {server.data_dir}"
        with progress.step("starting embedded Kafka broker (tansu)") as step:
            broker = EmbeddedBroker()
            services.callback(broker.stop)
            broker.start()
            step.detail = f"bootstrap {broker.bootstrap}"
        with progress.step(f"creating database {DEMO_DATABASE} and applying migrations"):
            database_url = fresh_database(server.url)
            engine = create_ledger_engine(database_url)
            services.callback(engine.dispose)
            upgrade(engine)
        bundles = sum(not record.raw for record in records)
        with progress.step(
            f"publishing {bundles} bundles and {len(records) - bundles} poison records"
        ) as step:
            sent = asyncio.run(publish(broker.bootstrap, prepare(records, settings.max_message_bytes)))
            step.detail = f"to topic {TOPIC}"
        with (
            progress.step("consuming: audit, judge, append") as step,
            LedgerStore(engine, role=WRITER_ROLE) as store,
        ):
            committed = asyncio.run(consume(broker.bootstrap, store, len(sent), step))
        checks.add(committed == len(sent), f"all {len(sent)} records committed (got {committed})")
        found = query_ledger(database_url)
        check_ledger(records, sent, found, checks)
        with progress.step("signing a transparency-log checkpoint") as step:
            public_key, checkpoint = sign_checkpoint(engine, demo_dir)
            step.detail = f"tree size {checkpoint.tree_size}"
        checks.add(
            checkpoint.tree_size == found["totals"]["entries"],
            f"checkpoint covers all {found['totals']['entries']} entries (tree size {checkpoint.tree_size})",
        )
        tools: dict[str, subprocess.CompletedProcess[str] | None] = {}
        verify = ["verify", "--public-key", str(public_key)]
        for name, argv in (("replay", ["replay", "--all", "--fail-on-drift"]), ("verify", verify)):
            if name not in offered:
                tools[name] = None
                continue
            with progress.step(f"ledger {name}") as step:
                tools[name] = done = run_tool(argv, libpq_url(database_url), demo_dir)
                step.detail = f"exit {done.returncode}"
            checks.add(done.returncode == 0, f"ledger {' '.join(argv)} exited {done.returncode}")
        with progress.step("stopping PostgreSQL and the broker"):
            services.close()
    seconds = time.monotonic() - started
    return DemoResult(records, sent, found, checkpoint, tools, checks, libpq_url(database_url), seconds)
