"""``ledger verify`` pages entries by an id range (``after < id <= last``) instead of ``= ANY(ids)``.

On a database whose default collation is ICU ``en-US`` (ids ordered unlike bytes: ``0xab...`` before
``0xAB...``), with orphan entries before, between, next to and after the heads (submission rows deleted; a
submission id changed to its upper-case spelling, so its entries name the lower-case one; entries
renamed to an id with a trailing space), the report is the same as with the old ``= ANY(ids)``
query at every page size, and the same with two jobs.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from itertools import groupby
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import create_engine, make_url

from ledger.connect import libpq_url
from ledger.migration import downgrade, upgrade
from ledger.verify import runner, source, workers
from tests.helpers.database import query, tamper
from tests.helpers.replay import build_ledger, ledger_json
from tests.integration.test_submission_check_migration import _check_refusals

pytestmark = pytest.mark.integration


@pytest.fixture
def icu_url(pg_server: Any) -> Iterator[str]:
    """A fresh database whose default collation is ICU en-US (skipped if the server cannot)."""
    name = f"h_attack15_{uuid.uuid4().hex}"
    admin = libpq_url(pg_server.admin_url)
    with psycopg.connect(admin, autocommit=True) as conn:
        try:
            conn.execute(
                sql.SQL(
                    "CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER icu ICU_LOCALE 'en-US' "
                    "LC_COLLATE 'C' LC_CTYPE 'C'"
                ).format(sql.Identifier(name))
            )
        except psycopg.Error as exc:  # pragma: no cover - servers before PostgreSQL 15
            pytest.skip(f"no ICU database on this server: {exc}")
    url = make_url(pg_server.admin_url).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _old_page(conn: Any, after: str, heads: list[tuple[Any, ...]]) -> list[source.SubmissionGroup]:
    """The page as revision-0010 ``verify`` read it: the entries of exactly the heads' ids."""
    rows = (
        conn.cursor(binary=True)
        .execute(
            f"SELECT {source.ENTRY_ROW_COLUMNS} FROM ledger_store.entries WHERE submission_id = ANY(%(ids)s) "
            "ORDER BY submission_id, stream_seq",
            {"ids": [head[0] for head in heads]},
        )
        .fetchall()
    )
    by_submission = {sid: list(group) for sid, group in groupby(rows, key=lambda row: row[1])}
    groups = []
    for sid, key, market_id, bundle_id, status, input_hashes, version in heads:
        raw = by_submission.get(sid, ())
        groups.append(
            source.SubmissionGroup(
                submission_id=sid,
                idempotency_key=key,
                market_id=market_id,
                bundle_id=bundle_id,
                status=status,
                input_hashes_canonical=input_hashes,
                engine_version=version,
                entries=[source.EntryRow(*row) for row in raw] if raw else (),
                steps=source.steps_of(raw),
            )
        )
    return groups


def _report(url: str, page_size: int, jobs: int = 1) -> tuple[Any, ...]:
    engine = create_engine(url)
    try:
        report = runner.run_verify(engine, jobs=jobs, page_size=page_size)
    finally:
        engine.dispose()
    problems = sorted(repr(dataclasses.asdict(p)) for p in report.problems)
    return report.submissions, report.entries, report.steps, sorted(report.counts.items()), problems


def test_range_pages_report_as_any_ids_under_icu(icu_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    url = icu_url
    upgrade(url)
    [(collation,)] = query(url, "SELECT datlocprovider FROM pg_database WHERE datname = current_database()")
    assert collation == "i"
    # the order of ids really differs from bytes here
    [(icu_first,)] = query(url, "SELECT 'a' < 'B'")
    assert icu_first is True
    stored = sorted(s.submission_id for s in build_ledger(url, limit=8))
    assert len(stored) >= 6
    for gone in (stored[0], stored[1], stored[-1]):  # orphans before, between and after the heads
        tamper(url, "DELETE FROM ledger_store.submissions WHERE submission_id = %(s)s", {"s": gone})
    tamper(
        url,
        "UPDATE ledger_store.submissions SET submission_id = '0x' || upper(substr(submission_id, 3)) "
        "WHERE submission_id = %(s)s",
        {"s": stored[3]},
    )
    tamper(
        url,
        "UPDATE ledger_store.entries SET submission_id = submission_id || ' ' WHERE submission_id = %(s)s "
        "AND stream_seq > 1",
        {"s": stored[4]},
    )
    new = {size: _report(url, size) for size in (1, 2, 3, 1000)}
    monkeypatch.setattr(source, "_page", _old_page)
    old = {size: _report(url, size) for size in (1, 2, 3, 1000)}
    assert new == old
    assert old[1000][3], "the tampering is reported"
    monkeypatch.undo()
    # two jobs (workers read pages with load_page too): the same report as one job
    assert workers.load_page is source.load_page
    assert _report(url, 1, jobs=2) == new[1]


def test_submission_check_refuses_lookalikes_under_icu(icu_url: str) -> None:
    """Revision 0011's ``DISTINCT`` and probe under an ICU default collation: ids differing from a
    stored one by case, a trailing space, a look-alike digit or length are refused as under 0010."""
    url = icu_url
    upgrade(url)
    build_ledger(url, limit=3)
    _check_refusals(url)
    downgrade(url, "0010")
    _check_refusals(url)
    upgrade(url)
    code, report = ledger_json(url, "verify")
    assert code == 0, report["problems"]
