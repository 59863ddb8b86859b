"""``POST /v1/verify-por``: verify a Cournot PoR pack sent in the body; nothing is stored.

The body is the pack as one JSON document keyed by part (``application/json``, the form
``ledger verify-por PACK.json`` reads) or as the zip Cournot writes (``application/zip``). The
answer is the same report ``ledger verify-por --format json`` prints: ``status`` is ``ok`` only if
every check passed, and every failure names its file, root, leaf and step or evidence id. A pack
that fails verification is a 200 with ``status: failed``; a body that is no readable pack is a 422
problem (``pack_unreadable``), never a verdict.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from api.access import read_limited_body
from api.problems import ApiProblem, problem_responses
from engine.jsonio import StrictJSONError, loads_strict
from engine.por_pack import PackReport, verify_pack_document, verify_pack_files
from engine.por_pack.parts import MAX_INTEGER_DIGITS
from ledger.por_files import PackReadError, read_zip_bytes

__all__ = ["router"]

log = logging.getLogger(__name__)
router = APIRouter(tags=["verify-por"])

JSON = "application/json"
ZIP = "application/zip"
SOURCE = "<request body>"


def _verify(raw: bytes, media_type: str) -> PackReport:
    try:
        if media_type == ZIP:
            return verify_pack_files(read_zip_bytes(raw, label=SOURCE), source=SOURCE)
        document = loads_strict(raw, max_integer_digits=MAX_INTEGER_DIGITS, exact_numbers=True)
        return verify_pack_document(document, source=SOURCE)
    except PackReadError as exc:
        raise ApiProblem(422, "pack_unreadable", str(exc)) from None
    except StrictJSONError as exc:
        raise ApiProblem(422, exc.code, exc.message, path=exc.path) from None
    except Exception as exc:  # a verifier bug must not become a verdict: refuse, log, no trace out
        log.warning("verify-por failed: %s", type(exc).__name__, exc_info=exc)
        raise ApiProblem(
            422, "pack_unreadable", f"the pack could not be verified: {type(exc).__name__}"
        ) from None


@router.post(
    "/v1/verify-por",
    response_model=PackReport,
    responses=problem_responses(401, 413, 415, 422),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                JSON: {"schema": {"type": "object", "description": "the pack as one document keyed by part"}},
                ZIP: {"schema": {"type": "string", "format": "binary"}},
            },
        }
    },
)
async def verify_por(request: Request) -> PackReport:
    """Verify the PoR pack in the body with the same verifier as ``ledger verify-por``."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type not in (JSON, ZIP):
        raise ApiProblem(
            415, "unsupported_media_type", "send the pack as application/json or application/zip"
        )
    limit: int = request.app.state.max_body_bytes
    raw = await read_limited_body(request, limit)
    return await run_in_threadpool(_verify, raw, media_type)
