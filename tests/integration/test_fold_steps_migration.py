"""Revision 0008 on a ledger that holds data: step rows fold into their ``trace.step`` entries and back.

Down to 0007 gives the layout the code before 0008 wrote (a ``trace_steps`` table beside the
entries); up again must keep every entry, hash, tile and step byte for byte, and ``ledger verify``
and ``ledger replay`` must pass on the result.
"""

from __future__ import annotations

import psycopg
import pytest
import sqlalchemy.exc

from ledger.connect import libpq_url
from ledger.migration import current_revision, downgrade, head_revision, upgrade
from ledger.store.ledger_store import LedgerStore
from tests.helpers.database import query, tamper
from tests.helpers.ledger_factories import audited
from tests.helpers.replay import build_ledger, corpus_drafts, ledger_json

pytestmark = pytest.mark.integration

ENTRIES = (
    "SELECT global_seq, submission_id, stream_seq, kind, payload_canonical, payload_hash, prev_hash, "
    "entry_hash, engine_version, appended_at FROM ledger_store.entries ORDER BY global_seq"
)
STEPS = (
    "SELECT submission_id, step_index, global_seq, step_id, step_type, evidence_ids, step_hash, canonical_step "
    "FROM ledger_store.trace_steps ORDER BY submission_id, step_index"
)
TILES = "SELECT level, idx, width, hashes FROM ledger_store.merkle_tiles ORDER BY level, idx"
USER_VIEW = "SELECT * FROM ledger.trace_steps ORDER BY global_seq"
STEP_COUNTS = "SELECT submission_id, step_count FROM ledger.submissions ORDER BY submission_id"
STEP_COLUMNS = {"step_index", "step_id", "step_type", "evidence_ids", "step_hash", "canonical_step"}


def _snapshot(url: str) -> dict[str, list[tuple[object, ...]]]:
    return {
        name: [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in query(url, sql)]
        for name, sql in (
            ("entries", ENTRIES),
            ("steps", STEPS),
            ("tiles", TILES),
            ("view", USER_VIEW),
            ("counts", STEP_COUNTS),
        )
    }


def _relkind(url: str, name: str) -> str:
    [[kind]] = query(url, "SELECT relkind::text FROM pg_class WHERE oid = %(n)s::regclass", {"n": name})
    return str(kind)


def _entry_columns(url: str) -> set[str]:
    rows = query(
        url,
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = 'ledger_store' AND table_name = 'entries'",
    )
    return {str(row[0]) for row in rows}


def _grants(url: str, relation: str) -> dict[str, set[str]]:
    """Privileges of the writer and reader roles on ``relation`` (schema-qualified)."""
    out: dict[str, set[str]] = {}
    for role in ("ledger_writer", "ledger_reader"):
        out[role] = {
            privilege
            for privilege in ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")
            if query(
                url,
                "SELECT has_table_privilege(%(r)s, %(t)s, %(p)s)",
                {"r": role, "t": relation, "p": privilege},
            )
            == [(True,)]
        }
    return out


def _append_only_trigger_enabled(url: str) -> bool:
    rows = query(
        url,
        "SELECT tgenabled::text FROM pg_trigger "
        "WHERE tgrelid = 'ledger_store.entries'::regclass AND tgname = 'entries_append_only'",
    )
    return rows == [("O",)]


def test_down_and_up_on_a_ledger_with_data_keeps_every_step_and_hash(migrated_database_url: str) -> None:
    url = migrated_database_url
    stored = build_ledger(url)
    before = _snapshot(url)
    assert len(before["steps"]) == sum(item.steps for item in stored) > 100
    assert _relkind(url, "ledger_store.trace_steps") == "v"
    assert _entry_columns(url) >= STEP_COLUMNS

    downgrade(url, "0007")  # the layout the code before revision 0008 wrote
    assert _relkind(url, "ledger_store.trace_steps") == "r"
    assert not STEP_COLUMNS & _entry_columns(url)
    assert _snapshot(url) == before
    assert _grants(url, "ledger_store.trace_steps") == {
        "ledger_writer": {"SELECT", "INSERT"},
        "ledger_reader": {"SELECT"},
    }
    with (
        psycopg.connect(libpq_url(url)) as conn,
        pytest.raises(psycopg.errors.RaiseException, match="append-only"),
    ):
        conn.execute("DELETE FROM ledger_store.trace_steps")

    upgrade(url)
    assert current_revision(url) == head_revision()
    assert _snapshot(url) == before
    assert _append_only_trigger_enabled(url)
    for relation in ("ledger_store.trace_steps", "ledger.trace_steps", "ledger.submissions"):
        assert _grants(url, relation) == {"ledger_writer": {"SELECT"}, "ledger_reader": {"SELECT"}}, relation
    code, report = ledger_json(url, "verify")
    assert code == 0, report["problems"]
    code, report = ledger_json(url, "replay", "--all")
    assert code == 0, report
    assert report["summary"]["identical"] == len(stored)
    assert report["summary"]["steps"] == len(before["steps"])

    later = corpus_drafts(copies=2, limit=1)[1]  # a new bundle, appended by the code of revision 0008
    with LedgerStore(url) as store:
        assert store.append(later).status == "created"
    downgrade(url, "0007")
    upgrade(url)
    after = _snapshot(url)
    assert after["entries"][: len(before["entries"])] == before["entries"]
    assert len(after["steps"]) == len(before["steps"]) + len(later.steps) > len(before["steps"])
    code, report = ledger_json(url, "verify")
    assert code == 0, report["problems"]


def test_verify_names_a_repeated_step_index_now_that_no_key_refuses_it(migrated_database_url: str) -> None:
    url = migrated_database_url
    [stored] = build_ledger(url, limit=1)
    assert stored.steps >= 2
    tamper(
        url,
        "UPDATE ledger_store.entries SET step_index = 0 WHERE submission_id = %(s)s AND step_index = 1",
        {"s": stored.submission_id},
    )
    code, report = ledger_json(url, "verify")
    assert code != 0
    assert {"step_index_gap", "step_entry_mismatch"} <= {p["code"] for p in report["problems"]}


def test_the_upgrade_refuses_step_rows_that_do_not_pair_with_entries(migrated_database_url: str) -> None:
    url = migrated_database_url
    with LedgerStore(url) as store:
        store.append(audited("k1", steps=2))
        store.append(audited("k2", steps=2))
    downgrade(url, "0007")
    tamper(url, "DELETE FROM ledger_store.trace_steps WHERE step_index = 1")
    with pytest.raises(
        sqlalchemy.exc.DBAPIError,
        match=r"0 trace_steps rows without their trace\.step entry, 2 trace\.step entries without a step row",
    ):
        upgrade(url)
    assert current_revision(url) == "0007"
    assert _relkind(url, "ledger_store.trace_steps") == "r"
    assert _append_only_trigger_enabled(url)
