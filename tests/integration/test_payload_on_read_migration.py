"""Revision 0009 on a ledger that holds data: ``payload`` parsed on read, a statement check for the FK.

A ledger written under revision 0008 (stored ``payload`` column, per-row foreign key) goes up to
0009, down and up again: every raw column and every row of the user views stays the same, ``ledger
verify`` and ``ledger replay`` pass, and an entry naming no stored submission is still refused.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from ledger.connect import libpq_url
from ledger.migration import current_revision, downgrade, upgrade
from ledger.store.ledger_store import LedgerStore
from tests.helpers.database import query, server_has_lz4
from tests.helpers.ledger_factories import audited, rejected
from tests.helpers.replay import build_ledger, corpus_drafts, ledger_json

pytestmark = pytest.mark.integration

RAW = (
    "SELECT global_seq, submission_id, stream_seq, kind, payload_canonical, payload_hash, prev_hash, "
    "entry_hash, engine_version, appended_at, step_index, step_id, step_type, evidence_ids, step_hash, "
    "canonical_step FROM ledger_store.entries ORDER BY global_seq"
)
VIEWS = {
    "entries": "global_seq",
    "audit_results": "global_seq",
    "verdicts": "global_seq",
    "rejections": "global_seq",
    "por_verifications": "global_seq",
    "submissions": "submission_id",
    "trace_steps": "global_seq",
}
FK = "fk_entries_submission_id_submissions"
UNKNOWN = "0x" + "cd" * 32


def _snapshot(url: str) -> dict[str, list[tuple[Any, ...]]]:
    out = {"raw": query(url, RAW)}
    for view, order in VIEWS.items():
        out[view] = query(url, f"SELECT * FROM ledger.{view} ORDER BY {order}")
    return out


def _columns(url: str, schema: str, table: str) -> list[tuple[str, str]]:
    return [
        (str(name), str(kind))
        for name, kind in query(
            url,
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = %(s)s AND table_name = %(t)s ORDER BY ordinal_position",
            {"s": schema, "t": table},
        )
    ]


def _has_fk(url: str) -> bool:
    return bool(query(url, "SELECT FROM pg_constraint WHERE conname = %(n)s", {"n": FK}))


def _has_trigger(url: str) -> bool:
    return bool(query(url, "SELECT FROM pg_trigger WHERE tgname = 'entries_submission_exists'"))


def _compression(url: str) -> str:
    [(method,)] = query(
        url,
        "SELECT attcompression::text FROM pg_attribute "
        "WHERE attrelid = 'ledger_store.entries'::regclass AND attname = 'payload_canonical'",
    )
    return str(method)


def _orphan_insert(url: str, *, copy: bool) -> None:
    """As ``ledger_writer``: one good entry (a follow-up on a stored chain) and one naming no submission."""
    [(seq, submission_id, stream_seq)] = query(
        url, "SELECT max(global_seq), min(submission_id), 99 FROM ledger_store.entries"
    )
    good = (seq + 1, submission_id, stream_seq, "replay.verified", "{}", "0x" + "00" * 32, "0x" + "11" * 32,
            "0x" + "22" * 32, "v")  # fmt: skip
    bad = (seq + 2, UNKNOWN, 1, *good[3:])
    columns = "global_seq, submission_id, stream_seq, kind, payload_canonical, payload_hash, prev_hash, entry_hash, engine_version"
    with psycopg.connect(libpq_url(url)) as conn:
        conn.execute("SET ROLE ledger_writer")
        with conn.cursor() as cur:
            if copy:
                with cur.copy(f"COPY ledger_store.entries ({columns}) FROM STDIN") as writer:
                    writer.write_row(good)
                    writer.write_row(bad)
            else:
                cur.executemany(
                    f"INSERT INTO ledger_store.entries ({columns}) VALUES ({', '.join(['%s'] * 9)})",
                    [good, bad],
                )


def test_down_and_up_on_a_ledger_written_before_keeps_every_row_and_view(migrated_database_url: str) -> None:
    url = migrated_database_url
    downgrade(url, "0008")  # written by the schema before revision 0009
    stored = build_ledger(url)
    with LedgerStore(url) as store:
        assert store.append(rejected("bad-1", b"{not json")).status == "created"
    before = _snapshot(url)
    assert len(before["audit_results"]) == len(stored) and len(before["rejections"]) == 1
    assert ("payload", "jsonb") in _columns(url, "ledger_store", "entries")
    assert _has_fk(url) and not _has_trigger(url)

    upgrade(url, "0009")
    assert current_revision(url) == "0009"
    assert "payload" not in {name for name, _ in _columns(url, "ledger_store", "entries")}
    assert not _has_fk(url) and _has_trigger(url)
    assert _compression(url) == ("l" if server_has_lz4(url) else "")
    assert _snapshot(url) == before  # same rows, same columns in the same order, payload jsonb
    assert _columns(url, "ledger", "entries")[4] == ("payload", "jsonb")
    for view in ("entries", "audit_results", "verdicts", "rejections", "por_verifications"):
        for role in ("ledger_reader", "ledger_writer"):
            assert query(url, "SELECT has_table_privilege(%(r)s, %(v)s, 'SELECT')", {"r": role, "v": f"ledger.{view}"}) == [(True,)]  # fmt: skip
            assert query(url, "SELECT has_table_privilege(%(r)s, %(v)s, 'INSERT')", {"r": role, "v": f"ledger.{view}"}) == [(False,)]  # fmt: skip
    code, report = ledger_json(url, "verify")
    assert code == 0, report["problems"]
    code, report = ledger_json(url, "replay", "--all")
    assert code == 0, report
    assert report["summary"]["identical"] == len(stored)

    downgrade(url, "0008")
    assert _has_fk(url) and not _has_trigger(url)
    assert _compression(url) == ""
    assert _snapshot(url) == before
    upgrade(url)
    later = corpus_drafts(copies=2, limit=1)[1]  # appended by the code of revision 0009
    with LedgerStore(url) as store:
        assert store.append(later).status == "created"
    after = _snapshot(url)
    assert after["raw"][: len(before["raw"])] == before["raw"]
    assert len(after["audit_results"]) == len(stored) + 1
    code, report = ledger_json(url, "verify")
    assert code == 0, report["problems"]


@pytest.mark.parametrize("copy", [False, True], ids=["insert", "copy"])
def test_an_entry_naming_no_submission_is_refused_with_its_statement(
    migrated_database_url: str, copy: bool
) -> None:
    url = migrated_database_url
    with LedgerStore(url) as store:
        store.append(audited("k1", steps=1))
    count = query(url, "SELECT count(*) FROM ledger_store.entries")
    with pytest.raises(psycopg.errors.ForeignKeyViolation, match=f"submission_id {UNKNOWN} is not in"):
        _orphan_insert(url, copy=copy)
    assert query(url, "SELECT count(*) FROM ledger_store.entries") == count  # the good row went too


def test_views_parse_the_stored_text(migrated_database_url: str) -> None:
    url = migrated_database_url
    with LedgerStore(url) as store:
        store.append(audited("k1", steps=2))
    rows = query(url, "SELECT payload = payload_canonical::jsonb, jsonb_typeof(payload) FROM ledger.entries")
    assert rows and set(rows) == {(True, "object")}
    [(ok,)] = query(url, "SELECT ok FROM ledger.audit_results", role="ledger_reader")
    assert ok is True
