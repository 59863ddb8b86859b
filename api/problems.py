"""RFC 9457 problem details: every error the API returns, and the handlers that make them.

Each error body is ``application/problem+json`` with ``type``, ``title``, ``status``, ``detail``
and a machine-readable ``code``. Unexpected exceptions are logged with their stack trace on the
server and answered with a generic 500 problem: no trace, SQL or path ever reaches a client.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

__all__ = ["PROBLEM_MEDIA_TYPE", "ApiProblem", "Problem", "install_problem_handlers", "problem_response"]

log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "https://cournot.dev/problems/ledger/"

_TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class Problem(BaseModel):
    """An RFC 9457 problem details object (plus ``code``, and ``path`` for envelope refusals)."""

    type: str = Field(description="URI naming the kind of problem")
    title: str = Field(description="short summary of the HTTP status")
    status: int = Field(description="the HTTP status code")
    detail: str = Field(description="what went wrong with this request")
    code: str = Field(description="machine-readable reason (e.g. not_found, schema_violation)")
    path: str | None = Field(default=None, description="JSON path of the offending value, if any")


class ApiProblem(Exception):
    """Raise to answer with a problem: ``status``, a ``code`` and a human ``detail``."""

    def __init__(self, status: int, code: str, detail: str, *, path: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.path = path


def problem_response(
    status: int, code: str, detail: str, *, path: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    """A problem+json response."""
    body: dict[str, Any] = {
        "type": TYPE_BASE + code,
        "title": _TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        "code": code,
    }
    if path is not None:
        body["path"] = path
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)


async def _on_problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiProblem)
    return problem_response(exc.status, exc.code, exc.detail, path=exc.path)


async def _on_http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    detail = exc.detail if isinstance(exc.detail, str) else _TITLES.get(exc.status_code, "error")
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no resource at {request.url.path}"
    return problem_response(exc.status_code, code, detail, headers=getattr(exc, "headers", None))


def _location(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


async def _on_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    detail = f"{_location(tuple(first.get('loc', ())))}: {first.get('msg', 'invalid')}"
    if len(errors) > 1:
        detail += f" (and {len(errors) - 1} more)"
    return problem_response(422, "invalid_request", detail)


async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    # Logged here with the trace; the client gets a fixed message (no trace, SQL or file paths).
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(500, "internal_error", "the server could not answer; the error was logged")


def install_problem_handlers(app: FastAPI) -> None:
    """Route every error through :func:`problem_response`."""
    app.add_exception_handler(ApiProblem, _on_problem)
    app.add_exception_handler(StarletteHTTPException, _on_http)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(Exception, _on_unexpected)


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries: each status answers with a :class:`Problem`."""
    return {
        status: {
            "model": Problem,
            "description": _TITLES.get(status, "Error"),
            "content": {PROBLEM_MEDIA_TYPE: {}},
        }
        for status in statuses
    }
