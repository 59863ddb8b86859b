"""Two appender processes on one ledger, with overlapping keys, batches of mixed sizes and a
repeated key inside a batch: global_seq stays gapless, each key is stored once, each process's
results are the committed rows, and the tree equals a from-scratch rebuild."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.database import chain_problems, query
from tests.integration.test_attack16b_append_tree_results import _assert_tree_is_a_rebuild

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

_WORKER = """
import json, sys
from ledger.store.ledger_store import LedgerStore
from tests.helpers.ledger_factories import audited, rejected
url, name = sys.argv[1], sys.argv[2]
out = []
with LedgerStore(url, lock_timeout="60s") as store:
    for round_ in range(12):
        shared = [audited(f"s{round_}-{i}", steps=1 + (round_ + i) % 5) for i in range(4)]
        own = [rejected(f"{name}{round_}-{i}", f"{name} {round_} {i}".encode()) for i in range(round_ % 3)]
        batch = shared[2:] + own + shared[:2] + [shared[0]] if name == "a" else shared + own
        for result in store.append_batch(batch):
            out.append([result.idempotency_key, result.status, result.submission_id,
                        [[e.global_seq, e.stream_seq, e.entry_hash] for e in result.entries]])
print(json.dumps(out))
"""


def test_two_appender_processes(migrated_database_url: str) -> None:
    url = migrated_database_url
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, url, name], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
        )
        for name in ("a", "b")
    ]
    outputs: list[list[Any]] = []
    for worker in workers:
        stdout, _ = worker.communicate(timeout=300)
        assert worker.returncode == 0
        outputs.append(json.loads(stdout))
    rows = query(url, "SELECT global_seq, submission_id, stream_seq, entry_hash FROM ledger_store.entries")
    by_submission: dict[str, list[list[Any]]] = {}
    for seq, submission, stream_seq, entry_hash in sorted(rows, key=lambda row: (row[1], row[2])):
        by_submission.setdefault(submission, []).append([seq, stream_seq, entry_hash])
    keys = query(url, "SELECT idempotency_key, submission_id FROM ledger_store.submissions")
    assert len({key for key, _ in keys}) == len(keys)
    stored_ids = dict(keys)
    created = [r[0] for out in outputs for r in out if r[1] == "created"]
    assert sorted(created) == sorted(stored_ids), "each key created exactly once, by one process"
    for out in outputs:
        for key, status, submission_id, entries in out:
            assert status in ("created", "existing")
            assert stored_ids[key] == submission_id
            assert entries == by_submission[submission_id]
    assert chain_problems(url) == []
    _assert_tree_is_a_rebuild(url)
