"""Alembic owns the schema (docs/event-store.md): up from empty, down/up round trips, models agree."""

from __future__ import annotations

import contextlib
import subprocess
import sys

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from cli.main import main as ledger_main
from ledger.connect import create_ledger_engine, libpq_url
from ledger.migration import (
    alembic_config,
    current_revision,
    downgrade,
    head_revision,
    include_name,
    target_metadata,
    upgrade,
)
from ledger.store.ledger_store import LedgerStore
from tests.helpers.database import query
from tests.helpers.ledger_factories import audited
from tests.helpers.services import PgServer, fresh_database

pytestmark = pytest.mark.integration

VIEWS = {"submissions", "trace_steps", "audit_results", "verdicts", "rejections"}


def _schema_objects(url: str) -> tuple[set[str], set[str]]:
    tables = {
        row[0] for row in query(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'ledger_store'")
    }
    views = {row[0] for row in query(url, "SELECT viewname FROM pg_views WHERE schemaname = 'ledger'")}
    return tables, views


def _revisions() -> list[str]:
    script = ScriptDirectory.from_config(alembic_config())
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


def test_upgrade_head_on_an_empty_database_creates_tables_views_and_roles(database_url: str) -> None:
    assert current_revision(database_url) is None
    upgrade(database_url)
    assert current_revision(database_url) == head_revision()
    tables, views = _schema_objects(database_url)
    assert {"submissions", "entries", "consumer_offsets", "idempotency_conflicts"} <= tables
    assert "trace_steps" not in tables  # since revision 0008 a view over the trace.step entries
    store_views = query(database_url, "SELECT viewname FROM pg_views WHERE schemaname = 'ledger_store'")
    assert store_views == [("trace_steps",)]
    assert views >= VIEWS
    roles = {
        row[0] for row in query(database_url, "SELECT rolname FROM pg_roles WHERE rolname LIKE 'ledger_%'")
    }
    assert {"ledger_owner", "ledger_writer", "ledger_reader"} <= roles
    upgrade(database_url)  # a second run is a no-op
    assert current_revision(database_url) == head_revision()


def test_models_and_migrations_agree(migrated_database_url: str) -> None:
    engine = create_ledger_engine(migrated_database_url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection,
                opts={
                    "include_schemas": True,
                    "include_name": include_name,
                    "compare_type": True,
                    "compare_server_default": True,
                    "target_metadata": target_metadata(),
                },
            )
            assert compare_metadata(context, target_metadata()) == []
    finally:
        engine.dispose()


def test_every_revision_steps_down_and_up(database_url: str) -> None:
    revisions = _revisions()
    assert revisions[:2] == ["0001", "0002"]
    for revision in revisions:
        upgrade(database_url, revision)
        assert current_revision(database_url) == revision
    for previous in reversed([None, *revisions[:-1]]):
        downgrade(database_url, previous or "base")
        assert current_revision(database_url) == previous
    assert _schema_objects(database_url) == (set(), set())
    upgrade(database_url)
    with LedgerStore(database_url) as store:  # the round-tripped schema works
        assert store.append(audited("k1")).status == "created"


def test_downgrade_keeps_the_cluster_roles(database_url: str) -> None:
    upgrade(database_url)
    downgrade(database_url, "base")
    roles = query(
        database_url,
        "SELECT count(*) FROM pg_roles WHERE rolname IN ('ledger_owner', 'ledger_writer', 'ledger_reader')",
    )
    assert roles == [(3,)]


def test_concurrent_migrations_of_several_databases_share_the_roles(pg_server: PgServer) -> None:
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(fresh_database(pg_server.admin_url)) for _ in range(3)]
        # separate processes: Alembic's context is a module global, so migrations are one per process
        code = "import sys; from ledger.migration import upgrade; upgrade(sys.argv[1])"
        procs = [subprocess.Popen([sys.executable, "-c", code, url], stderr=subprocess.PIPE) for url in urls]
        for proc in procs:
            _, stderr = proc.communicate(timeout=120)
            assert proc.returncode == 0, stderr.decode(errors="replace")[-2000:]
        assert {current_revision(url) for url in urls} == {head_revision()}


def test_ledger_migrate_command_on_an_empty_database(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ledger_main(["migrate", "--database-url", database_url]) == 0
    assert f"empty -> {head_revision()}" in capsys.readouterr().out
    with psycopg.connect(libpq_url(database_url)) as conn:
        assert conn.execute("SELECT count(*) FROM ledger.submissions").fetchone() == (0,)
    assert ledger_main(["migrate", "--database-url", database_url, "--downgrade", "base"]) == 0
    assert current_revision(database_url) is None
