"""The base of every development server (embedded PostgreSQL, the tansu broker).

A server runs in the ``foreground`` (owned by this process, stopped with it) or ``detached`` (found
again through its state file by ``ledger up/down/status``). Subclasses start, stop and report it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Self

from devstack.extra import EmbeddedServiceError

__all__ = ["EmbeddedServer"]


class EmbeddedServer(ABC):
    """Start/stop/status, the port and pid, and ``with server:`` for a foreground run."""

    NAME = "embedded server"  # what error messages call it
    mode: str
    _port: int | None
    _pid: int | None

    @abstractmethod
    def start(self) -> None:
        """Start the server (or adopt a running detached one) and wait until it answers."""

    @abstractmethod
    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server; idempotent."""

    @abstractmethod
    def status(self) -> Any:
        """What runs: a live server, a stale state file, or an orphan."""

    @property
    def port(self) -> int:
        """The TCP port; in detached mode, looked up from the running server if needed."""
        if self._port is None and self.mode == "detached":
            self.status()
        if self._port is None:
            raise EmbeddedServiceError(f"{self.NAME} is not started")
        return self._port

    @property
    def pid(self) -> int | None:
        """The server's pid, if known."""
        return self._pid

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
