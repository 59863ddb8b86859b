"""Revision 0010 on a ledger that holds data: without lz4, entry rows up to 8 KB stored inline.

Run on the embedded PostgreSQL (built without lz4) and on the test server named by the
environment when it answers (usually with lz4). A ledger written under revision 0009 (long
payloads compressed) goes up to 0010, down and up again: every raw column and every row of the
user views stays the same and the rows written before keep their compressed values. A payload
written after (over the 2 KB threshold, under 8 KB) is stored uncompressed where the server has no
lz4 and lz4-compressed where it has; a payload over 8 KB is compressed either way; ``ledger verify``
and ``ledger replay`` pass throughout.
"""

from __future__ import annotations

import pytest

from ledger.migration import current_revision, downgrade, upgrade
from ledger.store.ledger_store import LedgerStore
from tests.helpers.database import query, server_has_lz4
from tests.helpers.ledger_factories import rejected
from tests.helpers.replay import build_ledger, corpus_drafts, ledger_json
from tests.helpers.services import PgServer, ServiceStack, postgres_kinds

pytestmark = pytest.mark.integration

RAW = (
    "SELECT global_seq, submission_id, stream_seq, kind, payload_canonical, payload_hash, prev_hash, "
    "entry_hash, engine_version, appended_at, step_index, step_id, step_type, evidence_ids, step_hash, "
    "canonical_step FROM ledger_store.entries ORDER BY global_seq"
)
VIEWS = ("entries", "audit_results", "verdicts", "rejections", "trace_steps")
# Long enough to cross PostgreSQL's 2 KB TOAST threshold, short enough for an 8,160-byte row.
MIDDLE = "octet_length(payload_canonical) BETWEEN 2500 AND 7000"
INLINE = ["toast_tuple_target=8160"]


@pytest.fixture(scope="session", params=postgres_kinds())
def pg_server(request: pytest.FixtureRequest, service_stack: ServiceStack) -> PgServer:
    """Overrides the plugin's pg_server: the embedded server (no lz4) and the environment's."""
    return service_stack.postgres(request.param)


def _snapshot(url: str) -> dict[str, list[tuple[object, ...]]]:
    out = {"raw": query(url, RAW)}
    for view in VIEWS:
        out[view] = query(url, f"SELECT * FROM ledger.{view} ORDER BY global_seq")
    return out


def _options(url: str) -> list[str]:
    [(options,)] = query(url, "SELECT reloptions FROM pg_class WHERE oid = 'ledger_store.entries'::regclass")
    return list(options or [])


def _compressed(url: str, where: str) -> list[str | None]:
    """How each entry matching ``where`` (in sequence order) has its payload compressed (None: not)."""
    rows = query(
        url,
        "SELECT pg_column_compression(payload_canonical) FROM ledger_store.entries "
        f"WHERE {where} ORDER BY global_seq",
    )
    return [method for (method,) in rows]


def _verify_and_replay(url: str, submissions: int) -> None:
    code, report = ledger_json(url, "verify")
    assert code == 0, report["problems"]
    code, report = ledger_json(url, "replay", "--all")
    assert code == 0, report
    assert report["summary"]["identical"] == submissions


def test_down_and_up_on_a_ledger_written_before_keeps_every_row(migrated_database_url: str) -> None:
    url = migrated_database_url
    lz4 = server_has_lz4(url)
    method = "lz4" if lz4 else "pglz"
    downgrade(url, "0009")  # written by the schema before revision 0010
    stored = build_ledger(url, limit=6)
    before = _snapshot(url)
    written_before = _compressed(url, MIDDLE)
    assert written_before and set(written_before) == {method}  # compressed before 0010
    assert _options(url) == []

    upgrade(url, "0010")
    assert current_revision(url) == "0010"
    assert _options(url) == ([] if lz4 else INLINE)
    assert _snapshot(url) == before
    assert _compressed(url, MIDDLE) == written_before  # rows written before are left as they were
    _verify_and_replay(url, len(stored))

    first_new = query(url, "SELECT coalesce(max(global_seq), 0) + 1 FROM ledger_store.entries")[0][0]
    later = corpus_drafts(copies=2, limit=1)[1]  # appended by the code of revision 0010
    with LedgerStore(url) as store:
        assert store.append(later).status == "created"
        # a raw payload over 8 KB: its rejection entry's row cannot stay under the target
        assert store.append(rejected("big-1", b"x" * 9000)).status == "created"
    new_middle = _compressed(url, f"{MIDDLE} AND global_seq >= {first_new}")
    assert new_middle and set(new_middle) == ({"lz4"} if lz4 else {None})  # without lz4: as they are
    assert _compressed(url, f"octet_length(payload_canonical) > 9000 AND global_seq >= {first_new}") == [
        method
    ]
    after = _snapshot(url)
    assert after["raw"][: len(before["raw"])] == before["raw"]
    _verify_and_replay(url, len(stored) + 1)

    downgrade(url, "0009")
    assert _options(url) == []
    assert _snapshot(url) == after  # nothing stored changes, only how new rows are laid out
    upgrade(url)
    assert _options(url) == ([] if lz4 else INLINE)
    _verify_and_replay(url, len(stored) + 1)
