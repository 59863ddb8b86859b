"""``ledger verify`` reads each entry row once: step bodies come with their ``trace.step`` rows.

The CHECK ``ck_entries_step_columns`` keeps a body on exactly the ``trace.step`` rows; a superuser
who drops it can still break that, and verify must name the result either way.
"""

from __future__ import annotations

import psycopg
import pytest

from ledger.connect import libpq_url
from tests.helpers.database import query, tamper
from tests.helpers.replay import build_ledger, ledger_json

pytestmark = pytest.mark.integration

DROP_CHECK = "ALTER TABLE ledger_store.entries DROP CONSTRAINT ck_entries_step_columns"


def _drop_check(url: str) -> None:
    with psycopg.connect(libpq_url(url)) as conn:
        conn.execute(DROP_CHECK)


def _codes(report: dict[str, object]) -> set[str]:
    problems = report["problems"]
    assert isinstance(problems, list)
    return {str(problem["code"]) for problem in problems}


def test_a_trace_step_entry_without_its_body_is_a_missing_step_row(migrated_database_url: str) -> None:
    url = migrated_database_url
    [stored] = build_ledger(url, limit=1)
    _drop_check(url)
    [(seq,)] = query(
        url,
        "SELECT global_seq FROM ledger_store.entries WHERE submission_id = %(s)s AND step_index = 1",
        {"s": stored.submission_id},
    )
    tamper(url, "UPDATE ledger_store.entries SET canonical_step = NULL WHERE global_seq = %(g)s", {"g": seq})
    code, report = ledger_json(url, "verify")
    assert code != 0
    missing = [p for p in report["problems"] if p["code"] == "step_row_missing"]
    assert [(p["submission_id"], p["global_seq"]) for p in missing] == [(stored.submission_id, seq)]
    # the steps left are 0, 2, 3, ...: the gap and the audit's trace header both show it
    assert {"step_index_gap", "trace_header_mismatch"} <= _codes(report)


def test_a_step_body_on_another_kind_of_entry_is_named_ledger_wide(migrated_database_url: str) -> None:
    url = migrated_database_url
    [stored] = build_ledger(url, limit=1)
    _drop_check(url)
    tamper(
        url,
        "UPDATE ledger_store.entries e SET (step_index, step_id, step_type, evidence_ids, step_hash, canonical_step)"
        " = (s.step_index, s.step_id, s.step_type, s.evidence_ids, s.step_hash, s.canonical_step)"
        " FROM ledger_store.entries s WHERE e.submission_id = %(s)s AND e.kind = 'verdict.issued'"
        " AND s.submission_id = e.submission_id AND s.step_index = 0",
        {"s": stored.submission_id},
    )
    code, report = ledger_json(url, "verify")
    assert code != 0
    [orphan] = [p for p in report["problems"] if p["code"] == "step_entry_missing"]
    assert orphan["submission_id"] == stored.submission_id and orphan["step_index"] == 0
    assert "a verdict.issued entry" in orphan["message"]
    # the copied body is no step of the submission: its steps still verify
    assert _codes(report) == {"step_entry_missing"}


def test_steps_out_of_stream_order_are_checked_in_step_index_order(migrated_database_url: str) -> None:
    url = migrated_database_url
    [stored] = build_ledger(url, limit=1)
    assert stored.steps >= 2
    swap = (
        "UPDATE ledger_store.entries SET step_index = CASE step_index WHEN 0 THEN 1 ELSE 0 END "
        "WHERE submission_id = %(s)s AND step_index IN (0, 1)"
    )
    tamper(url, swap, {"s": stored.submission_id})
    code, report = ledger_json(url, "verify")
    assert code != 0
    mismatched = [p for p in report["problems"] if p["code"] == "step_entry_mismatch"]
    assert sorted(p["step_index"] for p in mismatched) == [0, 1]
    assert "step_index_gap" not in _codes(report)  # sorted by step_index: still exactly 0..n-1


def test_an_evidence_ids_column_unlike_the_step_text_is_named(migrated_database_url: str) -> None:
    url = migrated_database_url
    [stored] = build_ledger(url, limit=1)
    tamper(
        url,
        "UPDATE ledger_store.entries SET evidence_ids = evidence_ids || ARRAY['ev_forged'] "
        "WHERE submission_id = %(s)s AND step_index = 0",
        {"s": stored.submission_id},
    )
    code, report = ledger_json(url, "verify")
    assert code != 0
    [problem] = report["problems"]
    assert (problem["code"], problem["step_index"]) == ("step_columns_mismatch", 0)
