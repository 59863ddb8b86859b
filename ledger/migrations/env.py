"""Alembic environment for the ledger schema.

URL order: ``config.attributes["connection"]`` or ``["url"]`` (programmatic, see
``ledger.migration``), ``alembic -x url=...``, then ``LEDGER_DATABASE_URL``. Migrations run in one
transaction under ``pg_advisory_xact_lock(MIGRATION_LOCK_KEY)``, so concurrent ``ledger migrate``
runs on one database take turns instead of racing.
"""

from __future__ import annotations

import os
from logging.config import fileConfig

from alembic import context
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool

from ledger.connect import MIGRATION_LOCK_KEY, create_ledger_engine, sqlalchemy_url
from ledger.migration import include_name, target_metadata

config = context.config
if config.config_file_name is not None and not config.attributes.get("skip_logging_config"):
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _database_url() -> str:
    url = config.attributes.get("url") or context.get_x_argument(as_dictionary=True).get("url")
    url = url or os.environ.get("LEDGER_DATABASE_URL") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit(
            "no database URL: set LEDGER_DATABASE_URL, pass `-x url=postgresql://...`, "
            "or run `ledger migrate`, which starts the embedded PostgreSQL"
        )
    return sqlalchemy_url(url)


def _configure(**kwargs: object) -> None:
    context.configure(
        target_metadata=target_metadata(),
        include_schemas=True,
        include_name=include_name,
        compare_type=True,
        **kwargs,  # type: ignore[arg-type]
    )


def run_migrations_offline() -> None:
    """Emit SQL to stdout (``alembic upgrade head --sql``)."""
    _configure(url=_database_url(), literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def _run_online(connection: Connection) -> None:
    _configure(connection=connection)
    with context.begin_transaction():
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        context.run_migrations()


def run_migrations_online() -> None:
    """Run against a live database."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run_online(connection)
        return
    engine = create_ledger_engine(_database_url(), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            _run_online(connection)
            connection.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
