"""Store access for the reasoning stage: the work query, and appending to an existing chain.

Appending is the store's own :meth:`ledger.store.ledger_store.LedgerStore.append_to_stream` (optimistic
concurrency like an event store's expected version: under the global append lock the entries are
chained after the named head unless the chain has moved — then nothing is written and the result
is ``stale``, or ``existing`` for an idempotent repeat).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.envelope import EnvelopeError
from engine.envelope_inputs import decode_stored_inputs
from ledger.errors import InvalidDraftError
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import EntryDraft, StreamAppendResult, entry_columns, ledger_entry

__all__ = [
    "WORK_QUERY",
    "StreamAppendResult",
    "WorkItem",
    "append_to_stream",
    "find_reasoning_work",
]


def append_to_stream(
    store: LedgerStore,
    submission_id: str,
    entries: Sequence[EntryDraft],
    *,
    expected_stream_seq: int,
    engine_version: str,
) -> StreamAppendResult:
    """Chain ``entries`` after entry ``expected_stream_seq`` of ``submission_id`` (see module doc).

    Raises :class:`~ledger.errors.InvalidDraftError` when the submission has no such entry or an
    entry kind may not extend a chain.
    """
    if not engine_version:
        raise InvalidDraftError("engine_version is required", field_path="engine_version")
    return store.append_to_stream(
        submission_id, entries, expected_stream_seq=expected_stream_seq, engine_version=engine_version
    )


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
    inputs_error: str | None = None  # the stored inputs fail the consumer's decoder: never verified

    @property
    def evaluation_variables(self) -> dict[str, Any] | None:
        """The auditor's evaluation_variables (numbers exactly as stored)."""
        variables = (self.audit_payload or {}).get("evaluation_variables")
        return variables if isinstance(variables, dict) else None


WORK_QUERY = f"""
SELECT a.payload_canonical,
       a.entry_hash,
       (SELECT max(h.stream_seq) FROM ledger_store.entries h WHERE h.submission_id = r.submission_id),
       last.status,
       coalesce(last.attempt, 0),
       coalesce(last.appended_at <= now() - make_interval(secs => %(backoff)s * power(2, greatest(last.attempt, 1) - 1)),
                false),
       {entry_columns("r")}
FROM ledger_store.entries r
LEFT JOIN LATERAL (
    SELECT e.payload_canonical, e.entry_hash FROM ledger_store.entries e
    WHERE e.submission_id = r.submission_id AND e.kind = 'audit.completed'
    ORDER BY e.stream_seq DESC LIMIT 1) a ON true
LEFT JOIN LATERAL (
    SELECT v.payload ->> 'status' AS status, coalesce((v.payload ->> 'attempt')::int, 1) AS attempt, v.appended_at
    FROM (SELECT l.payload_canonical::jsonb AS payload, l.appended_at FROM ledger_store.entries l
          WHERE l.submission_id = r.submission_id AND l.kind = 'reasoning.verified'
          ORDER BY l.stream_seq DESC LIMIT 1) v) last ON true
WHERE r.kind = 'submission.received'
  AND r.global_seq > %(after)s
  AND (r.payload_canonical::jsonb) -> 'envelope_options' -> 'verify_reasoning' = 'true'::jsonb
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
    with store.connection() as conn:
        rows = conn.execute(WORK_QUERY, params).fetchall()
    items = []
    for audit_text, audit_hash, head, last_status, last_attempt, retry_ready, *entry_row in rows:
        received = ledger_entry(entry_row)
        question, options, inputs_error = _stored_inputs(received.payload_canonical)
        items.append(
            WorkItem(
                received_seq=received.global_seq,
                submission_id=received.submission_id,
                question=question,
                options=options,
                audit_payload=json.loads(audit_text) if audit_text is not None else None,
                audit_entry_hash=audit_hash,
                head_stream_seq=int(head),
                last_status=last_status,
                last_attempt=int(last_attempt),
                retry_ready=bool(retry_ready),
                inputs_error=inputs_error,
            )
        )
    return items


def _stored_inputs(received_text: str) -> tuple[str | None, dict[str, Any], str | None]:
    """``(question, options, error)`` of a ``submission.received`` payload, read through the
    consumer's decoder (:func:`engine.envelope.decode_stored_inputs`), so the stage works on what the
    consumer accepted; ``error`` (and no question) for stored inputs the consumer would refuse."""
    try:
        decoded = decode_stored_inputs(json.loads(received_text))
    except EnvelopeError as exc:
        return None, {}, f"{exc.reason.value}: {exc.message} at {exc.path}"
    envelope = decoded.envelope
    return envelope.prompt_spec.market.question, envelope.options.model_dump(mode="json"), None
