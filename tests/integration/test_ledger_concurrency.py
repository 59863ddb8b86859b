"""Concurrent appenders and a tailing reader (ledger-anchors lesson 2, the skipped-event bug).

Four appender processes × 50 batches race for the append lock while a reader process pages by
``global_seq``. Promises: the global sequence is gapless and duplicate-free, every chain is
intact, each batch occupies one contiguous run of seqs (no interleaving), a submission offered by
all four processes is written exactly once, offsets end where the batches left them, and the
reader saw every seq exactly once, in order.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from ledger.store.ledger_store import LedgerStore
from tests.helpers.database import chain_problems, query

pytestmark = pytest.mark.integration

WORKERS = 4
BATCHES = 50
PER_BATCH = 3
ENTRIES_OWN = 6  # received + 3 steps + audit + verdict
ENTRIES_SHARED = 5  # received + 2 steps + audit + verdict
WORKER_SCRIPT = Path(__file__).parents[1] / "helpers" / "ledger_workers.py"


def _spawn(*args: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(WORKER_SCRIPT), *map(str, args)], stderr=subprocess.PIPE)


def _finish(proc: subprocess.Popen[bytes], timeout: float) -> None:
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode == 0, stderr.decode(errors="replace")[-3000:]


def test_concurrent_appenders_and_a_tailing_reader(migrated_database_url: str, tmp_path: Path) -> None:
    expected = WORKERS * BATCHES * PER_BATCH * ENTRIES_OWN + BATCHES * ENTRIES_SHARED
    ready = tmp_path / "reader.ready"
    reader = _spawn(
        "read", migrated_database_url, expected, time.time() + 240, ready, tmp_path / "reader.json"
    )
    processes: list[subprocess.Popen[bytes]] = []
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert reader.poll() is None, "reader exited early"
            assert time.monotonic() < deadline, "reader never became ready"
            time.sleep(0.02)
        start_at = time.time() + 2.0
        processes = [
            _spawn("append", migrated_database_url, w, BATCHES, PER_BATCH, start_at, tmp_path / f"w{w}.json")
            for w in range(WORKERS)
        ]
        for proc in processes:
            _finish(proc, timeout=240)
        _finish(reader, timeout=240)
    finally:
        for proc in [*processes, reader]:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    count, low, high, distinct = query(
        migrated_database_url,
        "SELECT count(*), min(global_seq), max(global_seq), count(DISTINCT global_seq) "
        "FROM ledger_store.entries",
    )[0]
    assert (count, low, high, distinct) == (expected, 1, expected, expected)
    assert chain_problems(migrated_database_url) == []

    seen = json.loads((tmp_path / "reader.json").read_text())
    assert seen == list(range(1, expected + 1)), "the tailing reader skipped or repeated an entry"

    shared: dict[str, list[tuple[str, list[int], str]]] = defaultdict(list)
    for worker in range(WORKERS):
        report = json.loads((tmp_path / f"w{worker}.json").read_text())
        assert len(report) == BATCHES
        for batch in report:
            created = sorted(seq for key, status, seqs, _ in batch if status == "created" for seq in seqs)
            assert created == list(range(created[0], created[0] + len(created))), "a batch was interleaved"
            own = [status for key, status, _, _ in batch if not key.startswith("shared-")]
            assert own == ["created"] * PER_BATCH
            for key, status, seqs, last_hash in batch:
                if key.startswith("shared-"):
                    shared[key].append((status, seqs, last_hash))
    assert len(shared) == BATCHES
    for key, outcomes in shared.items():
        statuses = sorted(status for status, _, _ in outcomes)
        assert statuses == ["created"] + ["existing"] * (WORKERS - 1), key
        assert len({(tuple(seqs), last_hash) for _, seqs, last_hash in outcomes}) == 1, key

    with LedgerStore(migrated_database_url) as store:
        assert store.load_offsets("g", "t") == {w: BATCHES * PER_BATCH for w in range(WORKERS)}
        assert store.max_seq() == expected
