"""``POST /v1/audit``: a dry run of the engine on an envelope; nothing is stored.

The body is the envelope the consumer reads from Kafka, decoded by the same strict decoder with
the same size limit (``LEDGER_MAX_MESSAGE_BYTES``); a refusal is a 422 problem whose ``code`` is
the consumer's reason code (the one it would dead-letter with) and whose ``path`` is the JSON path.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from api.access import read_limited_body
from api.models import AuditResult
from api.problems import ApiProblem, problem_responses
from engine.envelope import DecodedEnvelope, EnvelopeError, Reason, decode_envelope, envelope_json_schema
from engine.pipeline import run_pipeline

__all__ = ["router"]

log = logging.getLogger(__name__)
router = APIRouter(tags=["audit"])


def _dry_run(raw: bytes, max_bytes: int) -> AuditResult:
    try:
        decoded: DecodedEnvelope = decode_envelope(raw, max_bytes=max_bytes)
    except EnvelopeError as refused:
        status = 413 if refused.reason is Reason.OVERSIZE else 422
        raise ApiProblem(status, refused.reason.value, refused.message, path=refused.path) from None
    envelope = decoded.envelope
    try:
        result = run_pipeline(envelope.prompt_spec, envelope.evidence_bundle)
    except Exception as exc:  # the consumer dead-letters these as audit_failed; the engine is deterministic
        log.warning("dry-run audit failed: %s", type(exc).__name__, exc_info=exc)
        raise ApiProblem(
            422, Reason.AUDIT_FAILED.value, f"the engine refused the bundle: {type(exc).__name__}"
        ) from None
    document: dict[str, Any] = json.loads(result.canonical_json())
    return AuditResult(
        idempotency_key=decoded.idempotency_key,
        inputs_hash=decoded.inputs_hash,
        market_id=decoded.market_id,
        stored=False,
        result=document,
    )


@router.post(
    "/v1/audit",
    response_model=AuditResult,
    responses=problem_responses(401, 413, 415, 422),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": envelope_json_schema()}},
        }
    },
)
async def audit(request: Request) -> AuditResult:
    """Decode the envelope as the consumer does and run the Auditor and Judge on it; store nothing."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise ApiProblem(415, "unsupported_media_type", "send the envelope as application/json")
    limit: int = request.app.state.max_body_bytes
    raw = await read_limited_body(request, limit)
    return await run_in_threadpool(_dry_run, raw, limit)
