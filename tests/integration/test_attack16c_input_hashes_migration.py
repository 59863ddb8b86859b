"""Attack on revision 0012 (``submissions.input_hashes`` parsed on read): an operator's view on
the dropped column stops the upgrade with nothing changed; the upgrade waits for an append in
flight and a store whose connection prepared its statements before keeps appending and reading
after it (no "cached plan must not change result type"); the reader role reads the view after;
down/up with data; ``ledger verify`` and ``ledger replay --all`` on
a ledger written before 0012 and appended after.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import psycopg
import pytest

from ledger.connect import create_ledger_engine, libpq_url
from ledger.errors import InvalidDraftError
from ledger.migration import current_revision, downgrade, upgrade
from ledger.store.ledger_store import LedgerStore
from tests.helpers.database import query
from tests.helpers.replay import build_ledger, corpus_drafts, ledger_json

pytestmark = pytest.mark.integration

VIEW = "SELECT * FROM ledger.submissions ORDER BY first_seq"
STORED = (
    "SELECT count(*) FROM pg_attribute WHERE attrelid = 'ledger_store.submissions'::regclass "
    "AND attname = 'input_hashes' AND NOT attisdropped"
)


def _as_reader(url: str, sql: str) -> list[Any]:
    with psycopg.connect(libpq_url(url)) as conn:
        conn.execute("SET ROLE ledger_reader")
        return conn.execute(sql).fetchall()


def test_a_view_on_the_dropped_column_stops_the_upgrade_with_nothing_changed(
    migrated_database_url: str,
) -> None:
    url = migrated_database_url
    downgrade(url, "0011")
    build_ledger(url, limit=2)
    before = query(url, VIEW)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(
            "CREATE VIEW public.attack16c_hashes AS SELECT input_hashes FROM ledger_store.submissions"
        )
    with pytest.raises(Exception, match="depend"):
        upgrade(url)
    assert current_revision(url) == "0011"
    assert query(url, STORED) == [(1,)]
    assert query(url, VIEW) == before
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("DROP VIEW public.attack16c_hashes")
    upgrade(url)
    assert current_revision(url) == "0012" and query(url, VIEW) == before


def test_upgrade_under_a_concurrent_append_and_a_store_that_prepared_before(
    migrated_database_url: str,
) -> None:
    url = migrated_database_url
    downgrade(url, "0011")
    stored = build_ledger(url, limit=3)
    engine = create_ledger_engine(url, pool_size=1)
    drafts = corpus_drafts(copies=7, limit=3)[3:]  # real audits (verify recomputes their hashes)
    try:
        with LedgerStore(engine, role="ledger_writer") as store:
            for draft in drafts[:8]:  # past psycopg's prepare threshold on the pooled connection
                assert store.append(draft).status == "created"
                assert store.get_submission(draft.idempotency_key) is not None
            # an append in flight (lock held, rows written, not committed) when the upgrade starts
            with psycopg.connect(libpq_url(url)) as holder:
                holder.execute("LOCK TABLE ledger_store.append_lock IN EXCLUSIVE MODE")
                holder.execute("SELECT count(*) FROM ledger_store.submissions")  # ACCESS SHARE held
                errors: list[BaseException] = []
                migrate = threading.Thread(target=lambda: _guarded(errors, upgrade, url))
                migrate.start()
                migrate.join(timeout=3)
                assert migrate.is_alive()  # waits for the transaction in flight
                assert current_revision(url) == "0011"
                holder.commit()
            migrate.join(timeout=120)
            assert not migrate.is_alive() and errors == []
            assert current_revision(url) == "0012" and query(url, STORED) == [(0,)]
            for draft in drafts[8:]:  # the same pooled connection, its statements prepared under 0011
                assert store.append(draft).status == "created"
                record = store.get_submission(draft.idempotency_key)
                assert record is not None
            assert [r.status for r in store.append_batch(drafts)] == ["existing"] * len(drafts)
    finally:
        engine.dispose()
    view = query(url, VIEW)
    assert len(view) == len(stored) + len(drafts)
    assert _as_reader(url, VIEW) == view
    assert all(isinstance(row[5], dict) for row in view)
    for command in (("verify",), ("replay", "--all")):
        code, report = ledger_json(url, *command)
        assert code == 0, (command, report.get("problems"))
    downgrade(url, "0011")
    assert query(url, VIEW) == view
    upgrade(url)
    assert query(url, VIEW) == view
    with LedgerStore(url) as store:
        assert store.append(corpus_drafts(copies=8, limit=3)[21]).status == "created"
    for command in (("verify",), ("replay", "--all")):
        code, report = ledger_json(url, *command)
        assert code == 0, (command, report.get("problems"))


def _guarded(errors: list[BaseException], function: Any, *args: Any) -> None:
    try:
        function(*args)
    except BaseException as exc:  # reported by the test thread
        errors.append(exc)


@pytest.mark.parametrize("revision", ["0011", "0012"])
def test_an_input_hash_jsonb_cannot_hold_is_refused_before_and_after(
    migrated_database_url: str, revision: str
) -> None:
    url = migrated_database_url
    downgrade(url, revision)
    draft = corpus_drafts(limit=1)[0]
    with LedgerStore(url, role="ledger_writer") as store:
        # refused when the draft is made (SubmissionDraft checks its header values) and by prepare
        # (before these fixes, 0011's generated column refused it in the server as LedgerDataError,
        # and 0012 stored it: every read of the view's input_hashes then failed)
        with pytest.raises(InvalidDraftError) as caught:
            store.append(dataclasses.replace(draft, input_hashes={**draft.input_hashes, "x": "a\x00b"}))
        assert caught.value.field_path == "input_hashes"
        kept = dataclasses.replace(draft, input_hashes={**draft.input_hashes, "x": "\\u0000"})
        assert store.append(kept).status == "created"
    rows = _as_reader(url, "SELECT input_hashes FROM ledger.submissions")
    assert [row[0]["x"] for row in rows] == ["\\u0000"]
    upgrade(url)
    assert [row[0]["x"] for row in _as_reader(url, "SELECT input_hashes FROM ledger.submissions")] == [
        "\\u0000"
    ]
