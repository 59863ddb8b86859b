"""Where the server may listen: loopback freely, anywhere else only with a bearer token.

Imports nothing outside the standard library, so ``ledger serve`` can refuse (or explain the
missing ``api`` extra) before FastAPI is imported.
"""

from __future__ import annotations

import ipaddress
import socket

__all__ = ["MIN_TOKEN_LENGTH", "TOKEN_ENV", "AccessError", "check_bind", "is_loopback"]

TOKEN_ENV = "LEDGER_API_TOKEN"
MIN_TOKEN_LENGTH = 16


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
    addresses = {str(info[4][0]).split("%")[0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


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
