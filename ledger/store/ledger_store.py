"""The ledger's Python API: append batches, read entries, submissions and consumer offsets.

``LedgerStore`` is the contract the consumers and replay/verify code use; it speaks psycopg 3
directly (COPY, server-side batching) over connections from a SQLAlchemy engine's pool, and
translates driver errors into :mod:`ledger.errors`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
import sqlalchemy.exc
from psycopg import Connection, Cursor, IsolationLevel
from sqlalchemy import Engine

from ledger.connect import create_ledger_engine
from ledger.errors import (
    AppendOnlyViolationError,
    InvalidDraftError,
    LedgerDamagedError,
    LedgerDataError,
    LedgerError,
    LedgerIntegrityError,
    LedgerPermissionError,
    LedgerUnavailableError,
    SchemaNotReadyError,
)
from ledger.store.append import (
    begin_append,
    outcome_results,
    prepare,
    write_batch,
)
from ledger.store.follow_ups import prepare_follow_ups, write_follow_ups
from ledger.store.records import (
    MAX_GLOBAL_SEQ_SQL,
    STEP_COLUMNS,
    SUBMISSION_WRITE_COLUMNS,
    AppendResult,
    EntryDraft,
    LedgerEntry,
    OffsetAdvance,
    OperationalInfo,
    StreamAppendResult,
    SubmissionDraft,
    SubmissionRecord,
    ledger_entry,
    select_entries,
    stored_step,
)
from ledger.store.source_log import (
    Incarnation,
    SourceIdentity,
    SourceResolution,
    fence_incarnations,
    known_incarnations,
    record_dead_letters,
    resolve_incarnation,
)
from ledger.translog.tree import TreeError


def _translate(exc: BaseException) -> LedgerError:
    """Map a driver error to the ledger vocabulary."""
    orig = exc.orig if isinstance(exc, sqlalchemy.exc.DBAPIError) and exc.orig is not None else exc
    message = str(orig).strip()
    if isinstance(orig, psycopg.errors.LockNotAvailable):
        return LedgerUnavailableError(f"the append lock was not granted in time: {message}")
    if isinstance(orig, (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName)):
        return SchemaNotReadyError(f"ledger tables missing, run `ledger migrate`: {message}")
    if isinstance(orig, psycopg.errors.InsufficientPrivilege):
        return LedgerPermissionError(message)
    if isinstance(orig, psycopg.errors.RaiseException) and (
        "append-only" in message or "forward-only" in message
    ):
        return AppendOnlyViolationError(message)
    if isinstance(orig, psycopg.IntegrityError):
        return LedgerIntegrityError(message)
    # Before the OperationalError test: psycopg files class 54 (e.g. "index row size exceeds
    # btree maximum") under OperationalError, and retrying such data would loop forever.
    if isinstance(orig, (psycopg.DataError, psycopg.errors.ProgramLimitExceeded)):
        return LedgerDataError(f"the database refused the data: {message}")
    if isinstance(orig, (psycopg.OperationalError, psycopg.InterfaceError)) or isinstance(
        exc, sqlalchemy.exc.OperationalError
    ):
        return LedgerUnavailableError(f"database unavailable: {message}")
    error = LedgerError(message)
    error.code = "database_error"
    return error


RECOVERY_HINT = (
    "appends stop until it is repaired; see docs/event-store.md §6, 'Recovering from a damaged ledger'"
)


@contextlib.contextmanager
def _tree_errors_as_damage() -> Iterator[None]:
    """A :class:`TreeError` inside an append means stored rows the log refuses: fail with the row named."""
    try:
        yield
    except TreeError as exc:
        raise LedgerDamagedError(f"the ledger is damaged: {exc}; {RECOVERY_HINT}") from exc


class LedgerStore:
    """Append-only store of hash-chained ledger entries in PostgreSQL."""

    def __init__(
        self,
        engine_or_url: Engine | str,
        *,
        role: str | None = None,
        lock_timeout: str = "30s",
        idle_in_transaction_timeout: str = "60s",
    ) -> None:
        """``role``: if set, each append runs ``SET LOCAL ROLE <role>`` (e.g. ``ledger_writer``)."""
        self._owns_engine = isinstance(engine_or_url, str)
        self.engine = create_ledger_engine(engine_or_url) if isinstance(engine_or_url, str) else engine_or_url
        self.role = role
        self.lock_timeout = lock_timeout
        self.idle_in_transaction_timeout = idle_in_transaction_timeout

    def close(self) -> None:
        """Dispose of the engine if this store created it."""
        if self._owns_engine:
            self.engine.dispose()

    def __enter__(self) -> LedgerStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextlib.contextmanager
    def connection(self) -> Iterator[Connection[Any]]:
        """A READ COMMITTED psycopg connection from the pool; driver errors become ledger errors."""
        try:
            raw = self.engine.raw_connection()
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

    # -- append ------------------------------------------------------------------------

    @contextlib.contextmanager
    def _append_transaction(self) -> Iterator[Cursor[Any]]:
        """A transaction holding the append lock, under ``role``, with the store's timeouts."""
        with self.connection() as conn, conn.transaction(), conn.cursor() as cur:
            begin_append(
                cur,
                role=self.role,
                lock_timeout=self.lock_timeout,
                idle_timeout=self.idle_in_transaction_timeout,
            )
            yield cur

    def append_batch(
        self, submissions: Sequence[SubmissionDraft], offsets: Sequence[OffsetAdvance] = ()
    ) -> list[AppendResult]:
        """Append audited submissions and advance the consumer offsets in ONE transaction.

        Returns one :class:`AppendResult` per draft, in order: ``created``, ``existing`` (already
        stored with identical content: success, nothing written) or ``conflict`` (recorded in
        ``idempotency_conflicts``; the other drafts are unaffected). Raises
        :class:`~ledger.errors.StaleOffsetError` (nothing written) if an offset would move back
        or was read from an earlier incarnation of the source log. Dead-letter coordinates carried
        by the drafts (``operational.dead_letter``) are stored in the same transaction.
        """
        keys = [(o.group, o.topic, o.partition) for o in offsets]
        if len(set(keys)) != len(keys):
            raise InvalidDraftError(
                "each (group, topic, partition) may appear once per batch", field_path="offsets"
            )
        prepared = [prepare(draft) for draft in submissions]
        if not prepared and not offsets:
            return []
        with _tree_errors_as_damage(), self._append_transaction() as cur:
            fence_incarnations(cur, offsets)
            outcomes = write_batch(cur, prepared, offsets)
            record_dead_letters(cur, submissions, outcomes)
        # the created submissions' results (their StoredEntry tuples) are made after the commit,
        # outside the append lock
        return outcome_results(outcomes)

    def append(self, submission: SubmissionDraft, offsets: Sequence[OffsetAdvance] = ()) -> AppendResult:
        """Append one submission (a batch of one)."""
        return self.append_batch([submission], offsets)[0]

    def append_to_stream(
        self,
        submission_id: str,
        entries: Sequence[EntryDraft],
        *,
        expected_stream_seq: int,
        engine_version: str,
        offsets: Sequence[OffsetAdvance] = (),
    ) -> StreamAppendResult:
        """Extend a stored submission's chain with follow-up entries (``reasoning.verified``, ``replay.verified``).

        Optimistic concurrency like an event store's expected version: ``expected_stream_seq`` is the
        head the caller saw. Under the append lock the entries are chained after it and written,
        unless the chain has moved: then nothing is written and the result is ``existing`` (the same
        entries are already there) or ``stale``. Raises :class:`~ledger.errors.InvalidDraftError`
        when the submission has no entry at ``expected_stream_seq``.
        """
        if not engine_version:
            raise InvalidDraftError("engine_version is required", field_path="engine_version")
        prepared = prepare_follow_ups(entries)
        with _tree_errors_as_damage(), self._append_transaction() as cur:
            return write_follow_ups(
                cur,
                submission_id,
                prepared,
                expected_stream_seq=expected_stream_seq,
                engine_version=engine_version,
                offsets=offsets,
            )

    # -- reads ---------------------------------------------------------------------------

    def max_seq(self) -> int:
        """The highest committed ``global_seq`` (0 for an empty ledger); entries 1..max all exist."""
        with self.connection() as conn:
            row = conn.execute(MAX_GLOBAL_SEQ_SQL).fetchone()
        return int(row[0]) if row else 0

    def read_entries(self, after_seq: int = 0, limit: int = 1000) -> list[LedgerEntry]:
        """One page: entries with ``global_seq > after_seq`` in order, at most ``limit``."""
        with self.connection() as conn:
            rows = conn.execute(
                select_entries("global_seq > %s ORDER BY global_seq LIMIT %s"), (after_seq, limit)
            ).fetchall()
        return [ledger_entry(row) for row in rows]

    def iter_entries(
        self, after_seq: int = 0, limit: int | None = None, page_size: int = 5000
    ) -> Iterator[LedgerEntry]:
        """Entries after ``after_seq`` in ``global_seq`` order, page by page, up to ``limit`` in all.

        Stops at the end of the ledger as of the last page read; call again with the last seq
        seen to follow new appends.
        """
        remaining = limit
        last = after_seq
        while remaining is None or remaining > 0:
            size = page_size if remaining is None else min(page_size, remaining)
            page = self.read_entries(last, size)
            yield from page
            if len(page) < size:
                return
            last = page[-1].global_seq
            if remaining is not None:
                remaining -= len(page)

    def get_submission(self, submission_id_or_key: str) -> SubmissionRecord | None:
        """A submission by ``submission_id`` or ``idempotency_key``, with its entries and steps."""
        with self.connection() as conn:
            head = conn.execute(
                f"SELECT {SUBMISSION_WRITE_COLUMNS}, appended_at "
                "FROM ledger_store.submissions WHERE submission_id = %s OR idempotency_key = %s "
                "ORDER BY submission_id = %s DESC LIMIT 1",
                (submission_id_or_key, submission_id_or_key, submission_id_or_key),
            ).fetchone()
            if head is None:
                return None
            submission_id = head[0]
            entries = conn.execute(
                select_entries("submission_id = %s ORDER BY stream_seq"), (submission_id,)
            ).fetchall()
            steps = conn.execute(
                f"SELECT {STEP_COLUMNS} FROM ledger_store.trace_steps WHERE submission_id = %s ORDER BY step_index",
                (submission_id,),
            ).fetchall()
        return SubmissionRecord(
            submission_id=submission_id,
            idempotency_key=head[1],
            market_id=head[2],
            bundle_id=head[3],
            status=head[4],
            input_hashes=json.loads(head[5]),
            engine_version=head[6],
            operational=OperationalInfo(head[7], head[8], head[9], head[10], head[11]),
            appended_at=head[12],
            entries=tuple(ledger_entry(row) for row in entries),
            steps=tuple(stored_step(row) for row in steps),
        )

    def resolve_source(
        self, group: str, topic: str, observed: SourceIdentity, *, host: str | None = None
    ) -> SourceResolution:
        """The incarnation of ``topic`` the broker's log ``observed`` is, with its offsets.

        One transaction under the append lock: a new identity is recorded as a new incarnation in
        ``source_incarnations`` and the group's offsets for the topic go back to 0 (see
        :func:`ledger.store.source_log.resolve_incarnation`).
        """
        with self._append_transaction() as cur:
            return resolve_incarnation(cur, group, topic, observed, host=host)

    def current_incarnation(self, group: str, topic: str) -> Incarnation | None:
        """The group's current incarnation of ``topic`` (None before its first consumed batch)."""
        with self.connection() as conn, conn.cursor() as cur:
            known = known_incarnations(cur, group, topic)
        return known[-1] if known else None

    def load_offsets(self, group: str, topic: str) -> dict[int, int]:
        """``{partition: next_offset}`` stored for a consumer group and topic (seek to these)."""
        with self.connection() as conn:
            rows = conn.execute(
                "SELECT kafka_partition, next_offset FROM ledger_store.consumer_offsets "
                "WHERE consumer_group = %s AND topic = %s",
                (group, topic),
            ).fetchall()
        return {int(partition): int(offset) for partition, offset in rows}
