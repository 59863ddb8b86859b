"""Revision 0012 on a ledger that holds data: ``submissions.input_hashes`` parsed on read.

Run on the embedded PostgreSQL and on the test server named by the environment. A ledger written
under revision 0011 (binary COPY of the entries is this head's, so it is also written by the new
append path after the upgrade) goes up to 0012, down and up again: every raw column but the
dropped one and every row of ``ledger.submissions`` stays the same (``input_hashes`` the same JSONB,
at the same position), the view keeps its owner and grants, a reader can query it, and ``ledger
verify`` passes on the rows written before and after.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from ledger.connect import libpq_url
from ledger.migration import current_revision, downgrade, upgrade
from ledger.store.ledger_store import LedgerStore
from tests.helpers.database import query
from tests.helpers.replay import build_ledger, corpus_drafts, ledger_json
from tests.helpers.services import PgServer, ServiceStack, postgres_kinds

pytestmark = pytest.mark.integration

RAW = (
    "SELECT submission_id, idempotency_key, market_id, bundle_id, status, input_hashes_canonical, "
    "engine_version, received_at, kafka_topic, kafka_partition, kafka_offset, host, appended_at "
    "FROM ledger_store.submissions ORDER BY submission_id"
)
VIEW = "SELECT * FROM ledger.submissions ORDER BY first_seq"
COLUMNS = (
    "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
    "WHERE attrelid = 'ledger.submissions'::regclass AND attnum > 0 ORDER BY attnum"
)
ACL = "SELECT relowner::regrole::text, relacl::text FROM pg_class WHERE oid = 'ledger.submissions'::regclass"
STORED = (
    "SELECT count(*) FROM pg_attribute WHERE attrelid = 'ledger_store.submissions'::regclass "
    "AND attname = 'input_hashes' AND NOT attisdropped"
)


@pytest.fixture(scope="session", params=postgres_kinds())
def pg_server(request: pytest.FixtureRequest, service_stack: ServiceStack) -> PgServer:
    """Overrides the plugin's pg_server: the embedded server (PostgreSQL 18) and the environment's."""
    return service_stack.postgres(request.param)


def _reader_rows(url: str, sql: str) -> list[Any]:
    """``sql``'s rows as ``ledger_reader``."""
    with psycopg.connect(libpq_url(url)) as conn:
        conn.execute("SET ROLE ledger_reader")
        return conn.execute(sql).fetchall()


def test_up_down_up_on_a_ledger_written_before(migrated_database_url: str) -> None:
    url = migrated_database_url
    downgrade(url, "0011")  # written by the schema before revision 0012
    stored = build_ledger(url, limit=4)
    raw, view, columns, acl = query(url, RAW), query(url, VIEW), query(url, COLUMNS), query(url, ACL)
    assert query(url, STORED) == [(1,)]
    assert all(isinstance(row[5], dict) and row[5] for row in view)

    upgrade(url)
    assert current_revision(url) == "0012"
    assert query(url, STORED) == [(0,)]
    assert (query(url, RAW), query(url, VIEW), query(url, COLUMNS), query(url, ACL)) == (
        raw,
        view,
        columns,
        acl,
    )
    assert _reader_rows(url, VIEW) == view
    code, report = ledger_json(url, "verify")
    assert code == 0, report["problems"]
    with LedgerStore(url) as store:  # the append path without the stored column
        assert store.append(corpus_drafts(copies=2, limit=1)[1]).status == "created"
    code, report = ledger_json(url, "verify")
    assert code == 0, report["problems"]
    after_raw, after_view = query(url, RAW), query(url, VIEW)
    assert len(after_view) == len(stored) + 1 and after_view[: len(view)] == view

    downgrade(url, "0011")
    assert query(url, STORED) == [(1,)]
    assert (query(url, RAW), query(url, VIEW), query(url, COLUMNS), query(url, ACL)) == (
        after_raw,
        after_view,
        columns,
        acl,
    )
    upgrade(url)
    assert (query(url, RAW), query(url, VIEW), query(url, COLUMNS), query(url, ACL)) == (
        after_raw,
        after_view,
        columns,
        acl,
    )
    code, report = ledger_json(url, "verify")
    assert code == 0, report["problems"]
