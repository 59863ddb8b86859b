"""Run the Alembic migrations programmatically (``ledger migrate``, :func:`ledger.database.open_database`)."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, MetaData

from ledger.connect import create_ledger_engine
from ledger.models import STORE_SCHEMA, metadata

# Shipped inside the package (env.py, script.py.mako, versions/), so a wheel migrates like a checkout.
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
MANAGED_SCHEMAS = frozenset({STORE_SCHEMA})
# Modules that register tables on ledger.models.metadata (imported if present; add yours here).
MODEL_MODULES: tuple[str, ...] = ("ledger.models", "ledger.translog.tables")


def target_metadata() -> MetaData:
    """The models' metadata with every table module in :data:`MODEL_MODULES` registered."""
    for name in MODEL_MODULES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)
    return metadata


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """Autogenerate filter: only the ``ledger_store`` schema is modelled (views live in ``ledger``)."""
    if type_ == "schema":
        return name in MANAGED_SCHEMAS
    return True


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config pointing at ``ledger/migrations``; ``url`` is handed to ``env.py`` as an attribute.

    No ``alembic.ini`` is read (an installed wheel has none): the options that matter are set here.
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    if url is not None:
        config.attributes["url"] = url
    config.attributes["skip_logging_config"] = True
    return config


def _run(target: Engine | str, action: str, revision: str) -> None:
    engine = create_ledger_engine(target) if isinstance(target, str) else target
    try:
        with engine.begin() as connection:
            config = alembic_config()
            config.attributes["connection"] = connection
            if action == "upgrade":
                command.upgrade(config, revision)
            else:
                command.downgrade(config, revision)
    finally:
        if isinstance(target, str):
            engine.dispose()


def upgrade(target: Engine | str, revision: str = "head") -> None:
    """``alembic upgrade <revision>`` on the given engine or URL."""
    _run(target, "upgrade", revision)


def downgrade(target: Engine | str, revision: str) -> None:
    """``alembic downgrade <revision>`` (roles are cluster-wide and are never dropped)."""
    _run(target, "downgrade", revision)


def head_revision() -> str:
    """The newest revision in ``ledger/migrations/versions``."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations found in {MIGRATIONS_DIR}")
    return head


def current_revision(target: Engine | str) -> str | None:
    """The revision the database is at, or None for an empty database."""
    engine = create_ledger_engine(target) if isinstance(target, str) else target
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        if isinstance(target, str):
            engine.dispose()
