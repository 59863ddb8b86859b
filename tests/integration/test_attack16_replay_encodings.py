"""Replay reads payload and step texts as UTF-8 bytes (``convert_to``): attacks on that read.

* A ``SQL_ASCII`` database (no encoding check on write) holding invalid UTF-8 in a payload or step
  text, written as the owner with triggers bypassed: the read fails (the server refuses to convert
  it), so the run fails as a whole; no submission is ever reported identical.
* A ``LATIN1`` database: the texts are converted to UTF-8 by the server, an untouched ledger replays
  identical and a payload changed by one non-ASCII character does not.
* A text made NULL after its ``NOT NULL`` was dropped (a tamperer who owns the tables): the
  submission's outcome is an error, the run is not a crash (compiled and pure builds alike).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import make_url

from ledger.connect import create_ledger_engine, libpq_url
from ledger.migration import upgrade
from ledger.replay.runner import ReplayReport, run_replay
from ledger.replay.source import ReplaySelection
from ledger.verify.runner import run_verify
from tests.helpers.database import tamper
from tests.helpers.replay import build_ledger
from tests.integration.test_replay_reasoning import record_reasoning

pytestmark = pytest.mark.integration


def _database(pg_server: Any, encoding: str) -> Iterator[str]:
    name = f"h_attack16a_{uuid.uuid4().hex}"
    admin = libpq_url(pg_server.admin_url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING {} LC_COLLATE 'C' LC_CTYPE 'C'").format(
                sql.Identifier(name), sql.Literal(encoding)
            )
        )
    url = make_url(pg_server.admin_url).set(database=name, query={"client_encoding": "utf8"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def sql_ascii_url(pg_server: Any) -> Iterator[str]:
    """A fresh migrated SQL_ASCII database (clients speak UTF-8), dropped afterwards."""
    for url in _database(pg_server, "SQL_ASCII"):
        upgrade(url)
        yield url


@pytest.fixture
def latin1_url(pg_server: Any) -> Iterator[str]:
    """A fresh migrated LATIN1 database, dropped afterwards."""
    for url in _database(pg_server, "LATIN1"):
        upgrade(url)
        yield url


def _replay(url: str) -> ReplayReport:
    engine = create_ledger_engine(url)
    try:
        return run_replay(engine, ReplaySelection(), keep_identical=True)
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE ledger_store.entries SET payload_canonical = payload_canonical || E'\\xff' "
        "WHERE kind = 'verdict.issued'",
        "UPDATE ledger_store.entries SET payload_canonical = "
        "overlay(payload_canonical placing E'\\xed\\xa0\\x80' from 3 for 0) WHERE kind = 'submission.received'",
        "UPDATE ledger_store.entries SET canonical_step = overlay(canonical_step placing E'\\xc3' from 3 for 0) "
        "WHERE kind = 'trace.step'",
    ],
    ids=["verdict-xff", "received-surrogate", "step-truncated-sequence"],
)
def test_invalid_utf8_in_a_sql_ascii_ledger_is_never_identical(sql_ascii_url: str, statement: str) -> None:
    build_ledger(sql_ascii_url, limit=2)
    assert _replay(sql_ascii_url).counts["identical"] == 2
    tamper(sql_ascii_url, statement)
    try:
        report = _replay(sql_ascii_url)
    except psycopg.DataError:
        pass  # the server refuses to convert the text: the run fails, nothing is called identical
    else:
        assert report.counts["identical"] == 0, report.counts
    engine = create_ledger_engine(sql_ascii_url)
    try:
        verified = run_verify(engine, jobs=1)
    except psycopg.DataError:
        return  # the same refusal when verify reads the text: never "valid"
    finally:
        engine.dispose()
    assert verified.problems


def test_a_latin1_ledger_replays_and_a_non_ascii_change_diverges(latin1_url: str) -> None:
    stored = build_ledger(latin1_url, limit=2)
    assert _replay(latin1_url).counts["identical"] == 2
    tamper(
        latin1_url,
        "UPDATE ledger_store.entries SET payload_canonical = regexp_replace(payload_canonical, "
        "'\"market_id\":\"m', '\"market_id\":\"\u00e9') WHERE kind = 'verdict.issued' AND submission_id = %(s)s",
        {"s": stored[0].submission_id},
    )
    report = _replay(latin1_url)
    assert report.counts["identical"] == 1, report.counts
    assert [item.status for item in report.results if item.submission_id == stored[0].submission_id] != [
        "identical"
    ]


def test_a_null_reasoning_text_is_an_error_outcome(migrated_database_url: str) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=2)
    record_reasoning(url, stored[0].submission_id)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("ALTER TABLE ledger_store.entries ALTER COLUMN payload_canonical DROP NOT NULL")
    tamper(url, "UPDATE ledger_store.entries SET payload_canonical = NULL WHERE kind = 'reasoning.verified'")
    report = _replay(url)
    assert report.reasoning_counts["error"] == 1
    assert report.reasoning_counts["identical"] == 0
    assert any(item.failed for item in report.results)


def test_a_null_step_text_is_an_error_outcome(migrated_database_url: str) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=2)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("ALTER TABLE ledger_store.entries DROP CONSTRAINT ck_entries_step_columns")
    tamper(
        url,
        "UPDATE ledger_store.entries SET canonical_step = NULL WHERE kind = 'trace.step' AND submission_id = %(s)s",
        {"s": stored[0].submission_id},
    )
    report = _replay(url)
    assert report.counts == {"identical": 1, "diverged": 0, "version_drift": 0, "error": 1}
    failed = [item for item in report.results if item.submission_id == stored[0].submission_id]
    assert failed[0].status == "error" and "NULL" in (failed[0].error or "")
