"""Revision 0011 on a ledger that holds data: ``entries_submission_exists`` probes each submission once.

Run on the embedded PostgreSQL and on the test server named by the environment.

A ledger written under revision 0010 goes up to 0011, down and up again: every stored row stays the
same, ``ledger verify`` passes, the function keeps its owner and privileges, downgrade restores the
body of revision 0010 exactly, and under both bodies the same statements are refused: any INSERT or
COPY (as ``ledger_writer``) with an entry whose ``submission_id`` is not stored, including ids that
differ from a stored one only by case, a trailing space, a non-ASCII look-alike digit or length,
and whatever else is in the statement; statements whose entries all name stored submissions (many
rows per submission) pass.
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
    "SELECT global_seq, submission_id, stream_seq, kind, payload_canonical, payload_hash, prev_hash, "
    "entry_hash, engine_version, appended_at, step_index, step_id, step_type, evidence_ids, step_hash, "
    "canonical_step FROM ledger_store.entries ORDER BY global_seq"
)
COLUMNS = "global_seq, submission_id, stream_seq, kind, payload_canonical, payload_hash, prev_hash, entry_hash, engine_version"
FUNCTION = "ledger_store.entries_submission_exists()"


@pytest.fixture(scope="session", params=postgres_kinds())
def pg_server(request: pytest.FixtureRequest, service_stack: ServiceStack) -> PgServer:
    """Overrides the plugin's pg_server: the embedded server (PostgreSQL 18) and the environment's."""
    return service_stack.postgres(request.param)


def _definition(url: str) -> tuple[Any, ...]:
    [row] = query(
        url,
        "SELECT prosrc, proowner::regrole::text, proacl::text, prosecdef FROM pg_proc "
        "WHERE oid = %(f)s::regprocedure",
        {"f": FUNCTION},
    )
    return row


def _lookalikes(stored: str) -> list[str]:
    """Values a stored ``submission_id`` must not be confused with."""
    body = stored[2:]
    return [
        "0x" + body.upper(),  # wrong case
        stored + " ",  # trailing space
        stored[:-1],  # 65 characters
        stored + "0",  # 67 characters
        stored[:-1] + "\u0661",  # ARABIC-INDIC DIGIT ONE: a non-ASCII digit
        stored[:-1] + "\u00e9",  # multibyte
        "0X" + body,  # prefix case
    ]


def _insert(url: str, rows: list[tuple[Any, ...]], *, copy: bool, keep: bool = True) -> int:
    """As ``ledger_writer``, in one statement; the entries then seen. ``keep=False``: rolled back."""
    with psycopg.connect(libpq_url(url)) as conn:
        conn.execute("SET ROLE ledger_writer")
        with conn.cursor() as cur:
            if copy:
                with cur.copy(f"COPY ledger_store.entries ({COLUMNS}) FROM STDIN") as writer:
                    for row in rows:
                        writer.write_row(row)
            else:
                cur.execute(
                    f"INSERT INTO ledger_store.entries ({COLUMNS}) VALUES "
                    + ", ".join([f"({', '.join(['%s'] * 9)})"] * len(rows)),
                    [value for row in rows for value in row],
                )
            cur.execute("SELECT count(*) FROM ledger_store.entries")
            seen = cur.fetchone()
        if not keep:
            conn.rollback()
    assert seen is not None
    return int(seen[0])


def _rows(url: str, submission_ids: list[str]) -> list[tuple[Any, ...]]:
    """One follow-up entry per id, after the stored ones (stream_seq 100 + i: no clash)."""
    [(seq,)] = query(url, "SELECT max(global_seq) FROM ledger_store.entries")
    hashes = ("0x" + "00" * 32, "0x" + "11" * 32, "0x" + "22" * 32)
    return [
        (seq + 1 + i, sid, 100 + i, "replay.verified", "{}", *hashes, "v")
        for i, sid in enumerate(submission_ids)
    ]


def _check_refusals(url: str) -> None:
    stored = [sid for (sid,) in query(url, "SELECT submission_id FROM ledger_store.submissions ORDER BY 1")]
    assert len(stored) >= 2
    count = query(url, "SELECT count(*) FROM ledger_store.entries")
    for copy in (False, True):
        for ghost in _lookalikes(stored[0]):
            # the unknown id first, last, or among many rows of stored submissions
            for ids in ([ghost, stored[0]], [stored[0], stored[1], stored[0], ghost], [ghost]):
                with pytest.raises(
                    psycopg.errors.ForeignKeyViolation, match=r"is not in ledger_store\.submissions"
                ):
                    _insert(url, _rows(url, ids), copy=copy)
        assert query(url, "SELECT count(*) FROM ledger_store.entries") == count  # nothing of them stayed
    # entries all naming stored submissions, several rows per submission, pass (then rolled back:
    # their hashes are not a chain's, and verify runs afterwards)
    for copy in (False, True):
        rows = _rows(url, [stored[0], stored[1], stored[0], stored[1]])
        assert _insert(url, rows, copy=copy, keep=False) == count[0][0] + 4
    assert query(url, "SELECT count(*) FROM ledger_store.entries") == count


def test_up_down_up_on_a_ledger_written_before(migrated_database_url: str) -> None:
    url = migrated_database_url
    downgrade(url, "0010")  # written by the schema before revision 0011
    body_0010 = _definition(url)
    stored = build_ledger(url, limit=4)
    before = query(url, RAW)

    upgrade(url, "0011")
    assert current_revision(url) == "0011"
    body_0011 = _definition(url)
    assert body_0011[0] != body_0010[0] and "DISTINCT" in body_0011[0]
    assert body_0011[1:] == body_0010[1:] == ("ledger_owner", body_0010[2], False)
    assert "=X/ledger_owner" in str(body_0010[2]) and "ledger_writer" not in str(body_0010[2])
    assert query(url, RAW) == before
    code, report = ledger_json(url, "verify")
    assert code == 0, report["problems"]
    with LedgerStore(url) as store:  # the append path under the new body
        assert store.append(corpus_drafts(copies=2, limit=1)[1]).status == "created"
    code, report = ledger_json(url, "verify")
    assert code == 0, report["problems"]
    assert len(query(url, "SELECT FROM ledger_store.submissions")) == len(stored) + 1

    downgrade(url, "0010")
    assert _definition(url) == body_0010  # the body of revision 0009/0010, exactly
    after = query(url, RAW)
    _check_refusals(url)  # the old body refuses ...
    upgrade(url)
    assert _definition(url) == body_0011
    assert query(url, RAW)[: len(after)] == after
    _check_refusals(url)  # ... exactly what the new one refuses
    code, report = ledger_json(url, "verify")
    assert code == 0, report["problems"]
