"""The base of every development server (embedded PostgreSQL, the tansu broker, Redis).

A server runs in the ``foreground`` (owned by this process, stopped with it) or ``detached`` (found
again through its state file by ``ledger up/down/status``). Subclasses start, stop and report it.
Also here: the two waits every server needs, both ``tenacity`` loops: :func:`poll` (until it
answers, or a process is gone) and :func:`retry_port_race` (a free port taken before the bind).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Self, TypeVar

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, stop_after_delay, wait_exponential

from devstack.extra import EmbeddedServiceError

__all__ = ["EmbeddedServer", "NotYet", "PortTaken", "poll", "retry_port_race"]

T = TypeVar("T")
PORT_ATTEMPTS = 3  # a port found free and taken before the server binds it: rare; three tries are plenty


class NotYet(Exception):  # a signal to poll again, not an error
    """Raised by a probe given to :func:`poll`: not ready yet; the message says what was seen."""


class PortTaken(EmbeddedServiceError):
    """The server could not bind the port picked for it: another process took it first."""


def poll(
    probe: Callable[[], T],
    *,
    timeout: float,
    what: str,
    first_delay: float = 0.005,
    max_delay: float = 0.2,
    growth: float = 2.0,
    transient: tuple[type[Exception], ...] = (),
) -> T:
    """``probe()`` until it returns, sleeping ``first_delay``, growing by ``growth`` up to ``max_delay``.

    :class:`NotYet` or a ``transient`` error means "again"; after ``timeout`` seconds the last one
    becomes ``EmbeddedServiceError("<what> after <timeout>s: <error>")``. Anything else propagates
    at once (a server that exited is not waited for). Only side-effect-free probes belong here.
    """
    again: tuple[type[Exception], ...] = (NotYet, *transient)
    retrying = Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_exponential(multiplier=first_delay, exp_base=growth, max=max_delay),
        retry=retry_if_exception_type(again),
        reraise=True,
    )
    try:
        return retrying(probe)
    except again as exc:
        raise EmbeddedServiceError(f"{what} after {timeout}s: {str(exc).strip()}") from None


def retry_port_race(
    start_on_a_free_port: Callable[[], None],
    *,
    fixed_port: bool,
    retry_on: type[EmbeddedServiceError] = PortTaken,
) -> None:
    """Run ``start_on_a_free_port()`` up to three times while it raises ``retry_on``; once for a fixed port.

    The callable must pick a new port each time and leave nothing running when it raises.
    """
    retrying = Retrying(
        stop=stop_after_attempt(1 if fixed_port else PORT_ATTEMPTS),
        retry=retry_if_exception_type(retry_on),
        reraise=True,
    )
    retrying(start_on_a_free_port)


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
