"""``entries_submission_exists`` (revision 0011: each distinct ``submission_id`` probed once) inside
transactions, as ``ledger_writer``, under the body of revision 0011 and the restored one of 0010.

Allowed under both: entries naming a submission inserted earlier in the same transaction (a separate
statement, a statement of the same multi-statement simple query) or by the same statement (a
writable CTE). Refused under both (SQLSTATE 23503): entries naming a submission whose insert was
rolled back to a savepoint; an INSERT ... SELECT / COPY naming the missing id many times among
stored ones. Nothing of a refused statement stays.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from ledger.connect import libpq_url
from ledger.migration import downgrade, upgrade
from tests.helpers.database import query
from tests.helpers.replay import build_ledger

pytestmark = pytest.mark.integration

ENTRY = "global_seq, submission_id, stream_seq, kind, payload_canonical, payload_hash, prev_hash, entry_hash, engine_version"
NEW_ID = "0x" + "e" * 64


def _clone_submission(columns: list[str], new_id: str, key: str) -> sql.Composed:
    """``INSERT INTO submissions`` a copy of the first stored row under ``new_id`` and ``key``."""
    values = [
        sql.Literal(new_id)
        if c == "submission_id"
        else sql.Literal(key)
        if c == "idempotency_key"
        else sql.Identifier(c)
        for c in columns
    ]
    return sql.SQL(
        "INSERT INTO ledger_store.submissions ({}) SELECT {} FROM ledger_store.submissions LIMIT 1"
    ).format(sql.SQL(", ").join(map(sql.Identifier, columns)), sql.SQL(", ").join(values))


def _entries(ids: list[str], base: int) -> sql.Composed:
    rows = [
        sql.SQL("({}, {}, {}, 'replay.verified', '{{}}', {}, {}, {}, 'v')").format(
            sql.Literal(base + i),
            sql.Literal(sid),
            sql.Literal(100 + i),
            *[sql.Literal("0x" + d * 64) for d in "012"],
        )
        for i, sid in enumerate(ids)
    ]
    return sql.SQL("INSERT INTO ledger_store.entries ({}) VALUES {}").format(
        sql.SQL(ENTRY), sql.SQL(", ").join(rows)
    )


def _as_writer(url: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(libpq_url(url))
    conn.execute("SET ROLE ledger_writer")
    return conn


def _check(url: str) -> None:
    columns = [
        c
        for (c,) in query(
            url,
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'ledger_store' "
            "AND table_name = 'submissions' AND is_generated = 'NEVER' ORDER BY ordinal_position",
        )
    ]
    [(stored,)] = query(url, "SELECT min(submission_id) FROM ledger_store.submissions")
    [(top,)] = query(url, "SELECT max(global_seq) FROM ledger_store.entries")
    before = query(url, "SELECT count(*) FROM ledger_store.entries")
    clone = _clone_submission(columns, NEW_ID, "attack15-key")
    # a separate earlier statement of the transaction
    with _as_writer(url) as conn:
        conn.execute(clone)
        conn.execute(_entries([stored, NEW_ID, NEW_ID, stored], top + 1))
        assert conn.execute("SELECT count(*) FROM ledger_store.entries").fetchone() == (before[0][0] + 4,)
        conn.rollback()
    # the same multi-statement simple query
    with _as_writer(url) as conn:
        conn.execute(sql.SQL("{}; {}").format(clone, _entries([NEW_ID, stored], top + 1)), prepare=False)
        assert conn.execute("SELECT count(*) FROM ledger_store.entries").fetchone() == (before[0][0] + 2,)
        conn.rollback()
    # the same statement: a writable CTE inserts the submission the entries name
    with _as_writer(url) as conn:
        cte = sql.SQL("WITH s AS ({} RETURNING submission_id) INSERT INTO ledger_store.entries ({}) ").format(
            clone, sql.SQL(ENTRY)
        ) + sql.SQL(
            "SELECT {} + g, s.submission_id, 100 + g, 'replay.verified', '{{}}', {}, {}, {}, 'v' "
            "FROM s, generate_series(0, 2) g"
        ).format(sql.Literal(top + 1), *[sql.Literal("0x" + d * 64) for d in "012"])
        conn.execute(cte)
        assert conn.execute("SELECT count(*) FROM ledger_store.entries").fetchone() == (before[0][0] + 3,)
        conn.rollback()
    # rolled back to a savepoint: the submission is gone, the entries are refused
    for copy in (False, True):
        with (
            _as_writer(url) as conn,
            pytest.raises(psycopg.errors.ForeignKeyViolation, match=r"is not in ledger_store\.submissions"),
            conn.transaction(),
        ):
            try:
                with conn.transaction():
                    conn.execute(clone)
                    raise _Undo
            except _Undo:
                pass
            if copy:
                with conn.cursor().copy(f"COPY ledger_store.entries ({ENTRY}) FROM STDIN") as writer:
                    for i, sid in enumerate([stored] * 5 + [NEW_ID] + [stored] * 5):
                        writer.write_row(
                            (
                                top + 1 + i,
                                sid,
                                100 + i,
                                "replay.verified",
                                "{}",
                                "0x" + "0" * 64,
                                "0x" + "1" * 64,
                                "0x" + "2" * 64,
                                "v",
                            )
                        )
            else:
                conn.execute(_entries([stored] * 5 + [NEW_ID] * 3 + [stored], top + 1))
    assert query(url, "SELECT count(*) FROM ledger_store.entries") == before
    assert query(
        url, "SELECT count(*) FROM ledger_store.submissions WHERE submission_id = %(s)s", {"s": NEW_ID}
    ) == [(0,)]


class _Undo(Exception):
    """Rolls a savepoint back."""


def test_same_transaction_submissions_under_both_bodies(migrated_database_url: str) -> None:
    url = migrated_database_url
    build_ledger(url, limit=2)
    _check(url)  # revision 0011
    downgrade(url, "0010")
    _check(url)  # the body of 0009/0010
    upgrade(url)
    _check(url)
