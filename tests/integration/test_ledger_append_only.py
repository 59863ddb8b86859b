"""Append-only in depth (docs/architecture.md, The event store): privileges, then triggers.

The writer lacks UPDATE/DELETE/TRUNCATE (privilege errors); the owner and a superuser have the
privileges but the row and TRUNCATE triggers refuse; the reader can only SELECT. What a superuser
can still do (``session_replication_role = replica``) is shown too, with how verification sees it.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from ledger.connect import libpq_url
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import OffsetAdvance
from tests.helpers.database import chain_problems
from tests.helpers.ledger_factories import audited

pytestmark = pytest.mark.integration

LEDGER_TABLES = ("submissions", "entries", "idempotency_conflicts")
ALL_TABLES = (*LEDGER_TABLES, "consumer_offsets")
# Since revision 0008 a step body is columns of its trace.step entry; ledger_store.trace_steps is a view.
STEP_EDITS = (
    "UPDATE ledger_store.entries SET step_type = 'forged' WHERE kind = 'trace.step'",
    "UPDATE ledger_store.entries SET canonical_step = '{}' WHERE kind = 'trace.step'",
    "UPDATE ledger_store.trace_steps SET step_type = 'forged'",
    "DELETE FROM ledger_store.trace_steps",
)
UPDATES = {
    "submissions": "UPDATE ledger_store.submissions SET market_id = 'forged'",
    "entries": "UPDATE ledger_store.entries SET payload_canonical = '{}'",
    "idempotency_conflicts": "UPDATE ledger_store.idempotency_conflicts SET reason = 'header_differs'",
    "consumer_offsets": "UPDATE ledger_store.consumer_offsets SET next_offset = 0",
}


@pytest.fixture
def populated(migrated_database_url: str) -> str:
    """A migrated database with a submission, a conflict and an offset in every table."""
    with LedgerStore(migrated_database_url) as store:
        store.append_batch([audited("k1")], [OffsetAdvance("g", "t", 0, 0, 5)])
        store.append_batch([audited("k1", variant=1)])
    return migrated_database_url


@pytest.fixture
def conn(populated: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """An autocommit superuser connection to the populated database."""
    with psycopg.connect(libpq_url(populated), autocommit=True) as connection:
        yield connection


def _attempt(
    conn: psycopg.Connection[tuple[object, ...]], role: str | None, statement: str
) -> psycopg.Error | None:
    """Run ``statement`` as ``role`` in a transaction that is always rolled back; return the error."""
    try:
        with conn.transaction(force_rollback=True):
            if role:
                conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
            conn.execute(statement)
    except psycopg.Error as exc:
        return exc
    return None


@pytest.mark.parametrize("table", ALL_TABLES)
def test_writer_cannot_update_delete_or_truncate(
    conn: psycopg.Connection[tuple[object, ...]], table: str
) -> None:
    for statement in (f"DELETE FROM ledger_store.{table}", f"TRUNCATE ledger_store.{table} CASCADE"):
        assert isinstance(_attempt(conn, "ledger_writer", statement), psycopg.errors.InsufficientPrivilege)
    if table != "consumer_offsets":  # its next_offset is the one column the writer may move (forward)
        assert isinstance(
            _attempt(conn, "ledger_writer", UPDATES[table]), psycopg.errors.InsufficientPrivilege
        )


def test_step_bodies_cannot_be_edited_or_removed_by_anyone(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    """Through the entry columns or the ``trace_steps`` view: no privilege (writer, reader), the
    ``entries`` trigger (owner, superuser); nobody may insert through the view."""
    for statement in STEP_EDITS:
        for role in ("ledger_writer", "ledger_reader"):
            assert isinstance(_attempt(conn, role, statement), psycopg.errors.InsufficientPrivilege), (
                role,
                statement,
            )
        for role in ("ledger_owner", None):
            error = _attempt(conn, role, statement)
            assert isinstance(error, psycopg.errors.RaiseException), (role, statement, error)
            assert "entries is append-only" in str(error)
    insert = (
        "INSERT INTO ledger_store.trace_steps (submission_id, step_index, global_seq, step_id, step_type, "
        "evidence_ids, step_hash, canonical_step) SELECT submission_id, 99, global_seq + 1000, step_id, "
        "step_type, evidence_ids, step_hash, canonical_step FROM ledger_store.trace_steps LIMIT 1"
    )
    for role in ("ledger_writer", "ledger_reader"):
        assert isinstance(_attempt(conn, role, insert), psycopg.errors.InsufficientPrivilege), role
    assert isinstance(_attempt(conn, None, insert), psycopg.errors.NotNullViolation)


def test_step_columns_are_set_exactly_on_trace_step_entries(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    """``ck_entries_step_columns`` holds even for a superuser who bypasses the triggers."""
    counts = conn.execute(
        "SELECT kind = 'trace.step', num_nulls(step_index, step_id, step_type, evidence_ids, step_hash, "
        "canonical_step), count(*) FROM ledger_store.entries GROUP BY 1, 2 ORDER BY 1"
    ).fetchall()
    assert [(is_step, nulls) for is_step, nulls, _ in counts] == [(False, 6), (True, 0)]
    for statement in (
        "UPDATE ledger_store.entries SET step_hash = NULL WHERE kind = 'trace.step'",
        "UPDATE ledger_store.entries SET step_id = 's' WHERE kind = 'verdict.issued'",
    ):
        with pytest.raises(psycopg.errors.CheckViolation), conn.transaction():
            conn.execute("SET LOCAL session_replication_role = replica")
            conn.execute(statement)


def test_writer_moves_offsets_forward_only(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    backwards = _attempt(conn, "ledger_writer", UPDATES["consumer_offsets"])
    assert isinstance(backwards, psycopg.errors.RaiseException) and "forward-only" in str(backwards)
    assert _attempt(conn, "ledger_writer", "UPDATE ledger_store.consumer_offsets SET next_offset = 9") is None
    rekey = _attempt(
        conn, "ledger_writer", "UPDATE ledger_store.consumer_offsets SET next_offset = 9, topic = 'x'"
    )
    assert isinstance(rekey, psycopg.errors.InsufficientPrivilege)


@pytest.mark.parametrize("role", ["ledger_owner", None], ids=["owner", "superuser"])
@pytest.mark.parametrize("table", ALL_TABLES)
def test_triggers_refuse_even_the_owner_and_a_superuser(
    conn: psycopg.Connection[tuple[object, ...]], table: str, role: str | None
) -> None:
    for statement in (
        UPDATES[table],
        f"DELETE FROM ledger_store.{table}",
        f"TRUNCATE ledger_store.{table} CASCADE",
    ):
        error = _attempt(conn, role, statement)
        assert isinstance(error, psycopg.errors.RaiseException), (statement, error)
        assert "append-only" in str(error) or "forward-only" in str(error)


def test_reader_can_select_views_and_tables_but_not_write(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    for view in ("submissions", "trace_steps", "audit_results", "verdicts", "rejections", "entries"):
        assert _attempt(conn, "ledger_reader", f"SELECT * FROM ledger.{view}") is None
    assert _attempt(conn, "ledger_reader", "SELECT * FROM ledger_store.entries") is None
    insert = "INSERT INTO ledger_store.consumer_offsets VALUES ('g', 't', 9, 0)"
    assert isinstance(_attempt(conn, "ledger_reader", insert), psycopg.errors.InsufficientPrivilege)
    assert isinstance(
        _attempt(conn, "ledger_reader", UPDATES["entries"]), psycopg.errors.InsufficientPrivilege
    )


def test_superuser_bypass_is_caught_by_recomputing_hashes(
    conn: psycopg.Connection[tuple[object, ...]], populated: str
) -> None:
    """The documented limit: replica mode skips triggers; the hash chain exposes the edit."""
    assert chain_problems(populated) == []
    with conn.transaction():
        conn.execute("SET LOCAL session_replication_role = replica")
        conn.execute(
            "UPDATE ledger_store.entries SET payload_canonical = replace(payload_canonical, 'YES', 'NO') "
            "WHERE kind = 'verdict.issued'"
        )
    problems = chain_problems(populated)
    assert problems and "payload_hash does not match" in problems[0]
