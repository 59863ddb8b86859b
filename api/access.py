"""Who may ask: loopback-only by default, a bearer token everywhere else.

* :func:`check_bind` refuses to start on a non-loopback address without ``LEDGER_API_TOKEN``.
* :class:`BearerTokenMiddleware` (pure ASGI) answers 401 problem+json to any request without
  ``Authorization: Bearer <token>`` when a token is configured; only ``/healthz`` is open, so
  liveness probes need no secret. Tokens are compared in constant time.
* :func:`read_limited_body` reads a request body and stops at the limit (413), whatever
  ``Content-Length`` claims.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import Request

from api.problems import ApiProblem, problem_response

__all__ = [
    "OPEN_PATHS",
    "TOKEN_ENV",
    "AccessError",
    "BearerTokenMiddleware",
    "check_bind",
    "is_loopback",
    "read_limited_body",
]

TOKEN_ENV = "LEDGER_API_TOKEN"
OPEN_PATHS = frozenset({"/healthz"})
MIN_TOKEN_LENGTH = 16

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class AccessError(ValueError):
    """The server must not start with this address and token."""


def is_loopback(host: str) -> bool:
    """True iff every address ``host`` resolves to is a loopback address (127.0.0.0/8, ::1)."""
    if host in ("", "0.0.0.0", "::"):
        return False
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False  # cannot tell: treat as public (fail closed)
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addresses)


def check_bind(host: str, token: str | None) -> None:
    """Raise :class:`AccessError` if serving on ``host`` with ``token`` would be unsafe."""
    if token is not None and len(token) < MIN_TOKEN_LENGTH:
        raise AccessError(
            f"{TOKEN_ENV} is shorter than {MIN_TOKEN_LENGTH} characters; use a long random token"
        )
    if token is None and not is_loopback(host):
        raise AccessError(
            f"refusing to serve on {host!r} without a bearer token: it is not a loopback address. "
            f"Set {TOKEN_ENV} (e.g. `export {TOKEN_ENV}=$(openssl rand -hex 32)`) or use --host 127.0.0.1"
        )


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
