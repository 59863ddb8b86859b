"""One way to run SQL on either a SQLAlchemy connection or a psycopg cursor/connection.

The store's append path works on a raw psycopg cursor; the CLI and verifiers on SQLAlchemy. SQL
here is written in psycopg's ``%(name)s`` style and passed to the driver unchanged
(``exec_driver_sql`` on SQLAlchemy), so the same functions serve both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

import psycopg
from sqlalchemy import Connection

__all__ = ["Database", "run", "run_dicts"]

Database: TypeAlias = Connection | psycopg.Cursor[Any] | psycopg.Connection[Any]


def run(db: Database, statement: str, params: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
    """Execute ``statement``; return its rows as tuples (empty for statements without rows)."""
    if isinstance(db, Connection):
        result = db.exec_driver_sql(statement, dict(params or {}))
        return [tuple(row) for row in result] if result.returns_rows else []
    if isinstance(db, psycopg.Connection):
        with db.cursor() as cursor:
            return run(cursor, statement, params)
    db.execute(statement, dict(params or {}))
    return [tuple(row) for row in db.fetchall()] if db.description else []


def run_dicts(db: Database, statement: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Execute ``statement``; return its rows as dicts keyed by column name."""
    if isinstance(db, Connection):
        result = db.exec_driver_sql(statement, dict(params or {}))
        return [dict(row._mapping) for row in result]
    if isinstance(db, psycopg.Connection):
        with db.cursor() as cursor:
            return run_dicts(cursor, statement, params)
    db.execute(statement, dict(params or {}))
    names = [column.name for column in db.description or ()]
    return [dict(zip(names, row, strict=True)) for row in db.fetchall()]
