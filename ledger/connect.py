"""Database URLs and engines for the ledger (SQLAlchemy 2 on psycopg 3)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import make_url

# pg_advisory_xact_lock key (advisory locks are scoped to one database). Appends do not use one:
# any login may hold any advisory key, so they lock ledger_store.append_lock (ledger.store.append).
MIGRATION_LOCK_KEY = 0x4C45444745520002  # "LEDGER" 0002: serialises concurrent `ledger migrate`


def sqlalchemy_url(url: str) -> str:
    """Normalise a PostgreSQL URL to the psycopg 3 driver (``postgresql+psycopg://``)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        raise ValueError(f"the ledger needs PostgreSQL, got a {parsed.get_backend_name()!r} URL")
    if parsed.drivername != "postgresql+psycopg":
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def libpq_url(url: str) -> str:
    """The same URL without the SQLAlchemy driver suffix (for psql and plain psycopg)."""
    parsed = make_url(sqlalchemy_url(url)).set(drivername="postgresql")
    return parsed.render_as_string(hide_password=False)


def create_ledger_engine(url: str, **kwargs: Any) -> Engine:
    """A pooled engine; connections are checked before use so a restarted server is survived."""
    options: dict[str, Any] = {"pool_pre_ping": True, "future": True}
    options.update(kwargs)
    return create_engine(sqlalchemy_url(url), **options)
