"""Replay reads each page's entries and step rows in one query: what it reads is what the rows and
the ``trace_steps`` view hold, in ``step_index`` order, and rows that are out of order, missing or
unreadable are reported, never skipped."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.connect import create_ledger_engine
from ledger.replay.runner import ReplayReport, run_replay
from ledger.replay.source import ReplayCase, ReplaySelection, as_text, iter_replay_pages
from ledger.store.read import snapshot
from tests.helpers.database import query, tamper
from tests.helpers.replay import build_ledger

pytestmark = pytest.mark.integration


def _cases(url: str) -> list[ReplayCase]:
    engine = create_ledger_engine(url)
    try:
        with snapshot(engine) as conn:
            return [case for page in iter_replay_pages(conn, ReplaySelection(), page_size=4) for case in page]
    finally:
        engine.dispose()


def _replay(url: str) -> ReplayReport:
    engine = create_ledger_engine(url)
    try:
        return run_replay(engine, ReplaySelection(), keep_identical=True)
    finally:
        engine.dispose()


def _view_steps(url: str, submission_id: str) -> list[tuple[Any, ...]]:
    return query(
        url,
        "SELECT step_id, step_hash, canonical_step FROM ledger_store.trace_steps "
        "WHERE submission_id = %(s)s ORDER BY step_index",
        {"s": submission_id},
    )


def test_cases_hold_the_step_rows_of_the_view_and_the_non_step_entries(migrated_database_url: str) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=6)
    cases = _cases(url)
    assert [case.submission_id for case in cases] == [item.submission_id for item in stored]
    for case, item in zip(cases, stored, strict=True):
        steps = _view_steps(url, case.submission_id)
        assert len(steps) == item.steps > 0
        assert all(isinstance(text, bytes) for text in case.step_texts)  # read as their UTF-8 bytes
        assert list(zip(case.step_ids, case.step_hashes, map(as_text, case.step_texts), strict=True)) == steps
        payloads = dict(
            query(
                url,
                "SELECT kind, payload_canonical FROM ledger_store.entries WHERE submission_id = %(s)s "
                "AND kind <> 'trace.step'",
                {"s": case.submission_id},
            )
        )
        assert (case.received, case.audit, case.verdict) == (
            payloads["submission.received"].encode("utf-8"),
            payloads["audit.completed"].encode("utf-8"),
            payloads["verdict.issued"].encode("utf-8"),
        )
        [(head,)] = query(
            url,
            "SELECT max(stream_seq) FROM ledger_store.entries WHERE submission_id = %(s)s "
            "AND kind <> 'trace.step'",
            {"s": case.submission_id},
        )
        assert case.head_stream_seq == head


def test_step_rows_are_read_in_step_index_order_not_ledger_order(migrated_database_url: str) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=4)
    target = stored[1].submission_id
    before = _view_steps(url, target)
    tamper(
        url,
        "UPDATE ledger_store.entries SET step_index = 1 - step_index "
        "WHERE submission_id = %(s)s AND kind = 'trace.step' AND step_index IN (0, 1)",
        {"s": target},
    )
    [case] = [case for case in _cases(url) if case.submission_id == target]
    assert list(
        zip(case.step_ids, case.step_hashes, map(as_text, case.step_texts), strict=True)
    ) == _view_steps(url, target)
    assert case.step_texts[:2] == (before[1][2].encode("utf-8"), before[0][2].encode("utf-8"))

    report = _replay(url)
    [outcome] = [item for item in report.results if item.submission_id == target]
    assert outcome.status == "diverged" and outcome.first is not None
    assert (outcome.first.component, outcome.first.step_index) == ("step", 0)
    assert report.counts["identical"] == len(stored) - 1


def test_a_missing_step_row_or_entry_is_reported(migrated_database_url: str) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=5)
    no_step, no_verdict = stored[1], stored[3]
    tamper(
        url,
        "DELETE FROM ledger_store.entries WHERE submission_id = %(s)s AND kind = 'trace.step' "
        "AND step_index = 1",
        {"s": no_step.submission_id},
    )
    tamper(
        url,
        "DELETE FROM ledger_store.entries WHERE submission_id = %(s)s AND kind = 'verdict.issued'",
        {"s": no_verdict.submission_id},
    )
    report = _replay(url)
    by_id = {item.submission_id: item for item in report.results}
    assert by_id[no_step.submission_id].status == "diverged"
    assert by_id[no_step.submission_id].steps == no_step.steps - 1
    assert by_id[no_verdict.submission_id].status == "error"
    assert "no verdict.issued entry" in str(by_id[no_verdict.submission_id].error)
    assert report.counts == {"identical": len(stored) - 2, "diverged": 1, "version_drift": 0, "error": 1}
