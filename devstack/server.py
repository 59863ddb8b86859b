"""The base of every development server (embedded PostgreSQL, the tansu broker, Redis).

A server runs in the ``foreground`` (owned by this process, stopped with it) or ``detached`` (found
again through its state file by ``ledger up/down/status``). Subclasses start, stop and report it.
Also here: the two waits every server needs, both ``tenacity`` loops: :func:`poll` (until it
answers, or a process is gone) and :func:`retry_port_race` (a free port taken before the bind), and
the process helpers every server and the test fixtures share (ports, pids, signals, state files).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Self, TypeVar

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, stop_after_delay, wait_exponential

from devstack.extra import EmbeddedServiceError, load_psutil

__all__ = [
    "LOOPBACK",
    "EmbeddedServer",
    "Mode",
    "NotYet",
    "PortTaken",
    "ServiceStatus",
    "child_env",
    "free_loopback_port",
    "log_tail",
    "pdeathsig_preexec",
    "pid_alive",
    "poll",
    "read_state",
    "retry_port_race",
    "spawn_detached",
    "spawn_owned",
    "state_lock",
    "terminate_pid",
    "wait_pid_gone",
    "write_state",
]

T = TypeVar("T")
Mode = Literal["foreground", "detached"]
LOOPBACK = "127.0.0.1"
_PR_SET_PDEATHSIG = 1
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


@dataclass(frozen=True)
class ServiceStatus:
    """What ``status()`` found: a live server, a stale state file, or an orphan."""

    running: bool
    pid: int | None = None
    port: int | None = None
    url: str | None = None
    stale_state: bool = False  # a state file names a process that is gone
    orphaned: bool = False  # a live server that the state file does not name


# --- process helpers shared by every server and the fixtures ---------------------------


def free_loopback_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago (callers retry on a race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def pdeathsig_preexec(sig: int) -> Callable[[], None]:
    """A Popen ``preexec_fn`` that delivers ``sig`` to the child when our thread dies.

    Popen runs ``preexec_fn`` after switching user, so the setting survives the switch
    (changing credentials clears it). If we died before prctl ran, the child kills itself.
    """
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent_pid = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


_LAUNCHER = """
import json, os, subprocess, sys
spec = json.load(sys.stdin)
ids = {} if spec["uid"] is None else {"user": spec["uid"], "group": spec["gid"], "extra_groups": []}
with open(spec["log"], "ab") as log:
    proc = subprocess.Popen(spec["argv"], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            cwd=spec["cwd"], env=spec["env"], start_new_session=True, **ids)
sys.stdout.write(str(proc.pid))
sys.stdout.flush()
os._exit(0)
"""


def spawn_detached(
    argv: Sequence[str],
    log: Path,
    *,
    cwd: Path,
    env: Mapping[str, str],
    owner: pwd.struct_passwd | None = None,
) -> int:
    """Start ``argv`` in a new session via a launcher that exits at once; return its pid.

    The server is reparented to init (or the nearest subreaper): no zombie or Popen of ours.
    """
    uid, gid = (owner.pw_uid, owner.pw_gid) if owner else (None, None)
    spec = {"argv": list(argv), "log": str(log), "cwd": str(cwd), "env": dict(env), "uid": uid, "gid": gid}
    launcher = [sys.executable, "-I", "-c", _LAUNCHER]
    done = subprocess.run(
        launcher, input=json.dumps(spec), capture_output=True, text=True, timeout=30, check=False
    )
    if done.returncode != 0 or not done.stdout.strip().isdigit():
        raise EmbeddedServiceError(f"could not launch {argv[0]}: {done.stderr.strip()[-2000:]}")
    return int(done.stdout)


def spawn_owned(
    argv: Sequence[str], log: Path, *, death_signal: int, append: bool = False, **popen: Any
) -> subprocess.Popen[bytes]:
    """Start ``argv`` as our child (foreground mode), output to ``log``; it gets ``death_signal``
    when our thread dies (:func:`pdeathsig_preexec`). ``popen``: more Popen arguments (env, user)."""
    with log.open("ab" if append else "wb") as handle:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            preexec_fn=pdeathsig_preexec(death_signal),
            **popen,
        )


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    psutil = load_psutil()
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def wait_pid_gone(pid: int, timeout: float) -> bool:
    """Wait (sleeping, not spinning) until ``pid`` is gone or a zombie; reap it if it is ours."""

    def gone() -> None:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if pid_alive(pid):
            raise NotYet(f"pid {pid} is alive")

    try:
        # polling is safe: the probe only reaps and looks, it sends nothing to the process
        poll(gone, timeout=timeout, what=f"waiting for pid {pid} to end", max_delay=0.1)
    except EmbeddedServiceError:
        return False
    return True


def terminate_pid(pid: int, signals: Sequence[int], timeout: float) -> None:
    """Send each signal in turn, waiting up to ``timeout`` after each, until ``pid`` is gone."""
    for sig in signals:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        if wait_pid_gone(pid, timeout):
            return
    raise EmbeddedServiceError(f"process {pid} survived signals {list(signals)}")


def read_state(path: Path) -> dict[str, Any] | None:
    """The JSON state file, or None if missing or unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("pid"), int) else None


def write_state(path: Path, data: Mapping[str, Any]) -> None:
    """Write the JSON state file atomically."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(dict(data), indent=2, sort_keys=True))
    os.replace(tmp, path)


@contextlib.contextmanager
def state_lock(path: Path) -> Iterator[None]:
    """An exclusive inter-process lock on ``path`` (serialises start and stop)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file is closed
        yield


def log_tail(path: Path, max_chars: int = 2000) -> str:
    """The end of a log file, for error messages."""
    try:
        return path.read_text(errors="replace")[-max_chars:]
    except OSError:
        return ""


def child_env(drop_prefixes: Sequence[str] = ()) -> dict[str, str]:
    """A copy of our environment without variables that would reconfigure the server."""
    return {k: v for k, v in os.environ.items() if not k.startswith(tuple(drop_prefixes))}


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
