"""Who may ask: loopback-only by default, a bearer token everywhere else.

* :func:`api.binding.check_bind` refuses to start on a non-loopback address without ``LEDGER_API_TOKEN``.
* :class:`BearerTokenMiddleware` (pure ASGI) answers 401 problem+json to any request without
  ``Authorization: Bearer <token>`` when a token is configured; only ``/healthz`` is open, so
  liveness probes need no secret. Tokens are compared in constant time.
* :class:`QueryEncodingMiddleware` answers 422 to a query string whose percent-escapes are not
  UTF-8 (Starlette would silently turn them into U+FFFD and answer a different question).
* :func:`read_limited_body` reads a request body and stops at the limit (413), whatever
  ``Content-Length`` claims.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import unquote_to_bytes

from fastapi import Request

from api.problems import ApiProblem, problem_response

__all__ = ["OPEN_PATHS", "BearerTokenMiddleware", "QueryEncodingMiddleware", "read_limited_body"]

OPEN_PATHS = frozenset({"/healthz"})

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BearerTokenMiddleware:
    """Require ``Authorization: Bearer <token>`` on every HTTP request except :data:`OPEN_PATHS`."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = token.encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        header = b""
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                header = value
                break
        scheme, _, credential = header.partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(credential.strip(), self.expected):
            await self.app(scope, receive, send)
            return
        response = problem_response(
            401,
            "unauthorized",
            "this server needs an Authorization: Bearer <token> header with the right token",
            headers={"WWW-Authenticate": 'Bearer realm="ledger"'},
        )
        await response(scope, receive, send)


def _query_is_utf8(query: bytes) -> bool:
    try:
        unquote_to_bytes(query.replace(b"+", b" ")).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class QueryEncodingMiddleware:
    """Refuse (422 ``invalid_request``) a query string that is not UTF-8 once percent-decoded."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not _query_is_utf8(scope.get("query_string", b"")):
            detail = "the query string is not UTF-8 once percent-decoded"
            await problem_response(422, "invalid_request", detail)(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def read_limited_body(request: Request, limit: int) -> bytes:
    """The request body, or a 413 problem as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiProblem(413, "oversize", f"request body is {int(declared)} bytes, the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiProblem(413, "oversize", f"request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
