"""The server's database access: a pool whose every session is ``ledger_reader``, read-only.

Each new connection runs ``SET ROLE ledger_reader`` and makes its transactions ``REPEATABLE READ,
READ ONLY`` (one consistent snapshot per request), with a statement timeout. :func:`reader_engine`
checks at startup that this works and that the ledger is migrated, and refuses otherwise: the
server never writes, and never runs with more rights than ``ledger_reader``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import sqlalchemy.exc
from fastapi import Request
from sqlalchemy import Connection, Engine, event

from ledger.connect import create_ledger_engine

__all__ = ["READER_ROLE", "DatabaseUnavailable", "ReaderSetupError", "db_connection", "reader_engine"]

READER_ROLE = "ledger_reader"
STATEMENT_TIMEOUT_MS = 15_000


class ReaderSetupError(RuntimeError):
    """The database cannot be read as ``ledger_reader`` (missing role membership, not migrated)."""


class DatabaseUnavailable(RuntimeError):
    """The database did not answer (answered as 503)."""


def _become_reader(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"SET ROLE {READER_ROLE}")
        cursor.execute(
            "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
        )
        cursor.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
    finally:
        cursor.close()
    # commit so the pool's reset-on-return rollback cannot undo the SETs
    dbapi_connection.commit()


def reader_engine(url: str, *, pool_size: int = 8) -> Engine:
    """A pooled engine on ``url`` whose sessions are read-only ``ledger_reader``; checked once."""
    engine = create_ledger_engine(url, pool_size=pool_size, max_overflow=4, pool_timeout=10)
    event.listen(engine, "connect", _become_reader)
    try:
        with engine.connect() as connection:
            role = connection.exec_driver_sql("SELECT current_user").scalar()
            connection.exec_driver_sql("SELECT 1 FROM ledger_store.merkle_checkpoints LIMIT 0")
            connection.exec_driver_sql("SELECT 1 FROM ledger.submissions LIMIT 0")
    except sqlalchemy.exc.ProgrammingError as exc:
        engine.dispose()
        message = str(exc.orig) if exc.orig is not None else str(exc)
        if "role" in message or "permission" in message:
            raise ReaderSetupError(
                f"cannot read as {READER_ROLE}: {message.strip()}. The login must be a member of "
                f"{READER_ROLE} (GRANT {READER_ROLE} TO <login>) and the ledger migrated (ledger migrate)"
            ) from None
        raise ReaderSetupError(
            f"the ledger database is not migrated or not a ledger: {message.strip()} (run ledger migrate)"
        ) from None
    except sqlalchemy.exc.OperationalError as exc:
        engine.dispose()
        raise DatabaseUnavailable(f"cannot reach the ledger database: {exc.orig or exc}") from None
    if role != READER_ROLE:  # cannot happen after SET ROLE; checked anyway
        engine.dispose()
        raise ReaderSetupError(f"the server's sessions run as {role!r}, not {READER_ROLE}")
    return engine


def db_connection(request: Request) -> Iterator[Connection]:
    """FastAPI dependency: one connection (one read-only snapshot) for the request."""
    engine: Engine = request.app.state.engine
    try:
        connection = engine.connect()
    except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.TimeoutError) as exc:
        raise DatabaseUnavailable(f"cannot reach the ledger database: {type(exc).__name__}") from None
    try:
        yield connection
    finally:
        connection.close()
