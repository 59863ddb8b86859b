"""Reading and tampering with a test database directly, and the one independent chain check.

Every function opens its own plain psycopg connection from a SQLAlchemy or libpq URL, so what it
sees is committed state, never the store's own pool or code path.
"""

from __future__ import annotations

import hashlib
from typing import Any

import psycopg
from psycopg import sql

from ledger.connect import libpq_url
from ledger.store.hashing import GENESIS_PREV_HASH, entry_hash_reference

__all__ = ["chain_problems", "query", "rewrite_step", "row_counts", "tamper"]


def query(
    database_url: str, statement: str, params: Any = None, *, role: str | None = None
) -> list[tuple[Any, ...]]:
    """Run one statement on a fresh connection (``SET ROLE role`` first when given); its rows."""
    with psycopg.connect(libpq_url(database_url)) as conn:
        if role is not None:
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
        return conn.execute(statement, params).fetchall()


def server_has_lz4(database_url: str) -> bool:
    """Whether the server behind ``database_url`` was built with lz4 (TOAST compression)."""
    with psycopg.connect(libpq_url(database_url)) as conn:
        try:
            conn.execute("SET default_toast_compression = 'lz4'")
        except psycopg.errors.InvalidParameterValue:
            return False
    return True


def tamper(database_url: str, statement: str, params: dict[str, Any] | None = None) -> int:
    """Run ``statement`` as the superuser with triggers bypassed; returns the rows it changed."""
    with psycopg.connect(libpq_url(database_url)) as conn:
        conn.execute("SET session_replication_role = replica")
        changed = conn.execute(statement, params or {}).rowcount
    assert changed > 0, "the tampering statement changed nothing"
    return changed


def row_counts(database_url: str) -> dict[str, int]:
    """Row count of every ledger_store table (to prove that nothing was written)."""
    tables = ("submissions", "entries", "trace_steps", "consumer_offsets", "idempotency_conflicts")
    return {
        table: int(query(database_url, f"SELECT count(*) FROM ledger_store.{table}")[0][0])
        for table in tables
    }


def chain_problems(database_url: str) -> list[str]:
    """Recompute every payload hash and chain link from the stored canonical text; list what fails.

    Independent of the store's code: its own SQL, its own walk. Also checks that ``global_seq`` is
    the gapless ``1..count`` readers page by (reported last).
    """
    rows = query(
        database_url,
        "SELECT global_seq, submission_id, stream_seq, kind, payload_canonical, payload_hash, prev_hash, "
        "entry_hash, engine_version FROM ledger_store.entries ORDER BY submission_id, stream_seq",
    )
    problems: list[str] = []
    previous: dict[str, tuple[int, str]] = {}
    for seq, stream, stream_seq, kind, text, payload_hash, prev_hash, entry_hash, version in rows:
        if "0x" + hashlib.sha256(text.encode()).hexdigest() != payload_hash:
            problems.append(f"seq {seq}: payload_hash does not match payload_canonical")
        last_seq, last_hash = previous.get(stream, (0, GENESIS_PREV_HASH))
        if stream_seq != last_seq + 1 or prev_hash != last_hash:
            problems.append(f"seq {seq}: chain broken at {stream}#{stream_seq}")
        if entry_hash_reference(stream, stream_seq, kind, payload_hash, prev_hash, version) != entry_hash:
            problems.append(f"seq {seq}: entry_hash does not recompute")
        previous[stream] = (stream_seq, entry_hash)
    if sorted(row[0] for row in rows) != list(range(1, len(rows) + 1)):
        problems.append(f"global_seq is not gapless 1..{len(rows)}")
    return problems


def rewrite_step(
    database_url: str, submission_id: str, step_index: int, text: str, *, step_hash: str | None = None
) -> None:
    """Tamper with a stored step: its ``canonical_step`` becomes ``text`` (and its ``step_hash``
    ``step_hash`` when given: a forgery consistent inside the row)."""
    assignments = "canonical_step = %(t)s" + (", step_hash = %(h)s" if step_hash is not None else "")
    tamper(
        database_url,
        f"UPDATE ledger_store.trace_steps SET {assignments} WHERE submission_id = %(s)s AND step_index = %(i)s",
        {"t": text, "h": step_hash, "s": submission_id, "i": step_index},
    )
