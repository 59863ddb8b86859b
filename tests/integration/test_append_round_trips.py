"""The append transaction's statements: how many round trips, and what the merged ones still refuse.

``begin_append`` sends the session settings, ``SET LOCAL ROLE`` and the lock as one simple query
(quoted literals, no bound parameters); ``write_batch`` reads the stored keys and the highest
``global_seq`` with one statement. Counted here by wrapping the cursor, with the same results as
before: created / existing / conflict, gapless sequence numbers, the role and timeouts in force.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from ledger.errors import LedgerError
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import OffsetAdvance
from tests.helpers.database import query
from tests.helpers.ledger_factories import audited

pytestmark = pytest.mark.integration


@contextlib.contextmanager
def _statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement text the store's cursors execute or COPY, in order."""
    seen: list[str] = []
    execute, copy = psycopg.Cursor.execute, psycopg.Cursor.copy

    def counted_execute(self: psycopg.Cursor[Any], statement: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(statement.as_string(self) if hasattr(statement, "as_string") else str(statement))
        return execute(self, statement, *args, **kwargs)

    def counted_copy(self: psycopg.Cursor[Any], statement: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(str(statement))
        return copy(self, statement, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted_execute)
    monkeypatch.setattr(psycopg.Cursor, "copy", counted_copy)
    yield seen


def test_a_batch_takes_one_round_trip_to_lock_and_one_to_read_what_is_stored(
    migrated_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = migrated_database_url
    with LedgerStore(url, role="ledger_writer", lock_timeout="7s") as store:
        first = [audited("k1", steps=1), audited("k2", steps=2)]
        created = store.append_batch(first, [OffsetAdvance("g", "t", 0, 0, 2)])
        assert [r.status for r in created] == ["created", "created"]
        with _statements(monkeypatch) as seen:
            again = [audited("k3", steps=1), audited("k1", steps=1), audited("k1", steps=3)]
            results = store.append_batch(again, [OffsetAdvance("g", "t", 0, 2, 5)])
        [lock] = [s for s in seen if "LOCK TABLE" in s]
        assert "set_config('lock_timeout', '7s', true)" in lock and 'SET LOCAL ROLE "ledger_writer"' in lock
        assert not [s for s in seen if "set_config" in s and s is not lock]
        [read] = [s for s in seen if "idempotency_key = ANY" in s]
        assert "max(global_seq)" in read
        assert not [s for s in seen if "max(global_seq)" in s and s is not read]
    assert [r.status for r in results] == ["created", "existing", "conflict"]
    assert results[1].entries == created[0].entries  # the stored k1, read back under the lock
    seqs = [seq for (seq,) in query(url, "SELECT global_seq FROM ledger_store.entries ORDER BY 1")]
    assert seqs == list(range(1, len(seqs) + 1))
    assert results[0].entries[0].global_seq == seqs[-len(results[0].entries)]
    assert query(url, "SELECT next_offset FROM ledger_store.consumer_offsets") == [(5,)]


@pytest.mark.parametrize("value", ["1s'; CREATE TABLE public.injected (x int); --", "7 parsecs", "1s\\'"])
def test_a_hostile_timeout_is_a_refused_value_never_sql(migrated_database_url: str, value: str) -> None:
    url = migrated_database_url
    with LedgerStore(url, lock_timeout=value) as store, pytest.raises(LedgerError, match="lock_timeout"):
        store.append(audited("k1", steps=1))
    assert query(url, "SELECT to_regclass('public.injected')") == [(None,)]
    assert query(url, "SELECT count(*) FROM ledger_store.entries") == [(0,)]
