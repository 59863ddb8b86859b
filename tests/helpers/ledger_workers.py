"""Subprocess workers for the ledger concurrency tests (run as scripts, not collected by pytest).

``append URL WORKER BATCHES PER_BATCH START_AT OUT``: append BATCHES batches, each of PER_BATCH
own submissions plus one submission shared by all workers, advancing partition WORKER's offset.
``read URL EXPECTED DEADLINE READY OUT``: poll ``global_seq > last ORDER BY global_seq LIMIT n``
until EXPECTED entries were seen; write every seq seen, in order.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: make `tests` importable

from ledger.connect import libpq_url
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import OffsetAdvance
from tests.helpers.ledger_factories import audited


def append(url: str, worker: int, batches: int, per_batch: int, start_at: float, out: Path) -> None:
    """Append the batches as fast as possible once ``start_at`` has come."""
    store = LedgerStore(url, role="ledger_writer")
    store.max_seq()  # connect before the start line
    time.sleep(max(0.0, start_at - time.time()))
    report = []
    for batch in range(batches):
        drafts = [audited(f"w{worker}-b{batch}-s{i}", market_id=f"m{worker}") for i in range(per_batch)]
        drafts.append(audited(f"shared-b{batch}", market_id="shared", steps=2))
        offsets = [OffsetAdvance("g", "t", worker, batch * per_batch, (batch + 1) * per_batch)]
        results = store.append_batch(drafts, offsets)
        report.append(
            [
                [r.idempotency_key, r.status, [e.global_seq for e in r.entries], r.entries[-1].entry_hash]
                for r in results
            ]
        )
    store.close()
    out.write_text(json.dumps(report))


def read(url: str, expected: int, deadline: float, ready: Path, out: Path) -> None:
    """Tail the entries by global_seq, as a replica or a projection would."""
    seen: list[int] = []
    last = 0
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        ready.write_text("ready")
        while last < expected and time.time() < deadline:
            rows = conn.execute(
                "SELECT global_seq FROM ledger_store.entries WHERE global_seq > %s ORDER BY global_seq LIMIT 37",
                (last,),
            ).fetchall()
            for (seq,) in rows:
                seen.append(seq)
                last = seq
            if not rows:
                time.sleep(0.001)
    out.write_text(json.dumps(seen))


if __name__ == "__main__":
    command, url, *rest = sys.argv[1:]
    if command == "append":
        append(url, int(rest[0]), int(rest[1]), int(rest[2]), float(rest[3]), Path(rest[4]))
    else:
        read(url, int(rest[0]), float(rest[1]), Path(rest[2]), Path(rest[3]))
