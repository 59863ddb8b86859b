"""Consumer path for PoR-pack records: verify and record, or refuse like a bad evidence bundle."""

from __future__ import annotations

import logging

from consumers.por_envelope import decode_por_envelope, por_draft
from consumers.processing import Audited, Outcome, RecordContext, build_rejection
from engine.envelope import EnvelopeError, Reason

__all__ = ["process_por_record"]

log = logging.getLogger(__name__)


def process_por_record(
    context: RecordContext, *, dlq_topic: str, max_bytes: int, inline_limit: int
) -> Outcome | None:
    """The outcome for a PoR envelope; None when the record is not one (its schema_id says otherwise)."""
    try:
        decoded = decode_por_envelope(context.value, max_bytes=max_bytes)
    except EnvelopeError as refused:
        return build_rejection(
            refused, context, dlq_topic=dlq_topic, inline_limit=inline_limit, dlq_value_limit=max_bytes
        )
    except Exception as exc:  # a decoder bug must not stop the consumer: the record is refused, not lost
        log.exception(
            "PoR envelope decoding failed",
            extra={"topic": context.topic, "partition": context.partition, "offset": context.offset},
        )
        failed = EnvelopeError(Reason.AUDIT_FAILED, f"the PoR decoder failed: {type(exc).__name__}: {exc}")
        return build_rejection(
            failed, context, dlq_topic=dlq_topic, inline_limit=inline_limit, dlq_value_limit=max_bytes
        )
    if decoded is None:
        return None
    try:
        draft = por_draft(decoded, context.operational())
    except Exception as exc:  # the verifier is deterministic: retrying cannot help, so dead-letter it
        log.exception(
            "PoR verification failed",
            extra={"topic": context.topic, "partition": context.partition, "offset": context.offset},
        )
        failed = EnvelopeError(Reason.AUDIT_FAILED, f"{type(exc).__name__}: {exc}")
        return build_rejection(
            failed, context, dlq_topic=dlq_topic, inline_limit=inline_limit, dlq_value_limit=max_bytes
        )
    return Audited(context, draft)
