"""The compiled and the pure build (``LEDGER_ENGINE=pure``) store the same bytes: the same corpus
plus payloads with hostile but storable values (control characters inside strings, U+2028,
float-looking strings, big ints, str subclasses, deep nesting; U+0000 is refused by both, see
tests/unit/test_payload_nul_refused.py), appended in the same batches by one
process of each build, give identical entries, steps, submissions (hashed columns) and tiles."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.migration import upgrade
from tests.helpers.database import chain_problems, query
from tests.helpers.services import PgServer, fresh_database

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

_WORKER = """
import sys
from dataclasses import replace
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import EntryDraft
from tests.helpers.ledger_factories import audited, rejected
from tests.helpers.replay import corpus_drafts

class Text(str):
    def __str__(self):
        return "other"

deep = {"v": 1}
for _ in range(60):
    deep = {"d": [deep]}
odd = [
    {"s": "a\\x01b\\x01\\x1f\\x7f\\\\N\\t\\n\\r\\\\", "u": "\\u2028\\u2029\\ufeff\\U0001f600", "f": "1e400", "z": "-0"},
    {"big": 10**300, "neg": -(2**64), "float": 1.5, "t": True, "n": None, Text("k"): Text("v%d%%s")},
    deep,
]
drafts = corpus_drafts(1, limit=12)
extra = [replace(rejected(f"odd{i}", f"raw{i}".encode()), entries=[EntryDraft("submission.rejected", p)])
         for i, p in enumerate(odd)]
extra.append(replace(audited("aud-odd", steps=2), market_id=Text("m\\u2028%s"), bundle_id="b\\\\N\\t"))
with LedgerStore(sys.argv[1]) as store:
    for batch in (drafts[:5], extra, drafts[5:], [], drafts[:3] + extra[:1]):
        store.append_batch(batch)
"""

_TABLES = {
    "entries": "SELECT global_seq, submission_id, stream_seq, kind, payload_canonical, payload_hash, prev_hash, "
    "entry_hash, engine_version, step_index, step_id, step_type, evidence_ids, step_hash, canonical_step "
    "FROM ledger_store.entries ORDER BY global_seq",
    "submissions": "SELECT submission_id, idempotency_key, market_id, bundle_id, status, input_hashes_canonical, "
    "engine_version FROM ledger_store.submissions ORDER BY submission_id",
    "tiles": "SELECT level, idx, width, hashes FROM ledger_store.merkle_tiles ORDER BY level, idx",
}


@pytest.fixture
def two_databases(pg_server: PgServer) -> Iterator[tuple[str, str]]:
    with fresh_database(pg_server.admin_url) as first, fresh_database(pg_server.admin_url) as second:
        upgrade(first)
        upgrade(second)
        yield first, second


def test_compiled_and_pure_store_the_same_bytes(two_databases: tuple[str, str]) -> None:
    dumps = []
    for url, build in zip(two_databases, ("compiled", "pure"), strict=True):
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("LEDGER_ENGINE", None)
        if build == "pure":
            env["LEDGER_ENGINE"] = "pure"
        done = subprocess.run(
            [sys.executable, "-c", _WORKER, url],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert chain_problems(url) == []
        dumps.append({name: query(url, statement) for name, statement in _TABLES.items()})
    compiled, pure = dumps
    assert len(compiled["entries"]) > 100
    for name in _TABLES:
        assert compiled[name] == pure[name], name
