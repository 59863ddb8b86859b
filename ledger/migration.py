"""Run the Alembic migrations programmatically (``ledger migrate``, :func:`devstack.database.open_database`)."""

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
from ledger.store.models import STORE_SCHEMA, metadata

# Shipped inside the package (env.py, script.py.mako, versions/), so a wheel migrates like a checkout.
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
MANAGED_SCHEMAS = frozenset({STORE_SCHEMA})
# Modules that register tables on ledger.store.models.metadata (imported if present; add yours here).
MODEL_MODULES: tuple[str, ...] = (
    "ledger.store.models",
    "ledger.translog.tables",
    "ledger.store.privilege_tables",
)


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


WRITER_ROLE = "ledger_writer"


def require_head(engine: Engine, *, command_name: str) -> None:
    """Refuse to start unless the database is at this code's head revision (never migrates).

    Raises :class:`~ledger.errors.SchemaNotReadyError` with one line saying what to run: an
    appender holds a writer login, which may not (and should not) run migrations.
    """
    import sqlalchemy.exc
    from sqlalchemy import text

    from ledger.errors import SchemaNotReadyError

    head = head_revision()
    try:
        with engine.connect() as connection:
            found = connection.execute(text("SELECT to_regclass('alembic_version') IS NOT NULL")).scalar()
            current = (
                connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
                if found
                else None
            )
    except (
        sqlalchemy.exc.ProgrammingError
    ) as exc:  # typically: no SELECT on alembic_version yet (before 0005)
        reason = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
        raise SchemaNotReadyError(
            f"cannot read the ledger's schema version ({reason}); run `ledger migrate` as the ledger owner "
            f"(head is {head}), then start {command_name} again"
        ) from exc
    if current != head:
        raise SchemaNotReadyError(
            f"the ledger schema is at revision {current or 'none (empty database)'} but {command_name} needs "
            f"{head}: run `ledger migrate` as the ledger owner, then start {command_name} again"
        )


def require_role_member(engine: Engine, role: str = WRITER_ROLE) -> None:
    """Raise :class:`~ledger.errors.LedgerPermissionError` unless the login may ``SET ROLE role``."""
    from sqlalchemy import text

    from ledger.errors import LedgerPermissionError

    with engine.connect() as connection:
        row = connection.execute(
            text("SELECT current_user, pg_has_role(current_user, :role, 'MEMBER')"), {"role": role}
        ).one()
    if not row[1]:
        raise LedgerPermissionError(
            f"login {row[0]} is not a member of {role}: an administrator must run GRANT {role} TO {row[0]}"
        )
