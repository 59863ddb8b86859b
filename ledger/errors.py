"""The ledger's error vocabulary.

Driver errors (psycopg, SQLAlchemy) are translated at the edge of :mod:`ledger.store.ledger_store`, so callers
handle "conflict", "stale consumer" or "retry later", never driver internals. Every error carries a
machine ``code``, a human ``message`` and, where one applies, a ``field_path``.
"""

from __future__ import annotations


class LedgerError(Exception):
    """Base class of every error the ledger raises on purpose."""

    code = "ledger_error"
    retryable = False

    def __init__(self, message: str, *, field_path: str | None = None) -> None:
        super().__init__(message if field_path is None else f"{message} (at {field_path})")
        self.message = message
        self.field_path = field_path


class InvalidDraftError(LedgerError, ValueError):
    """A draft handed to the append path is malformed; nothing of the batch was written."""

    code = "invalid_draft"


class IdempotencyConflictError(LedgerError):
    """An idempotency key that is already stored was offered with different content.

    The conflict is recorded in ``ledger_store.idempotency_conflicts`` before this is raised (by
    :meth:`ledger.store.records.AppendResult.raise_for_conflict`); the stored submission stands.
    """

    code = "idempotency_conflict"

    def __init__(
        self,
        message: str,
        *,
        idempotency_key: str,
        reason: str,
        existing_submission_id: str,
        offered_submission_id: str,
        conflict_id: int | None = None,
    ) -> None:
        super().__init__(message, field_path="idempotency_key")
        self.idempotency_key = idempotency_key
        self.reason = reason
        self.existing_submission_id = existing_submission_id
        self.offered_submission_id = offered_submission_id
        self.conflict_id = conflict_id


class StaleOffsetError(LedgerError):
    """A consumer offset would move backwards: another consumer owns the partition now.

    The whole batch transaction was rolled back; the caller must drop its assignment and re-seek
    from :meth:`ledger.store.ledger_store.LedgerStore.load_offsets`. This fences zombie consumers.
    """

    code = "stale_offset"

    def __init__(self, message: str, *, group: str, topic: str, partition: int, from_offset: int) -> None:
        super().__init__(message, field_path=f"offsets[{group}/{topic}/{partition}]")
        self.group = group
        self.topic = topic
        self.partition = partition
        self.from_offset = from_offset


class SourceLogUndecidedError(LedgerError):
    """The consumer cannot tell which log of the source topic it reads: it stops instead of guessing.

    Raised when the broker gives no cluster id or topic id, when the topic's identity is one the
    group consumed before but not the current one, or when a partition's log end lies below the
    stored offset while the identity is unchanged (docs/event-store.md §4, "Source incarnations").
    """

    code = "source_log_undecided"

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class AppendOnlyViolationError(LedgerError):
    """The database refused an UPDATE, DELETE or TRUNCATE of ledger rows (trigger or privilege)."""

    code = "append_only_violation"


class LedgerPermissionError(LedgerError):
    """The connected role lacks a privilege the operation needs (e.g. a reader asked to append)."""

    code = "permission_denied"


class LedgerIntegrityError(LedgerError):
    """A constraint of the store was violated in a way the append path did not expect."""

    code = "integrity_error"


class LedgerDataError(LedgerError):
    """The database refused a value of the data (SQLSTATE class 22 "data exception", or 54
    "program limit exceeded", e.g. an index row too large). Retrying the same data cannot help."""

    code = "data_refused"


class UnstorableRecordError(LedgerError):
    """A record could be neither stored nor stored as a rejection: the consumer must stop.

    Never expected (rejection rows are built to be storable whatever the record held); raised
    instead of skipping the record or retrying it forever.
    """

    code = "record_not_storable"


class ClientEncodingError(LedgerError):
    """The connection would store text in another encoding than UTF-8 (a ``SQL_ASCII`` database
    keeps the client's bytes as sent): nothing is appended. A configuration error, not retried."""

    code = "client_encoding_unsafe"


class SchemaNotReadyError(LedgerError):
    """The ledger tables are missing: run ``ledger migrate`` (Alembic ``upgrade head``)."""

    code = "schema_not_ready"


class LedgerUnavailableError(LedgerError):
    """The database could not be reached or the append lock was not granted in time. Retry later."""

    code = "ledger_unavailable"
    retryable = True


class LedgerDamagedError(LedgerError):
    """Stored rows disagree with the transparency log (e.g. a row inserted outside the append path).

    Appends stop until an operator repairs the ledger (docs/event-store.md §6, "Recovering from a
    damaged ledger"); the message names the row. Never retried: the same row fails every append.
    """

    code = "ledger_damaged"
