"""The append's merged opening statement (settings, role and lock in one simple query) on connections
that prepare every statement.

``LedgerStore`` accepts an engine made by its caller; psycopg's ``prepare_threshold=0`` (prepare
each statement on first use) is an ordinary setting for such an engine. The old ``begin_append``
sent one statement per ``execute`` and worked there; a multi-statement string cannot be prepared
(``cannot insert multiple commands into a prepared statement``), so the merged query must never be.
Also: an empty ledger, a batch whose keys are all stored, a NUL in a timeout (refused, nothing
written), under the writer role.
"""

from __future__ import annotations

import pytest

from ledger.connect import create_ledger_engine
from ledger.errors import LedgerError
from ledger.store.ledger_store import LedgerStore
from tests.helpers.database import query
from tests.helpers.ledger_factories import audited

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("threshold", [0, 1, None])
def test_append_on_an_engine_that_prepares_every_statement(
    migrated_database_url: str, threshold: int | None
) -> None:
    url = migrated_database_url
    engine = create_ledger_engine(url, connect_args={"prepare_threshold": threshold}, pool_size=1)
    try:
        with LedgerStore(engine, role="ledger_writer", lock_timeout="7s") as store:
            first = store.append_batch([audited("k1", steps=1), audited("k2", steps=2)])
            assert [r.status for r in first] == ["created", "created"]
            for _ in range(3):  # the same connection again: prepared by then, if ever
                again = store.append_batch([audited("k1", steps=1), audited("k2", steps=2)])
                assert [r.status for r in again] == ["existing", "existing"]
                assert [r.entries for r in again] == [r.entries for r in first]
            third = store.append(audited("k3", steps=1))
            assert third.status == "created"
    finally:
        engine.dispose()
    seqs = [seq for (seq,) in query(url, "SELECT global_seq FROM ledger_store.entries ORDER BY 1")]
    assert seqs == list(range(1, len(seqs) + 1))
    assert third.entries[0].global_seq == seqs[-len(third.entries)]


def test_a_nul_in_a_timeout_is_refused_and_nothing_written(migrated_database_url: str) -> None:
    url = migrated_database_url
    with LedgerStore(url, lock_timeout="1s\x00; garbage") as store, pytest.raises(LedgerError):
        store.append(audited("k1", steps=1))
    assert query(url, "SELECT count(*) FROM ledger_store.entries") == [(0,)]
