"""Who may ask: loopback-only by default, a bearer token everywhere else.

* :func:`api.binding.check_bind` refuses to start on a non-loopback address without ``LEDGER_API_TOKEN``.
* :class:`BearerTokenMiddleware` (pure ASGI) answers 401 problem+json to any request without
  ``Authorization: Bearer <token>`` when a token is configured; only ``/healthz`` is open, so
  liveness probes need no secret. Tokens are compared in constant time.
* :func:`read_limited_body` reads a request body and stops at the limit (413), whatever
  ``Content-Length`` claims.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import Request

from api.problems import ApiProblem, problem_response

__all__ = ["OPEN_PATHS", "BearerTokenMiddleware", "read_limited_body"]

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
