"""Store access for the reasoning stage: the work query and appending to an existing chain.

:func:`append_to_stream` is the store API the stage needs and ``LedgerStore`` lacks (its
``append_batch`` only writes whole submissions: offering more entries than are stored is an
``entries_differ`` conflict). It is written here, on the store's own append lock and
:func:`ledger.append.begin_append`, because ``ledger/store.py`` and ``ledger/append.py`` are being
changed by another engineer; it is meant to move there as ``LedgerStore.append_to_stream`` with
the same signature (see ``docs/reasoning-verification.md`` §5).

Optimistic concurrency, like an event store's expected version: the caller names the
``stream_seq`` it saw at the head of the submission's chain. Under the global append lock the
entries are chained after that head and written, unless the chain has moved: then nothing is
written and the entries that appeared are returned (``stale``), or, if they are exactly the
offered ones, ``existing`` (an idempotent repeat).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import psycopg
import sqlalchemy.exc
from psycopg import Connection, IsolationLevel

from ledger.append import NOTIFY_CHANNEL, begin_append
from ledger.errors import InvalidDraftError
from ledger.hashing import canonical_text, chain_hashes, payload_hash
from ledger.records import EntryDraft, StoredEntry
from ledger.store import LedgerStore, _translate

__all__ = [
    "WORK_QUERY",
    "StreamAppendResult",
    "WorkItem",
    "append_to_stream",
    "find_reasoning_work",
]

FOLLOW_UP_KINDS = ("reasoning.verified", "replay.verified")
"""Kinds that may be appended to an existing chain (never a second received/step/audit entry)."""

StreamAppendStatus = Literal["created", "existing", "stale"]


@dataclass(frozen=True)
class StreamAppendResult:
    """``created``: written now; ``existing``: the same entries already follow the expected head;
    ``stale``: the chain moved past the expected head, nothing written. ``entries`` are the new
    entries (created) or the stored entries after the expected head (existing, stale)."""

    status: StreamAppendStatus
    submission_id: str
    entries: tuple[StoredEntry, ...]


@contextlib.contextmanager
def _connection(store: LedgerStore) -> Iterator[Connection[Any]]:
    try:
        raw = store.engine.raw_connection()
    except (sqlalchemy.exc.DBAPIError, psycopg.Error) as exc:
        raise _translate(exc) from exc
    try:
        driver = raw.driver_connection
        assert isinstance(driver, Connection)
        if driver.isolation_level != IsolationLevel.READ_COMMITTED:
            driver.isolation_level = IsolationLevel.READ_COMMITTED
        yield driver
    except psycopg.Error as exc:
        raise _translate(exc) from exc
    finally:
        raw.close()


def _prepared(entries: Sequence[EntryDraft]) -> list[tuple[str, str, str]]:
    if not entries:
        raise InvalidDraftError("nothing to append", field_path="entries")
    out = []
    for index, entry in enumerate(entries):
        if entry.kind not in FOLLOW_UP_KINDS:
            raise InvalidDraftError(
                f"only {FOLLOW_UP_KINDS} may extend an existing chain", field_path=f"entries[{index}].kind"
            )
        text = canonical_text(entry.payload)
        out.append((entry.kind, text, payload_hash(text)))
    return out


_STREAM_SELECT = (
    "SELECT global_seq, submission_id, stream_seq, kind, payload_hash, prev_hash, entry_hash, engine_version "
    "FROM ledger_store.entries WHERE submission_id = %s AND stream_seq >= %s ORDER BY stream_seq"
)


def append_to_stream(
    store: LedgerStore,
    submission_id: str,
    entries: Sequence[EntryDraft],
    *,
    expected_stream_seq: int,
    engine_version: str,
) -> StreamAppendResult:
    """Chain ``entries`` after entry ``expected_stream_seq`` of ``submission_id`` (see module doc).

    Raises :class:`~ledger.errors.InvalidDraftError` when the submission has no such entry.
    """
    if not engine_version:
        raise InvalidDraftError("engine_version is required", field_path="engine_version")
    prepared = _prepared(entries)
    with _connection(store) as conn, conn.transaction(), conn.cursor() as cur:
        begin_append(
            cur,
            role=store.role,
            lock_timeout=store.lock_timeout,
            idle_timeout=store.idle_in_transaction_timeout,
        )
        cur.execute(_STREAM_SELECT, (submission_id, expected_stream_seq))
        stored = [StoredEntry(*row) for row in cur.fetchall()]
        if not stored or stored[0].stream_seq != expected_stream_seq:
            raise InvalidDraftError(
                f"submission {submission_id} has no entry at stream_seq {expected_stream_seq}",
                field_path="expected_stream_seq",
            )
        head, after = stored[0], tuple(stored[1:])
        links = [(kind, digest, engine_version) for kind, _, digest in prepared]
        chain = chain_hashes(submission_id, links, start_seq=head.stream_seq + 1, prev_hash=head.entry_hash)
        if after:
            offered = [current for _, _, current in chain]
            if [entry.entry_hash for entry in after[: len(offered)]] == offered:
                return StreamAppendResult("existing", submission_id, after[: len(offered)])
            return StreamAppendResult("stale", submission_id, after)
        cur.execute("SELECT coalesce(max(global_seq), 0) FROM ledger_store.entries")
        row = cur.fetchone()
        first_seq = (int(row[0]) if row else 0) + 1
        rows = [
            (first_seq + i, submission_id, seq, kind, text, digest, prev, current, engine_version)
            for i, ((kind, text, digest), (seq, prev, current)) in enumerate(
                zip(prepared, chain, strict=True)
            )
        ]
        cur.executemany(
            "INSERT INTO ledger_store.entries (global_seq, submission_id, stream_seq, kind, payload_canonical, "
            "payload_hash, prev_hash, entry_hash, engine_version) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            rows,
        )
        cur.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, str(rows[-1][0])))
    created = tuple(
        StoredEntry(g, s_id, seq, kind, digest, prev, current, version)
        for g, s_id, seq, kind, _, digest, prev, current, version in rows
    )
    return StreamAppendResult("created", submission_id, created)


@dataclass(frozen=True)
class WorkItem:
    """One submission the stage should verify (first time, or again after a fail-closed result)."""

    received_seq: int
    submission_id: str
    question: str | None
    options: dict[str, Any]
    audit_payload: dict[str, Any] | None
    audit_entry_hash: str | None
    head_stream_seq: int
    last_status: str | None
    last_attempt: int
    retry_ready: bool

    @property
    def evaluation_variables(self) -> dict[str, Any] | None:
        """The auditor's evaluation_variables (numbers exactly as stored)."""
        variables = (self.audit_payload or {}).get("evaluation_variables")
        return variables if isinstance(variables, dict) else None


WORK_QUERY = """
SELECT r.global_seq,
       r.submission_id,
       r.payload #>> '{prompt_spec,market,question}',
       coalesce(r.payload -> 'envelope_options', '{}'::jsonb)::text,
       a.payload_canonical,
       a.entry_hash,
       (SELECT max(h.stream_seq) FROM ledger_store.entries h WHERE h.submission_id = r.submission_id),
       last.status,
       coalesce(last.attempt, 0),
       coalesce(last.appended_at <= now() - make_interval(secs => %(backoff)s * power(2, greatest(last.attempt, 1) - 1)),
                false)
FROM ledger_store.entries r
LEFT JOIN LATERAL (
    SELECT e.payload_canonical, e.entry_hash FROM ledger_store.entries e
    WHERE e.submission_id = r.submission_id AND e.kind = 'audit.completed'
    ORDER BY e.stream_seq DESC LIMIT 1) a ON true
LEFT JOIN LATERAL (
    SELECT v.payload ->> 'status' AS status, coalesce((v.payload ->> 'attempt')::int, 1) AS attempt, v.appended_at
    FROM ledger_store.entries v
    WHERE v.submission_id = r.submission_id AND v.kind = 'reasoning.verified'
    ORDER BY v.stream_seq DESC LIMIT 1) last ON true
WHERE r.kind = 'submission.received'
  AND r.global_seq > %(after)s
  AND r.payload -> 'envelope_options' -> 'verify_reasoning' = 'true'::jsonb
  AND (last.status IS NULL
       OR (%(retry)s AND last.status = 'fail_closed' AND last.attempt < %(max_attempts)s))
ORDER BY r.global_seq
LIMIT %(limit)s
"""
"""Requested submissions without a ``reasoning.verified`` entry (an anti-join on the latest one),
plus, with ``retry``, those whose latest is ``fail_closed`` below ``max_attempts``; ``retry_ready``
says whether the backoff ``backoff * 2**(attempt-1)`` seconds has passed since it was appended."""


def find_reasoning_work(
    store: LedgerStore,
    *,
    after_seq: int = 0,
    limit: int = 100,
    retry_failed: bool = False,
    max_attempts: int = 3,
    retry_backoff: float = 60.0,
) -> list[WorkItem]:
    """One page of work in ``submission.received`` order (``global_seq > after_seq``)."""
    params = {
        "after": after_seq,
        "limit": limit,
        "retry": retry_failed,
        "max_attempts": max_attempts,
        "backoff": float(retry_backoff),
    }
    with _connection(store) as conn:
        rows = conn.execute(WORK_QUERY, params).fetchall()
    return [
        WorkItem(
            received_seq=int(row[0]),
            submission_id=row[1],
            question=row[2],
            options=json.loads(row[3]),
            audit_payload=json.loads(row[4]) if row[4] is not None else None,
            audit_entry_hash=row[5],
            head_stream_seq=int(row[6]),
            last_status=row[7],
            last_attempt=int(row[8]),
            retry_ready=bool(row[9]),
        )
        for row in rows
    ]
