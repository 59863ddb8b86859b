"""End to end, topic → committed ledger: bundles/s with one and two `ledger consume` processes, and
p50/p99 commit latency at a fixed produce rate.

Run:  .venv/bin/python bench/bench_end_to_end.py [--bundles 4000] [--latency-seconds 20] [--rate R]

Services: ``LEDGER_KAFKA_BOOTSTRAP`` / ``LEDGER_DATABASE_URL`` when set, else the embedded tansu
broker and an embedded PostgreSQL (fsync on) in a temporary directory, stopped at the end. Each
phase gets its own topic (4 partitions) and a fresh, migrated database; the records are keyed by
market id, spread over ``--markets`` of them (default 1,000).

Bundles: ``samples/corpus/*.json`` with 2–5 evidence items that pass envelope validation (else
``tests/data/cournot_minimal.json``), each copy given a unique ``bundle_id`` so every record is
a new submission; they are validated and encoded before any clock starts.

* throughput: the whole backlog is produced first; consumers run with ``--until-idle``;
  bundles/s = N / (first partition assignment → last committed batch), from the consumers' JSON
  logs (``batch committed`` is logged right after the Postgres transaction commits); CPU per
  bundle of the consumers and, when embedded, of the broker and PostgreSQL (its backends, which it
  reaps; not its background writers) from consumer start to exit, and of the consumers alone from
  their first assignment to their last commit (the ``cpu_seconds`` of those log lines: no start-up); rows written per committed
  submission, from the ``n_tup_ins + n_tup_upd`` deltas of ``pg_stat_user_tables`` over the phase;
* latency: two consumers already running; records are produced at ``--rate`` (default: half the
  two-consumer throughput) with the send time in a ``bench.produced_at_ns`` header; a record's
  commit time is that of the first ``batch committed`` line whose next offset passes it.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import copy
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # noqa: E402
from e2e_logs import (  # noqa: E402
    batch_summary,
    commit_times,
    log_events,
    median_batch,
    percentile,
    ts,
    window_cpu,
)

from consumers.publisher import PreparedRecord, prepare_document  # noqa: E402
from devstack.broker import EmbeddedBroker  # noqa: E402
from devstack.postgres import EmbeddedPostgres  # noqa: E402
from engine.envelope import EnvelopeError  # noqa: E402
from ledger.connect import libpq_url, sqlalchemy_url  # noqa: E402
from ledger.migration import upgrade  # noqa: E402

HEADER = "bench.produced_at_ns"
GROUP_TIMING = ["--session-timeout-ms", "6000", "--heartbeat-interval-ms", "500"]
CONSUMER_ARGS: list[str] = []  # extra ``ledger consume`` options (--consumer-arg)
SERVER_PIDS: dict[str, int] = {}  # embedded servers only: name -> pid, for their CPU per bundle


# --- services -----------------------------------------------------------------------------


@contextlib.contextmanager
def services() -> Iterator[tuple[str, str, str]]:
    """(bootstrap, admin database URL, description), embedded unless configured."""
    with contextlib.ExitStack() as stack:
        bootstrap = os.environ.get("LEDGER_KAFKA_BOOTSTRAP", "")
        if not bootstrap:
            broker = EmbeddedBroker()
            broker.start()
            stack.callback(broker.stop)
            bootstrap = broker.bootstrap
            if (broker_pid := broker.status().pid) is not None:
                SERVER_PIDS["broker"] = broker_pid
        admin_url = os.environ.get("LEDGER_DATABASE_URL", "")
        if not admin_url:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-e2e-pg-")))
            server = EmbeddedPostgres(data_dir / "pg", durable=True)
            server.start()
            stack.callback(server.stop)
            admin_url = server.url
            if (server_pid := server.status().pid) is not None:
                SERVER_PIDS["PostgreSQL"] = server_pid
        kind = "configured" if os.environ.get("LEDGER_KAFKA_BOOTSTRAP") else "embedded tansu"
        pg = "configured" if os.environ.get("LEDGER_DATABASE_URL") else "embedded PostgreSQL (fsync on)"
        yield bootstrap, admin_url, f"broker: {kind}; database: {pg}"


@contextlib.contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    """A new migrated database, dropped afterwards."""
    name = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(libpq_url(admin_url), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = sqlalchemy_url(admin_url).rsplit("/", 1)[0] + f"/{name}"
    try:
        upgrade(url)
        yield url
    finally:
        with psycopg.connect(libpq_url(admin_url), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


PARTITIONS = 4


async def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    """Create the topic and its dead-letter topic."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1), NewTopic(f"{topic}.dlq", partitions, 1)])
    finally:
        await admin.close()


# --- bundles ------------------------------------------------------------------------------


def corpus() -> tuple[list[dict[str, Any]], str]:
    """Valid corpus documents with 2–5 evidence items, or the minimal sample."""
    chosen, skipped = [], 0
    for path in sorted((ROOT / "samples" / "corpus").glob("*.json")):
        document = json.loads(path.read_text())
        items = len(document["evidence_bundle"]["items"])
        try:
            prepare_document(copy.deepcopy(document))
        except EnvelopeError:
            skipped += 1
            continue
        if 2 <= items <= 5:
            chosen.append(document)
    if chosen:
        return chosen, f"{len(chosen)} corpus bundles with 2-5 evidence items ({skipped} invalid skipped)"
    sample = json.loads((ROOT / "tests" / "data" / "cournot_minimal.json").read_text())
    return [sample], "tests/data/cournot_minimal.json (1 evidence item)"


MARKETS = 1000
"""Distinct market ids (the record key, so the partition) the copies are spread over (``--markets``)."""


def records(
    templates: list[dict[str, Any]], count: int, tag: str, markets: int = MARKETS
) -> list[PreparedRecord]:
    """``count`` validated, encoded records, each a distinct submission.

    With ``markets`` > 0 copy ``i`` belongs to market ``<corpus market id>-m<i mod markets>`` (in
    the prompt spec and the bundle alike), as on a topic carrying many markets: keyed by the corpus's
    15 market ids alone, the records fall unevenly on the 4 partitions (one run: 534 / 2,133 /
    1,333 / 0 of 4,000), so with two consumers one of them gets two thirds of the backlog."""
    prepared = []
    for index in range(count):
        document = copy.deepcopy(templates[index % len(templates)])
        bundle = document["evidence_bundle"]
        bundle["bundle_id"] = f"{bundle['bundle_id']}-{tag}-{index}"
        if markets > 0:
            market = f"{bundle['market_id']}-m{index % markets}"
            bundle["market_id"] = document["prompt_spec"]["market"]["market_id"] = market
        prepared.append(prepare_document(document))
    return prepared


async def produce(bootstrap: str, topic: str, batch: list[PreparedRecord], rate: float | None = None) -> None:
    """Send every record (paced at ``rate`` records/s when given) with its send time in a header."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=5,
        max_batch_size=1_048_576,
        max_request_size=4_194_304,
    )
    await producer.start()
    try:
        started = time.monotonic()
        pending = []
        for index, record in enumerate(batch):
            if rate:
                delay = started + index / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            headers = [*record.headers, (HEADER, str(time.time_ns()).encode())]
            pending.append(await producer.send(topic, value=record.value, key=record.key, headers=headers))
        sent = await asyncio.gather(*pending)
    finally:
        await producer.stop()
    if rate is None:
        counts = collections.Counter(metadata.partition for metadata in sent)
        print(f"  records per partition: {' / '.join(str(counts[p]) for p in range(PARTITIONS))}")


async def produced_at(bootstrap: str, topic: str) -> dict[tuple[int, int], int]:
    """``{(partition, offset): produce time in ns}`` read back from the records' headers."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        await consumer.topics()
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        await consumer.seek_to_beginning()
        found: dict[tuple[int, int], int] = {}
        idle = 0
        while idle < 3:
            batch = await consumer.getmany(timeout_ms=1000, max_records=10_000)
            idle = 0 if batch else idle + 1
            for part in batch.values():
                for record in part:
                    headers = dict(record.headers)
                    found[(record.partition, record.offset)] = int(headers[HEADER])
        return found
    finally:
        await consumer.stop()


# --- consumers and their logs ---------------------------------------------------------------


def start_consumers(
    count: int, env: dict[str, str], log_dir: Path, *args: str
) -> list[subprocess.Popen[bytes]]:
    """``count`` ``ledger consume`` processes in one group, logs in ``log_dir``."""
    processes = []
    for index in range(count):
        log = (log_dir / f"consumer{index}.log").open("wb")
        processes.append(
            subprocess.Popen(
                [sys.executable, "-m", "cli", "consume", *GROUP_TIMING, *CONSUMER_ARGS, *args],
                cwd=ROOT,
                env={**os.environ, **env},
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        )
    return processes


# --- phases -------------------------------------------------------------------------------


def throughput(
    bootstrap: str, admin_url: str, prepared: list[PreparedRecord], members: int, work: Path
) -> float:
    """Bundles/s with a pre-filled backlog and ``members`` consumer processes."""
    topic = f"bench-e2e-{members}-{uuid.uuid4().hex[:8]}"
    log_dir = work / topic
    log_dir.mkdir()
    asyncio.run(create_topic(bootstrap, topic))
    asyncio.run(produce(bootstrap, topic, prepared))
    with fresh_database(admin_url) as url:
        env = env_for(bootstrap, url, topic)
        rows_before = rows_written(url)
        cpu_before, servers_before = children_cpu(), server_cpu()
        processes = start_consumers(members, env, log_dir, "--until-idle", "5")
        for process in processes:
            if process.wait(timeout=3600) != 0:
                raise SystemExit(f"consumer failed, see {log_dir}")
        consumer_cpu = children_cpu() - cpu_before  # only the consumers were waited for in between
        time.sleep(0.5)  # the server reaps the consumers' backends, which adds their CPU to its own
        servers = {name: seconds - servers_before[name] for name, seconds in server_cpu().items()}
        with psycopg.connect(libpq_url(url)) as conn:
            stored = conn.execute(
                "SELECT count(*) FROM ledger.submissions WHERE status = 'audited'"
            ).fetchone()
        rows_after = rows_written(url)
    if stored is None or stored[0] != len(prepared):
        raise SystemExit(f"expected {len(prepared)} submissions, found {stored}")
    print(f"  {members} consumer(s): {rows_per_submission(rows_before, rows_after, stored[0])}")
    first = min(ts(line) for line in log_events(log_dir, "partitions assigned"))
    last = max(ts(line) for line in log_events(log_dir, "batch committed"))
    print(
        f"  {members} consumer(s): {batch_summary(log_dir, last - first)}; "
        f"consumer CPU {consumer_cpu * 1000 / len(prepared):.2f} ms/bundle (start-up and idle tail included)"
        f"{window_cpu(log_dir)}"
        + "".join(
            f"; {name} {seconds * 1000 / len(prepared):.2f} ms/bundle" for name, seconds in servers.items()
        )
    )
    return len(prepared) / (last - first)


def rows_written(url: str) -> dict[str, int]:
    """Rows inserted plus rows updated so far, per table (``pg_stat_user_tables``) of ``url``'s database.

    The consumers' backends report their counts when they exit; the phase reads this after they did.
    """
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        rows = conn.execute(
            "SELECT schemaname || '.' || relname, n_tup_ins + n_tup_upd FROM pg_stat_user_tables"
        ).fetchall()
    return {name: int(count) for name, count in rows}


def rows_per_submission(before: dict[str, int], after: dict[str, int], submissions: int) -> str:
    """Rows written per committed submission over a phase: the total, then each table that wrote any."""
    deltas = {name: after[name] - before.get(name, 0) for name in after}
    written = {name: count for name, count in sorted(deltas.items()) if count > 0}
    total = sum(written.values()) / max(1, submissions)
    parts = ", ".join(f"{name} {count / max(1, submissions):.2f}" for name, count in written.items())
    return f"rows written per submission {total:.1f} (inserted + updated; {parts})"


def children_cpu() -> float:
    """User + system CPU seconds of the waited-for child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def server_cpu() -> dict[str, float]:
    """CPU seconds so far of each embedded server, its reaped children (PostgreSQL backends) included."""
    seconds = {}
    for name, pid in SERVER_PIDS.items():
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(pid).cpu_times()
            seconds[name] = times.user + times.system + times.children_user + times.children_system
    return seconds


def latency(
    bootstrap: str, admin_url: str, prepared: list[PreparedRecord], rate: float, work: Path
) -> tuple[float, float, float, int]:
    """(p50 s, p99 s, max s, records) at ``rate`` records/s with two consumers already running."""
    topic = f"bench-e2e-latency-{uuid.uuid4().hex[:8]}"
    log_dir = work / topic
    log_dir.mkdir()
    asyncio.run(create_topic(bootstrap, topic))
    with fresh_database(admin_url) as url:
        processes = start_consumers(2, env_for(bootstrap, url, topic), log_dir, "--until-idle", "5")
        deadline = time.monotonic() + 60
        while not all(
            any(
                line["partitions"]
                for line in log_events(log_dir, "partitions assigned", f"consumer{index}.log")
            )
            for index in range(2)
        ):
            if time.monotonic() > deadline:
                raise SystemExit("consumers did not join in 60 s")
            time.sleep(0.2)
        time.sleep(2.5)  # let the group settle after the second join
        asyncio.run(produce(bootstrap, topic, prepared, rate=rate))
        for process in processes:
            process.wait(timeout=3600)
    sent = asyncio.run(produced_at(bootstrap, topic))
    print(f"  latency phase: {batch_summary(log_dir, 0.0).rsplit(', wall', 1)[0]}{window_cpu(log_dir)}")
    commits = commit_times(log_dir)
    latencies = []
    for (partition, offset), produced_ns in sent.items():
        committed = next(at for next_offset, at in commits[partition] if next_offset > offset)
        latencies.append(max(0.0, committed - produced_ns / 1e9))
    return percentile(latencies, 0.5), percentile(latencies, 0.99), max(latencies), len(latencies)


def env_for(bootstrap: str, url: str, topic: str) -> dict[str, str]:
    """Consumer environment for one phase."""
    return {
        "LEDGER_KAFKA_BOOTSTRAP": bootstrap,
        "LEDGER_DATABASE_URL": url,
        "LEDGER_TOPIC": topic,
        "LEDGER_DLQ_TOPIC": f"{topic}.dlq",
        "LEDGER_GROUP_ID": f"{topic}-group",
    }


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo, if readable."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def main() -> None:
    """Run the three phases and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundles", type=int, default=4000, help="backlog size per throughput phase")
    parser.add_argument("--latency-seconds", type=float, default=20.0, help="duration of the latency phase")
    parser.add_argument(
        "--rate", type=float, help="produce rate for the latency phase (default: half of 2-consumer)"
    )
    parser.add_argument(
        "--phases", default="1,2,latency", help="comma-separated subset of 1,2,latency (default: all)"
    )
    parser.add_argument(
        "--consumer-arg", action="append", default=[], help="extra ledger consume option (repeatable)"
    )
    parser.add_argument(
        "--markets",
        type=int,
        default=MARKETS,
        help=f"market ids (record keys) the copies are spread over (default {MARKETS}; 0: the corpus's own)",
    )
    parser.add_argument(
        "--keep-logs", type=Path, metavar="DIR", help="copy the consumers' JSON logs into DIR at the end"
    )
    args = parser.parse_args()
    CONSUMER_ARGS.extend(args.consumer_arg)
    phases = set(args.phases.split(","))
    templates, source = corpus()
    with services() as (bootstrap, admin_url, where), tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
        work = Path(tmp)
        try:
            run_phases(args, phases, templates, bootstrap, admin_url, f"{where}; bundles: {source}", work)
        finally:
            if args.keep_logs is not None:
                shutil.copytree(work, args.keep_logs, dirs_exist_ok=True)


def run_phases(
    args: argparse.Namespace,
    phases: set[str],
    templates: list[dict[str, Any]],
    bootstrap: str,
    admin_url: str,
    where: str,
    work: Path,
) -> None:
    """The chosen phases, one after another, printing each one's figures."""
    print(f"machine: {os.cpu_count()} CPUs, {cpu_model()}, Python {platform.python_version()}")
    print(
        f"{where}; topic: {PARTITIONS} partitions, {args.markets or 'the corpus'} market ids; consumer {' '.join(CONSUMER_ARGS) or 'defaults'}"
    )
    if "1" in phases:
        one = throughput(bootstrap, admin_url, records(templates, args.bundles, "a", args.markets), 1, work)
        print(f"1 consumer : {one:8.0f} bundles/s  ({args.bundles} bundles, backlog)")
    two = 0.0
    if "2" in phases:
        two = throughput(bootstrap, admin_url, records(templates, args.bundles, "b", args.markets), 2, work)
        print(f"2 consumers: {two:8.0f} bundles/s  ({args.bundles} bundles, backlog)")
    if "latency" not in phases:
        return
    rate = args.rate or max(1.0, two / 2)
    count = max(1, int(rate * args.latency_seconds))
    p50, p99, worst, measured = latency(
        bootstrap, admin_url, records(templates, count, "c", args.markets), rate, work
    )
    print(
        f"latency at {rate:.0f} bundles/s, 2 consumers, {measured} records: "
        f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {worst * 1000:.0f} ms (produce → commit)"
    )
    print(
        f"target (docs/architecture.md): >= 2000 bundles/s; p99 < 500 ms at half load. median batch: {median_batch(work)}"
    )


if __name__ == "__main__":
    main()
